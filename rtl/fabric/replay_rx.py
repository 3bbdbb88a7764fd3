"""The receiving end of the link-level retry: check, deliver in order, ACK or NAK."""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.common.fcs_checker import FcsChecker
from spec.checks import check_int, reject
from spec.fabric import RX_COUNTERS
from spec.formats.link_retry import SEQ_BITS, ack_layout, tagged_packet_signature
from spec.formats.packet import check_width, packet_layout, packet_signature

__all__ = ["ReplayRx"]


class ReplayRx(wiring.Component):
    """Deliver each frame once, whole, good and in sequence; tell the sender what came.

    Parameters
    ----------
    width : int
        Datapath bytes.
    depth : int
        Beats of the delivery buffer (a power of two, 4 to 4096): at least two of the
        longest frames, so that one can arrive while the one before leaves.

    Ports
    -----
    i : In(tagged_packet_signature(width))
        From the link, always ready; ``tag`` is the frame's sequence number and its
        check bit (:mod:`spec.formats.link_retry`).
    o : Out(packet_signature(width))
        Frames, each once and in sequence, with their FCS. The first beat of a frame is
        valid in the cycle after its last beat arrived on ``i`` (store and forward: a
        frame is judged whole before any of it leaves), then one beat a cycle while
        ``o.ready``.
    ack : Out(stream.Signature(ack_layout, always_ready=True))
        One ACK or NAK at most per frame, valid in the cycle after the frame's last beat:
        ``seq`` is the next expected sequence number, ``check`` its check bit.
    frames_ok, fcs_bad, out_of_order, duplicates, acks, naks, no_room, tag_bad : Out(32)
        Frames delivered; frames with the expected number but a bad FCS; frames with a
        later number (one before them was lost); frames with an earlier number (already
        delivered); ACKs and NAKs sent; frames with the expected number that found the
        buffer full (they are treated as lost, so nothing is delivered broken); frames
        whose tag (read at their first beat) failed its check.

    Rule
    ----
    A tag whose check bit fails matches no number: its frame is neither taken nor a
    duplicate, so it is handled like a lost one (NAK), and counted in ``tag_bad``.
    Only a frame whose tag is the expected number is written to the buffer (a first beat
    abandons the beats of a frame that never got its last beat). At its last
    beat it is delivered (``expected`` + 1, ACK, the NAK flag cleared) if its FCS is
    good and all its beats fitted; otherwise its beats are taken back. A frame with an
    earlier number is acknowledged again (ACK ``expected``). After any other failure a
    NAK ``expected`` is sent unless one was sent since the last delivery (one NAK per
    loss: the sender's timer covers a lost retransmission).
    """

    def __init__(self, width, depth):
        self.width = check_width(width, self)
        self.depth = check_int(self, "delivery buffer depth (beats)", depth, 4, 4096)
        if depth & (depth - 1):
            reject(self, f"delivery buffer depth must be a power of two, not {depth!r}")
        ports = {
            "i": In(tagged_packet_signature(width)),
            "o": Out(packet_signature(width)),
            "ack": Out(stream.Signature(ack_layout, always_ready=True)),
        }
        ports.update({name: Out(32) for name in RX_COUNTERS})
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        d = self.depth
        abits = d.bit_length() - 1
        pbits = abits + 1
        mask = (1 << SEQ_BITS) - 1
        m.submodules.fcs = chk = FcsChecker(self.width)
        m.submodules.beats = beats = memory.Memory(shape=packet_layout(self.width),
                                                   depth=d, init=[])
        b_wr, b_rd = beats.write_port(), beats.read_port(domain="comb")
        beat = self.i.payload
        m.d.comb += [
            self.i.ready.eq(1),
            chk.i.valid.eq(self.i.valid),
            chk.i.payload.data.eq(beat.data), chk.i.payload.nbytes.eq(beat.nbytes),
            chk.i.payload.first.eq(beat.first), chk.i.payload.last.eq(beat.last),
            chk.o.ready.eq(1),
        ]

        wr = Signal(pbits)
        commit = Signal(pbits)
        rd = Signal(pbits)
        expected = Signal(SEQ_BITS)
        nak_sent = Signal()
        taking = Signal()            # the frame being received has the expected number
        spilled = Signal()           # ... and a beat of it found the buffer full

        # Arrival.
        take_now = Signal()
        room = Signal()
        write = Signal()
        full_now = Signal()
        wpos = Signal(pbits)         # a first beat abandons an unfinished frame
        tag_ok = Signal()            # the beat's tag passes its check
        seq = Signal(SEQ_BITS)
        tag_bad = Signal()           # the frame's tag (at its first beat) failed it
        tag_bad_r = Signal()
        m.d.comb += [
            tag_ok.eq(~beat.tag.xor()), seq.eq(beat.tag[:SEQ_BITS]),
            tag_bad.eq(Mux(beat.first, ~tag_ok, tag_bad_r)),
            wpos.eq(Mux(beat.first, commit, wr)),
            take_now.eq(Mux(beat.first, tag_ok & (seq == expected), taking)),
            room.eq(((wpos - rd)[:pbits]) < d),
            write.eq(self.i.valid & take_now & room),
            full_now.eq(self.i.valid & take_now & ~room),
            b_wr.addr.eq(wpos[:abits]), b_wr.en.eq(write),
            b_wr.data.data.eq(beat.data), b_wr.data.nbytes.eq(beat.nbytes),
            b_wr.data.first.eq(beat.first), b_wr.data.last.eq(beat.last),
        ]
        spill = Signal()
        m.d.comb += spill.eq(full_now | Mux(beat.first, 0, spilled))
        with m.If(self.i.valid):
            m.d.sync += [taking.eq(take_now), spilled.eq(spill), tag_bad_r.eq(tag_bad)]

        # Verdict at the last beat.
        end = Signal()
        good = Signal()
        old = Signal()
        m.d.comb += [
            end.eq(self.i.valid & beat.last),
            good.eq(take_now & chk.fcs_ok & ~spill),
            old.eq(~take_now & tag_ok & ~tag_bad
                   & (((expected - seq) & mask) < (1 << (SEQ_BITS - 1)))),
        ]
        ack_valid = Signal()
        ack_seq = Signal(SEQ_BITS)
        ack_nak = Signal()
        m.d.sync += ack_valid.eq(0)
        m.d.comb += [self.ack.valid.eq(ack_valid), self.ack.payload.seq.eq(ack_seq),
                     self.ack.payload.nak.eq(ack_nak),
                     self.ack.payload.check.eq(Cat(ack_seq, ack_nak).xor())]
        with m.If(write):
            m.d.sync += wr.eq(wpos + 1)
        with m.If(end):
            with m.If(good):
                m.d.sync += [commit.eq(wpos + 1), expected.eq(expected + 1), nak_sent.eq(0),
                             ack_valid.eq(1), ack_seq.eq(expected + 1), ack_nak.eq(0),
                             self.frames_ok.eq(self.frames_ok + 1),
                             self.acks.eq(self.acks + 1)]
            with m.Else():
                m.d.sync += wr.eq(commit)
                with m.If(old):
                    m.d.sync += [ack_valid.eq(1), ack_seq.eq(expected), ack_nak.eq(0),
                                 self.duplicates.eq(self.duplicates + 1),
                                 self.acks.eq(self.acks + 1)]
                with m.Else():
                    with m.If(~nak_sent):
                        m.d.sync += [ack_valid.eq(1), ack_seq.eq(expected), ack_nak.eq(1),
                                     nak_sent.eq(1), self.naks.eq(self.naks + 1)]
                    with m.If(tag_bad):
                        m.d.sync += self.tag_bad.eq(self.tag_bad + 1)
                    with m.Elif(~take_now):
                        m.d.sync += self.out_of_order.eq(self.out_of_order + 1)
                    with m.Elif(spill):
                        m.d.sync += self.no_room.eq(self.no_room + 1)
                    with m.Else():
                        m.d.sync += self.fcs_bad.eq(self.fcs_bad + 1)

        # Delivery.
        out = Signal()
        m.d.comb += [
            b_rd.addr.eq(rd[:abits]),
            self.o.valid.eq(rd != commit),
            # Zeros between frames, not the stale (in a simulator: unset) buffer word.
            self.o.payload.eq(Mux(self.o.valid, b_rd.data, 0)),
            out.eq(self.o.valid & self.o.ready),
        ]
        with m.If(out):
            m.d.sync += rd.eq(rd + 1)
        return m
