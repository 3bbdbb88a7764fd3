"""Co-simulation top of the ephemeral receiver: packet headers played in at their arrival
cycles, outcomes, deliveries, ACKs and idle closes recorded with their cycles."""

from amaranth.lib.wiring import In, Out

from rtl.ephemeral.pool import COUNTER_BITS
from rtl.ephemeral.receiver import (
    EphemeralReceiver,
    ack_layout,
    deliver_layout,
    outcome_layout,
    pkt_layout,
)
from rtl.sim.harness_top import HarnessTop
from spec.ephemeral import NODE_BITS, RECV_OUTCOMES, STAMP_BITS

__all__ = ["EphemeralReceiverTop"]


class EphemeralReceiverTop(HarnessTop):
    """``pkts`` (a timed player: packet ``k`` from its release cycle) ->
    :class:`EphemeralReceiver` -> ``outcome``, ``deliver``, ``ack`` and ``expired``
    (recorders, never stalled: the receiver's outputs are strobes and it never stalls its
    input).

    Parameters: the receiver's ``entries``, and ``depth`` (packets the player and each
    recorder hold). Static port: ``idle``. Out: the receiver's counters (one per name of
    :data:`spec.ephemeral.RECV_OUTCOMES`), ``used`` and ``used_max``."""

    def __init__(self, entries, depth):
        self.receiver = EphemeralReceiver(entries, NODE_BITS)
        ports = {"idle": In(STAMP_BITS), "used": Out(range(entries + 1)),
                 "used_max": Out(range(entries + 1))}
        ports.update({name: Out(COUNTER_BITS) for name in RECV_OUTCOMES})
        super().__init__(players={"pkts": (pkt_layout(NODE_BITS), depth, True)},
                         recorders={"outcome": (outcome_layout(entries), depth),
                                    "deliver": (deliver_layout(entries, NODE_BITS), depth),
                                    "ack": (ack_layout(NODE_BITS), depth),
                                    "expired": (NODE_BITS, depth)},
                         ports=ports)

    def elaborate_design(self, m, players, recorders):
        m.submodules.receiver = r = self.receiver
        pkts = players["pkts"].o
        m.d.comb += [r.idle.eq(self.idle), r.pkt.valid.eq(pkts.valid),
                     r.pkt.payload.eq(pkts.payload), pkts.ready.eq(r.pkt.ready),
                     self.used.eq(r.used), self.used_max.eq(r.used_max)]
        for rec, out in ((recorders["outcome"].i, r.outcome),
                         (recorders["deliver"].i, r.deliver),
                         (recorders["ack"].i, r.ack),
                         (recorders["expired"].i, r.expired)):
            m.d.comb += [rec.valid.eq(out.valid), rec.payload.eq(out.payload)]
        m.d.comb += [self.stale.eq(r.stale), self.opened.eq(r.opened), self.full.eq(r.full),
                     self.delivered.eq(r.delivered), self.duplicate.eq(r.duplicate),
                     self.reopened.eq(r.reopened), self.gap.eq(r.gap),
                     self.closed.eq(r.closed)]
