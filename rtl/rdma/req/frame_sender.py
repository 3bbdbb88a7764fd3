"""Frame sender: build each frame once all its payload is at hand; record messages."""

from amaranth import Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.common.fcs_inserter import FcsInserter
from rtl.rdma.icrc_inserter import IcrcInserter
from rtl.rdma.req.request_framer import RequestFramer
from rtl.rdma.write_framer import WriteFramer
from spec.formats.packet import packet_signature
from spec.formats.roce import HOST_WORD_BITS, PSN_BITS, QPN_BITS, WqeOpcode
from spec.ports import CacheReadSignature
from spec.rdma_engine import TIMEOUT_BITS
from spec.rdma_read_req import SENDER_COUNTERS, issue_layout
from spec.rdma_stages import record_layout, seg_layout

__all__ = ["FrameSender"]


class FrameSender(wiring.Component):
    """Hand frame descriptors to the framer (WriteFramer, ICRC, FCS) in order.

    Parameters
    ----------
    entries : int
        Context-cache entries.
    fifo_words : int
        Words of the payload FIFO.
    reads : int
        1: READ and atomic descriptors (``op`` not RDMA WRITE) go to a
        :class:`~rtl.rdma.req.request_framer.RequestFramer` and, first sends, into the
        response intake (``issue``); 0 (default): WRITEs only, no ``issue`` port.
    depth : int
        Host-memory words (the ``issue`` port's local address; with ``reads``).

    Ports
    -----
    seg : In(stream.Signature(seg_layout()))
        Frame descriptors, from a FIFO.
    pay : In(stream.Signature(HOST_WORD_BITS))
        The payload FIFO's read side (the framer takes the words as it sends them).
    pay_level : In(range(fifo_words + 1))
        Its level.
    rec : Out(stream.Signature(record_layout()))
        The record of each message whose last frame starts (first sends only), and of
        each ``null`` descriptor, to the completion unit's FIFO.
    o : Out(packet_signature(64))
        The frames, with ICRC and FCS (``o.ready`` is expected high: a link).
    ctx : Out(CacheReadSignature(entries))
        A static read port of the cache (MACs, IPs, ``dest_qp``).
    go : In(1)
        Flow control from the link (init 1: a requester on its own link ties it high):
        a descriptor goes to the framer only in a cycle with ``go`` high. It holds
        between frames only: a frame once started is sent whole, at the timing below.
    resent : Out(stream.Signature({"qpn": QPN_BITS}, always_ready=True))
        ``valid`` for one cycle, with the frame's QPN, in the cycle the framer takes the
        descriptor of a resent frame (its first beat is on ``o`` from the next cycle on,
        by the timing below): the completion unit restarts the QP's transport timer.
    issue : Out(stream.Signature(issue_layout(depth)))
        With ``reads``: a READ or atomic sent the first time, or a *take* resend
        (``resend`` and ``last_of_item``: the completion unit's walk found it holding no
        slot), to the response intake (its ``ready`` is the ORD backpressure), in the
        cycle its descriptor is taken.
    timeout : In(TIMEOUT_BITS)
        With ``reads``: the transport timeout (cycles), the bound of a wait for ``issue``.
    took : Out(1)
        With ``reads``: a take resend left ``seg`` (sent or not) in this cycle.
    frames, retransmissions : Out(32)
        Frames started; those of them that were resends.
    req_frames, req_unframed, lost_frames : Out(32)
        With ``reads`` (:data:`spec.rdma_read_req.SENDER_COUNTERS`): READ and atomic
        request frames started; READ and atomic descriptors that left ``seg`` without a
        frame (the timeout below); WRITE frames that lost a beat at the output mux (the
        request framer sent in a cycle the WRITE chain did: by the rules below never,
        so 0; counted when the frame's last beat leaves).

    Timing
    ------
    A descriptor at the head of ``seg`` goes to the framer in a cycle when ``go`` is
    high, the framer takes one (idle, or sending the last beat of its frame), all ``words`` of its
    payload are in the FIFO above the words the frame in progress has not taken yet
    (so a frame never waits for data once it has started) and, for a record, ``rec``
    has room. Frame timing: a descriptor taken in cycle ``t`` sends its ``B`` beats
    (with ICRC and FCS) from cycle ``f = max(t + 1, end + 1)`` (``end``: the previous
    frame's last beat), one a cycle; the framer takes the next descriptor in cycle
    ``f + Bw - 1``, ``Bw`` being its own beats (without ICRC and FCS; the inserters add
    a beat, ``B = Bw + 1``, when the framer's last beat holds more than 56 bytes); it
    takes payload word ``k`` in cycle ``f + 1 + k`` for a frame with a RETH, ``f + k``
    without. A ``null`` descriptor only pushes its record.

    With ``reads``, a READ or atomic descriptor goes to the request framer in a cycle
    with ``go`` high, room in ``rec``, the WRITE chain idle or sending its last beat,
    the request framer idle or sending its last beat and, for a first send, ``issue``
    ready; its 2 beats leave in the next two cycles. A first send or take resend whose
    ``issue`` is not ready goes, under the other conditions, without a frame once the
    register ``since`` (cycles since the last issue taken, counting up to ``timeout``)
    has reached ``timeout``: a first send still writes its record (its request is lost
    at the source, recovered by a rewind as a lost frame is), a take resend raises
    ``resent`` (its QP's timer restarts) and ``took``. So no descriptor waits longer
    than the timeout for a slot. A WRITE descriptor waits, besides
    the rules above, until the request framer is idle or sends its last beat. A READ's
    record has the last PSN of its responses (``psn + max(1, ceil(length / 2**pmtu_log2))
    - 1``), an atomic's its PSN.
    """

    def __init__(self, entries, fifo_words, header="roce", reads=0, depth=1 << 14):
        self.entries, self.fifo_words = entries, fifo_words
        self.header, self.reads, self.depth = header, reads, depth
        ops = {"issue": Out(stream.Signature(issue_layout(depth))),
               "timeout": In(TIMEOUT_BITS), "took": Out(1),
               **{n: Out(32) for n in SENDER_COUNTERS}} if reads else {}
        super().__init__({
            "seg": In(stream.Signature(seg_layout(bool(reads)))),
            "pay": In(stream.Signature(HOST_WORD_BITS)),
            "pay_level": In(range(fifo_words + 1)),
            "rec": Out(stream.Signature(record_layout(bool(reads)))),
            "o": Out(packet_signature(64)),
            "ctx": Out(CacheReadSignature(entries)),
            "go": In(1, init=1),
            "resent": Out(stream.Signature(data.StructLayout({"qpn": QPN_BITS}),
                                           always_ready=True)),
            "frames": Out(32), "retransmissions": Out(32), **ops,
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.framer = framer = WriteFramer(header=self.header)
        m.submodules.icrc = icrc = IcrcInserter(header=self.header)
        m.submodules.fcs = fcs = FcsInserter(64)
        wiring.connect(m, framer.o, icrc.i)
        wiring.connect(m, icrc.o, fcs.i)
        if self.reads:
            m.submodules.req_framer = rq = RequestFramer()
            # The two chains never send in the same cycle (the Timing rules above).
            m.d.comb += [self.o.valid.eq(fcs.o.valid | rq.o.valid),
                         self.o.payload.eq(Mux(rq.o.valid, rq.o.payload, fcs.o.payload)),
                         fcs.o.ready.eq(self.o.ready), rq.o.ready.eq(self.o.ready)]
            self._lost_frames(m, fcs, rq)
        else:
            wiring.connect(m, fcs.o, wiring.flipped(self.o))
        wiring.connect(m, wiring.flipped(self.pay), framer.i_data)
        d = self.seg.payload
        ctx = self.ctx.data
        m.d.comb += self.ctx.addr.eq(d.entry)
        f = framer.i_seg.payload
        m.d.comb += [
            f.opcode.eq(d.opcode), f.ack_req.eq(d.ack_req),
            f.dmac.eq(ctx.dmac), f.smac.eq(ctx.smac), f.sip.eq(ctx.sip), f.dip.eq(ctx.dip),
            f.src_qp.eq(d.qpn), f.dest_qp.eq(ctx.dest_qp), f.psn.eq(d.psn),
            f.va.eq(d.va), f.rkey.eq(d.rkey), f.dma_length.eq(d.msg_length),
            f.length.eq(d.length),
        ]
        r = self.rec.payload
        m.d.comb += [
            r.entry.eq(d.entry), r.qpn.eq(d.qpn), r.last_psn.eq(d.psn),
            r.wr_id.eq(d.wr_id), r.sq_index.eq(d.sq_index), r.first_psn.eq(d.first_psn),
            r.msg_length.eq(d.msg_length), r.signalled.eq(d.signalled),
            r.resend.eq(d.resend), r.last_of_item.eq(d.last_of_item), r.null.eq(d.null),
            r.flush.eq(d.flush), r.modify.eq(d.modify),
        ]
        m.d.comb += self.resent.payload.qpn.eq(d.qpn)
        record = d.last_seg & ~d.resend
        # Payload words of the frame being sent that the framer has not taken yet: the
        # next frame's words are counted only above them.
        pending = Signal(range(self.fifo_words + 1))
        take = framer.i_seg.valid & framer.i_seg.ready
        m.d.sync += pending.eq(pending + Mux(take, d.words, 0)
                               - (self.pay.valid & self.pay.ready))
        w_go = (self.seg.valid & self.go & (self.pay_level >= d.words + pending)
                & (self.rec.ready | ~record))
        if self.reads:          # a WRITE descriptor also waits for the request chain
            w_go = w_go & self._requests(m, rq, fcs, take, record)
        with m.If(self.seg.valid & d.null):
            m.d.comb += [self.rec.valid.eq(1), self.seg.ready.eq(self.rec.ready)]
        with m.Elif(w_go):
            m.d.comb += framer.i_seg.valid.eq(1)
            with m.If(framer.i_seg.ready):
                m.d.comb += [self.seg.ready.eq(1), self.rec.valid.eq(record),
                             self.resent.valid.eq(d.resend)]
                m.d.sync += [self.frames.eq(self.frames + 1),
                             self.retransmissions.eq(self.retransmissions + d.resend)]
        return m

    def _requests(self, m, rq, fcs, w_take, record):
        """READ and atomic descriptors to the request framer (and the intake); returns
        the condition under which a WRITE descriptor may go."""
        d = self.seg.payload
        ctx = self.ctx.data
        is_req = Signal()
        m.d.comb += is_req.eq(~d.null & (d.op != WqeOpcode.RDMA_WRITE))
        # The WRITE chain's frames taken and not yet ended (their last beat): the framer
        # takes the next descriptor while the inserters may still add the last beat of
        # the frame before, so two can be in flight; a request goes only once the last
        # of them sends its last beat (the model's ``w_end``).
        wcount = Signal(2)
        w_end = Signal()
        m.d.comb += w_end.eq(fcs.o.valid & fcs.o.ready & fcs.o.payload.last)
        m.d.sync += wcount.eq(wcount + w_take - w_end)
        rp = rq.i.payload
        m.d.comb += [
            rp.opcode.eq(d.opcode), rp.dmac.eq(ctx.dmac), rp.smac.eq(ctx.smac),
            rp.sip.eq(ctx.sip), rp.dip.eq(ctx.dip), rp.src_qp.eq(d.qpn),
            rp.dest_qp.eq(ctx.dest_qp), rp.psn.eq(d.psn), rp.ack_req.eq(d.ack_req),
            rp.va.eq(d.va), rp.rkey.eq(d.rkey), rp.dma_length.eq(d.msg_length),
            rp.swap_add.eq(d.swap_add), rp.compare.eq(d.compare),
        ]
        atomic = d.op != WqeOpcode.RDMA_READ
        npk = Signal(PSN_BITS)
        m.d.comb += npk.eq(Mux(atomic | (d.msg_length == 0), 1,
                               (d.msg_length + (Const(1, 13) << d.pmtu_log2) - 1)
                               >> d.pmtu_log2))
        r = self.rec.payload
        m.d.comb += r.op.eq(d.op)
        with m.If(is_req):
            m.d.comb += r.last_psn.eq(d.psn + npk - 1)
        ip = self.issue.payload
        m.d.comb += [ip.atomic.eq(atomic), ip.qpn.eq(d.qpn), ip.psn.eq(d.psn),
                     ip.pmtu_log2.eq(d.pmtu_log2), ip.laddr.eq(d.laddr),
                     ip.length.eq(d.msg_length)]
        w_idle = (wcount == 0) | ((wcount == 1) & w_end)
        take_r = d.resend & d.last_of_item        # a take resend
        need = take_r | ~d.resend                 # it takes a slot
        base = self.seg.valid & is_req & self.go & w_idle & (self.rec.ready | ~record)
        since = Signal(TIMEOUT_BITS)              # cycles since the last issue taken
        m.d.comb += rq.i.valid.eq(base & (self.issue.ready | ~need))
        go_r = rq.i.valid & rq.i.ready
        lost = base & rq.i.ready & need & ~self.issue.ready & (since >= self.timeout)
        with m.If(go_r):
            m.d.comb += [self.seg.ready.eq(1), self.rec.valid.eq(record),
                         self.resent.valid.eq(d.resend), self.issue.valid.eq(need)]
            m.d.sync += [self.frames.eq(self.frames + 1),
                         self.retransmissions.eq(self.retransmissions + d.resend),
                         self.req_frames.eq(self.req_frames + 1)]
        with m.Elif(lost):                        # waited a timeout: no frame
            m.d.comb += [self.seg.ready.eq(1), self.rec.valid.eq(record),
                         self.resent.valid.eq(take_r)]
            m.d.sync += self.req_unframed.eq(self.req_unframed + 1)
        m.d.comb += self.took.eq((go_r | lost) & take_r)
        with m.If(self.issue.valid & self.issue.ready):
            m.d.sync += since.eq(0)
        with m.Elif(since < self.timeout):
            m.d.sync += since.eq(since + 1)
        return ~is_req & rq.i.ready

    def _lost_frames(self, m, fcs, rq):
        """``lost_frames``: a WRITE frame with a beat offered in a cycle the request
        framer's beat took the output mux, counted with the frame's last beat."""
        clash = fcs.o.valid & rq.o.valid
        hit = Signal()                            # this WRITE frame lost a beat
        with m.If(fcs.o.valid & fcs.o.ready & fcs.o.payload.last):
            m.d.sync += [hit.eq(0), self.lost_frames.eq(self.lost_frames + (hit | clash))]
        with m.Elif(clash):
            m.d.sync += hit.eq(1)
