"""Miss queue: work items whose context is still being filled step aside for the others."""

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from spec.checks import check_int
from spec.ports import FillQuerySignature
from spec.rdma_engine import MISS_QUEUE_RANGE
from spec.rdma_stages import fetch_layout

__all__ = ["MissQueue"]


class MissQueue(wiring.Component):
    """Between the ``fetch`` FIFO and the WQE fetch stage: let items of present contexts
    pass items whose context fill is still on its way, keeping the order of each QP.

    An item's cache entry is pinned from its lookup until the completion unit has seen it
    done (:class:`~rtl.rdma.req.qp_front.QpFront`), so every item of one entry in the
    pipeline belongs to one QP and the entry, once filled, stays filled until they are
    all served: keeping the order per entry keeps it per QP.

    Parameters
    ----------
    entries : int
        Context-cache entries.
    depth : int
        Items the side queue holds (1 to 64; :data:`spec.rdma_engine.MISS_QUEUE_RANGE`).
        The requester builds no miss queue for 0 (the ``fetch`` FIFO feeds the WQE fetch
        stage directly and an item waits at its head for its fill).

    Ports
    -----
    i : In(stream.Signature(fetch_layout()))
        Work items with their entry, from the ``fetch`` FIFO.
    o : Out(stream.Signature(fetch_layout()))
        To the WQE fetch stage's ``fetch``: only items whose entry is filled.
    filled : In(FillQuerySignature(entries))
        The WQE fetch stage's query, answered here: always ready (``o`` presents only
        items whose entry is filled).
    filled_i, filled_s : Out(FillQuerySignature(entries))
        The cache's answers for the entry of the item at the head of ``i`` and of the
        side queue's head.
    waiting : Out(range(depth + 1))
        Items in the side queue.
    stepped_aside : Out(32)
        Items moved to the side queue.

    Timing
    ------
    Combinational, on the heads and on the side queue's registers of the start of the
    cycle. ``o`` presents the side queue's head if its entry is filled; else the head of
    ``i`` if it may go *directly*: its entry is filled, no item of the same entry waits
    in the side queue, and, for a WQE by MMIO (``bf``), no ``bf`` item waits there (the
    sequencer takes the MMIO words of all QPs from one FIFO in the order of their
    items). Else nothing. The presented item leaves when ``o.ready``; its source pops.
    The head of ``i`` that may not go directly *steps aside* into the side queue in the
    same cycle if it is not full (one cycle, whatever ``o`` does); it is the side
    queue's head at the earliest in the next cycle. With the side queue full such an
    item waits at the head of ``i`` and so does everything behind it. The side queue is
    first in, first out: its items leave in the order they stepped aside. Items step
    aside while the presented item's QP is held by a pending rewind (the WQE fetch
    stage's ``hold``) too: that promises no record.
    Bad input: none (an item's entry is the front's, in range by construction).
    """

    def __init__(self, entries, depth):
        self.entries = entries
        self.depth = check_int(self, "miss queue depth", depth, 1, MISS_QUEUE_RANGE[1])
        super().__init__({
            "i": In(stream.Signature(fetch_layout())),
            "o": Out(stream.Signature(fetch_layout())),
            "filled": In(FillQuerySignature(entries)),
            "filled_i": Out(FillQuerySignature(entries)),
            "filled_s": Out(FillQuerySignature(entries)),
            "waiting": Out(range(depth + 1)),
            "stepped_aside": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.depth
        lay = fetch_layout()
        slots = [Signal(lay, name=f"slot{k}") for k in range(n)]
        count = self.waiting
        head = slots[0]
        f = self.i.payload
        same, bf_waits = Signal(), Signal()
        m.d.comb += [
            same.eq(0), bf_waits.eq(0),
            self.filled.ready.eq(1),
            self.filled_i.entry.eq(f.entry), self.filled_s.entry.eq(head.entry),
        ]
        for k, s in enumerate(slots):
            live = count > k
            with m.If(live & (s.entry == f.entry)):
                m.d.comb += same.eq(1)
            with m.If(live & s.bf):
                m.d.comb += bf_waits.eq(1)
        side_go = Signal()
        direct = Signal()
        aside = Signal()
        m.d.comb += [
            side_go.eq((count != 0) & self.filled_s.ready),
            direct.eq(self.i.valid & self.filled_i.ready & ~same & ~(f.bf & bf_waits)),
            aside.eq(self.i.valid & ~direct & (count != n)),
        ]
        pop = Signal()
        with m.If(side_go):
            m.d.comb += [self.o.valid.eq(1), self.o.payload.eq(head),
                         pop.eq(self.o.ready)]
        with m.Elif(direct):
            m.d.comb += [self.o.valid.eq(1), self.o.payload.eq(f),
                         self.i.ready.eq(self.o.ready)]
        with m.If(aside):
            m.d.comb += self.i.ready.eq(1)
            m.d.sync += self.stepped_aside.eq(self.stepped_aside + 1)
        # The side queue: slot 0 is its head; a pop shifts every slot down by one, a push
        # writes the first free slot after the shift.
        for k, s in enumerate(slots):
            with m.If(pop):
                if k + 1 < n:
                    m.d.sync += s.eq(slots[k + 1])
            with m.If(aside & (count - pop == k)):
                m.d.sync += s.eq(f)
        m.d.sync += count.eq(count + aside - pop)
        return m
