"""The on-chip cache of QP contexts of one engine, with pipelined fills."""

from amaranth import Cat, Const, Module, Mux, Shape, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from rtl.rdma.cache_index import check_ways, entry_of, plru_touch, plru_victim
from spec.checks import check_int, reject
from spec.formats.roce import HOST_WORD_BITS, QPC_DYNAMIC_MASK, QPC_LAYOUT, QPN_BITS
from spec.ports import (
    CacheGroupSignature,
    CacheProbeSignature,
    CacheReadSignature,
    FillQuerySignature,
    ports_by_name,
)
from spec.rdma_engine import CACHE_COUNTERS, CACHE_WAYS, QPC_LOG2_BITS, QPC_MAX_WORDS
from spec.rdma_stages import group_layout, writeback_layout

__all__ = ["ContextCache", "entry_of", "CACHE_LOG2_BITS", "CACHE_WAYS", "check_ways",
           "QPC_LOG2_BITS", "QPC_MAX_WORDS"]

#: Width of the run-time port that says how many entries are in use (``2**cache_log2``).
CACHE_LOG2_BITS = 4


def _width(shape):
    return Shape.cast(shape).width


class ContextCache(wiring.Component):
    """Set-associative cache of ``entries`` QP contexts (one 64-byte word each: the
    fields of a context, :data:`spec.formats.roce.QPC_LAYOUT`).

    With ``2**cache_log2`` entries in use and ``ways`` ways, QP ``q`` lives in set
    ``s = q % (2**cache_log2 // ways)``, in one of the entries ``s * ways + w`` (way
    ``w``): the ways of a set are adjacent entries. With one way the cache is direct
    mapped (QP ``q`` in entry ``q % 2**cache_log2``). A lookup compares the tags of all
    ways of the set at once. On a miss the cache proposes one *candidate* way to
    evict: the first invalid way of the set if there is one, else the least recently
    used way by a tree pseudo-LRU of ``ways - 1`` bits per set (tree-LRU, as described
    in J. T. Robinson, "Generalized Tree-LRU Replacement", IBM Research Report RC23332,
    2004: each node of a binary tree over the ways points to its less recently used
    half; an access turns the nodes on its path away from it). The pseudo-LRU of the
    set is updated on every lookup taken (the hit way or the filled way). A candidate
    that is ``victim_busy`` or still filling is marked most recently used instead, so the
    next cycle proposes another way (one candidate per cycle); ``busy_skips`` counts
    those cycles. The cache holds a context's *static* word as
    it was read from host memory, and *groups* of dynamic fields that one pipeline stage
    owns and rewrites (the requester's ``sq_head``, its ``next_psn``; the responder's
    PSN and MSN state). Each group has one writer, so stages never race; a group reads
    as the filled word's fields until its owner first writes the entry after a fill.

    A context in host memory is ``W = 2**qpc_log2`` words at ``base + qpn * W``
    (:data:`spec.formats.roce.QPC_DYNAMIC_FIELDS`): word 0 the dynamic word, word 1 the
    static word, words 2 to W - 1 the rest of a real context, not interpreted here. A
    fill reads the whole context (one read of W words: the cache line is the context,
    as a real engine caches whole contexts with fields this model does not use, so the
    host interface is charged for all of them); the cache keeps the word ``static
    fields of word 1 | dynamic fields of word 0`` and discards words 2 to W - 1
    (``fill_discards``). A write-back writes only the dynamic word (the written word
    masked to the dynamic fields; with W = 1 the whole word).

    The cache never evicts a context that is in use: the user says so with
    ``victim_busy`` (its own count of work of that entry's QP in flight), and a lookup
    that misses on a busy entry waits. Several fills can be outstanding (one per
    entry being filled); their data returns in the order of the misses.

    Parameters
    ----------
    entries : int
        Power of two, 16 to 256.
    depth : int
        Host-memory words (address width of ``fill_rd`` and ``wb``).
    groups : dict
        ``{group name: (QPC field names)}``: the dynamic groups.
    static_reads : int
        Number of static read ports (``reads``).
    probes : int
        Number of presence probes (``probe``), 0 to 5.
    ways : int
        Ways per set: 1, 2, 4 or 8 (:data:`CACHE_WAYS`).
    fill_queries : int
        Number of further "entry filled?" queries (``filled_more``), 0 to 2.

    Ports
    -----
    base : In(range(depth))
        Word address of the context table: QP ``q`` at ``base + q * 2**qpc_log2``.
    qpc_log2 : In(QPC_LOG2_BITS)
        A context is ``2**qpc_log2`` host words (0 to 4: 64 to 1024 bytes; held
        from reset). One build serves every context size.
    cache_log2 : In(CACHE_LOG2_BITS)
        ``2**cache_log2`` entries are in use (4 to ``log2(entries)``; held from reset),
        ``2**cache_log2 // ways`` sets. One build serves every cache size up to
        ``entries``.
    req : In(stream.Signature({"qpn": QPN_BITS}))
        A lookup. ``ready`` (combinational) is high when it is taken in this cycle: on a
        hit (the tag matches, also while the entry is still filling), or on a miss
        whose entry is not ``victim_busy`` nor filling and for which ``fill_rd`` (and,
        if the victim must be written back, ``wb``) and the fill-order queue have room.
        A miss then issues the fill read and the write-back in the same cycle and
        sets the tag.
    victim_busy : In(1)
        For ``entry``: its QP has work in flight (no eviction).
    hit : Out(1)
        With ``req.valid``: a tag of the set matches.
    entry : Out(range(entries))
        With ``req.valid`` (combinational): on a hit the entry holding the QP, on a miss
        the candidate entry a taken miss fills.
    victim : Out(StructLayout({"valid": 1, "qpn": QPN_BITS}))
        The tag of ``entry`` (on a miss, the QP a taken miss evicts).
    probe : In(CacheProbeSignature()).array(probes)
        Is QP ``probe.qpn`` in the cache, filled (``present``), and in which ``entry``?
        Combinational.
    fill_rd : Out(stream.Signature(range(depth)))
        Fill reads (word address of a context; the user reads ``2**qpc_log2`` words
        there), to a FIFO of the user.
    fill_data : In(stream.Signature(HOST_WORD_BITS))
        The fill words, in the order of the fill reads, ``2**qpc_log2`` per fill;
        ``ready`` is ignored.
    wb : Out(stream.Signature(writeback_layout(depth)))
        Write-backs of evicted contexts that a group owner has written since their fill.
    filled : In(FillQuerySignature(entries))
        Is entry ``filled.entry`` filled (``filled.ready``: not waiting for its fill
        data)?
    filled_more : In(FillQuerySignature(entries)).array(fill_queries)
        More queries like ``filled``.
    reads : In(CacheReadSignature(entries)).array(static_reads)
        Static read ports (combinational).
    <group> : In(CacheGroupSignature(entries, group_layout(fields)))
        One per group, named after it: the group's current values for entry ``addr``
        on ``data`` (combinational); ``we`` writes ``wdata`` to that entry (seen from
        the next cycle on).
    lookups, misses, writebacks, fills_max : Out(32)
        Counters since reset; ``fills_max`` is the most fills outstanding at once.
    fill_discards : Out(32)
        Fill words discarded (words 2 to W - 1 of each fill).
    busy_skips : Out(32)
        Cycles a lookup missed and was not taken because its candidate was
        ``victim_busy`` or filling.

    Timing
    ------
    A lookup is answered in the cycle it is presented. A fill is complete when its last
    word (word W - 1) arrives; that word written in cycle ``f``, the context is readable
    (and ``q_ready`` high) from ``f + 1``. A write-back word is the static
    word with every group's current value put in its fields.
    """

    def __init__(self, entries, depth, groups, static_reads=1, probes=0, ways=1,
                 fill_queries=0):
        check_int(self, "QP-context cache entries", entries, 16, 256)
        if entries & (entries - 1):
            reject(self, f"QP-context cache entries must be a power of two, not {entries!r}")
        check_int(self, "static read ports", static_reads, 1, 8)
        check_int(self, "cache probes", probes, 0, 5)
        self.ways = check_ways(self, ways, entries)
        check_int(self, "further fill queries", fill_queries, 0, 2)
        for name, fields in groups.items():
            for f in fields:
                if f not in QPC_LAYOUT.members:
                    reject(self, f"context group {name!r}: unknown QPC field {f!r}")
        self.entries, self.depth, self.static_reads = entries, depth, static_reads
        self.groups = {name: tuple(fields) for name, fields in groups.items()}
        ports = {
            "base": In(range(depth)),
            "qpc_log2": In(QPC_LOG2_BITS),
            "cache_log2": In(CACHE_LOG2_BITS, init=(entries - 1).bit_length()),
            "req": In(stream.Signature(data.StructLayout({"qpn": QPN_BITS}))),
            "victim_busy": In(1),
            "hit": Out(1),
            "entry": Out(range(entries)),
            "victim": Out(data.StructLayout({"valid": 1, "qpn": QPN_BITS})),
            "probe": In(CacheProbeSignature()).array(probes),
            "fill_rd": Out(stream.Signature(range(depth))),
            "fill_data": In(stream.Signature(HOST_WORD_BITS)),
            "wb": Out(stream.Signature(writeback_layout(depth))),
            "filled": In(FillQuerySignature(entries)),
            "filled_more": In(FillQuerySignature(entries)).array(fill_queries),
            "reads": In(CacheReadSignature(entries)).array(static_reads),
        }
        for name, fields in self.groups.items():
            if name in ports or name in CACHE_COUNTERS:
                reject(self, f"context group name {name!r} is taken by a port")
            ports[name] = In(CacheGroupSignature(entries, group_layout(fields)))
        ports.update({n: Out(32) for n in CACHE_COUNTERS})
        ports["busy_skips"] = Out(32)
        ports["fill_discards"] = Out(32)
        super().__init__(ports)

    def _ways_of(self, m, tags, qpn, name):
        """The entry of ``qpn`` (its matching way, else the first way of its set), the
        match bits of the ways, and the set's first entry."""
        ways = self.ways
        ibits = (self.entries - 1).bit_length()
        wbits = (ways - 1).bit_length()
        sets_log2 = Signal(CACHE_LOG2_BITS, name=f"{name}_sets_log2")
        m.d.comb += sets_log2.eq(self.cache_log2 - wbits)
        first = Signal(ibits, name=f"{name}_first")
        m.d.comb += first.eq(entry_of(qpn, sets_log2, ibits - wbits) << wbits)
        match = Signal(ways, name=f"{name}_match")
        tag_data = []
        for w in range(ways):
            rd = tags.read_port(domain="comb")
            m.d.comb += [rd.addr.eq(first | w),
                         match[w].eq(rd.data.valid & (rd.data.qpn == qpn))]
            tag_data.append(rd.data)
        hit_way = Signal(max(wbits, 1), name=f"{name}_hit_way")
        for w in reversed(range(ways)):
            with m.If(match[w]):
                m.d.comb += hit_way.eq(w)
        found = Signal(ibits, name=f"{name}_entry")
        m.d.comb += found.eq(first | (hit_way[:wbits] if wbits else 0))
        return found, match, first, tag_data

    def elaborate(self, platform):
        m = Module()
        n = self.entries
        ibits = (n - 1).bit_length()
        tag_layout = data.StructLayout({"valid": 1, "qpn": QPN_BITS})
        m.submodules.tags = tags = memory.Memory(shape=tag_layout, depth=n, init=[])
        m.submodules.static = static = memory.Memory(shape=HOST_WORD_BITS, depth=n, init=[])
        m.submodules.order = order = SyncFIFO(width=ibits, depth=n)
        tag_rd = tags.read_port(domain="comb")
        tag_wr = tags.write_port()
        st_wr = static.write_port()

        filling = Signal(n)
        outstanding = Signal(range(n + 1))

        ways = self.ways
        wbits = (ways - 1).bit_length()
        qpn = self.req.payload.qpn
        entry = Signal(ibits)
        found, match, first, way_tags = self._ways_of(m, tags, qpn, "req")
        # The candidate way of a miss: the first invalid way, else the pseudo-LRU's.
        cand = Signal(max(wbits, 1))
        if ways > 1:
            m.submodules.plru = plru = memory.Memory(shape=ways - 1, depth=n // ways,
                                                     init=[])
            plru_rd, plru_wr = plru.read_port(domain="comb"), plru.write_port()
            set_no = first >> wbits
            m.d.comb += [plru_rd.addr.eq(set_no), plru_wr.addr.eq(set_no),
                         cand.eq(plru_victim(plru_rd.data, ways))]
            for w in reversed(range(ways)):
                with m.If(~way_tags[w].valid):
                    m.d.comb += cand.eq(w)
        m.d.comb += [self.hit.eq(match.any()),
                     entry.eq(Mux(self.hit, found, first | (cand[:wbits] if wbits else 0))),
                     self.entry.eq(entry), tag_rd.addr.eq(entry)]
        tag = tag_rd.data
        m.d.comb += self.victim.eq(tag)

        # Group memories: the owner's read/write port and the write-back read port.
        wb_word = Signal(HOST_WORD_BITS)
        touched = Signal()
        st_wb = static.read_port(domain="comb")
        m.d.comb += st_wb.addr.eq(entry)
        overlay = Signal(HOST_WORD_BITS)
        parts = []
        group_touched = []
        fresh_updates = []
        for name, fields in self.groups.items():
            layout = group_layout(fields)
            mem = memory.Memory(shape=layout, depth=n, init=[])
            m.submodules[f"grp_{name}"] = mem
            fresh_bits = Signal(n, name=f"{name}_fresh_bits")   # filled, not yet written
            own_rd, wb_rd, wr = mem.read_port(domain="comb"), mem.read_port(domain="comb"), \
                mem.write_port()
            st_own = static.read_port(domain="comb")
            port = ports_by_name(self, name)
            addr = port["addr"]
            m.d.comb += [own_rd.addr.eq(addr), st_own.addr.eq(addr), wb_rd.addr.eq(entry),
                         wr.addr.eq(addr), wr.en.eq(port["we"]), wr.data.eq(port["wdata"])]
            fresh = Signal(name=f"{name}_fresh")       # the owner has not written it yet
            m.d.comb += fresh.eq(fresh_bits.bit_select(addr, 1))
            st_view = data.View(QPC_LAYOUT, st_own.data)
            from_static = Signal(layout, name=f"{name}_from_static")
            for f in fields:
                m.d.comb += from_static[f].eq(st_view[f])
            m.d.comb += port["data"].eq(Mux(fresh, from_static, own_rd.data))
            written = Signal(n, name=f"{name}_written")
            with m.If(port["we"]):
                m.d.comb += written.eq(Const(1, n) << addr)
            fresh_updates.append((fresh_bits, written))
            t = Signal(name=f"{name}_touched")
            m.d.comb += t.eq(~fresh_bits.bit_select(entry, 1))
            group_touched.append(t)
            wb_view = data.View(layout, wb_rd.data)
            for f in fields:
                parts.append((f, t, wb_view[f]))
        m.d.comb += touched.eq(Cat(*group_touched).any() if group_touched else 0)
        # The write-back word: the static word with the touched groups' fields.
        cur = st_wb.data
        for f, t, value in parts:
            off, width = QPC_LAYOUT[f].offset, _width(QPC_LAYOUT[f].shape)
            nxt = Signal(HOST_WORD_BITS, name=f"wb_{f}")
            m.d.comb += nxt.eq(cur)
            with m.If(t):
                m.d.comb += nxt[off:off + width].eq(value)
            cur = nxt
        m.d.comb += [overlay.eq(cur),
                     wb_word.eq(Mux(self.qpc_log2 == 0, overlay,
                                    overlay & Const(QPC_DYNAMIC_MASK, HOST_WORD_BITS)))]

        # Static read ports.
        for reader in self.reads:
            port = static.read_port(domain="comb")
            m.d.comb += [port.addr.eq(reader.addr), reader.data.eq(port.data)]

        # Lookups.
        is_filling = Signal()
        need_wb = Signal()
        m.d.comb += [is_filling.eq(filling.bit_select(entry, 1)),
                     need_wb.eq(tag.valid & touched)]
        miss_ok = Signal()
        m.d.comb += miss_ok.eq(~self.hit & ~self.victim_busy & ~is_filling
                               & self.fill_rd.ready & (self.wb.ready | ~need_wb)
                               & order.w_rdy)
        take_miss = Signal()
        m.d.comb += [
            self.req.ready.eq(self.req.valid & (self.hit | miss_ok)),
            take_miss.eq(self.req.valid & miss_ok),
        ]
        with m.If(self.req.ready):
            m.d.sync += self.lookups.eq(self.lookups + 1)
        skip = Signal()
        m.d.comb += skip.eq(self.req.valid & ~self.hit & (self.victim_busy | is_filling))
        with m.If(skip):
            m.d.sync += self.busy_skips.eq(self.busy_skips + 1)
        if ways > 1:
            # The way touched: the way taken (hit or filled), or a skipped candidate.
            m.d.comb += [plru_wr.en.eq(self.req.ready | skip),
                         plru_wr.data.eq(plru_touch(plru_rd.data, entry[:wbits], ways))]
        set_mask = Signal(n)
        clr_mask = Signal(n)
        with m.If(take_miss):
            m.d.comb += [
                tag_wr.addr.eq(entry), tag_wr.en.eq(1),
                tag_wr.data.valid.eq(1), tag_wr.data.qpn.eq(qpn),
                self.fill_rd.valid.eq(1),
                self.fill_rd.payload.eq(self.base + (qpn << self.qpc_log2)),
                order.w_en.eq(1), order.w_data.eq(entry),
                set_mask.eq(Const(1, n) << entry),
            ]
            m.d.sync += self.misses.eq(self.misses + 1)
            with m.If(need_wb):
                m.d.comb += [self.wb.valid.eq(1),
                             self.wb.payload.addr.eq(self.base + (tag.qpn << self.qpc_log2)),
                             self.wb.payload.data.eq(wb_word)]
                m.d.sync += self.writebacks.eq(self.writebacks + 1)

        # Fill data, in the order of the misses, 2**qpc_log2 words per fill: word 0 held,
        # word 1 (word 0 if W = 1) merged with it and stored, the fill done at word W - 1.
        word_no = Signal(range(QPC_MAX_WORDS))
        held = Signal(HOST_WORD_BITS)
        last_no = Signal(range(QPC_MAX_WORDS))
        keep_no = Signal(1)
        fill_done = Signal()
        dyn_src = Signal(HOST_WORD_BITS)
        dyn_mask = Const(QPC_DYNAMIC_MASK, HOST_WORD_BITS)
        m.d.comb += [last_no.eq((Const(1, QPC_MAX_WORDS.bit_length()) << self.qpc_log2) - 1),
                     keep_no.eq(self.qpc_log2 != 0),
                     fill_done.eq(self.fill_data.valid & (word_no == last_no)),
                     dyn_src.eq(Mux(word_no == 0, self.fill_data.payload, held))]
        with m.If(self.fill_data.valid):
            m.d.sync += word_no.eq(Mux(word_no == last_no, 0, word_no + 1))
            with m.If(word_no == 0):
                m.d.sync += held.eq(self.fill_data.payload)
            with m.If(word_no == keep_no):
                m.d.comb += [st_wr.addr.eq(order.r_data), st_wr.en.eq(1),
                             st_wr.data.eq((dyn_src & dyn_mask)
                                           | (self.fill_data.payload & ~dyn_mask))]
            with m.If(word_no > 1):
                m.d.sync += self.fill_discards.eq(self.fill_discards + 1)
        with m.If(fill_done):
            m.d.comb += [order.r_en.eq(1), clr_mask.eq(Const(1, n) << order.r_data)]
        m.d.sync += filling.eq((filling | set_mask) & ~clr_mask)
        for bits, written in fresh_updates:
            m.d.sync += bits.eq((bits & ~written) | clr_mask)
        nxt_out = Signal(range(n + 1))
        m.d.comb += nxt_out.eq(outstanding + take_miss - fill_done)
        m.d.sync += outstanding.eq(nxt_out)
        with m.If(nxt_out > self.fills_max):
            m.d.sync += self.fills_max.eq(nxt_out)
        for q in (self.filled, *self.filled_more):
            m.d.comb += q.ready.eq(~filling.bit_select(q.entry, 1))
        for k, pr in enumerate(self.probe):
            p_e, p_match, _, _ = self._ways_of(m, tags, pr.qpn, f"probe{k}")
            m.d.comb += [pr.entry.eq(p_e),
                         pr.present.eq(p_match.any() & ~filling.bit_select(p_e, 1))]
        return m
