"""The pipelined responder of RDMA WRITEs: stages and FIFOs, wired (no logic here)."""

from amaranth import Module, Mux, Shape
from amaranth.lib import memory, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from rtl.rdma.context_cache import CACHE_LOG2_BITS, QPC_LOG2_BITS, ContextCache
from rtl.rdma.eth_ip_udp import framing_param
from rtl.rdma.resp.ack import AckSender
from rtl.rdma.resp.header import HeaderCheck
from rtl.rdma.resp.mr_cache import MrCache
from rtl.rdma.resp.response import ResponseSender
from rtl.rdma.resp.rx import Receive
from rtl.rdma.resp.verify import Verify
from rtl.rdma.resp.wr_arbiter import WriteArbiter
from rtl.rdma.resp.writer import PayloadWriter
from spec.checks import check_int, reject
from spec.formats.packet import packet_signature
from spec.formats.roce import HOST_WORD_BITS, MR_LAYOUT, MR_LAYOUT_RA
from spec.host import wr_layout
from spec.ports import CountersSignature, HostDmaSignature, PortView
from spec.rdma_engine import check_cache_shape
from spec.rdma_responder import (
    MR_CACHE_COUNTERS,
    MR_READ_ID,
    READ_COUNTERS,
    READ_DATA_ID,
    RESP_GROUP,
    RESPONDER_COUNTERS,
    ResponderSizes,
    check_mr_table,
    check_read_words,
)
from spec.rdma_stages import (
    ack_layout,
    header_entry_layout,
    verify_job_layout,
    write_job_layout,
    writeback_layout,
)

__all__ = ["Responder"]


def _fifo(shape, depth):
    return SyncFIFO(width=Shape.cast(shape).width, depth=depth)


class Responder(wiring.Component):
    """Receive RDMA WRITE frames, check them, DMA-write the payload, send ACK/NAK.

    A pipeline of stages that talk only through ``SyncFIFO``s (and the context cache's
    memories): frames are handled in arrival order, one in-order pipeline for all QPs,
    with the checks, counters and ACK/NAK rules of the store-and-forward responder it
    replaces (docs/rdma.md, "Responder checks" and "Recovery"); only the timing differs.

    Stages, and the FIFOs (``[name]``, depths from ``sizes``) between them::

        i               -> Receive       -> [hdr], [pay]
        [hdr]           -> HeaderCheck   -> [jobs]   lookups: ContextCache -> [fills], [wbs]
        [jobs]          -> Verify        -> [wjobs], [acks]   context, group: ContextCache
        [wjobs], [pay]  -> PayloadWriter -> [words]
        [words], [wbs]  -> WriteArbiter  -> host.wr
        [acks]          -> AckSender     -> o
        [fills]         -> host.rd_req;  host.rd_data -> ContextCache (fill words)

    Parameters
    ----------
    cache : ContextCacheShape
        The QP-context cache's shape (:class:`spec.rdma_engine.ContextCacheShape`: its
        entries and ways per set), as the requester's; None: its default (16 entries,
        direct mapped).
    depth : int
        Host-memory words (a power of two, 2**6 to 2**32).
    mr : MrTableShape
        The MR table (:class:`spec.rdma_responder.MrTableShape`; None: its default, 16
        MRs on chip), indexed by ``rkey % mr.entries``. With ``mr.cache`` 0 it is on chip
        (``mr_table``). Else it lives in host memory at ``mr_base`` and a direct-mapped MR
        cache of ``mr.cache`` lines sits in front of it
        (:class:`~rtl.rdma.resp.mr_cache.MrCache`): a hit costs nothing, a miss holds
        the frame in the verify stage while one word is read on ``host.rd_req`` (``id``
        :data:`~spec.rdma_responder.MR_READ_ID`; the read data goes to the MR cache by
        that id). An MR read waiting is presented before the fill FIFO's head.
    header : str
        The framing, ``"roce"`` (default) or ``"scaleup"`` (:mod:`spec.formats.scaleup`:
        the receive, header-check, writer and ACK stages follow it).
    read_words : int
        0 (default): no RDMA READ (a READ request is ``malformed``). Else RDMA READ is
        executed (:data:`spec.rdma_responder.READ_WORDS_RANGE`): READ requests pass the
        header check and the verify stage (its docstring), their READ jobs travel in
        order with the ACKs to a :class:`~rtl.rdma.resp.response.ResponseSender` in
        place of the :class:`~rtl.rdma.resp.ack.AckSender`, whose data reads go to
        ``host.rd_req`` (``id`` :data:`~spec.rdma_responder.READ_DATA_ID`, after MR
        reads and fills) and whose data comes back into a FIFO of ``read_words`` words;
        counters :data:`~spec.rdma_responder.READ_COUNTERS` are added.
    **sizes
        FIFO depths, the fields of :class:`spec.rdma_responder.ResponderSizes`
        (``rx_beats``, ``rx_frames``, ``jobs``, ``write_jobs``, ``ack_jobs``, ``words``,
        ``fills``, ``writebacks``); the defaults and why: :mod:`spec.rdma_responder`.

    Ports
    -----
    i : In(packet_signature(64))
        Frames from the link, with ICRC and FCS; always ready.
    o : Out(packet_signature(64))
        ACK/NAK frames with ICRC and FCS (66 bytes, 2 beats); ``ready`` is honoured.
    qpc_base : In(range(depth))
        Word address of the QP-context table (QP ``q`` at ``qpc_base + q * 2**qpc_log2``).
    qpc_log2 : In(QPC_LOG2_BITS)
        A QP context is ``2**qpc_log2`` host words (0 to 4, held from reset;
        :data:`spec.formats.roce.QPC_DYNAMIC_FIELDS`): a fill reads them all, a
        write-back writes the first.
    cache_log2 : In(4)
        ``2**cache_log2`` cache entries in use (4 to ``log2(cache.entries)``, held from
        reset); with one way QP ``q`` lives in entry ``q % 2**cache_log2``
        (else in one of the ways of its set: :class:`~rtl.rdma.context_cache.ContextCache`).
    selective : In(1)
        Selective repeat (held from reset): 0 go-back-N, 1 frames ahead are placed
        (:class:`~rtl.rdma.resp.verify.Verify`); an entry with frames placed out of
        order, or with frames ahead discarded and not yet NAKed after consuming, is not
        evicted.
    host : Out(HostDmaSignature(depth))
        To the host interface's engine side (``HostInterface.dma``). ``host.rd_req``:
        context fills, a whole context each (``words`` = ``2**qpc_log2``, ``id`` = 0),
        from the fill FIFO; ``host.rd_data``: fill words, in request order, always
        ready; ``host.wr``: payload words (one write TLP per frame, ``mark`` with ``tag``
        = QPN on the last word of a WRITE LAST/ONLY) and context write-backs (one-word
        TLPs: the dynamic word).
    rx_beats_level, rx_frames_level : Out
        The levels of the payload and header FIFOs the receive stage writes, at the start
        of the cycle (registers of the FIFOs: no path from ``i``); the fabric's pause
        reads them (:class:`rtl.rdma.pause.PauseGen`). The twin's are
        ``len(fifos["pay"].q)`` and ``len(fifos["hdr"].q)`` before the cycle's ``step``.
    mr_table : memory.Memory (attribute, not a port)
        The MR table (:data:`MR_LAYOUT` entries, :data:`MR_LAYOUT_RA` with
        ``read_words``), loaded by the testbench; None with the table in host memory.
    mr_base : In(range(depth))
        Only with the table in host memory: its word address (MR ``x``,
        ``x = rkey % mr.entries``, one :data:`MR_LAYOUT` word at ``mr_base + x``).
    mr_lookups, mr_misses : Out(32)
        Only with the table in host memory: :data:`~spec.rdma_responder.MR_CACHE_COUNTERS`
        (:class:`~rtl.rdma.resp.mr_cache.MrCache`).
    frames_ok, acks, words, lookups, misses, writebacks, fills_max, <drop reasons>,
    duplicates, out_of_order, rx_beats_max, rx_frames_max, jobs_max : Out(32)
        :data:`RESPONDER_COUNTERS`: see the stages for when each one counts.

    Timing (cycles)
    ---------------
    A frame whose last beat arrives in cycle ``t`` is checked and looked up in
    ``t + 1`` (:class:`~rtl.rdma.resp.header.HeaderCheck`), verified in ``t + 2`` on a
    hit (:class:`~rtl.rdma.resp.verify.Verify`); its payload words are written by
    :class:`~rtl.rdma.resp.writer.PayloadWriter` from ``t + 3`` (one a cycle) and reach
    ``wr`` one cycle after each is written, and its ACK leaves on ``o`` in ``t + 3`` and
    ``t + 4`` (:class:`~rtl.rdma.resp.ack.AckSender`), when nothing is queued before
    it. A context miss holds the frame in the verify stage until the cycle after its
    last fill word arrives on ``host.rd_data`` (``L + W`` cycles more than a hit, ``W``
    the context's words, when ``rd_req`` is taken at once, answered ``L`` cycles later
    and its words arrive one a cycle); later frames are looked up
    meanwhile, and their misses issue their own fills (one per cache entry at most). A
    miss on an entry that is still filling, or whose QP has frames between the lookup
    and the end of the verify stage, waits in the header check and holds the frames
    behind it (the cache is direct mapped and never evicts a context in use). With
    the MR table in host memory, a FIRST/ONLY frame whose MR misses when it reaches the head of the
    verify stage in cycle ``v`` presents its MR read on ``rd_req`` in ``v + 1`` and is
    decided in the cycle after the word arrives (``L + 2`` cycles more than a hit
    when taken at once; in parallel with its context fill when both miss), holding the
    frames behind it; a hit costs nothing. At 128
    bytes every stage needs at most 2 cycles per frame (the wire brings one every 4), so
    a backlog drains at up to one frame every 2 cycles.
    """

    def __init__(self, cache=None, depth=1 << 14, mr=None, header="roce", read_words=0,
                 **sizes):
        self.framing = framing_param(self, header)
        try:
            cache = check_cache_shape(cache)
        except ValueError as error:
            reject(self, str(error))
        self.cache_shape = cache
        cache_entries = cache.entries
        check_int(self, "host-memory depth (words)", depth, 1 << 6, 1 << 32)
        if depth & (depth - 1):
            reject(self, f"host-memory depth (words) must be a power of two, not {depth!r}")
        try:
            self.mr = mr = check_mr_table(mr)
            self.sizes = ResponderSizes.of(sizes)
            self.read_words = check_read_words(read_words)
            mr.check_reads(read_words)
        except ValueError as error:
            reject(self, str(error))
        self.cache_entries, self.depth, self.mr_entries = cache_entries, depth, mr.entries
        ports = {
            "i": In(packet_signature(64)),
            "o": Out(packet_signature(64)),
            "qpc_base": In(range(depth)),
            "cache_log2": In(CACHE_LOG2_BITS, init=(cache_entries - 1).bit_length()),
            "qpc_log2": In(QPC_LOG2_BITS),
            "selective": In(1),
            "host": Out(HostDmaSignature(depth)),
            "rx_beats_level": Out(range(self.sizes.rx_beats + 1)),
            "rx_frames_level": Out(range(self.sizes.rx_frames + 1)),
        }
        ports.update({name: Out(32) for name in RESPONDER_COUNTERS})
        if mr.in_host:
            ports["mr_base"] = In(range(depth))
            ports.update({name: Out(32) for name in MR_CACHE_COUNTERS})
        if read_words:
            ports.update({name: Out(32) for name in READ_COUNTERS})
        super().__init__(ports)
        self.mr_table = (None if mr.in_host else
                         memory.Memory(shape=MR_LAYOUT_RA if read_words else MR_LAYOUT,
                                       depth=mr.entries, init=[]))

    def elaborate(self, platform):
        m = Module()
        s, n, depth = self.sizes, self.cache_entries, self.depth
        if not self.mr.in_host:
            m.submodules.mr_table = self.mr_table
        fr, hb = self.framing.header.value, self.framing.head_bytes
        m.submodules.rx = rx = Receive(s.rx_beats, s.rx_frames, header=fr)
        reads = bool(self.read_words)
        m.submodules.header = hdr = HeaderCheck(n, s.jobs, header=fr, reads=reads)
        m.submodules.verify = ver = Verify(n, s.jobs, depth, self.mr, hb, reads=reads)
        m.submodules.writer = wrt = PayloadWriter(depth, header=fr)
        m.submodules.arbiter = arb = WriteArbiter(depth)
        m.submodules.ack = ack = (ResponseSender(depth, self.read_words, header=fr) if reads
                                  else AckSender(header=fr))
        m.submodules.cache = cache = ContextCache(n, depth, {"resp": RESP_GROUP},
                                                  ways=self.cache_shape.ways)
        fifos = dict(
            hdr=_fifo(header_entry_layout(), s.rx_frames), pay=_fifo(HOST_WORD_BITS, s.rx_beats),
            jobs=_fifo(verify_job_layout(hb, reads), s.jobs),
            wjobs=_fifo(write_job_layout(depth, hb), s.write_jobs),
            acks=_fifo(ack_layout(reads), s.ack_jobs), words=_fifo(wr_layout(depth), s.words),
            fills=_fifo(range(depth), s.fills),
            wbs=_fifo(writeback_layout(depth), s.writebacks))
        if reads:
            fifos["rdata"] = _fifo(HOST_WORD_BITS, self.read_words)
        for name, fifo in fifos.items():
            m.submodules[f"{name}_fifo"] = fifo

        wiring.connect(m, wiring.flipped(self.i), rx.i)
        wiring.connect(m, rx.hdr, fifos["hdr"].w_stream)
        wiring.connect(m, rx.pay, fifos["pay"].w_stream)
        m.d.comb += [rx.hdr_level.eq(fifos["hdr"].level),
                     rx.pay_level.eq(fifos["pay"].level),
                     self.rx_frames_level.eq(fifos["hdr"].level),
                     self.rx_beats_level.eq(fifos["pay"].level)]

        wiring.connect(m, fifos["hdr"].r_stream, hdr.i)
        wiring.connect(m, hdr.o, fifos["jobs"].w_stream)
        wiring.connect(m, hdr.lookup, cache.req)
        m.d.comb += [hdr.o_level.eq(fifos["jobs"].level),
                     cache.victim_busy.eq(hdr.victim_busy | ver.held), hdr.entry.eq(cache.entry),
                     ver.held_addr.eq(hdr.done_addr), ver.selective.eq(self.selective),
                     ver.done_addr.eq(hdr.done_addr), hdr.done_data.eq(ver.done_data),
                     cache.base.eq(self.qpc_base), cache.cache_log2.eq(self.cache_log2),
                     cache.qpc_log2.eq(self.qpc_log2),
                     hdr.cache_log2.eq(self.cache_log2), ver.cache_log2.eq(self.cache_log2)]

        wiring.connect(m, cache.fill_rd, fifos["fills"].w_stream)
        rd_req, rd_data = self.host.rd_req, self.host.rd_data
        if self.mr.in_host:
            m.submodules.mr_cache = mrc = MrCache(self.mr.cache, self.mr.entries)
            mr_rd = mrc.rd_req
            m.d.comb += [
                mrc.key.eq(ver.mr_key), mrc.look.eq(ver.mr_look), mrc.take.eq(ver.mr_take),
                ver.mr_hit.eq(mrc.hit), ver.mr_data.eq(mrc.mr),
                self.mr_lookups.eq(mrc.mr_lookups), self.mr_misses.eq(mrc.mr_misses),
                rd_req.valid.eq(mr_rd.valid | fifos["fills"].r_rdy),
                mr_rd.ready.eq(rd_req.ready),
                fifos["fills"].r_en.eq(rd_req.ready & ~mr_rd.valid),
                rd_data.ready.eq(1),
                cache.fill_data.valid.eq(rd_data.valid & (rd_data.payload.id != MR_READ_ID)),
                cache.fill_data.payload.eq(rd_data.payload.data),
                mrc.fill.valid.eq(rd_data.valid & (rd_data.payload.id == MR_READ_ID)),
                mrc.fill.payload.eq(rd_data.payload.data[:MR_LAYOUT.size]),
            ]
            # (``words`` in both branches: a lone constant assignment would be an
            # ``always @*`` without inputs, which Icarus never runs.)
            with m.If(mr_rd.valid):
                m.d.comb += [rd_req.payload.addr.eq(self.mr_base + mr_rd.payload),
                             rd_req.payload.words.eq(1), rd_req.payload.id.eq(MR_READ_ID)]
            with m.Else():
                m.d.comb += [rd_req.payload.addr.eq(fifos["fills"].r_data),
                             rd_req.payload.words.eq(1 << self.qpc_log2),
                             rd_req.payload.id.eq(0)]
        else:
            m.d.comb += [
                rd_req.valid.eq(fifos["fills"].r_rdy),
                rd_req.payload.addr.eq(fifos["fills"].r_data),
                rd_req.payload.words.eq(1 << self.qpc_log2), rd_req.payload.id.eq(0),
                fifos["fills"].r_en.eq(rd_req.ready),
                rd_data.ready.eq(1),
                cache.fill_data.valid.eq(rd_data.valid),
                cache.fill_data.payload.eq(rd_data.payload.data),
            ]
        if reads:
            # READ data reads come last: behind MR reads and context fills.
            other = fifos["fills"].r_rdy | (mrc.rd_req.valid if self.mr.in_host else 0)
            with m.If(~other):
                m.d.comb += [rd_req.valid.eq(ack.rd.valid),
                             rd_req.payload.addr.eq(ack.rd.payload.addr),
                             rd_req.payload.words.eq(ack.rd.payload.words),
                             rd_req.payload.id.eq(READ_DATA_ID)]
            rdata = fifos["rdata"]
            is_data = rd_data.payload.id == READ_DATA_ID
            not_mr = (rd_data.payload.id != MR_READ_ID) if self.mr.in_host else 1
            m.d.comb += [
                ack.writes_idle.eq(~fifos["wjobs"].r_rdy & ~fifos["words"].r_rdy),
                ack.rd.ready.eq(rd_req.ready & ~other),
                cache.fill_data.valid.eq(rd_data.valid & not_mr & ~is_data),
                rdata.w_en.eq(rd_data.valid & is_data), rdata.w_data.eq(rd_data.payload.data),
            ]
            wiring.connect(m, rdata.r_stream, ack.data)
        wiring.connect(m, cache.wb, fifos["wbs"].w_stream)

        wiring.connect(m, fifos["jobs"].r_stream, ver.i)
        wiring.connect(m, ver.w, fifos["wjobs"].w_stream)
        wiring.connect(m, ver.ack, fifos["acks"].w_stream)
        wiring.connect(m, ver.filled, cache.filled)
        wiring.connect(m, ver.ctx, cache.reads[0])
        wiring.connect(m, ver.group, cache.resp)
        if not self.mr.in_host:
            mr = self.mr_table.read_port(domain="comb")
            m.d.comb += [mr.addr.eq(ver.mr_addr), ver.mr_data.eq(mr.data)]

        wiring.connect(m, fifos["wjobs"].r_stream, wrt.i)
        wiring.connect(m, fifos["pay"].r_stream, wrt.beats)
        if reads:
            # The response sender's atomic write-back shares the payload-word FIFO (the
            # payload writer is idle then: the atomic's read waited for writes_idle and
            # the verify stage decides nothing until the atomic is executed).
            words = fifos["words"]
            m.d.comb += [words.w_en.eq(wrt.o.valid | ack.wr.valid),
                         words.w_data.eq(Mux(ack.wr.valid, ack.wr.payload.as_value(),
                                             wrt.o.payload.as_value())),
                         wrt.o.ready.eq(words.w_rdy), ack.wr.ready.eq(words.w_rdy),
                         ver.save_valid.eq(ack.save_valid), ver.save_qpn.eq(ack.save_qpn),
                         ver.save_psn.eq(ack.save_psn), ver.save_orig.eq(ack.save_orig)]
        else:
            wiring.connect(m, wrt.o, fifos["words"].w_stream)
        wiring.connect(m, fifos["words"].r_stream, arb.pay)
        wiring.connect(m, fifos["wbs"].r_stream, arb.wb)
        wiring.connect(m, arb.o, wiring.flipped(self.host.wr))
        wiring.connect(m, fifos["acks"].r_stream, ack.i)
        wiring.connect(m, ack.o, wiring.flipped(self.o))

        owners = [(rx, ("overflow", "rx_beats_max", "rx_frames_max")),
                  (hdr, ("fcs_bad", "truncated", "malformed", "icrc_bad", "jobs_max")),
                  (ver, ("frames_ok", "unknown_qp", "duplicates", "psn_nak",
                         "out_of_order", "access_nak", "qp_err", "sr_placed")
                   + (("read_reqs", "atomics", "atomic_replays") if reads else ())),
                  (wrt, ("words",)), (ack, ("acks",) + (("read_frames",) if reads else ())),
                  (cache, ("lookups", "misses", "writebacks", "fills_max"))]
        for stage, names in owners:
            sig = CountersSignature(names)
            wiring.connect(m, PortView(sig, stage), wiring.flipped(PortView(sig, self)))
        return m
