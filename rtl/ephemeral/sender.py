"""One sender's context store: posted messages through the ephemeral context pool."""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.ephemeral.pool import ContextPool, status_ports
from spec.checks import reject
from spec.ephemeral import (
    ACK_COUNT_BITS,
    II_BITS,
    NODE_BITS,
    RTL_POOL_ENTRIES_MAX,
    STAMP_BITS,
    Verdict,
    check_sender,
)

__all__ = ["EphemeralSender", "msg_layout", "sent_layout"]


def msg_layout(key_bits=NODE_BITS):
    """A posted message: its destination and whether it is its context's last for now
    (none of the next ``lookahead`` posted messages goes to that destination)."""
    return data.StructLayout({"dest": key_bits, "last": 1})


def sent_layout(entries):
    """A message sent: its context's entry, whether it asked for an ACK, and whether its
    context was opened by it."""
    return data.StructLayout({"entry": range(entries), "asked": 1, "opened": 1})


class EphemeralSender(wiring.Component):
    """The sender's side of the ephemeral design around a :class:`ContextPool`.

    Messages are posted in order (``msg``) and sent in order, one per taken transfer. The
    ``last`` bit of a message comes with its doorbell: the posting side sees the next
    ``lookahead`` messages of its own queue and sets it when none of them goes to the same
    destination (:func:`analysis.ephemeral.flow.ack_requests`).

    Per cycle, when a message is offered and the spacing allows (``ii`` cycles since the
    last one sent; the first may go at once): ``run`` is its context's count of messages
    since the last ACK request (0 when the pool has no context for ``dest``); the message
    asks for an ACK when ``last`` is set or ``run + 1 >= ack_every``; it is looked up in
    the pool with ``open`` and ``count = (run == 0)`` (the first message of a run holds
    one outstanding count). The message is taken (sent) in the cycle the lookup is taken
    (``HIT`` or ``OPENED``): the entry's count becomes 0 if it asked, else ``run + 1``; a
    message that asked puts ``(now + completion, entry)`` in the ACK queue. The queue's
    head is the pool's completion (``done``) in the cycle ``now`` equals its due cycle:
    its ACK has arrived. The pool's close scan runs every cycle; a context closed is a
    CLOSE frame to send (``closed``).

    Backpressure: ``msg.ready`` is high exactly in the cycles the message is taken. It is
    low while the spacing runs, while the pool is full for a new destination
    (``full_waits`` counts those cycles) and, for a message that would ask, while the ACK
    queue holds ``ack_slots`` entries. Latency: a message taken in cycle ``t`` is on
    ``sent`` in cycle ``t`` (combinational from ``msg``); its ACK reaches the pool in cycle
    ``t + completion``. ``sent`` and ``closed`` are strobes (``ready`` ignored).

    Parameters
    ----------
    entries : int
        Contexts in the pool, a power of two from 2 to
        :data:`spec.ephemeral.RTL_POOL_ENTRIES_MAX`.
    ack_slots : int
        ACKs awaited at once (:data:`spec.ephemeral.ACK_SLOTS_RANGE`, a power of two): a
        memory of due cycles and entries.
    key_bits : int
        Bits of a destination (default :data:`spec.ephemeral.NODE_BITS`).

    Ports
    -----
    idle : In(STAMP_BITS)
        The pool's idle time (held).
    ack_every : In(ACK_COUNT_BITS)
        Messages of a context per ACK request at most, at least 1 (held).
    ii : In(II_BITS)
        Cycles between two messages sent, at least 1 (held).
    completion : In(STAMP_BITS)
        Cycles from a message that asked to its ACK at the sender, at least 1 (held).
    msg : In(stream.Signature(msg_layout(key_bits)))
    sent : Out(stream.Signature(sent_layout(entries)))
    closed : Out(stream.Signature(key_bits))
    acks_pending : Out(range(ack_slots + 1))
        ACKs awaited.
    now, used, used_max, opens, closes, full_waits, stale : Out
        The pool's.
    """

    def __init__(self, entries, ack_slots, key_bits=NODE_BITS):
        try:
            check_sender(entries, 1, 1, 1, 1, ack_slots)
        except ValueError as exc:
            reject(self, f"ephemeral sender: {exc}")
        if entries > RTL_POOL_ENTRIES_MAX:
            reject(self, f"ephemeral sender: entries must be at most "
                         f"{RTL_POOL_ENTRIES_MAX} in RTL, not {entries!r}")
        self.entries, self.ack_slots, self.key_bits = entries, ack_slots, key_bits
        self.pool = ContextPool(entries, key_bits)
        ports = {
            "idle": In(STAMP_BITS),
            "ack_every": In(ACK_COUNT_BITS),
            "ii": In(II_BITS),
            "completion": In(STAMP_BITS),
            "msg": In(stream.Signature(msg_layout(key_bits))),
            "sent": Out(stream.Signature(sent_layout(entries))),
            "closed": Out(stream.Signature(key_bits)),
            "acks_pending": Out(range(ack_slots + 1)),
            **status_ports(entries),
        }
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        m.submodules.pool = pool = self.pool
        n, slots = self.entries, self.ack_slots
        m.d.comb += [pool.idle.eq(self.idle), self.closed.valid.eq(pool.closed.valid),
                     self.closed.payload.eq(pool.closed.payload), self.now.eq(pool.now),
                     self.used.eq(pool.used), self.used_max.eq(pool.used_max)]
        m.d.comb += [self.opens.eq(pool.opens), self.closes.eq(pool.closes),
                     self.full_waits.eq(pool.full_waits), self.stale.eq(pool.stale)]

        # The ACK queue: (due cycle, entry) in send order.
        ack = data.StructLayout({"due": STAMP_BITS, "entry": range(n)})
        m.submodules.acks = acks = memory.Memory(shape=ack, depth=slots, init=[])
        wp, rp = acks.write_port(), acks.read_port(domain="comb")
        head, tail = Signal(range(slots)), Signal(range(slots))
        count = self.acks_pending
        m.d.comb += rp.addr.eq(head)
        pop = Signal()
        m.d.comb += [pop.eq((count != 0) & (rp.data.due == pool.now)),
                     pool.done.valid.eq(pop), pool.done.payload.eq(rp.data.entry)]

        # Per entry: messages since the context's last ACK request.
        unasked = [Signal(ACK_COUNT_BITS, name=f"unasked{i}") for i in range(n)]
        run = Signal(ACK_COUNT_BITS)
        with m.If(pool.verdict == Verdict.HIT):
            with m.Switch(pool.entry):
                for i in range(n):
                    with m.Case(i):
                        m.d.comb += run.eq(unasked[i])
        ask = Signal()
        m.d.comb += ask.eq(self.msg.payload.last | (run + 1 >= self.ack_every))

        # Spacing: cycles until the next message may go.
        gap = Signal(II_BITS)
        offer = Signal()
        m.d.comb += [
            offer.eq(self.msg.valid & (gap == 0) & ~(ask & (count == slots))),
            pool.req.valid.eq(offer),
            pool.req.payload.key.eq(self.msg.payload.dest),
            pool.req.payload.open.eq(1),
            pool.req.payload.count.eq(run == 0),
        ]
        take = Signal()
        m.d.comb += [
            take.eq(offer & pool.req.ready),
            self.msg.ready.eq(take),
            self.sent.valid.eq(take),
            self.sent.payload.entry.eq(pool.entry),
            self.sent.payload.asked.eq(ask),
            self.sent.payload.opened.eq(pool.verdict == Verdict.OPENED),
        ]
        with m.If(take):
            m.d.sync += gap.eq(self.ii - 1)
            with m.Switch(pool.entry):
                for i in range(n):
                    with m.Case(i):
                        m.d.sync += unasked[i].eq(Mux(ask, 0, run + 1))
        with m.Elif(gap != 0):
            m.d.sync += gap.eq(gap - 1)

        push = take & ask
        m.d.comb += [wp.addr.eq(tail), wp.en.eq(push),
                     wp.data.due.eq(pool.now + self.completion), wp.data.entry.eq(pool.entry)]
        with m.If(push):
            m.d.sync += tail.eq(tail + 1)
        with m.If(pop):
            m.d.sync += head.eq(head + 1)
        m.d.sync += count.eq(count + push - pop)
        return m
