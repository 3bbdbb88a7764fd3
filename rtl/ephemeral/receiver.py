"""One receiver's context store: arriving packets through the ephemeral context pool."""

from amaranth import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.ephemeral.pool import COUNTER_BITS, ContextPool
from spec.checks import reject
from spec.ephemeral import (
    NODE_BITS,
    OPEN_OFFSET_BITS,
    RECV_ACKS,
    RECV_DELIVERS,
    RECV_OUTCOMES,
    RTL_POOL_ENTRIES_MAX,
    STAMP_BITS,
    Verdict,
    check_receiver,
)
from spec.formats.roce import PSN_BITS

__all__ = ["EphemeralReceiver", "pkt_layout", "deliver_layout", "ack_layout",
           "outcome_layout"]


def pkt_layout(key_bits=NODE_BITS):
    """An arriving packet's header: its source, PSN, open flag, whether it is a CLOSE
    frame (then ``psn``, ``open`` and ``off`` are ignored) and, with the open flag, its
    offset from its context's first PSN (:data:`spec.ephemeral.OPEN_OFFSET_BITS`)."""
    return data.StructLayout({"src": key_bits, "psn": PSN_BITS, "open": 1, "close": 1,
                              "off": OPEN_OFFSET_BITS})


def deliver_layout(entries, key_bits=NODE_BITS):
    """A packet delivered (written to memory): its context's entry, source and PSN."""
    return data.StructLayout({"entry": range(entries), "src": key_bits, "psn": PSN_BITS})


def ack_layout(key_bits=NODE_BITS):
    """An ACK to send: the destination (the packet's source) and the PSN acknowledged."""
    return data.StructLayout({"src": key_bits, "psn": PSN_BITS})


def outcome_layout(entries):
    """A packet's outcome (its index in :data:`spec.ephemeral.RECV_OUTCOMES`) and its
    context's entry (0 for ``stale`` and ``full``, which have none)."""
    return data.StructLayout({"outcome": range(len(RECV_OUTCOMES)), "entry": range(entries)})


class EphemeralReceiver(wiring.Component):
    """The receiver's side of the ephemeral design around a :class:`ContextPool` keyed by
    source, with a next expected PSN (24 bits) per entry.

    One packet header a cycle (``pkt``) is looked up in the pool (``open`` when the
    packet is its context's first: the open flag with offset 0, not a CLOSE; nothing
    outstanding, so a context with no arrival for ``idle`` cycles closes: the fallback for
    a lost CLOSE). Its outcome
    (:data:`spec.ephemeral.RECV_OUTCOMES`, the rules of docs/ephemeral.md, "Late,
    duplicate and forged packets"; ``newer`` as
    :func:`pymodel.ephemeral.receiver.newer`, serial arithmetic over 24 bits):

    - a CLOSE: ``closed`` when its source has a context (the pool drops that entry at the
      clock edge), else ``stale``;
    - no context: ``stale`` without the open flag, ``gap`` with it and a nonzero offset
      (the context's first packet is missing), ``opened`` with offset 0 and an entry free,
      ``full`` with offset 0 and none free (the pool counts a ``full_waits`` cycle);
    - a context with expected PSN ``e``: ``delivered`` if ``psn == e``, ``duplicate`` if
      ``e`` is newer than ``psn``, else ``reopened`` with the open flag and offset 0,
      ``gap`` otherwise.

    ``opened``, ``delivered`` and ``reopened`` write ``psn + 1`` as the entry's expected
    PSN and are on ``deliver`` (what is written to memory); they and ``duplicate`` are on
    ``ack`` (``src``, ``psn``). ``stale``, ``full``, ``gap`` and ``closed`` send nothing
    (the sender's go-back-N timer resends a refused packet). Each outcome adds one to its
    counter, so the counters sum to the packets taken.

    Latency: a packet taken in cycle ``t`` has its ``outcome``, ``deliver`` and ``ack`` in
    cycle ``t`` (combinational from ``pkt``); its entry's changes are seen from ``t + 1``.
    Backpressure: none, ``pkt.ready`` is always high (a refusal is an outcome, not a
    stall); ``outcome``, ``deliver``, ``ack`` and ``expired`` are strobes (``ready``
    ignored). Bad input has no other outcome than the table's: any source, PSN and flags
    are a defined case.

    Parameters
    ----------
    entries : int
        Contexts, a power of two from 2 to :data:`spec.ephemeral.RTL_POOL_ENTRIES_MAX`.
    key_bits : int
        Bits of a source (default :data:`spec.ephemeral.NODE_BITS`).

    Ports
    -----
    idle : In(STAMP_BITS)
        Cycles without arrivals after which a context closes (held, at least 1).
    pkt : In(stream.Signature(pkt_layout(key_bits)))
    outcome : Out(stream.Signature(outcome_layout(entries)))
    deliver : Out(stream.Signature(deliver_layout(entries, key_bits)))
    ack : Out(stream.Signature(ack_layout(key_bits)))
    expired : Out(stream.Signature(key_bits))
        The source whose context the pool's idle scan closed in this cycle (no arrival
        for ``idle`` cycles: its CLOSE was lost, or a forged open).
    used, used_max : Out(range(entries + 1))
        Contexts open, and their most at once.
    <outcome> : Out(COUNTER_BITS)
        One counter per name of :data:`spec.ephemeral.RECV_OUTCOMES`.
    """

    def __init__(self, entries, key_bits=NODE_BITS):
        try:
            check_receiver(entries, 1)
        except ValueError as exc:
            reject(self, f"ephemeral receiver: {exc}")
        if entries > RTL_POOL_ENTRIES_MAX:
            reject(self, f"ephemeral receiver: entries must be at most "
                         f"{RTL_POOL_ENTRIES_MAX} in RTL, not {entries!r}")
        self.entries, self.key_bits = entries, key_bits
        self.pool = ContextPool(entries, key_bits)
        ports = {
            "idle": In(STAMP_BITS),
            "pkt": In(stream.Signature(pkt_layout(key_bits))),
            "outcome": Out(stream.Signature(outcome_layout(entries))),
            "deliver": Out(stream.Signature(deliver_layout(entries, key_bits))),
            "ack": Out(stream.Signature(ack_layout(key_bits))),
            "expired": Out(stream.Signature(key_bits)),
            "used": Out(range(entries + 1)),
            "used_max": Out(range(entries + 1)),
            **{name: Out(COUNTER_BITS) for name in RECV_OUTCOMES},
        }
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        m.submodules.pool = pool = self.pool
        n, pkt = self.entries, self.pkt.payload
        code = {name: i for i, name in enumerate(RECV_OUTCOMES)}
        first = Signal()     # the context's first packet: the only one that (re)opens it
        m.d.comb += first.eq(pkt.open & ~pkt.close & (pkt.off == 0))
        m.d.comb += [pool.idle.eq(self.idle), self.pkt.ready.eq(1),
                     self.expired.valid.eq(pool.closed.valid),
                     self.expired.payload.eq(pool.closed.payload),
                     self.used.eq(pool.used), self.used_max.eq(pool.used_max),
                     pool.req.valid.eq(self.pkt.valid),
                     pool.req.payload.key.eq(pkt.src),
                     pool.req.payload.open.eq(first),
                     pool.req.payload.count.eq(0)]

        # The entry's next expected PSN.
        expected = [Signal(PSN_BITS, name=f"expected{i}") for i in range(n)]
        exp = Signal(PSN_BITS)
        with m.Switch(pool.entry):
            for i in range(n):
                with m.Case(i):
                    m.d.comb += exp.eq(expected[i])
        diff = Signal(PSN_BITS)
        older = Signal()     # newer(exp, psn): the packet's PSN is before the expected one
        m.d.comb += [diff.eq(exp - pkt.psn), older.eq((diff != 0) & ~diff[-1])]

        out = Signal(range(len(RECV_OUTCOMES)))
        with m.Switch(pool.verdict):
            with m.Case(Verdict.STALE):
                with m.If(pkt.open & ~pkt.close):
                    m.d.comb += out.eq(code["gap"])
                with m.Else():
                    m.d.comb += out.eq(code["stale"])
            with m.Case(Verdict.FULL):
                m.d.comb += out.eq(code["full"])
            with m.Case(Verdict.OPENED):
                m.d.comb += out.eq(code["opened"])
            with m.Default():
                with m.If(pkt.close):
                    m.d.comb += out.eq(code["closed"])
                with m.Elif(pkt.psn == exp):
                    m.d.comb += out.eq(code["delivered"])
                with m.Elif(older):
                    m.d.comb += out.eq(code["duplicate"])
                with m.Elif(first):
                    m.d.comb += out.eq(code["reopened"])
                with m.Else():
                    m.d.comb += out.eq(code["gap"])

        def one_of(names):
            hit = 0
            for name in names:
                hit = hit | (out == code[name])
            return self.pkt.valid & hit

        deliver, acked = one_of(RECV_DELIVERS), one_of(RECV_ACKS)
        m.d.comb += [
            self.outcome.valid.eq(self.pkt.valid),
            self.outcome.payload.outcome.eq(out),
            self.outcome.payload.entry.eq(pool.entry),
            self.deliver.valid.eq(deliver),
            self.deliver.payload.entry.eq(pool.entry),
            self.deliver.payload.src.eq(pkt.src),
            self.deliver.payload.psn.eq(pkt.psn),
            self.ack.valid.eq(acked),
            self.ack.payload.src.eq(pkt.src),
            self.ack.payload.psn.eq(pkt.psn),
            pool.drop.valid.eq(one_of(["closed"])),
            pool.drop.payload.eq(pool.entry),
        ]
        with m.If(deliver):
            with m.Switch(pool.entry):
                for i in range(n):
                    with m.Case(i):
                        m.d.sync += expected[i].eq(pkt.psn + 1)
        counters = (self.stale, self.opened, self.full, self.delivered, self.duplicate,
                    self.reopened, self.gap, self.closed)      # RECV_OUTCOMES' order
        for name, counter in zip(RECV_OUTCOMES, counters, strict=True):
            m.d.sync += counter.eq(counter + one_of([name]))
        return m
