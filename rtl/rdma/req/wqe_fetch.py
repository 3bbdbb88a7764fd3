"""WQE fetch: one DMA read for every WQE a doorbell announces, up to a prefetch depth."""

from amaranth import Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from spec.checks import check_int
from spec.ports import CacheGroupSignature, CacheReadSignature, FillQuerySignature
from spec.rdma_engine import FETCH_GROUP, MAX_PREFETCH, REQUESTER_DEFAULTS
from spec.rdma_stages import (
    batch_layout,
    fetch_layout,
    group_layout,
    read_layout,
    resend_layout,
)

__all__ = ["WqeFetch"]


class WqeFetch(wiring.Component):
    """Read the WQEs of each work item from the send queue, or announce its MMIO WQE.

    Parameters
    ----------
    entries : int
        Context-cache entries.
    depth : int
        Host-memory words.
    prefetch : int
        Most WQEs fetched by one read (1 to 16; default 16).
    ring_words : int
        Words of the fetched-WQE FIFO (reads are only issued when their words fit).
    records : int
        The completion unit's window records: new work is only served when the records
        it will need fit in the pool together with those in windows and those promised
        and not yet appended (so a record is always free when the completion unit
        appends one, and a rewind's wait for the pipeline to empty always ends).
    reads : int
        1: the resends carry ``take``, passed on as the batch's ``last_of_item`` (0 on
        every other resend) to the frame sender; 0 (default): WRITEs only.

    Ports
    -----
    fetch : In(stream.Signature(fetch_layout()))
        Work items with their (pinned) entry, from a FIFO.
    resend : In(stream.Signature(resend_layout(reads)))
        Messages to send again (a rewind), from a FIFO; served first.
    rd : Out(stream.Signature(read_layout(depth)))
        WQE reads, to the WQE read client's FIFO.
    batch : Out(stream.Signature(batch_layout()))
        One batch per read (``count`` WQEs from slot ``first``), one per MMIO WQE
        (``bf``), one ``null`` batch per item that announced no new WQE or is a modify
        command (``modify``); to a FIFO.
    filled : Out(FillQuerySignature(entries))
        The cache's "entry filled?" query, for the item at the head of ``fetch``.
    ctx : Out(CacheReadSignature(entries))
        A static read port of the cache (``sq_base``, ``sq_size_log2``,
        ``sq_stride_log2``).
    group : Out(CacheGroupSignature(entries, group_layout(FETCH_GROUP)))
        The cache's group ``FETCH_GROUP`` (``sq_head``), owned by this stage.
    released : In(16)
        Words the sequencer has taken out of the WQE FIFO since reset (mod 2**16).
    hold : In(1)
        A rewind of the QP of the item at the head of ``fetch`` is pending (the
        completion unit's answer for that QP): that item is not served, nor anything
        behind it (resends are).
    win_total : In(16), appended : In(16)
        The completion unit's records in windows, and records it has taken from its
        ``rec`` FIFO since reset (mod 2**16).
    issued : Out(16)
        Records this stage has promised since reset (mod 2**16): one per WQE of each
        batch it issued that is not a resend, one per null batch. Each non-resend batch
        yields exactly that many records at the completion unit.
    wqe_reads, wqes, wqe_words_max : Out(32)
        Reads issued (first sends and resends), WQE slots read, and the most WQE FIFO
        words reserved at once.

    Timing
    ------
    One action per cycle, combinational on the FIFO heads: a resend (one WQE read, one
    batch) if one waits; else the item at the head of ``fetch`` once its entry is
    filled: a null batch with ``modify`` for a modify command; a null batch (no new WQE);
    a ``bf`` batch for a WQE by MMIO (``sq_head``
    becomes the item's ``sq_tail``); or one read of ``n = min(new WQEs, prefetch, slots
    to the end of the ring)`` slots of ``2**sq_stride_log2`` words (``sq_head`` advances
    by ``n``; the item leaves when all its WQEs are read, else it is served again next
    cycle). A read is issued only if its words fit in the WQE FIFO together with the
    words reserved and not yet taken, and ``rd`` and ``batch`` have room. New work (not
    a resend) is served only while ``hold`` is low and its records fit: ``win_total +
    (issued - appended) + k <= records``, ``k`` = ``n`` for a read (``n`` also at most
    ``records``), 1 for the others. A read waits for all its records rather than being
    cut to the records free: cut reads would undo doorbell batching (one read per WQE)
    whenever the pool is full.
    """

    def __init__(self, entries, depth, prefetch=MAX_PREFETCH, ring_words=256,
                 records=REQUESTER_DEFAULTS["records"], reads=0):
        self.entries, self.depth, self.reads = entries, depth, reads
        self.records = check_int(self, "window records", records, 2, 4096)
        self.prefetch = check_int(self, "WQE prefetch depth", prefetch, 1, MAX_PREFETCH)
        self.ring_words = check_int(self, "WQE FIFO words", ring_words, 64, 1 << 14)
        super().__init__({
            "fetch": In(stream.Signature(fetch_layout())),
            "resend": In(stream.Signature(resend_layout(bool(reads)))),
            "rd": Out(stream.Signature(read_layout(depth))),
            "batch": Out(stream.Signature(batch_layout())),
            "filled": Out(FillQuerySignature(entries)),
            "ctx": Out(CacheReadSignature(entries)),
            "group": Out(CacheGroupSignature(entries, group_layout(FETCH_GROUP))),
            "released": In(16), "hold": In(1), "win_total": In(16), "appended": In(16),
            "issued": Out(16),
            "wqe_reads": Out(32), "wqes": Out(32), "wqe_words_max": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        reserved = Signal(16)
        held = Signal(16)
        m.d.comb += held.eq(reserved - self.released)
        owed = Signal(16)             # records promised and not yet appended
        pool = Signal(17)
        m.d.comb += [owed.eq(self.issued - self.appended), pool.eq(self.win_total + owed)]
        promise = Signal(6)           # records promised this cycle
        m.d.sync += self.issued.eq(self.issued + promise)
        r, f = self.resend.payload, self.fetch.payload
        use_resend = self.resend.valid
        m.d.comb += [
            self.ctx.addr.eq(Mux(use_resend, r.entry, f.entry)),
            self.filled.entry.eq(f.entry), self.group.addr.eq(f.entry),
        ]
        ctx = self.ctx.data
        size = Signal(17)
        mask = Signal(16)
        m.d.comb += [size.eq(Const(1, 17) << ctx.sq_size_log2), mask.eq(size - 1)]
        head = self.group.data.sq_head
        b = self.batch.payload
        m.d.comb += [b.entry.eq(Mux(use_resend, r.entry, f.entry)),
                     b.qpn.eq(Mux(use_resend, r.qpn, f.qpn)),
                     b.stride_log2.eq(ctx.sq_stride_log2)]

        issue = Signal()              # a read goes out this cycle
        words = Signal(8)
        slot = Signal(16)
        n = Signal(6)
        room = Signal()
        m.d.comb += room.eq(held + words <= self.ring_words)
        m.d.comb += [self.rd.payload.addr.eq(ctx.sq_base + (slot << ctx.sq_stride_log2)),
                     self.rd.payload.words.eq(words)]
        with m.If(issue):
            m.d.comb += self.rd.valid.eq(1)
            m.d.sync += [reserved.eq(reserved + words),
                         self.wqe_reads.eq(self.wqe_reads + 1),
                         self.wqes.eq(self.wqes + n)]
            with m.If(held + words > self.wqe_words_max):
                m.d.sync += self.wqe_words_max.eq(held + words)

        with m.If(use_resend):
            m.d.comb += [
                slot.eq(r.sq_index & mask), n.eq(1),
                words.eq(Const(1, 8) << ctx.sq_stride_log2),
                b.first.eq(r.sq_index), b.count.eq(1), b.resend.eq(1),
                b.first_psn.eq(r.first_psn),
            ]
            if self.reads:      # a take resend: its ``last_of_item`` (0 on resends)
                m.d.comb += b.last_of_item.eq(r.take)
            ok = room & self.rd.ready & self.batch.ready
            m.d.comb += [issue.eq(ok), self.batch.valid.eq(ok), self.resend.ready.eq(ok)]
        with m.Elif(self.fetch.valid & self.filled.ready & ~self.hold):
            count = Signal(16)
            to_end = Signal(17)
            m.d.comb += [count.eq(f.sq_tail - head), to_end.eq(size - (head & mask))]
            one = self.batch.ready & (pool < self.records)    # a batch of one record
            with m.If(f.modify):
                go = one
                m.d.comb += [b.null.eq(1), b.modify.eq(1), b.last_of_item.eq(1),
                             self.batch.valid.eq(go), self.fetch.ready.eq(go),
                             promise.eq(go)]
            with m.Elif(f.bf):
                go = one
                m.d.comb += [
                    b.first.eq(f.sq_tail - 1), b.count.eq(1), b.bf.eq(1),
                    b.last_of_item.eq(1),
                    self.batch.valid.eq(go), self.fetch.ready.eq(go), promise.eq(go),
                    self.group.we.eq(go), self.group.wdata.sq_head.eq(f.sq_tail),
                ]
            with m.Elif(count == 0):
                go = one
                m.d.comb += [b.null.eq(1), b.last_of_item.eq(1),
                             self.batch.valid.eq(go), self.fetch.ready.eq(go),
                             promise.eq(go)]
            with m.Else():
                cap = min(self.prefetch, self.records)     # most WQEs a read may take
                m.d.comb += n.eq(Mux(count < cap, Mux(count < to_end, count, to_end),
                                     Mux(cap < to_end, cap, to_end)))
                m.d.comb += [
                    slot.eq(head & mask),
                    words.eq(n << ctx.sq_stride_log2),
                    b.first.eq(head), b.count.eq(n), b.last_of_item.eq(n == count),
                ]
                ok = room & self.rd.ready & self.batch.ready & (pool + n <= self.records)
                m.d.comb += [
                    issue.eq(ok), self.batch.valid.eq(ok), promise.eq(Mux(ok, n, 0)),
                    self.fetch.ready.eq(ok & (n == count)),
                    self.group.we.eq(ok), self.group.wdata.sq_head.eq(head + n),
                ]
        return m
