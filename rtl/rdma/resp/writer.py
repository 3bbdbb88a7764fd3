"""Payload-writer stage of the responder: realign the payload into 64-byte host words."""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.rdma.eth_ip_udp import framing_param
from spec.formats.roce import HOST_WORD_BITS
from spec.formats.scaleup import Header
from spec.host import wr_layout
from spec.rdma_responder import REST_MAX
from spec.rdma_stages import write_job_layout

__all__ = ["PayloadWriter"]


class PayloadWriter(wiring.Component):
    """Write each verified frame's payload as whole host words; pop every frame's beats.

    Parameters
    ----------
    depth : int
        Host-memory words.

    Ports
    -----
    i : In(stream.Signature(write_job_layout(depth)))
        One job per frame, in frame order, from the verify stage.
    beats : In(stream.Signature(HOST_WORD_BITS))
        The payload FIFO: beats 2 and later of every stored frame.
    o : Out(stream.Signature(wr_layout(depth)))
        Payload words to the write arbiter: word ``k`` of a frame at ``addr + k`` with
        ``be`` for its bytes (bytes outside ``be`` are zero); ``last`` on the frame's
        last word (one write TLP per frame); ``mark`` and ``tag`` = QPN on the last word
        of a LAST/ONLY (``tag`` 0 elsewhere).
    words : Out(32)
        Words written.

    Timing
    ------
    The payload starts at frame byte 70 after a RETH, 54 without; the job brings bytes
    54 to 127 (frame beats 0 and 1), the rest comes from ``beats``. Word ``k`` of a
    frame is its payload bytes ``64k .. 64k + 63``. In each cycle with a job at the head
    of ``i`` the stage does one step: while words remain, it writes the next word and,
    if that word needs bytes of a beat not yet popped, pops that beat in the same cycle;
    then, while beats of the frame remain (the ICRC/FCS tail), pops one per cycle. The
    job is popped in the cycle of its last step; a job with nothing to do takes one
    cycle. A step that writes needs room in ``o`` and a step that pops needs a beat
    (always there: a frame's beats are stored before its job exists); otherwise the
    cycle does nothing. So a frame takes ``max(1, words + tail beats)`` cycles: 2 for a
    128-byte WRITE ONLY (4 beats), 64 for a 4096-byte one (66 beats).

    ``header="scaleup"``: the payload starts at frame byte 38 after a RETH, 22 without;
    the job brings bytes 22 to 127 (frame beats 0 and 1), so the first word of every
    frame comes from the job and word ``k >= 1`` needs beat ``k + 1`` of the frame. A
    128-byte WRITE ONLY is 3 beats and takes 2 cycles.
    """

    def __init__(self, depth, header="roce"):
        self.depth = depth
        self.framing = framing_param(self, header)
        super().__init__({
            "i": In(stream.Signature(write_job_layout(depth, self.framing.head_bytes))),
            "beats": In(stream.Signature(HOST_WORD_BITS)),
            "o": Out(stream.Signature(wr_layout(depth))),
            "words": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        job = self.i.payload
        scaleup = self.framing.header is Header.SCALEUP
        k = Signal(7)                          # words written of this job
        popped = Signal(range(REST_MAX + 1))   # beats popped of this job
        carry = Signal(HOST_WORD_BITS)                  # the frame beat before the next one
        tail_bits = 8 * (64 - self.framing.plain_bytes)        # beat 0 from the payload on
        f0_tail, f1 = job.data[:tail_bits], job.data[tail_bits:]
        # Scale-up: the payload's offset in every beat, after a RETH (38) and without (22).
        rr, rp = 8 * self.framing.reth_bytes, 8 * self.framing.plain_bytes

        nwords = Signal(8)
        m.d.comb += nwords.eq(Mux(job.write, (job.plen + 63) >> 6, 0))
        left = Signal(14)
        m.d.comb += left.eq(job.plen - (k << 6))
        word_due, need_beat, tail = Signal(), Signal(), Signal()
        if scaleup:
            need = (k != 0) & Mux(job.reth, left > 64 - rr // 8, left > 64 - rp // 8)
        else:
            need = Mux(job.reth, left > 58, (k != 0) & (left > 10))
        m.d.comb += [
            word_due.eq(k < nwords),
            need_beat.eq(word_due & need),
            tail.eq(~word_due & (popped < job.rest)),
        ]
        hi = self.beats.payload
        word = Signal(HOST_WORD_BITS)
        if scaleup:
            b0 = Cat(Const(0, rp), f0_tail)           # beat 0, its header bytes zero
            lo_beat, hi_beat = Mux(k == 0, b0, carry), Mux(k == 0, f1, hi)
            m.d.comb += word.eq(Mux(job.reth, Cat(lo_beat[rr:], hi_beat[:rr]),
                                    Cat(lo_beat[rp:], hi_beat[:rp])))
        else:
            with m.If(job.reth):
                m.d.comb += word.eq(Cat(Mux(k == 0, f1, carry)[48:], hi[:48]))
            with m.Elif(k == 0):
                m.d.comb += word.eq(Cat(f0_tail, f1[:432]))
            with m.Else():
                m.d.comb += word.eq(Cat(carry[432:], hi[:432]))
        be = Signal(64)
        m.d.comb += be.eq(Mux(left >= 64, (1 << 64) - 1, (Const(1, 65) << left[:7]) - 1))
        mask = Signal(HOST_WORD_BITS)
        m.d.comb += mask.eq(Cat(*[b.replicate(8) for b in be]))
        last = Signal()
        m.d.comb += last.eq(k + 1 == nwords)
        out = self.o.payload
        m.d.comb += [
            out.addr.eq(job.addr + k), out.data.eq(word & mask), out.be.eq(be),
            out.last.eq(last), out.mark.eq(job.mark & last),
            out.tag.eq(Mux(job.mark & last, job.qpn, 0)),
        ]

        pop = Signal()
        step = Signal()
        m.d.comb += [
            pop.eq(need_beat | tail),
            step.eq(self.i.valid & (~word_due | self.o.ready) & (~pop | self.beats.valid)),
        ]
        with m.If(step):
            m.d.comb += [self.o.valid.eq(word_due), self.beats.ready.eq(pop)]
            with m.If(pop):
                m.d.sync += carry.eq(hi)
            with m.Elif((k == 0) & (Const(1) if scaleup else ~job.reth)):
                m.d.sync += carry.eq(f1)
            with m.If(word_due):
                m.d.sync += self.words.eq(self.words + 1)
            finished = (k + word_due == nwords) & (popped + pop == job.rest)
            with m.If(finished):
                m.d.comb += self.i.ready.eq(1)
                m.d.sync += [k.eq(0), popped.eq(0)]
            with m.Else():
                m.d.sync += [k.eq(k + word_due), popped.eq(popped + pop)]
        return m
