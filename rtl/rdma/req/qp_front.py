"""The requester's front: one QP-context lookup per work item, in order."""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.rdma.context_cache import CACHE_LOG2_BITS
from spec.formats.roce import QPN_BITS
from spec.ports import CompletionQuerySignature
from spec.rdma_stages import COUNT_BITS, fetch_layout, item_layout

__all__ = ["QpFront"]


class QpFront(wiring.Component):
    """Look up each work item's QP context and pass the item on with its cache entry.

    The entry of a lookup's QP holds the *victim* (the QP a miss evicts). The victim is
    *busy*, and the miss waits, while its QP has work in the pipeline: items admitted
    here that the completion unit has not yet seen done (``adm[e] != done[e]``), or its
    QP entered ERR in the last cycle (``completion.err``: the sequencer writes the state
    this cycle), or the completion unit says ``keep``: the looked-up QP's window slot
    holds another QP's messages, or the victim's window is pinned (a rewind or error
    needs its context). Messages waiting for their ACK do not pin the victim otherwise:
    the window lives in the completion unit's window slot, not in the cache. Later
    stages address a context by its entry number without a tag check (the items in
    the pipeline pin it).

    Parameters
    ----------
    entries : int
        Entries of the context cache.

    Ports
    -----
    item : In(stream.Signature(item_layout()))
        Work items, from a FIFO.
    fetch : Out(stream.Signature(fetch_layout()))
        The item and its entry, to a FIFO.
    lookup : Out(stream.Signature({"qpn": QPN_BITS}))
        To the cache's ``req`` (its ``ready`` says the lookup was taken this cycle).
    victim_busy : Out(1)
        To the cache: the victim of the presented lookup is busy.
    victim : In(StructLayout({"valid": 1, "qpn": QPN_BITS})), hit : In(1)
        From the cache: the presented lookup's victim, and whether it hits.
    entry : In(range(entries))
        From the cache: the presented lookup's entry (the hit entry, or the entry a
        miss fills), combinational.
    completion : Out(CompletionQuerySignature(entries, COUNT_BITS))
        To the completion unit: the lookup (entry, QPN, victim) and its answers.
    need : In(stream.Signature({"qpn": QPN_BITS}))
        The completion unit's lookup (a rewind or error whose context left the cache):
        presented before any item, taken when the cache takes it.
    hold : In(1)
        Take nothing. The requester ties it low: a rewind holds the new work of its own
        QP, at the WQE fetch stage (:class:`~rtl.rdma.req.completion.CompletionUnit`).
    serial : In(1), idle : In(1)
        With ``serial``, take an item only while ``idle`` (nothing in flight anywhere):
        one message at a time.
    cache_log2 : In(4)
        Cache entries in use, as the cache's port (the cache places the QPs).
    adm_total : Out(COUNT_BITS)
        Items taken since reset (mod ``2**COUNT_BITS``).
    items, ctx_stalls, evict_inflight : Out(32)
        Items taken; cycles an item waited for the cache (a busy victim, a fill
        already in progress for its entry, or no room for the fill); misses taken whose
        victim had messages waiting for their ACK.

    Timing
    ------
    Combinational: with ``need`` valid its lookup is presented and no item is taken.
    Else an item at the head of ``item`` is taken in the cycle the cache takes its
    lookup, if ``fetch`` has room and neither ``hold`` nor ``serial & ~idle`` holds it
    back; it is in ``fetch`` from the next cycle.
    """

    def __init__(self, entries):
        self.entries = entries
        super().__init__({
            "item": In(stream.Signature(item_layout())),
            "fetch": Out(stream.Signature(fetch_layout())),
            "lookup": Out(stream.Signature(data.StructLayout({"qpn": QPN_BITS}))),
            "victim_busy": Out(1),
            "victim": In(data.StructLayout({"valid": 1, "qpn": QPN_BITS})), "hit": In(1),
            "entry": In(range(entries)),
            "completion": Out(CompletionQuerySignature(entries, COUNT_BITS)),
            "need": In(stream.Signature(data.StructLayout({"qpn": QPN_BITS}))),
            "hold": In(1), "serial": In(1), "idle": In(1),
            "cache_log2": In(CACHE_LOG2_BITS, init=(entries - 1).bit_length()),
            "adm_total": Out(COUNT_BITS),
            "items": Out(32), "ctx_stalls": Out(32), "evict_inflight": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.entries
        ibits = (n - 1).bit_length()
        m.submodules.adm = adm = memory.Memory(shape=COUNT_BITS, depth=n, init=[])
        rd, wr = adm.read_port(domain="comb"), adm.write_port()
        it = self.item.payload
        qpn = Signal(QPN_BITS)
        m.d.comb += qpn.eq(Mux(self.need.valid, self.need.payload.qpn, it.qpn))
        e = Signal(ibits)
        q = self.completion
        m.d.comb += [e.eq(self.entry), rd.addr.eq(e),
                     wr.addr.eq(e), q.entry.eq(e), q.qpn.eq(qpn),
                     q.victim_valid.eq(self.victim.valid), q.victim_qpn.eq(self.victim.qpn)]
        go = Signal()
        m.d.comb += [
            go.eq(self.item.valid & self.fetch.ready & ~self.hold & ~self.need.valid
                  & (~self.serial | self.idle)),
            self.lookup.valid.eq(go | self.need.valid),
            self.lookup.payload.qpn.eq(qpn),
            self.victim_busy.eq((rd.data != q.done) | q.keep | q.err),
            self.need.ready.eq(self.need.valid & self.lookup.ready),
        ]
        taken = Signal()
        m.d.comb += [
            taken.eq(go & self.lookup.ready),
            self.item.ready.eq(taken),
            self.fetch.valid.eq(taken),
            self.fetch.payload.qpn.eq(it.qpn),
            self.fetch.payload.sq_tail.eq(it.sq_tail),
            self.fetch.payload.bf.eq(it.bf),
            self.fetch.payload.modify.eq(it.modify),
            self.fetch.payload.entry.eq(e),
            wr.en.eq(taken), wr.data.eq(rd.data + 1),
        ]
        with m.If(taken):
            m.d.sync += [self.adm_total.eq(self.adm_total + 1), self.items.eq(self.items + 1)]
        with m.If(go & ~self.lookup.ready):
            m.d.sync += self.ctx_stalls.eq(self.ctx_stalls + 1)
        with m.If(self.lookup.valid & self.lookup.ready & ~self.hit & q.victim_open):
            m.d.sync += self.evict_inflight.eq(self.evict_inflight + 1)
        return m
