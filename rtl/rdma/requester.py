"""The requester of RDMA WRITEs: doorbell, WQE fetch, context, payload, frames, CQEs."""

from amaranth import Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from rtl.common.fcs_inserter import FcsInserter
from rtl.common.latency_memory import write_layout
from rtl.formats.packet import packet_signature
from rtl.formats.roce import (
    CQE_LAYOUT,
    QPC_LAYOUT,
    WQE_LAYOUT,
    CqeStatus,
    OpCode,
    Syndrome,
    WqeOpcode,
)
from rtl.rdma.ack_receiver import AckReceiver, ack_event_layout
from rtl.rdma.icrc_inserter import IcrcInserter
from rtl.rdma.qpc_cache import QpcCache
from rtl.rdma.write_framer import WriteFramer

__all__ = ["Requester", "doorbell_layout", "outstanding_layout", "OUTSTANDING"]

#: Messages that may wait for their ACK (the depth of the outstanding-request FIFO).
OUTSTANDING = 64


def doorbell_layout():
    """An MMIO doorbell write: the QP and its new send-queue tail (producer index)."""
    return data.StructLayout({"qpn": 24, "sq_tail": 16})


def outstanding_layout():
    """What the requester keeps per message until its ACK: enough to write the CQE."""
    return data.StructLayout({"wr_id": 64, "qpn": 24, "psn": 24, "length": 32,
                              "sq_index": 16})


class Requester(wiring.Component):
    """Send RDMA WRITEs posted by the host and complete them on ACK.

    Parameters
    ----------
    cache_entries : int
        Entries of the QP-context cache.
    depth : int
        Host-memory words.

    Ports
    -----
    doorbell : In(stream.Signature(doorbell_layout()))
        The doorbell register: one MMIO write per transfer, taken when the engine is
        idle and has no ACK to retire (it is the engine's only doorbell queue).
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
    doorbells, wqe_reads, payload_reads, frames, cqe_writes, acks, ack_dropped,
    ack_unexpected, lookups, misses, writebacks : Out(32)
        Counters since reset.

    Timing (one state per cycle unless said; ``L`` is the memory latency)
    --------------------------------------------------------------------
    IDLE: if an ACK event is queued, the CQE is written in this cycle (retire first);
    else a doorbell is taken and the context looked up in this cycle. LOOKUP: until the
    cache answers (1 cycle on a hit, ``1 + L`` on a miss). WQE_RD (read of
    ``sq_base + sq_head % 2**sq_size_log2``), WQE_WAIT (``L`` cycles). Per segment of
    ``min(remaining, 2**pmtu_log2)`` bytes: SEG (1), PAY_RD (one word read a cycle),
    PAY_WAIT (until the last word is back), SEND (the descriptor enters the framer),
    TXWAIT (until the framer has taken the last beat, then 1 more cycle). DONE (1, the
    message is queued as outstanding), then the next WQE of the same QP or UPDATE (1,
    the context goes back into the cache) and IDLE. The frame's first beat leaves the
    cycle after SEND, one beat a cycle. Store and forward per segment; one message in
    flight in the sequencer, up to :data:`OUTSTANDING` waiting for their ACK.

    ACKs: an ACK (or NAK) event is matched with the oldest outstanding message; the CQE
    status is SUCCESS for an ACK, REM_ACCESS_ERR for a remote access NAK and
    RETRY_EXC_ERR for any other NAK (there is no retransmission). An event whose QPN or
    PSN is not the oldest message's counts as ``ack_unexpected`` (and, if there is no
    outstanding message, is dropped). Payload and WQE addresses must be 64-byte aligned.
    """

    def __init__(self, cache_entries=16, depth=1 << 14):
        self.cache = QpcCache(cache_entries, depth)
        self.depth = depth
        counters = ("doorbells", "wqe_reads", "payload_reads", "frames", "cqe_writes",
                    "acks", "ack_dropped", "ack_unexpected", "lookups", "misses",
                    "writebacks")
        ports = {
            "doorbell": In(stream.Signature(doorbell_layout())),
            "o": Out(packet_signature(64)),
            "i": In(packet_signature(64)),
            "qpc_base": In(range(depth)), "cq_base": In(range(depth)), "cq_log2": In(5),
            "rd_addr": Out(stream.Signature(range(depth))),
            "rd_data": In(stream.Signature(512)),
            "wr": Out(stream.Signature(write_layout(64, depth))),
            "completed": Out(stream.Signature(24)),
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
        m.submodules.outstanding = outq = SyncFIFO(width=outstanding_layout().size,
                                                   depth=OUTSTANDING)
        m.submodules.ack_rx = ack_rx = AckReceiver()
        m.submodules.ack_queue = ackq = SyncFIFO(width=ack_event_layout().size, depth=16)
        wiring.connect(m, framer.o, icrc.i)
        wiring.connect(m, icrc.o, fcs.i)
        wiring.connect(m, fcs.o, wiring.flipped(self.o))
        wiring.connect(m, wiring.flipped(self.i), ack_rx.i)
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

        # Retire: the oldest outstanding message meets the oldest ACK event.
        ev = Signal(ack_event_layout())
        out = Signal(outstanding_layout())
        m.d.comb += [ev.eq(ackq.r_data), out.eq(outq.r_data)]
        cqe = Signal(CQE_LAYOUT)
        m.d.comb += [
            cqe.wr_id.eq(out.wr_id),
            cqe.status.eq(Mux(ev.syndrome == Syndrome.ACK.value, CqeStatus.SUCCESS.value,
                              Mux(ev.syndrome == Syndrome.NAK_REMOTE_ACCESS.value,
                                  CqeStatus.REM_ACCESS_ERR.value,
                                  CqeStatus.RETRY_EXC_ERR.value))),
            cqe.opcode.eq(WqeOpcode.RDMA_WRITE),
            cqe.owner.eq(~(cq_index >> self.cq_log2)[0]),
            cqe.qpn.eq(out.qpn), cqe.byte_len.eq(out.length), cqe.sq_index.eq(out.sq_index),
        ]
        cq_mask = Signal(32)
        m.d.comb += cq_mask.eq((Const(1, 33) << self.cq_log2) - 1)

        # Payload words go into the FIFO as they come back.
        with m.If(self.rd_data.valid & (issued != 0)):
            m.d.comb += [payload.w_en.eq(1), payload.w_data.eq(self.rd_data.payload)]

        with m.FSM():
            with m.State("IDLE"):
                with m.If(ackq.r_rdy):
                    m.d.comb += ackq.r_en.eq(1)
                    with m.If(outq.r_rdy):
                        m.d.comb += [
                            outq.r_en.eq(1),
                            my_wr_valid.eq(1),
                            my_wr.addr.eq(self.cq_base + (cq_index & cq_mask)),
                            my_wr.data.eq(cqe.as_value()),
                            my_wr.be.eq((1 << 64) - 1),
                            self.completed.valid.eq(1),
                            self.completed.payload.eq(out.qpn),
                        ]
                        m.d.sync += [cq_index.eq(cq_index + 1),
                                     self.cqe_writes.eq(self.cqe_writes + 1)]
                        with m.If((ev.qpn != out.qpn) | (ev.psn != out.psn)):
                            m.d.sync += self.ack_unexpected.eq(self.ack_unexpected + 1)
                    with m.Else():
                        m.d.sync += self.ack_unexpected.eq(self.ack_unexpected + 1)
                with m.Elif(self.doorbell.valid):
                    m.d.comb += [self.doorbell.ready.eq(1), cache.req.valid.eq(1),
                                 cache.req.payload.eq(self.doorbell.payload.qpn)]
                    m.d.sync += [
                        qpn.eq(self.doorbell.payload.qpn),
                        self.doorbells.eq(self.doorbells + 1),
                    ]
                    m.d.sync += ctx.sq_tail.eq(self.doorbell.payload.sq_tail)
                    m.next = "LOOKUP"
            with m.State("LOOKUP"):
                with m.If(cache.resp.valid):
                    new = Signal(QPC_LAYOUT)
                    m.d.comb += [new.eq(cache.resp.payload), new.sq_tail.eq(ctx.sq_tail)]
                    m.d.sync += ctx.eq(new)
                    with m.If(new.sq_head != new.sq_tail):
                        m.next = "WQE_RD"
                    with m.Else():
                        m.next = "UPDATE"
            with m.State("WQE_RD"):
                sq_mask = (Const(1, 17) << ctx.sq_size_log2) - 1
                m.d.comb += [my_rd_valid.eq(1),
                             my_rd.eq(ctx.sq_base + (ctx.sq_head & sq_mask))]
                m.d.sync += self.wqe_reads.eq(self.wqe_reads + 1)
                m.next = "WQE_WAIT"
            with m.State("WQE_WAIT"):
                with m.If(self.rd_data.valid):
                    rd = Signal(WQE_LAYOUT)
                    m.d.comb += rd.eq(self.rd_data.payload)
                    m.d.sync += [wqe.eq(rd), remaining.eq(rd.length), sent.eq(0),
                                 psn.eq(ctx.next_psn), laddr.eq(rd.laddr[6:])]
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
                m.d.sync += [self.frames.eq(self.frames + 1), issued.eq(0)]
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
                rec = Signal(outstanding_layout())
                m.d.comb += [
                    rec.wr_id.eq(wqe.wr_id), rec.qpn.eq(qpn), rec.psn.eq(psn - 1),
                    rec.length.eq(wqe.length), rec.sq_index.eq(ctx.sq_head),
                    outq.w_en.eq(1), outq.w_data.eq(rec),
                ]
                m.d.sync += [ctx.sq_head.eq(ctx.sq_head + 1), ctx.next_psn.eq(psn)]
                with m.If(ctx.sq_head + 1 != ctx.sq_tail):
                    m.next = "WQE_RD"
                with m.Else():
                    m.next = "UPDATE"
            with m.State("UPDATE"):
                m.d.comb += [cache.upd.valid.eq(1), cache.upd.payload.eq(ctx)]
                m.next = "IDLE"
        return m
