"""The requester of RDMA WRITEs: doorbell, WQE fetch, context, payload, frames, CQEs."""

from amaranth import Const, Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from rtl.common.fcs_inserter import FcsInserter
from rtl.common.latency_memory import write_layout
from rtl.rdma.ack_receiver import AckReceiver, ack_event_layout
from rtl.rdma.icrc_inserter import IcrcInserter
from rtl.rdma.qpc_cache import QpcCache
from rtl.rdma.write_framer import WriteFramer
from spec.checks import check_int
from spec.formats.packet import packet_signature
from spec.formats.roce import (
    CQE_LAYOUT,
    QPC_LAYOUT,
    WQE_LAYOUT,
    CqeStatus,
    OpCode,
    Syndrome,
    WqeOpcode,
)
from spec.rdma import (
    ACK_QUEUE,
    DEFAULT_RETRY_LIMIT,
    DEFAULT_TIMEOUT,
    OUTSTANDING,
    REQUESTER_COUNTERS,
    RETRY_LIMIT_RANGE,
    TIMEOUT_RANGE,
    doorbell_layout,
)

__all__ = ["Requester", "outstanding_layout"]


def outstanding_layout():
    """What the requester keeps per message until its ACK: enough to write the CQE and
    to send the message again (``first_psn`` .. ``psn`` are its frames' PSNs)."""
    return data.StructLayout({"wr_id": 64, "qpn": 24, "first_psn": 24, "psn": 24,
                              "length": 32, "sq_index": 16})


class Requester(wiring.Component):
    """Send RDMA WRITEs posted by the host, complete them on ACK, recover by go-back-N.

    Parameters
    ----------
    cache_entries : int
        Entries of the QP-context cache.
    depth : int
        Host-memory words.
    timeout : int
        Transport timeout in cycles (:data:`TIMEOUT_RANGE`, default
        :data:`DEFAULT_TIMEOUT`); another value raises ``ValueError`` naming
        "transport timeout".
    retry_limit : int
        Timer expiries without progress for which the window is resent (0 to 7, default
        :data:`DEFAULT_RETRY_LIMIT`); at the next one the head completes with
        RETRY_EXC_ERR. Another value raises ``ValueError`` naming "retry limit".

    Ports
    -----
    doorbell : In(stream.Signature(doorbell_layout()))
        The doorbell register: one MMIO write per transfer, taken in IDLE when nothing
        of higher priority is due and the window has room (it is the engine's only
        doorbell queue; a doorbell waits, ``ready`` low, while the window is full).
    o : Out(packet_signature(64))
        RDMA WRITE frames with ICRC and FCS, to the link (``o.ready`` is expected high).
    i : In(packet_signature(64))
        Frames from the link (ACK/NAK), always ready.
    qpc_base, cq_base : In(range(depth))
        Word addresses of the QP-context table and of the completion queue.
    cq_log2 : In(5)
        The CQ holds ``2**cq_log2`` CQEs; the CQE owner bit flips at each wrap.
    rd_addr, rd_data, wr :
        The DMA ports into the host memory.
    completed : Out(stream.Signature(24))
        One-cycle strobe with the QPN in the cycle a CQE is written.
    ack_timeout : In(24)
        Run-time transport timeout in cycles (like the per-QP ``timeout`` attribute of
        ``ibv_modify_qp``, here one for the engine); 0 selects the constructor's
        ``timeout``. Set it before reset is released and hold it.
    doorbells, wqe_reads, payload_reads, frames, cqe_writes, acks, ack_dropped,
    ack_unexpected, lookups, misses, writebacks : Out(32)
        Counters since reset (``frames`` includes resent frames).
    retransmissions, timeouts, seq_naks, ack_lost : Out(32)
        Frames sent again; timer expiries (rewinds and RETRY_EXC_ERR completions);
        rewinds started by a PSN
        sequence error NAK; ACK/NAK events lost because :data:`ACK_QUEUE` events were
        already waiting.

    Timing (one state per cycle unless said; ``L`` is the memory latency)
    --------------------------------------------------------------------
    IDLE does one thing per cycle, the first that applies: (1) handle the oldest queued
    ACK/NAK event (below); (2) if the timer has expired, rewind; (3) if a rewind is in
    progress, start sending the next message of it again; (4) resume a QP whose WQEs
    waited for room in the window; (5) take a doorbell if the window has room. A message
    then costs: LOOKUP (1 cycle on a hit, ``1 + L`` on a miss), WQE_RD (read of
    ``sq_base + index % 2**sq_size_log2``), WQE_WAIT (``L`` cycles); per segment of
    ``min(remaining, 2**pmtu_log2)`` bytes: SEG (1), PAY_RD (one word read a cycle),
    PAY_WAIT (until the last word is back), SEND (the descriptor enters the framer),
    TXWAIT (until the framer has taken the last beat, then 1 more cycle); DONE (1).
    A new message is recorded at the tail of the window in DONE and is followed by the
    QP's next WQE (if the window still has room, else the QP is remembered for (4)) or
    by UPDATE (1, the context goes back into the cache) and IDLE. A resent message
    goes from DONE straight to IDLE (its context did not change). The frame's first
    beat leaves the cycle after SEND, one beat a cycle. Store and forward per segment.

    Window (go-back-N)
    ------------------
    Up to :data:`OUTSTANDING` messages wait for their ACK, in sending order (one window
    for all QPs): each record keeps ``qpn``, ``first_psn`` .. ``psn`` (its frames' PSNs),
    ``sq_index``, ``wr_id`` and ``length``. A rewind makes every message from the head
    (the oldest) to the tail be sent again in order, with its recorded PSNs, from a fresh
    context lookup, WQE read and payload read; new doorbells wait until it is done.

    An event is compared with the head record ``h`` (same QPN, PSNs modulo ``2**24``
    with a ``2**23`` window): a PSN after ``h.psn`` (any syndrome) means the head arrived:
    it retires with SUCCESS and the event stays queued for the next head (cumulative
    ACK); an ACK with ``h.psn`` retires it with SUCCESS; a remote-access NAK (other NAK)
    with a PSN within ``h`` completes it with REM_ACCESS_ERR (RETRY_EXC_ERR); a PSN
    sequence error NAK with a PSN within ``h``, or for a QP other than the head's,
    rewinds (``seq_naks``); anything else (a late duplicate, a stale NAK, an empty
    window) is dropped and counted as ``ack_unexpected`` unless it already retired a
    message. A retired message's CQE is written in that IDLE cycle.

    The transport timer is held at 0 while the window is empty or a rewind is being
    sent, and restarts when a message retires or a rewind starts; otherwise it counts
    each cycle. When it has counted the timeout (``ack_timeout``, or ``timeout`` if that
    is 0) cycles, the next IDLE without a queued event counts it (``timeouts``) and
    rewinds, unless ``retry_limit`` expiries have already rewound since the last
    retirement: then the head completes with RETRY_EXC_ERR instead (its frames may have
    reached the responder or not; the QP's later messages usually meet the same fate,
    as an IBTA QP would be in the error state). Payload and WQE addresses must be
    64-byte aligned.
    """

    def __init__(self, cache_entries=16, depth=1 << 14, timeout=DEFAULT_TIMEOUT,
                 retry_limit=DEFAULT_RETRY_LIMIT):
        self.timeout = check_int(self, "transport timeout (cycles)", timeout,
                                 *TIMEOUT_RANGE)
        self.retry_limit = check_int(self, "retry limit", retry_limit, *RETRY_LIMIT_RANGE)
        self.cache = QpcCache(cache_entries, depth)
        self.depth = depth
        counters = REQUESTER_COUNTERS
        ports = {
            "doorbell": In(stream.Signature(doorbell_layout())),
            "o": Out(packet_signature(64)),
            "i": In(packet_signature(64)),
            "qpc_base": In(range(depth)), "cq_base": In(range(depth)), "cq_log2": In(5),
            "rd_addr": Out(stream.Signature(range(depth))),
            "rd_data": In(stream.Signature(512)),
            "wr": Out(stream.Signature(write_layout(64, depth))),
            "completed": Out(stream.Signature(24)),
            "ack_timeout": In(24),
        }
        ports.update({name: Out(32) for name in counters})
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        m.submodules.cache = cache = self.cache
        m.submodules.framer = framer = WriteFramer()
        m.submodules.icrc = icrc = IcrcInserter()
        m.submodules.fcs = fcs = FcsInserter(64)
        m.submodules.payload = payload = SyncFIFO(width=512, depth=64)
        m.submodules.window = window = memory.Memory(
            shape=outstanding_layout(), depth=OUTSTANDING, init=[])
        m.submodules.ack_rx = ack_rx = AckReceiver()
        m.submodules.ack_queue = ackq = SyncFIFO(width=ack_event_layout().size,
                                                 depth=ACK_QUEUE)
        wiring.connect(m, framer.o, icrc.i)
        wiring.connect(m, icrc.o, fcs.i)
        wiring.connect(m, fcs.o, wiring.flipped(self.o))
        wiring.connect(m, wiring.flipped(self.i), ack_rx.i)
        with m.If(ack_rx.o.valid & ~ackq.w_rdy):
            m.d.sync += self.ack_lost.eq(self.ack_lost + 1)
        m.d.comb += [
            ackq.w_en.eq(ack_rx.o.valid), ackq.w_data.eq(ack_rx.o.payload),
            self.acks.eq(ack_rx.acks), self.ack_dropped.eq(ack_rx.dropped),
            framer.i_data.valid.eq(payload.r_rdy), framer.i_data.payload.eq(payload.r_data),
            payload.r_en.eq(framer.i_data.ready),
            cache.base.eq(self.qpc_base),
            self.lookups.eq(cache.lookups), self.misses.eq(cache.misses),
            self.writebacks.eq(cache.writebacks),
            cache.rd_data.valid.eq(self.rd_data.valid),
            cache.rd_data.payload.eq(self.rd_data.payload),
        ]

        # DMA ports: the cache's requests, or the sequencer's (never in the same cycle).
        my_rd = Signal(range(self.depth))
        my_rd_valid = Signal()
        my_wr = Signal(self.wr.payload.shape())
        my_wr_valid = Signal()
        m.d.comb += [
            self.rd_addr.valid.eq(cache.rd_addr.valid | my_rd_valid),
            self.rd_addr.payload.eq(Mux(cache.rd_addr.valid, cache.rd_addr.payload, my_rd)),
            self.wr.valid.eq(cache.wr.valid | my_wr_valid),
            self.wr.payload.eq(Mux(cache.wr.valid, cache.wr.payload, my_wr)),
        ]

        ctx = Signal(QPC_LAYOUT)
        wqe = Signal(WQE_LAYOUT)
        qpn = Signal(24)
        remaining = Signal(32)
        sent = Signal(32)            # payload bytes of the message already framed
        psn = Signal(24)
        seg_len = Signal(13)
        words = Signal(7)
        issued = Signal(7)
        received = Signal(7)
        laddr = Signal(range(self.depth))
        cq_index = Signal(32)

        pmtu = Signal(13)
        m.d.comb += pmtu.eq(Const(1, 13) << ctx.pmtu_log2)
        first_seg = Signal()
        last_seg = Signal()
        m.d.comb += [first_seg.eq(sent == 0), last_seg.eq(remaining == seg_len)]

        seg = framer.i_seg.payload
        m.d.comb += [
            seg.opcode.eq(Mux(first_seg,
                              Mux(last_seg, OpCode.RC_RDMA_WRITE_ONLY.value,
                                  OpCode.RC_RDMA_WRITE_FIRST.value),
                              Mux(last_seg, OpCode.RC_RDMA_WRITE_LAST.value,
                                  OpCode.RC_RDMA_WRITE_MIDDLE.value))),
            seg.ack_req.eq(last_seg),
            seg.dmac.eq(ctx.dmac), seg.smac.eq(ctx.smac), seg.sip.eq(ctx.sip),
            seg.dip.eq(ctx.dip), seg.src_qp.eq(qpn), seg.dest_qp.eq(ctx.dest_qp),
            seg.psn.eq(psn), seg.va.eq(wqe.raddr), seg.rkey.eq(wqe.rkey),
            seg.dma_length.eq(wqe.length), seg.length.eq(seg_len),
        ]

        # The go-back-N window: records head .. tail - 1 wait for their ACK; replay ..
        # tail - 1 are still to be sent again after a rewind (replay == tail otherwise).
        ptr_bits = (2 * OUTSTANDING - 1).bit_length()
        head, replay, tail = (Signal(ptr_bits, name=n) for n in ("head", "replay", "tail"))
        head_rd = window.read_port(domain="comb")
        replay_rd = window.read_port(domain="comb")
        win_wr = window.write_port()
        index_bits = (OUTSTANDING - 1).bit_length()
        count = Signal(ptr_bits)
        empty, room, replaying = Signal(), Signal(), Signal()
        m.d.comb += [
            head_rd.addr.eq(head[:index_bits]), replay_rd.addr.eq(replay[:index_bits]),
            win_wr.addr.eq(tail[:index_bits]),
            count.eq(tail - head), empty.eq(head == tail), room.eq(count < OUTSTANDING),
            replaying.eq(replay != tail),
        ]
        replay_mode = Signal()       # the message in the sequencer is a replay
        rec_first_psn = Signal(24)
        rec_sq_index = Signal(16)
        from_db = Signal()           # the lookup was started by a doorbell
        resume = Signal()            # a QP whose WQEs wait for room in the window
        resume_qpn = Signal(24)
        used = Signal()              # the queued event has already retired a message
        retries = Signal(range(RETRY_LIMIT_RANGE[1] + 1))   # expiries since progress

        # The transport timer: cleared while the window is empty, while a rewind is being
        # sent, and when a message retires or a rewind starts; else it counts up to
        # the timeout (expired), checked in IDLE.
        limit = Signal(24)
        m.d.comb += limit.eq(Mux(self.ack_timeout == 0, self.timeout, self.ack_timeout))
        timer = Signal(24)
        expired = Signal()
        clear = Signal()
        m.d.comb += expired.eq(timer >= limit)
        m.d.sync += timer.eq(Mux(clear | empty | replaying, 0,
                                 Mux(expired, timer, timer + 1)))

        # An ACK event against the head of the window.
        ev = Signal(ack_event_layout())
        h = Signal(outstanding_layout())
        m.d.comb += [ev.eq(ackq.r_data), h.eq(head_rd.data)]
        same, at_last, past, within = Signal(), Signal(), Signal(), Signal()
        d_last, d_first = Signal(24), Signal(24)
        m.d.comb += [
            d_last.eq(ev.psn - h.psn), d_first.eq(ev.psn - h.first_psn),
            same.eq(~empty & (ev.qpn == h.qpn)),
            at_last.eq(same & (d_last == 0)),
            past.eq(same & (d_last != 0) & ~d_last[23]),
            within.eq(same & ~d_first[23] & ((d_last == 0) | d_last[23])),
        ]
        is_ack, is_seq, is_access = Signal(), Signal(), Signal()
        m.d.comb += [
            is_ack.eq(ev.syndrome == Syndrome.ACK.value),
            is_seq.eq(ev.syndrome == Syndrome.NAK_PSN_SEQUENCE.value),
            is_access.eq(ev.syndrome == Syndrome.NAK_REMOTE_ACCESS.value),
        ]
        status = Signal(8)
        cqe = Signal(CQE_LAYOUT)
        m.d.comb += [
            cqe.wr_id.eq(h.wr_id),
            cqe.status.eq(status),
            cqe.opcode.eq(WqeOpcode.RDMA_WRITE),
            cqe.owner.eq(~(cq_index >> self.cq_log2)[0]),
            cqe.qpn.eq(h.qpn), cqe.byte_len.eq(h.length), cqe.sq_index.eq(h.sq_index),
        ]
        cq_mask = Signal(32)
        m.d.comb += cq_mask.eq((Const(1, 33) << self.cq_log2) - 1)

        def retire(code):
            """Write the head's CQE with status ``code``, advance the head."""
            m.d.comb += [
                status.eq(code),
                clear.eq(1),
                my_wr_valid.eq(1),
                my_wr.addr.eq(self.cq_base + (cq_index & cq_mask)),
                my_wr.data.eq(cqe.as_value()),
                my_wr.be.eq((1 << 64) - 1),
                self.completed.valid.eq(1),
                self.completed.payload.eq(h.qpn),
            ]
            m.d.sync += [cq_index.eq(cq_index + 1), self.cqe_writes.eq(self.cqe_writes + 1),
                         head.eq(head + 1), replay.eq(Mux(replay == head, head + 1, replay)),
                         retries.eq(0)]

        def rewind(counter):
            m.d.comb += clear.eq(1)
            m.d.sync += [replay.eq(head), counter.eq(counter + 1)]

        # Payload words go into the FIFO as they come back.
        with m.If(self.rd_data.valid & (issued != 0)):
            m.d.comb += [payload.w_en.eq(1), payload.w_data.eq(self.rd_data.payload)]

        with m.FSM():
            with m.State("IDLE"):
                with m.If(ackq.r_rdy):
                    with m.If(past):
                        # A later PSN of the head's QP: the head arrived (cumulative ACK).
                        retire(CqeStatus.SUCCESS.value)
                        m.d.sync += used.eq(1)
                    with m.Else():
                        m.d.comb += ackq.r_en.eq(1)
                        m.d.sync += used.eq(0)
                        with m.If(is_ack & at_last):
                            retire(CqeStatus.SUCCESS.value)
                        with m.Elif(~is_ack & ~is_seq & within):
                            retire(Mux(is_access, CqeStatus.REM_ACCESS_ERR.value,
                                       CqeStatus.RETRY_EXC_ERR.value))
                        with m.Elif(is_seq & ~empty & (within | ~same)):
                            rewind(self.seq_naks)
                        with m.Elif(~used):
                            m.d.sync += self.ack_unexpected.eq(self.ack_unexpected + 1)
                with m.Elif(expired & ~empty & ~replaying):
                    with m.If(retries == self.retry_limit):
                        retire(CqeStatus.RETRY_EXC_ERR.value)
                        m.d.sync += self.timeouts.eq(self.timeouts + 1)
                    with m.Else():
                        rewind(self.timeouts)
                        m.d.sync += retries.eq(retries + 1)
                with m.Elif(replaying):
                    rec = Signal(outstanding_layout())
                    m.d.comb += [rec.eq(replay_rd.data), cache.req.valid.eq(1),
                                 cache.req.payload.eq(rec.qpn)]
                    m.d.sync += [qpn.eq(rec.qpn), replay_mode.eq(1), from_db.eq(0),
                                 rec_first_psn.eq(rec.first_psn),
                                 rec_sq_index.eq(rec.sq_index)]
                    m.next = "LOOKUP"
                with m.Elif(resume):
                    with m.If(room):
                        m.d.comb += [cache.req.valid.eq(1), cache.req.payload.eq(resume_qpn)]
                        m.d.sync += [qpn.eq(resume_qpn), replay_mode.eq(0), from_db.eq(0),
                                     resume.eq(0)]
                        m.next = "LOOKUP"
                with m.Elif(self.doorbell.valid & room):
                    m.d.comb += [self.doorbell.ready.eq(1), cache.req.valid.eq(1),
                                 cache.req.payload.eq(self.doorbell.payload.qpn)]
                    m.d.sync += [
                        qpn.eq(self.doorbell.payload.qpn),
                        self.doorbells.eq(self.doorbells + 1),
                        replay_mode.eq(0), from_db.eq(1),
                    ]
                    m.d.sync += ctx.sq_tail.eq(self.doorbell.payload.sq_tail)
                    m.next = "LOOKUP"
            with m.State("LOOKUP"):
                with m.If(cache.resp.valid):
                    new = Signal(QPC_LAYOUT)
                    m.d.comb += [new.eq(cache.resp.payload),
                                 new.sq_tail.eq(Mux(from_db, ctx.sq_tail,
                                                    cache.resp.payload.sq_tail))]
                    m.d.sync += ctx.eq(new)
                    with m.If(replay_mode | (new.sq_head != new.sq_tail)):
                        m.next = "WQE_RD"
                    with m.Else():
                        m.next = "UPDATE"
            with m.State("WQE_RD"):
                sq_mask = (Const(1, 17) << ctx.sq_size_log2) - 1
                index = Mux(replay_mode, rec_sq_index, ctx.sq_head)
                m.d.comb += [my_rd_valid.eq(1),
                             my_rd.eq(ctx.sq_base + (index & sq_mask))]
                m.d.sync += self.wqe_reads.eq(self.wqe_reads + 1)
                m.next = "WQE_WAIT"
            with m.State("WQE_WAIT"):
                with m.If(self.rd_data.valid):
                    rd = Signal(WQE_LAYOUT)
                    m.d.comb += rd.eq(self.rd_data.payload)
                    m.d.sync += [wqe.eq(rd), remaining.eq(rd.length), sent.eq(0),
                                 psn.eq(Mux(replay_mode, rec_first_psn, ctx.next_psn)),
                                 laddr.eq(rd.laddr[6:])]
                    m.next = "SEG"
            with m.State("SEG"):
                length = Mux(remaining > pmtu, pmtu, remaining)
                m.d.sync += [seg_len.eq(length), words.eq((length + 63)[6:]),
                             issued.eq(0), received.eq(0)]
                m.next = "PAY_RD"
            with m.State("PAY_RD"):
                m.d.comb += [my_rd_valid.eq(1), my_rd.eq(laddr)]
                m.d.sync += [laddr.eq(laddr + 1), issued.eq(issued + 1),
                             self.payload_reads.eq(self.payload_reads + 1)]
                with m.If(self.rd_data.valid):
                    m.d.sync += received.eq(received + 1)
                with m.If(issued + 1 == words):
                    m.next = "PAY_WAIT"
            with m.State("PAY_WAIT"):
                with m.If(self.rd_data.valid):
                    m.d.sync += received.eq(received + 1)
                    with m.If(received + 1 == words):
                        m.next = "SEND"
            with m.State("SEND"):
                m.d.comb += framer.i_seg.valid.eq(1)
                m.d.sync += [self.frames.eq(self.frames + 1), issued.eq(0),
                             self.retransmissions.eq(self.retransmissions + replay_mode)]
                m.next = "TXWAIT"
            with m.State("TXWAIT"):
                with m.If(framer.i_seg.ready):
                    m.d.sync += [remaining.eq(remaining - seg_len), sent.eq(sent + seg_len),
                                 psn.eq(psn + 1)]
                    with m.If(last_seg):
                        m.next = "DONE"
                    with m.Else():
                        m.next = "SEG"
            with m.State("DONE"):
                with m.If(replay_mode):
                    m.d.sync += replay.eq(replay + 1)
                    m.next = "IDLE"
                with m.Else():
                    rec = Signal(outstanding_layout())
                    m.d.comb += [
                        rec.wr_id.eq(wqe.wr_id), rec.qpn.eq(qpn),
                        rec.first_psn.eq(ctx.next_psn), rec.psn.eq(psn - 1),
                        rec.length.eq(wqe.length), rec.sq_index.eq(ctx.sq_head),
                        win_wr.en.eq(1), win_wr.data.eq(rec),
                    ]
                    m.d.sync += [ctx.sq_head.eq(ctx.sq_head + 1), ctx.next_psn.eq(psn),
                                 tail.eq(tail + 1), replay.eq(tail + 1)]
                    with m.If((ctx.sq_head + 1)[:16] != ctx.sq_tail):
                        with m.If(count + 1 < OUTSTANDING):
                            m.next = "WQE_RD"
                        with m.Else():
                            # The window is full: write the context back and come back
                            # for the rest of this QP's WQEs once a message retires.
                            m.d.sync += [resume.eq(1), resume_qpn.eq(qpn)]
                            m.next = "UPDATE"
                    with m.Else():
                        m.next = "UPDATE"
            with m.State("UPDATE"):
                m.d.comb += [cache.upd.valid.eq(1), cache.upd.payload.eq(ctx)]
                m.next = "IDLE"
        return m
