"""Frame sender: build each frame once all its payload is at hand; record messages."""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.common.fcs_inserter import FcsInserter
from rtl.rdma.icrc_inserter import IcrcInserter
from rtl.rdma.write_framer import WriteFramer
from spec.formats.packet import packet_signature
from spec.formats.roce import HOST_WORD_BITS, QPN_BITS
from spec.ports import CacheReadSignature
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
    frames, retransmissions : Out(32)
        Frames started; those of them that were resends.

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
    """

    def __init__(self, entries, fifo_words, header="roce"):
        self.entries, self.fifo_words = entries, fifo_words
        self.header = header
        super().__init__({
            "seg": In(stream.Signature(seg_layout())),
            "pay": In(stream.Signature(HOST_WORD_BITS)),
            "pay_level": In(range(fifo_words + 1)),
            "rec": Out(stream.Signature(record_layout())),
            "o": Out(packet_signature(64)),
            "ctx": Out(CacheReadSignature(entries)),
            "go": In(1, init=1),
            "resent": Out(stream.Signature(data.StructLayout({"qpn": QPN_BITS}),
                                           always_ready=True)),
            "frames": Out(32), "retransmissions": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.framer = framer = WriteFramer(header=self.header)
        m.submodules.icrc = icrc = IcrcInserter(header=self.header)
        m.submodules.fcs = fcs = FcsInserter(64)
        wiring.connect(m, framer.o, icrc.i)
        wiring.connect(m, icrc.o, fcs.i)
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
        with m.If(self.seg.valid & d.null):
            m.d.comb += [self.rec.valid.eq(1), self.seg.ready.eq(self.rec.ready)]
        with m.Elif(self.seg.valid & self.go & (self.pay_level >= d.words + pending)
                    & (self.rec.ready | ~record)):
            m.d.comb += framer.i_seg.valid.eq(1)
            with m.If(framer.i_seg.ready):
                m.d.comb += [self.seg.ready.eq(1), self.rec.valid.eq(record),
                             self.resent.valid.eq(d.resend)]
                m.d.sync += [self.frames.eq(self.frames + 1),
                             self.retransmissions.eq(self.retransmissions + d.resend)]
        return m
