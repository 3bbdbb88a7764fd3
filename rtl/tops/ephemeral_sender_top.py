"""Co-simulation top of the ephemeral sender: posted messages played in, sends and CLOSEs
recorded with their cycles."""

from amaranth.lib.wiring import In, Out

from rtl.ephemeral.pool import COUNTER_BITS
from rtl.ephemeral.sender import EphemeralSender, msg_layout, sent_layout
from rtl.sim.harness_top import HarnessTop
from spec.ephemeral import ACK_COUNT_BITS, II_BITS, NODE_BITS, POOL_COUNTERS, STAMP_BITS

__all__ = ["EphemeralSenderTop"]


class EphemeralSenderTop(HarnessTop):
    """``msgs`` (player) -> :class:`EphemeralSender` -> ``sent`` and ``closed``
    (recorders, never stalled: ``sent`` and ``closed`` are strobes).

    Parameters: the sender's ``entries`` and ``ack_slots``, and ``depth`` (messages the
    player and each recorder hold). Static ports: ``idle``, ``ack_every``, ``ii``,
    ``completion`` (the sender's). Out: the pool's counters, ``used``, ``used_max`` and
    ``acks_pending``."""

    def __init__(self, entries, ack_slots, depth):
        self.sender = EphemeralSender(entries, ack_slots, NODE_BITS)
        ports = {"idle": In(STAMP_BITS), "ack_every": In(ACK_COUNT_BITS), "ii": In(II_BITS),
                 "completion": In(STAMP_BITS), "used": Out(range(entries + 1)),
                 "used_max": Out(range(entries + 1)),
                 "acks_pending": Out(range(ack_slots + 1))}
        ports.update({name: Out(COUNTER_BITS) for name in POOL_COUNTERS})
        super().__init__(players={"msgs": (msg_layout(NODE_BITS), depth)},
                         recorders={"sent": (sent_layout(entries), depth),
                                    "closed": (NODE_BITS, depth)},
                         ports=ports)

    def elaborate_design(self, m, players, recorders):
        m.submodules.sender = s = self.sender
        msgs, sends, closes = players["msgs"].o, recorders["sent"].i, recorders["closed"].i
        m.d.comb += [s.idle.eq(self.idle), s.ack_every.eq(self.ack_every), s.ii.eq(self.ii),
                     s.completion.eq(self.completion),
                     s.msg.valid.eq(msgs.valid), s.msg.payload.eq(msgs.payload),
                     msgs.ready.eq(s.msg.ready),
                     sends.valid.eq(s.sent.valid), sends.payload.eq(s.sent.payload),
                     closes.valid.eq(s.closed.valid), closes.payload.eq(s.closed.payload),
                     self.used.eq(s.used), self.used_max.eq(s.used_max),
                     self.acks_pending.eq(s.acks_pending)]
        m.d.comb += [self.opens.eq(s.opens), self.closes.eq(s.closes),
                     self.full_waits.eq(s.full_waits), self.stale.eq(s.stale)]
