"""The on-chip pool of ephemeral delivery contexts: open on first use, close when idle."""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from spec.checks import reject
from spec.ephemeral import (
    OUTSTANDING_BITS,
    POOL_COUNTERS,
    POOL_ENTRIES_RANGE,
    RTL_POOL_ENTRIES_MAX,
    STAMP_BITS,
    Verdict,
)

__all__ = ["ContextPool", "COUNTER_BITS", "status_ports"]

#: Width of each counter of :data:`spec.ephemeral.POOL_COUNTERS`.
COUNTER_BITS = 32


def req_layout(key_bits):
    """A lookup: the key (destination or source node), whether a missing context may be
    opened, and whether the lookup adds one outstanding message to it."""
    return data.StructLayout({"key": key_bits, "open": 1, "count": 1})


def status_ports(entries):
    """The pool's status outputs (see :class:`ContextPool`): ``now``, ``used``,
    ``used_max`` and a counter per name of :data:`spec.ephemeral.POOL_COUNTERS`; a block
    around the pool shows them as its own."""
    return {"now": Out(STAMP_BITS), "used": Out(range(entries + 1)),
            "used_max": Out(range(entries + 1)),
            **{name: Out(COUNTER_BITS) for name in POOL_COUNTERS}}


class ContextPool(wiring.Component):
    """A fully associative pool of ``entries`` contexts, each found by its key.

    Every cycle one lookup (``req``), one completion (``done``) and one step of the close
    scan. ``now`` counts cycles from reset (mod ``2**STAMP_BITS``); the scan looks at
    entry ``now % entries`` in each cycle, so it visits every entry once per ``entries``
    cycles.

    Lookup (combinational, with ``req.payload``): ``verdict`` is ``HIT`` when a valid
    entry holds ``key`` (``entry`` is that entry), else ``OPENED`` when ``open`` is set
    and an entry is free (``entry`` is the lowest free entry), else ``FULL`` when
    ``open`` is set (no entry free), else ``STALE``. ``req.ready`` is low exactly on
    ``FULL``: the lookup waits (``full_waits`` counts the cycles with ``req.valid``) and
    nothing changes. A taken ``HIT`` or ``OPENED`` writes the entry's stamp (``now``)
    and adds ``count`` to its outstanding count; ``OPENED`` also makes it valid with
    ``key`` (``opens`` + 1). A taken ``STALE`` changes no entry (``stale`` + 1): a packet
    of a context that is closed never opens one without ``open``.

    Completion (``done``, always ready): entry ``done.payload`` (if valid) loses one
    outstanding message (not below 0) and its stamp is written (``now``). With a lookup
    of the same entry in the same cycle both apply.

    Close scan: entry ``p = now % entries`` closes in this cycle when it is valid, has
    no outstanding message, ``(now - stamp) % 2**STAMP_BITS >= idle``, and neither the
    lookup nor the completion of this cycle touches it; ``closed`` is then valid for
    this cycle with its key (``closes`` + 1). Its entry is free from the next cycle.

    Drop (``drop``, always ready): entry ``drop.payload`` (if valid) closes at the clock
    edge, on request (a receiver's CLOSE frame); ``closed`` and ``closes`` are the scan's
    only, a block around the pool counts its drops. The scan does not close that entry in
    the same cycle. A lookup of the same cycle sees the entry still valid. Unused (``drop``
    never valid), the pool is as without it.

    All state changes at the clock edge; ``used`` (valid entries) and ``used_max`` (its
    high-water mark) are registers.

    Parameters
    ----------
    entries : int
        Contexts in the pool, a power of two (:data:`spec.ephemeral.POOL_ENTRIES_RANGE`).
    key_bits : int
        Bits of a key, 1 to 16.

    Ports
    -----
    idle : In(STAMP_BITS)
        Cycles without activity after which an entry with nothing outstanding closes
        (held; at most ``2**STAMP_BITS - entries - 1`` so no stamp wraps unseen).
    req : In(stream.Signature(req_layout(key_bits)))
    verdict : Out(Verdict.BITS)
    entry : Out(range(entries))
    done : In(stream.Signature(range(entries)))
    drop : In(stream.Signature(range(entries)))
    closed : Out(stream.Signature(key_bits))
        A strobe (``ready`` ignored): the key of the entry closed in this cycle.
    now : Out(STAMP_BITS)
    used, used_max : Out(range(entries + 1))
    opens, closes, full_waits, stale : Out(COUNTER_BITS)
    """

    def __init__(self, entries, key_bits):
        lo, hi = POOL_ENTRIES_RANGE
        if (isinstance(entries, bool) or not isinstance(entries, int)
                or not lo <= entries <= min(hi, RTL_POOL_ENTRIES_MAX)
                or entries & (entries - 1)):
            reject(self, f"context pool: entries must be a power of two from {lo} to "
                         f"{min(hi, RTL_POOL_ENTRIES_MAX)}, not {entries!r}")
        if isinstance(key_bits, bool) or not isinstance(key_bits, int) \
                or not 1 <= key_bits <= 16:
            reject(self, f"context pool: key_bits must be an integer from 1 to 16, "
                         f"not {key_bits!r}")
        self.entries, self.key_bits = entries, key_bits
        ports = {
            "idle": In(STAMP_BITS),
            "req": In(stream.Signature(req_layout(key_bits))),
            "verdict": Out(Verdict.BITS),
            "entry": Out(range(entries)),
            "done": In(stream.Signature(range(entries))),
            "drop": In(stream.Signature(range(entries))),
            "closed": Out(stream.Signature(key_bits)),
            **status_ports(entries),
        }
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        n = self.entries
        valid = Signal(n)
        keys = [Signal(self.key_bits, name=f"key{i}") for i in range(n)]
        outs = [Signal(OUTSTANDING_BITS, name=f"out{i}") for i in range(n)]
        stamps = [Signal(STAMP_BITS, name=f"stamp{i}") for i in range(n)]
        req = self.req.payload

        # Lookup: the matching entry, else the lowest free entry.
        match = Signal(n)
        m.d.comb += match.eq(Cat(valid[i] & (keys[i] == req.key) for i in range(n)))
        hit_entry = Signal(range(n))
        free_entry = Signal(range(n))
        for i in reversed(range(n)):
            with m.If(match[i]):
                m.d.comb += hit_entry.eq(i)
            with m.If(~valid[i]):
                m.d.comb += free_entry.eq(i)
        hit, full = match.any(), valid.all()
        with m.If(hit):
            m.d.comb += [self.verdict.eq(Verdict.HIT), self.entry.eq(hit_entry)]
        with m.Elif(req.open & ~full):
            m.d.comb += [self.verdict.eq(Verdict.OPENED), self.entry.eq(free_entry)]
        with m.Elif(req.open):
            m.d.comb += self.verdict.eq(Verdict.FULL)
        with m.Else():
            m.d.comb += self.verdict.eq(Verdict.STALE)
        m.d.comb += [self.req.ready.eq(self.verdict != Verdict.FULL),
                     self.done.ready.eq(1), self.drop.ready.eq(1)]
        dropped = Signal()
        m.d.comb += dropped.eq(self.drop.valid & valid.bit_select(self.drop.payload, 1))
        taken = self.req.valid & self.req.ready
        touch = taken & ((self.verdict == Verdict.HIT) | (self.verdict == Verdict.OPENED))
        opened = taken & (self.verdict == Verdict.OPENED)

        # Close scan.
        log2 = (n - 1).bit_length()
        p = Signal(range(n))
        m.d.comb += p.eq(self.now[:log2] if log2 else 0)
        sel_valid = Signal()
        sel_out = Signal(OUTSTANDING_BITS)
        sel_stamp = Signal(STAMP_BITS)
        sel_key = Signal(self.key_bits)
        m.d.comb += sel_valid.eq(valid.bit_select(p, 1))
        with m.Switch(p):
            for i in range(n):
                with m.Case(i):
                    m.d.comb += [sel_out.eq(outs[i]), sel_stamp.eq(stamps[i]),
                                 sel_key.eq(keys[i])]
        age = Signal(STAMP_BITS)
        m.d.comb += age.eq(self.now - sel_stamp)
        touched = ((touch & (self.entry == p)) | (self.done.valid & (self.done.payload == p))
                   | (self.drop.valid & (self.drop.payload == p)))
        close = Signal()
        m.d.comb += [close.eq(sel_valid & (sel_out == 0) & (age >= self.idle) & ~touched),
                     self.closed.valid.eq(close), self.closed.payload.eq(sel_key)]

        # Entries.
        for i in range(n):
            add = touch & (self.entry == i) & req.count
            sub = self.done.valid & (self.done.payload == i) & valid[i] & (outs[i] != 0)
            with m.If(opened & (self.entry == i)):
                m.d.sync += [keys[i].eq(req.key), outs[i].eq(req.count),
                             stamps[i].eq(self.now)]
            with m.Else():
                with m.If(add & ~sub):
                    m.d.sync += outs[i].eq(outs[i] + 1)
                with m.Elif(sub & ~add):
                    m.d.sync += outs[i].eq(outs[i] - 1)
                with m.If((touch & (self.entry == i))
                          | (self.done.valid & (self.done.payload == i) & valid[i])):
                    m.d.sync += stamps[i].eq(self.now)
        new_valid = Signal(n)
        m.d.comb += new_valid.eq(
            (valid | Mux(opened, Const(1, n) << self.entry, 0))
            & ~Mux(close, Const(1, n) << p, 0)
            & ~Mux(dropped, Const(1, n) << self.drop.payload, 0))
        m.d.sync += valid.eq(new_valid)

        # Counters and occupancy.
        used_next = Signal(range(n + 1))
        m.d.comb += used_next.eq(self.used + opened - close - dropped)
        m.d.sync += [
            self.now.eq(self.now + 1),
            self.used.eq(used_next),
            self.used_max.eq(Mux(used_next > self.used_max, used_next, self.used_max)),
            self.opens.eq(self.opens + opened),
            self.closes.eq(self.closes + close),
            self.full_waits.eq(self.full_waits
                               + (self.req.valid & (self.verdict == Verdict.FULL))),
            self.stale.eq(self.stale + (taken & (self.verdict == Verdict.STALE))),
        ]
        return m
