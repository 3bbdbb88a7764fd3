"""Payload fetch: cut each message into frames, read (or copy) their payload."""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from spec.checks import check_int
from spec.formats.roce import HOST_WORD_BITS, PSN_BITS, OpCode, WqeOpcode
from spec.rdma_engine import REQUESTER_DEFAULTS
from spec.rdma_stages import COUNT_BITS, job_layout, read_layout, seg_layout

__all__ = ["PayloadFetch"]


class PayloadFetch(wiring.Component):
    """Segment jobs at the path MTU; one DMA read per frame, or copy its inline words.

    Parameters
    ----------
    depth : int
        Host-memory words.
    fifo_words : int
        Words of the payload FIFO that the frame sender reads (reads are issued only
        when their words fit, counting the words of reads still outstanding).
    reads : int
        1: a job whose ``op`` is RDMA READ, COMPARE & SWAP or FETCH & ADD is one
        descriptor (opcode READ REQUEST, CMP_SWAP or FETCH_ADD, no payload, its first
        PSN, ``last_seg``), in one cycle with room in ``seg``, no read; the descriptors
        carry the job's ``op``, operands, local byte address and ``pmtu_log2``
        (:func:`spec.rdma_stages.seg_layout` with ``reads``). 0 (default): WRITEs only.

    Ports
    -----
    job : In(stream.Signature(job_layout(depth)))
        From the sequencer.
    inline : In(stream.Signature(HOST_WORD_BITS))
        The inline words of the jobs, in order.
    rd : Out(stream.Signature(read_layout(depth)))
        Payload reads, to the payload read client's FIFO.
    seg : Out(stream.Signature(seg_layout()))
        One descriptor per frame (and the ``null`` job's), to a FIFO.
    pay_w : Out(stream.Signature(HOST_WORD_BITS))
        Inline words into the payload FIFO (the parent merges this with the read data:
        an inline word is only written while no payload read is outstanding).
    pay_level : In(range(fifo_words + 1)), pay_arrived : In(COUNT_BITS)
        The payload FIFO's level, and the read words written into it since reset.
    payload_reads, payload_words_max : Out(32)
        Reads issued; the most payload FIFO words held or reserved at once.

    Timing
    ------
    One frame per cycle from a job that is read from host memory: the read and the
    descriptor leave together when ``rd`` and ``seg`` have room and the frame's
    ``ceil(length / 64)`` words fit. A frame of inline data copies one word per cycle
    (while no read is outstanding and the FIFO has room) and its descriptor leaves with
    its last word. A job leaves with its last frame. Frame ``k`` of a job of ``L``
    bytes carries ``min(L - k * MTU, MTU)`` bytes with PSN ``psn + k``; opcodes ONLY,
    or FIRST, MIDDLE..., LAST; AckReq (the job's) on the last frame only.
    """

    def __init__(self, depth, fifo_words=REQUESTER_DEFAULTS["payload_words"], reads=0):
        self.depth, self.reads = depth, reads
        self.fifo_words = check_int(self, "payload FIFO words", fifo_words, 64, 1 << 14)
        super().__init__({
            "job": In(stream.Signature(job_layout(depth, bool(reads)))),
            "inline": In(stream.Signature(HOST_WORD_BITS)),
            "rd": Out(stream.Signature(read_layout(depth))),
            "seg": Out(stream.Signature(seg_layout(bool(reads)))),
            "pay_w": Out(stream.Signature(HOST_WORD_BITS)),
            "pay_level": In(range(fifo_words + 1)), "pay_arrived": In(COUNT_BITS),
            "payload_reads": Out(32), "payload_words_max": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        j = self.job.payload
        issued = Signal(COUNT_BITS)
        outstanding = Signal(COUNT_BITS)
        m.d.comb += outstanding.eq(issued - self.pay_arrived)
        off = Signal(32)                 # bytes of the job already framed
        psn_cur = Signal(PSN_BITS)
        laddr_cur = Signal(range(self.depth))
        copied = Signal(3)               # inline words of this frame already copied
        started = Signal()
        psn = Mux(started, psn_cur, j.psn)
        laddr = Mux(started, laddr_cur, j.laddr)
        rem = Signal(32)
        pmtu = Signal(14)
        seg_len = Signal(13)
        words = Signal(7)
        first, last = Signal(), Signal()
        m.d.comb += [
            rem.eq(j.msg_length - off), pmtu.eq(Const(1, 14) << j.pmtu_log2),
            last.eq(rem <= pmtu), first.eq(off == 0),
            seg_len.eq(Mux(last, rem, pmtu)),
            words.eq((seg_len + 63)[6:]),
        ]
        s = self.seg.payload
        m.d.comb += [
            s.entry.eq(j.entry), s.qpn.eq(j.qpn), s.psn.eq(psn), s.length.eq(seg_len),
            s.opcode.eq(Mux(first, Mux(last, OpCode.RC_RDMA_WRITE_ONLY,
                                       OpCode.RC_RDMA_WRITE_FIRST),
                            Mux(last, OpCode.RC_RDMA_WRITE_LAST,
                                OpCode.RC_RDMA_WRITE_MIDDLE))),
            s.va.eq(j.raddr), s.rkey.eq(j.rkey), s.ack_req.eq(j.ack_req & last),
            s.words.eq(words), s.last_seg.eq(last),
            s.wr_id.eq(j.wr_id), s.sq_index.eq(j.sq_index), s.first_psn.eq(j.first_psn),
            s.msg_length.eq(j.msg_length), s.signalled.eq(j.signalled),
            s.resend.eq(j.resend), s.last_of_item.eq(j.last_of_item), s.null.eq(j.null),
            s.flush.eq(j.flush), s.modify.eq(j.modify),
            self.rd.payload.addr.eq(laddr), self.rd.payload.words.eq(words),
            self.pay_w.payload.eq(self.inline.payload),
        ]
        passes = j.null                  # a descriptor without a read or a copy
        if self.reads:
            is_req = Signal()
            m.d.comb += is_req.eq(j.op != WqeOpcode.RDMA_WRITE)
            passes = j.null | is_req
            with m.If(is_req):
                m.d.comb += [
                    s.opcode.eq(Mux(j.op == WqeOpcode.RDMA_READ, OpCode.RC_RDMA_READ_REQUEST,
                                    Mux(j.op == WqeOpcode.ATOMIC_CMP_AND_SWP,
                                        OpCode.RC_CMP_SWAP, OpCode.RC_FETCH_ADD))),
                    s.length.eq(0), s.words.eq(0), s.last_seg.eq(1),
                    s.ack_req.eq(j.ack_req),
                ]
            m.d.comb += [s.op.eq(j.op), s.swap_add.eq(j.swap_add), s.compare.eq(j.compare),
                         s.laddr.eq(Cat(j.laddr_lo, j.laddr)), s.pmtu_log2.eq(j.pmtu_log2)]
        held = Signal(17)
        m.d.comb += held.eq(self.pay_level + outstanding)
        with m.If(held > self.payload_words_max):
            m.d.sync += self.payload_words_max.eq(held)
        advance = Signal()

        with m.If(self.job.valid & passes):
            m.d.comb += [self.seg.valid.eq(1), self.job.ready.eq(self.seg.ready)]
        with m.Elif(self.job.valid & j.inline & (words != 0)):
            final = copied + 1 == words
            go = (self.inline.valid & (outstanding == 0)
                  & (self.pay_level < self.fifo_words) & (~final | self.seg.ready))
            with m.If(go):
                m.d.comb += [self.pay_w.valid.eq(1), self.inline.ready.eq(1)]
                m.d.sync += copied.eq(copied + 1)
                with m.If(final):
                    m.d.comb += [self.seg.valid.eq(1), advance.eq(1)]
        with m.Elif(self.job.valid):
            ok = (self.seg.ready & ((words == 0) | self.rd.ready)
                  & (held + words <= self.fifo_words))
            with m.If(ok):
                m.d.comb += [self.seg.valid.eq(1), advance.eq(1),
                             self.rd.valid.eq(words != 0)]
                m.d.sync += issued.eq(issued + words)
                with m.If(words != 0):
                    m.d.sync += self.payload_reads.eq(self.payload_reads + 1)
        with m.If(advance):       # after the copy count above: this assignment wins
            m.d.sync += [off.eq(off + seg_len), psn_cur.eq(psn + 1),
                         laddr_cur.eq(laddr + words), started.eq(~last), copied.eq(0)]
            with m.If(last):
                m.d.sync += off.eq(0)
                m.d.comb += self.job.ready.eq(1)
        return m
