"""Message sequencer: parse each WQE, give its frames their PSNs, decide AckReq."""

from amaranth import Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from spec.formats.roce import (
    HOST_WORD_BITS,
    PSN_BITS,
    WQE_ACK_REQ,
    WQE_INLINE,
    WQE_LAYOUT,
    WQE_SIGNALLED,
    QpState,
    WqeOpcode,
)
from spec.ports import CacheGroupSignature, CacheReadSignature
from spec.rdma_engine import MAX_INLINE_WORDS, SEQ_GROUP
from spec.rdma_stages import COUNT_BITS, batch_layout, group_layout, job_layout

__all__ = ["Sequencer"]


class Sequencer(wiring.Component):
    """Turn batches of WQEs into send jobs, one WQE at a time, in order.

    Parameters
    ----------
    entries, depth : int
        Context-cache entries, host-memory words.
    reads : int
        1: the jobs carry the WQE's opcode (``op``), an atomic's operands and the low
        bits of the local byte address (:func:`spec.rdma_stages.job_layout` with
        ``reads``), and a READ or atomic WQE copies no inline words (its inline flag is
        ignored, its slot's words after the header are dropped). 0 (default): WRITEs only,
        the opcode is not looked at.

    Ports
    -----
    batch : In(stream.Signature(batch_layout()))
        From the WQE fetch stage.
    wqe : In(stream.Signature(HOST_WORD_BITS))
        The fetched-WQE FIFO: each batch's ``count << stride_log2`` words, in order.
    bfq : In(stream.Signature(HOST_WORD_BITS))
        The FIFO of WQEs written by MMIO: a header word and its inline words.
    job : Out(stream.Signature(job_layout(depth)))
        One send job per WQE (and one ``null`` job per null batch), to a FIFO.
    inline : Out(stream.Signature(HOST_WORD_BITS))
        The inline payload words of the jobs, in order, to a FIFO.
    ctx : Out(CacheReadSignature(entries))
        A static read port of the cache (``pmtu_log2``).
    group : Out(CacheGroupSignature(entries, group_layout(SEQ_GROUP)))
        The cache's group ``SEQ_GROUP``, owned here.
    ack_every : In(8)
        ACK coalescing: a message asks for an ACK (AckReq on its last frame) when it is
        signalled or its WQE has ``WQE_ACK_REQ``, or when it is the ``ack_every``-th
        since the last one that asked (0 and 1: every message).
    ack_frames : In(16)
        ... or when ``ack_frames`` frames have been sent since the last one that asked
        (0: no limit). Linux rxe asks at least every 64 packets
        (``RXE_MAX_UNACKED_PSNS``).
    err_valid : In(1), err_entry : In(range(entries))
        The completion unit's notice that the QP of entry ``err_entry`` entered ERR (a
        one-cycle pulse, the cycle after its error completion).
    released : Out(COUNT_BITS)
        Words taken out of ``wqe`` since reset (mod 2**16), for the fetch stage's
        reservations.
    sequenced : Out(32)
        WQEs turned into jobs that send frames (first sends and resends).
    doorbell_err_qp : Out(32)
        Items (doorbells, WQEs by MMIO) of a QP in ERR: counted with their last WQE (or
        their null batch).

    Timing
    ------
    One word a cycle from the WQE's source FIFO: the header word (the job is pushed
    in that cycle; it needs room in ``job``), then the inline words (each needs room
    in ``inline``; at most :data:`MAX_INLINE_WORDS`, and for a fetched WQE at most the
    slot's words after the header), then for a fetched WQE the slot's unused words
    (dropped). A null batch costs one cycle (its null job). The batch leaves with
    the last word of its last WQE.

    A first send gets ``next_psn`` and advances it by its frame count
    ``max(1, ceil(length / 2**pmtu_log2))`` (for a READ the count of its response
    packets, the PSNs it consumes: IBTA Vol 1 9.7.1; an atomic's 8 bytes, 1); a resend
    keeps the PSN its batch carries and always asks for an ACK.

    QP state (the group's ``state``): in a cycle with ``err_valid`` the stage only writes
    ``state = ERR`` into entry ``err_entry`` (nothing else moves). A null batch with
    ``modify`` writes ``state = RTS`` (its null job carries ``modify``). A WQE of a QP
    in ERR is flushed: its header takes the same cycle and needs room in ``job``, but
    its job is a ``null`` one with ``flush`` (no frame, no PSN, the completion unit
    writes its FLUSH_ERR CQE) and its inline words are dropped like padding; a resend
    of a QP in ERR is dropped with no job at all (its WQE was already flushed from
    the window); with ``reads``, ``take_dropped`` (Out(1)) is high in the cycle such a
    resend with ``last_of_item`` (a take resend: :class:`~rtl.rdma.req.completion.
    CompletionUnit`) is dropped.
    """

    def __init__(self, entries, depth, reads=0):
        self.entries, self.depth, self.reads = entries, depth, reads
        super().__init__({
            "batch": In(stream.Signature(batch_layout())),
            "wqe": In(stream.Signature(HOST_WORD_BITS)),
            "bfq": In(stream.Signature(HOST_WORD_BITS)),
            "job": Out(stream.Signature(job_layout(depth, bool(reads)))),
            "inline": Out(stream.Signature(HOST_WORD_BITS)),
            "ctx": Out(CacheReadSignature(entries)),
            "group": Out(CacheGroupSignature(entries, group_layout(SEQ_GROUP))),
            "ack_every": In(8), "ack_frames": In(16),
            "err_valid": In(1), "err_entry": In(range(entries)),
            "released": Out(COUNT_BITS),
            "sequenced": Out(32), "doorbell_err_qp": Out(32),
            **({"take_dropped": Out(1)} if reads else {}),
        })

    def elaborate(self, platform):
        m = Module()
        bt = self.batch.payload
        m.d.comb += [self.ctx.addr.eq(bt.entry),
                     self.group.addr.eq(Mux(self.err_valid, self.err_entry, bt.entry)),
                     self.group.wdata.eq(self.group.data)]
        idx = Signal(6)                  # WQE of the batch
        inl_left = Signal(3)             # inline words still to copy
        pad_left = Signal(3)             # slot words still to drop
        src_valid = Signal()
        src_word = Signal(HOST_WORD_BITS)
        pop = Signal()
        m.d.comb += [
            src_valid.eq(Mux(bt.bf, self.bfq.valid, self.wqe.valid)),
            src_word.eq(Mux(bt.bf, self.bfq.payload, self.wqe.payload)),
            self.bfq.ready.eq(pop & bt.bf),
            self.wqe.ready.eq(pop & ~bt.bf),
            self.inline.payload.eq(src_word),
        ]
        with m.If(pop & ~bt.bf):
            m.d.sync += self.released.eq(self.released + 1)
        last_wqe = Signal()
        m.d.comb += last_wqe.eq(idx + 1 == bt.count)

        # Header decoding.
        w = data.View(WQE_LAYOUT, src_word)
        ctx = self.ctx.data
        g = self.group.data
        length = w.length
        inline = (w.flags & WQE_INLINE) != 0
        if self.reads:
            inline = inline & (w.opcode == WqeOpcode.RDMA_WRITE)
        signalled = (w.flags & WQE_SIGNALLED) != 0
        asks = (w.flags & WQE_ACK_REQ) != 0
        slot_words = Signal(4)
        m.d.comb += slot_words.eq(Const(1, 4) << bt.stride_log2)
        flush = Signal()               # the batch's QP is in ERR
        m.d.comb += flush.eq(g.state == QpState.ERR.value)
        drop = Signal()                # a resend of a QP in ERR: no job
        m.d.comb += drop.eq(flush & bt.resend)
        n_inl_raw = Signal(3)
        n_inl = Signal(3)
        need = Signal(27)                # inline words the length needs
        m.d.comb += need.eq((length + 63)[6:])
        cap = Signal(3)
        m.d.comb += cap.eq(Mux(bt.bf, MAX_INLINE_WORDS,
                               Mux(slot_words - 1 < MAX_INLINE_WORDS, slot_words - 1,
                                   MAX_INLINE_WORDS)))
        m.d.comb += [n_inl_raw.eq(Mux(inline, Mux(need < cap, need, cap), 0)),
                     n_inl.eq(Mux(flush, 0, n_inl_raw))]
        n_pad = Signal(3)
        m.d.comb += n_pad.eq(Mux(bt.bf, Mux(flush, n_inl_raw, 0), slot_words - 1 - n_inl))
        frames = Signal(PSN_BITS)
        m.d.comb += frames.eq(Mux(length == 0, 1,
                                  (length + (Const(1, 13) << ctx.pmtu_log2) - 1)
                                  >> ctx.pmtu_log2))
        msgs = Signal(9)
        fsum = Signal(17)
        m.d.comb += [msgs.eq(g.ack_msgs + 1), fsum.eq(g.ack_frames + frames)]
        want_ack = Signal()
        m.d.comb += want_ack.eq(bt.resend | signalled | asks | (self.ack_every <= 1)
                                | (msgs >= self.ack_every)
                                | ((self.ack_frames != 0) & (fsum >= self.ack_frames)))
        psn = Mux(bt.resend, bt.first_psn, g.next_psn)
        j = self.job.payload
        m.d.comb += [
            j.entry.eq(bt.entry), j.qpn.eq(bt.qpn), j.psn.eq(psn),
            j.laddr.eq(w.laddr[6:]), j.raddr.eq(w.raddr), j.rkey.eq(w.rkey),
            j.inline.eq(inline), j.ack_req.eq(want_ack),
            j.wr_id.eq(w.wr_id), j.sq_index.eq(bt.first + idx), j.first_psn.eq(psn),
            j.msg_length.eq(length), j.signalled.eq(signalled), j.resend.eq(bt.resend),
            j.last_of_item.eq(bt.last_of_item & last_wqe), j.null.eq(bt.null | flush),
            j.flush.eq(flush & ~bt.null), j.modify.eq(bt.modify),
            j.pmtu_log2.eq(ctx.pmtu_log2),
        ]
        if self.reads:
            m.d.comb += [j.op.eq(w.opcode), j.laddr_lo.eq(w.laddr[:6]),
                         j.swap_add.eq(w.swap_add), j.compare.eq(w.compare)]

        def wqe_done():
            """The current WQE's last word leaves in this cycle."""
            with m.If(last_wqe):
                m.d.comb += self.batch.ready.eq(1)
                m.d.sync += idx.eq(0)
            with m.Else():
                m.d.sync += idx.eq(idx + 1)

        with m.If(self.err_valid):
            m.d.comb += [self.group.we.eq(1), self.group.wdata.state.eq(QpState.ERR.value)]
        with m.Else(), m.FSM():
            with m.State("HDR"):
                with m.If(self.batch.valid & bt.null):
                    m.d.comb += [self.job.valid.eq(1), self.batch.ready.eq(self.job.ready)]
                    with m.If(self.job.ready & bt.modify):
                        m.d.comb += [self.group.we.eq(1),
                                     self.group.wdata.state.eq(QpState.RTS.value)]
                    with m.Elif(self.job.ready & flush):
                        m.d.sync += self.doorbell_err_qp.eq(self.doorbell_err_qp + 1)
                with m.Elif(self.batch.valid & src_valid & (self.job.ready | drop)):
                    m.d.comb += [self.job.valid.eq(~drop), pop.eq(1)]
                    if self.reads:
                        m.d.comb += self.take_dropped.eq(drop & bt.last_of_item)
                    m.d.sync += [inl_left.eq(n_inl), pad_left.eq(n_pad)]
                    with m.If(~flush):
                        m.d.sync += self.sequenced.eq(self.sequenced + 1)
                    with m.Elif(~bt.resend & bt.last_of_item & last_wqe):
                        m.d.sync += self.doorbell_err_qp.eq(self.doorbell_err_qp + 1)
                    with m.If(~bt.resend & ~flush):
                        m.d.comb += [
                            self.group.we.eq(1),
                            self.group.wdata.next_psn.eq(g.next_psn + frames),
                            self.group.wdata.ack_msgs.eq(Mux(want_ack, 0, msgs)),
                            self.group.wdata.ack_frames.eq(Mux(want_ack, 0, fsum)),
                        ]
                    with m.If(n_inl != 0):
                        m.next = "INLINE"
                    with m.Elif(n_pad != 0):
                        m.next = "PAD"
                    with m.Else():
                        wqe_done()
            with m.State("INLINE"):
                with m.If(src_valid & self.inline.ready):
                    m.d.comb += [pop.eq(1), self.inline.valid.eq(1)]
                    m.d.sync += inl_left.eq(inl_left - 1)
                    with m.If(inl_left == 1):
                        with m.If(pad_left != 0):
                            m.next = "PAD"
                        with m.Else():
                            wqe_done()
                            m.next = "HDR"
            with m.State("PAD"):
                with m.If(src_valid):
                    m.d.comb += pop.eq(1)
                    m.d.sync += pad_left.eq(pad_left - 1)
                    with m.If(pad_left == 1):
                        wqe_done()
                        m.next = "HDR"
        return m
