"""The pipelined RDMA WRITE requester: its stages and the FIFOs between them."""

from amaranth import Module, Mux, Shape, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from rtl.rdma.ack_receiver import AckReceiver
from rtl.rdma.context_cache import CACHE_LOG2_BITS, QPC_LOG2_BITS, ContextCache
from rtl.rdma.eth_ip_udp import framing_param
from rtl.rdma.req.ack_queue import AckQueue
from rtl.rdma.req.completion import CompletionUnit
from rtl.rdma.req.cqe_writer import CqeWriter
from rtl.rdma.req.doorbell_intake import DoorbellIntake
from rtl.rdma.req.frame_sender import FrameSender
from rtl.rdma.req.host_ports import ReadArbiter, RequesterWriteArbiter
from rtl.rdma.req.miss_queue import MissQueue
from rtl.rdma.req.payload_fetch import PayloadFetch
from rtl.rdma.req.qp_front import QpFront
from rtl.rdma.req.read_path import wire_read_path
from rtl.rdma.req.sequencer import Sequencer
from rtl.rdma.req.wqe_fetch import WqeFetch
from spec.checks import check_int, check_windows, reject
from spec.formats.packet import packet_signature
from spec.formats.roce import HOST_WORD_BITS
from spec.host import mmio_layout
from spec.ports import CountersSignature, HostDmaSignature, PortView
from spec.rdma_engine import (
    CACHE_COUNTERS,
    COMPLETION_COUNTERS,
    FETCH_GROUP,
    FIFO_DEPTHS,
    INTAKE_COUNTERS,
    MAX_PREFETCH,
    MISS_QUEUE_RANGE,
    RD_FILL,
    RD_PAYLOAD,
    RD_WQE,
    REQUESTER_COUNTERS,
    REQUESTER_SIZES,
    RETRY_LIMIT_RANGE,
    SEQ_GROUP,
    TIMEOUT_BITS,
    TIMEOUT_RANGE,
    check_cache_shape,
)
from spec.rdma_read_req import REQUESTER_READ_COUNTERS as READ_COUNTERS
from spec.rdma_read_req import SLOTS_RANGE
from spec.rdma_stages import (
    COUNT_BITS,
    batch_layout,
    cqe_req_layout,
    fetch_layout,
    item_layout,
    job_layout,
    read_layout,
    record_layout,
    resend_layout,
    seg_layout,
    write_layout_req,
)

__all__ = ["Requester"]


class Requester(wiring.Component):
    """Post, send, complete and recover RDMA WRITEs, one stage per component.

    ::

      mmio -> DoorbellIntake -> QpFront -> WqeFetch -> Sequencer -> PayloadFetch
                  |   (BF WQEs)   |cache     ^  |rd       |inline       |rd
                  +---------------|----------|--|---------+             v
                                  v          |  v                 FrameSender -> o
                            ContextCache     |  ReadArbiter -> rd_req    | records
                                             |                           v
          i -> AckReceiver -> events -> CompletionUnit (windows, timers) -+-> resend
                                             | CQEs -> CqeWriter -> RequesterWriteArbiter -> wr

    Every arrow between stages is a SyncFIFO (:data:`spec.rdma_engine.FIFO_DEPTHS`);
    read data from the host interface is routed by its ``id`` into the cache (fills),
    the WQE FIFO or the payload FIFO. See each stage's docstring for its contract and timing, and
    docs/rdma.md for the whole.

    Parameters
    ----------
    cache : ContextCacheShape
        The QP-context cache's shape (:class:`spec.rdma_engine.ContextCacheShape`: its
        entries and ways; more than one way is refused with ``windows`` 0, where a
        window slot is a cache entry); None: its default (16 entries, direct mapped).
    depth : int
        Host-memory words.
    prefetch, wqe_words, payload_words, records, timeout, retry_limit : int
        See :data:`spec.rdma_engine.REQUESTER_SIZES`; ``timeout`` is the default
        transport timeout in cycles (64 to 2**24 - 1) when the run-time port
        ``ack_timeout`` is 0,
        ``windows`` the completion unit's window slots (0: one
        per cache entry, contexts pinned until their messages are acknowledged),
        ``miss_queue`` the items whose context fill is on its way that may step aside
        for others (a :class:`~rtl.rdma.req.miss_queue.MissQueue` between the ``fetch``
        FIFO and the WQE fetch stage; 0: none, an item waits for its fill in order).
    header : str
        The framing of the frames sent and of the ACKs accepted, ``"roce"`` (default) or
        ``"scaleup"`` (:mod:`spec.formats.scaleup`).
    reads : int
        0 (default): RDMA WRITE only (the WQE opcode is not looked at). Else RDMA READ
        and the atomics too (RoCEv2 framing only), with ``reads`` (1 to 64) slots of
        outstanding READs and atomics, all QPs, at most
        :data:`~spec.rdma_read_req.ORD_DEFAULT` per QP: see "RDMA READ and atomics at
        the requester" in docs/rdma.md and below.

    Ports
    -----
    mmio : In(stream.Signature(mmio_layout()))
        The host's MMIO writes (doorbells, WQEs by MMIO), from the host interface.
    host : Out(HostDmaSignature(depth))
        To the host interface's engine side (``HostInterface.dma``): reads (``rd_req``,
        ``id`` one of ``RD_FILL``, ``RD_WQE``, ``RD_PAYLOAD``), their words
        (``rd_data``, ``ready`` ignored) and posted writes (``wr``).
    o : Out(packet_signature(64)), i : In(packet_signature(64))
        WRITE frames to the link; ACK/NAK frames from it (always ready).
    go : In(1)
        Flow control from the link, between frames (the frame sender's ``go``; init 1).
    qpc_base, cq_base : In(range(depth)), cq_log2 : In(5)
        The context table and the completion queue.
    ack_timeout : In(TIMEOUT_BITS)
        Transport timeout in cycles, 0 for the ``timeout`` parameter.
    selective : In(1)
        Selective repeat (held from reset): a rewind resends only the QP's oldest
        unacknowledged message (:class:`~rtl.rdma.req.completion.CompletionUnit`).
    ack_every : In(8), ack_frames : In(16)
        ACK coalescing (see :class:`~rtl.rdma.req.sequencer.Sequencer`).
    serial : In(1)
        One message at a time: the front takes an item only when nothing is in flight.
    cache_log2 : In(4)
        ``2**cache_log2`` context-cache entries in use (4 to ``log2(cache.entries)``,
        held from reset).
    qpc_log2 : In(QPC_LOG2_BITS)
        A QP context is ``2**qpc_log2`` host words at ``qpc_base + qpn * 2**qpc_log2``
        (0 to 4, held from reset; :data:`spec.formats.roce.QPC_DYNAMIC_FIELDS`): a fill
        reads them all, a write-back writes the first.
    <counter> : Out(32)
        :data:`spec.rdma_engine.REQUESTER_COUNTERS`. The ACK path: ``acks`` and
        ``ack_dropped`` (the ACK receiver), ``ack_lost`` and ``ack_wait_cycles`` (events
        lost at, and cycles of backpressure on, the receiver: 0, as the
        :class:`~rtl.rdma.req.ack_queue.AckQueue` between it and the completion unit is
        always ready), ``ack_coalesced`` (events merged into a pending one of their
        window slot).
    read : Out(CountersSignature(spec.rdma_read_req.REQUESTER_READ_COUNTERS))
        With ``reads``: the response intake's counters and the frame sender's READ and
        atomic request counters (``lost_frames`` 0 in a correct build).

    READs and atomics (``reads``): :mod:`rtl.rdma.req.read_path`.
    """

    def __init__(self, cache=None, depth=1 << 14, header="roce", reads=0, **params):
        try:
            cache = check_cache_shape(cache)
        except ValueError as error:
            reject(self, str(error))
        cache_entries = cache.entries
        self.framing = framing_param(self, header)
        if reads:
            check_int(self, "READ/atomic slots (reads)", reads, *SLOTS_RANGE)
            if header != "roce":
                reject(self, f"reads needs the RoCEv2 framing (header 'roce'), not "
                             f"{header!r}")
        self.reads = reads
        unknown = set(params) - set(REQUESTER_SIZES)
        if unknown:
            reject(self, f"unknown Requester parameter(s): {sorted(unknown)}")
        p = dict(REQUESTER_SIZES, **params)
        # Every check before any part is built (a part that rejects its parameter would
        # leave the others built and unused).
        check_int(self, "transport timeout (cycles)", p["timeout"], *TIMEOUT_RANGE)
        check_int(self, "retry limit", p["retry_limit"], *RETRY_LIMIT_RANGE)
        check_int(self, "WQE prefetch depth", p["prefetch"], 1, MAX_PREFETCH)
        check_int(self, "WQE FIFO words", p["wqe_words"], 64, 1 << 14)
        check_int(self, "payload FIFO words", p["payload_words"], 64, 1 << 14)
        check_int(self, "window records", p["records"], 2, 4096)
        check_int(self, "miss queue depth", p["miss_queue"], *MISS_QUEUE_RANGE)
        check_windows(self, p["windows"], cache_entries)
        if cache.ways > 1 and p["windows"] == 0:
            reject(self, f"a QP-context cache of {cache.ways} ways needs window slots apart "
                         f"from the cache (windows > 0, not 0)")
        self.p, self.depth, self.cache_entries = p, depth, cache_entries
        self.cache = ContextCache(cache_entries, depth,
                                  {"fetch": FETCH_GROUP, "seq": SEQ_GROUP}, static_reads=3,
                                  probes=5, ways=cache.ways,
                                  fill_queries=2 if p["miss_queue"] else 0)
        self.front = QpFront(cache_entries)
        self.fetch = WqeFetch(cache_entries, depth, p["prefetch"], p["wqe_words"],
                              p["records"], bool(reads))
        self.sequencer = Sequencer(cache_entries, depth, bool(reads))
        self.payload = PayloadFetch(depth, p["payload_words"], bool(reads))
        self.sender = FrameSender(cache_entries, p["payload_words"],
                                  self.framing.header.value, bool(reads), depth)
        self.completion = CompletionUnit(cache, p["records"], p["retry_limit"],
                                         p["windows"], bool(reads))
        ports = {
            "mmio": In(stream.Signature(mmio_layout())),
            "host": Out(HostDmaSignature(depth)),
            "o": Out(packet_signature(64)), "i": In(packet_signature(64)),
            "qpc_base": In(range(depth)), "cq_base": In(range(depth)), "cq_log2": In(5),
            "ack_timeout": In(TIMEOUT_BITS), "selective": In(1), "ack_every": In(8),
            "ack_frames": In(16),
            "serial": In(1), "go": In(1, init=1),
            "cache_log2": In(CACHE_LOG2_BITS, init=(cache_entries - 1).bit_length()),
            "qpc_log2": In(QPC_LOG2_BITS),
        }
        ports.update({n: Out(32) for n in REQUESTER_COUNTERS})
        if reads:
            ports["read"] = Out(CountersSignature(READ_COUNTERS))
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        p, depth = self.p, self.depth
        cache, front, fetch = self.cache, self.front, self.fetch
        seq, pay, sender, comp = self.sequencer, self.payload, self.sender, self.completion
        for name, sub in (("cache", cache), ("front", front), ("fetch", fetch),
                          ("sequencer", seq), ("payload", pay), ("sender", sender),
                          ("completion", comp)):
            m.submodules[name] = sub
        m.submodules.intake = intake = DoorbellIntake()
        m.submodules.cqe_writer = cqw = CqeWriter(depth, bool(self.reads))
        m.submodules.rd_arb = rd_arb = ReadArbiter(depth)
        m.submodules.wr_arb = wr_arb = RequesterWriteArbiter(depth, bool(self.reads))
        m.submodules.ack_rx = ack_rx = AckReceiver(self.framing.header.value)

        def fifo(name, shape, depth_):
            f = SyncFIFO(width=Shape.cast(shape).width, depth=depth_)
            m.submodules[f"q_{name}"] = f
            return f

        def link(src, f, dst):
            """``src`` (an Out stream) -> FIFO ``f`` -> ``dst`` (an In stream)."""
            wiring.connect(m, src, f.w_stream)
            wiring.connect(m, f.r_stream, dst)

        d = FIFO_DEPTHS
        q_items = fifo("items", item_layout(), d["items"])
        q_bf = fifo("bf", HOST_WORD_BITS, d["bf"])
        q_fetch = fifo("fetch", fetch_layout(), d["fetch"])
        q_resend = fifo("resend", resend_layout(bool(self.reads)), d["resend"])
        q_batch = fifo("batch", batch_layout(), d["batch"])
        q_wqe = fifo("wqe", HOST_WORD_BITS, p["wqe_words"])
        q_jobs = fifo("jobs", job_layout(depth, bool(self.reads)), d["jobs"])
        q_inline = fifo("inline", HOST_WORD_BITS, d["inline"])
        q_segs = fifo("segs", seg_layout(bool(self.reads)), d["segs"])
        q_pay = fifo("payload", HOST_WORD_BITS, p["payload_words"])
        q_recs = fifo("recs", record_layout(bool(self.reads)), d["recs"])
        # ACK events, one pending per window slot (never full: the receiver never waits).
        m.submodules.q_events = q_events = AckQueue(self.cache_entries, p["windows"])
        m.d.comb += q_events.cache_log2.eq(self.cache_log2)
        q_cqes = fifo("cqes", cqe_req_layout(bool(self.reads)), d["cqes"])
        q_rd_fill = fifo("rd_fill", range(depth), d["rd_fill"])
        q_rd_wqe = fifo("rd_wqe", read_layout(depth), d["rd_wqe"])
        q_rd_pay = fifo("rd_pay", read_layout(depth), d["rd_pay"])
        q_wr_wb = fifo("wr_wb", cache.wb.payload.shape(), d["wr_wb"])
        q_wr_cqe = fifo("wr_cqe", write_layout_req(depth), d["wr_cqe"])

        wiring.connect(m, wiring.flipped(self.mmio), intake.mmio)
        link(intake.item, q_items, front.item)
        link(intake.bf, q_bf, seq.bfq)
        if p["miss_queue"]:
            # Items whose fill is on its way step aside (the cache answers the miss
            # queue's two queries; the WQE fetch stage's is answered by the miss queue).
            m.submodules.miss = miss = MissQueue(self.cache_entries, p["miss_queue"])
            link(front.fetch, q_fetch, miss.i)
            wiring.connect(m, miss.o, fetch.fetch)
            wiring.connect(m, fetch.filled, miss.filled)
            wiring.connect(m, miss.filled_i, cache.filled_more[0])
            wiring.connect(m, miss.filled_s, cache.filled_more[1])
        else:
            link(front.fetch, q_fetch, fetch.fetch)
            wiring.connect(m, fetch.filled, cache.filled)
        link(comp.resend, q_resend, fetch.resend)
        link(fetch.batch, q_batch, seq.batch)
        link(fetch.rd, q_rd_wqe, rd_arb.wqe)
        link(seq.job, q_jobs, pay.job)
        link(seq.inline, q_inline, pay.inline)
        link(pay.seg, q_segs, sender.seg)
        link(pay.rd, q_rd_pay, rd_arb.pay)
        link(sender.rec, q_recs, comp.rec)
        wiring.connect(m, sender.resent, comp.resent)
        link(comp.cqe, q_cqes, cqw.cqe)
        link(cache.fill_rd, q_rd_fill, rd_arb.fill)
        link(cache.wb, q_wr_wb, wr_arb.wb)
        link(cqw.wr, q_wr_cqe, wr_arb.cqe)
        wiring.connect(m, rd_arb.o, wiring.flipped(self.host.rd_req))
        wiring.connect(m, wr_arb.o, wiring.flipped(self.host.wr))
        wiring.connect(m, q_wqe.r_stream, seq.wqe)
        wiring.connect(m, q_pay.r_stream, sender.pay)
        m.d.comb += [pay.pay_level.eq(q_pay.level), sender.pay_level.eq(q_pay.level)]

        # Read data, routed by id; inline words share the payload FIFO's write side.
        rd = self.host.rd_data
        arrived = Signal(COUNT_BITS)
        to_pay = rd.valid & (rd.payload.id == RD_PAYLOAD)
        m.d.comb += [
            cache.fill_data.valid.eq(rd.valid & (rd.payload.id == RD_FILL)),
            cache.fill_data.payload.eq(rd.payload.data),
            q_wqe.w_en.eq(rd.valid & (rd.payload.id == RD_WQE)),
            q_wqe.w_data.eq(rd.payload.data),
            q_pay.w_en.eq(to_pay | pay.pay_w.valid),
            q_pay.w_data.eq(Mux(to_pay, rd.payload.data, pay.pay_w.payload)),
            pay.pay_w.ready.eq(1),
            pay.pay_arrived.eq(arrived),
            fetch.released.eq(seq.released),
        ]
        with m.If(to_pay):
            m.d.sync += arrived.eq(arrived + 1)

        # The cache's users, each through its port Signatures (spec/ports.py).
        m.d.comb += [
            cache.base.eq(self.qpc_base), cache.cache_log2.eq(self.cache_log2),
            cache.qpc_log2.eq(self.qpc_log2), rd_arb.qpc_log2.eq(self.qpc_log2),
            front.cache_log2.eq(self.cache_log2), comp.cache_log2.eq(self.cache_log2),
            cache.victim_busy.eq(front.victim_busy),
            front.victim.eq(cache.victim), front.hit.eq(cache.hit),
            front.entry.eq(cache.entry),
        ]
        wiring.connect(m, front.lookup, cache.req)
        wiring.connect(m, comp.need, front.need)
        for k in range(5):
            wiring.connect(m, comp.probe[k], cache.probe[k])
        wiring.connect(m, fetch.ctx, cache.reads[0])
        wiring.connect(m, sender.ctx, cache.reads[1])
        wiring.connect(m, seq.ctx, cache.reads[2])
        wiring.connect(m, fetch.group, cache.fetch)
        wiring.connect(m, seq.group, cache.seq)

        # Front <-> completion.
        wiring.connect(m, front.completion, comp.query)
        m.d.comb += [
            comp.hold_qpn.eq(fetch.fetch.payload.qpn), fetch.hold.eq(comp.hold),
            fetch.win_total.eq(comp.win_total),
            fetch.appended.eq(comp.appended), comp.issued.eq(fetch.issued),
            front.hold.eq(0), front.serial.eq(self.serial),
            seq.err_valid.eq(comp.err_valid), seq.err_entry.eq(comp.err_entry),
            front.idle.eq((front.adm_total == comp.done_total) & (comp.win_total == 0)),
            comp.timeout.eq(Mux(self.ack_timeout == 0, p["timeout"], self.ack_timeout)),
            comp.selective.eq(self.selective),
            seq.ack_every.eq(self.ack_every), seq.ack_frames.eq(self.ack_frames),
            cqw.cq_base.eq(self.cq_base), cqw.cq_log2.eq(self.cq_log2),
        ]

        # Frames out; ACKs in.
        wiring.connect(m, sender.o, wiring.flipped(self.o))
        m.d.comb += sender.go.eq(self.go)
        if self.reads:
            wiring.connect(m, ack_rx.o, q_events.i)
            wire_read_path(m, self, fifo, link, q_events, ack_rx, comp, wr_arb)
        else:
            wiring.connect(m, wiring.flipped(self.i), ack_rx.i)
            wiring.connect(m, ack_rx.o, q_events.i)
            wiring.connect(m, q_events.o, comp.ev)

        # Counters: each stage's, under the stage's own names (the ACK receiver's
        # ``dropped`` is ``ack_dropped`` here).
        owners = ((intake, INTAKE_COUNTERS), (front, ("items", "ctx_stalls", "evict_inflight")),
                  (cache, CACHE_COUNTERS), (fetch, ("wqe_reads", "wqes", "wqe_words_max")),
                  (seq, ("sequenced", "doorbell_err_qp")),
                  (pay, ("payload_reads", "payload_words_max")),
                  (sender, ("frames", "retransmissions")), (cqw, ("cqe_writes",)),
                  (ack_rx, ("acks",)), (comp, COMPLETION_COUNTERS))
        for stage, names in owners:
            sig = CountersSignature(names)
            wiring.connect(m, PortView(sig, stage), wiring.flipped(PortView(sig, self)))
        m.d.comb += [self.ack_dropped.eq(ack_rx.dropped), self.ack_lost.eq(ack_rx.lost),
                     self.ack_wait_cycles.eq(ack_rx.wait_cycles),
                     self.ack_coalesced.eq(q_events.coalesced)]
        return m
