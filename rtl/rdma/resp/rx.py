"""Receive stage of the responder: judge frames as they arrive and store the whole ones."""

from amaranth import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.rdma.eth_ip_udp import framing_param
from rtl.rdma.frame_check import FrameCheck
from spec.checks import check_int
from spec.formats.packet import packet_signature
from spec.formats.roce import HOST_WORD_BITS
from spec.rdma_responder import MAX_FRAME_BEATS, REST_MAX, SIZE_LIMITS
from spec.rdma_stages import header_entry_layout

__all__ = ["Receive"]


class Receive(wiring.Component):
    """Split each frame into a header entry and payload beats, or drop it whole.

    Parameters
    ----------
    rx_beats, rx_frames : int
        Depths of the payload FIFO and of the header FIFO this stage writes.

    Ports
    -----
    i : In(packet_signature(64))
        Frames from the link (with ICRC and FCS), a well-formed packet stream (every frame
        from a ``first`` to a ``last`` beat, as links deliver them). Always ready.
    hdr : Out(stream.Signature(header_entry_layout()))
        One entry per stored frame, written in the cycle of its last beat: beats 0 and 1,
        the :class:`~rtl.rdma.frame_check.FrameCheck` verdict (``icrc_ok`` is forced low
        for frames under 64 bytes: such frames fail the length or header check first,
        and this keeps the verdict independent of how FrameCheck treats ICRC bytes that
        overlap masked header bytes), ``single``, ``too_long`` and ``rest``.
    pay : Out(stream.Signature(HOST_WORD_BITS))
        The data of beats 2 to MAX_FRAME_BEATS - 1 of each stored frame, in the cycle
        each arrives (later beats of a too long frame are not stored).
    hdr_level, pay_level : In
        The ``level`` of the header and payload FIFOs.
    overflow : Out(32)
        Frames dropped whole, counted in the cycle of their last beat.
    rx_beats_max, rx_frames_max : Out(32)
        Highest payload and header FIFO levels seen at the start of a cycle.

    Timing
    ------
    Zero latency: a beat is written in the cycle it arrives (readable by the next stage
    from the next cycle). Admission is decided at a frame's first beat from the levels at
    the start of that cycle: the frame is stored if the payload FIFO holds at most
    ``rx_beats - REST_MAX`` beats (room for the largest frame) and the header FIFO is not
    full; otherwise every beat of it is dropped and it counts as ``overflow``. Since only
    this stage writes those FIFOs, an admitted frame always finds room (``ready`` is not
    looked at). Frames already stored are never touched.

    ``header="scaleup"``: the FrameCheck of the scale-up ICRC; ``icrc_ok`` is its verdict
    as is (it is low below 23 bytes, and a WRITE with the scale-up header may be shorter
    than 64 bytes).
    """

    def __init__(self, rx_beats, rx_frames, header="roce"):
        self.framing = framing_param(self, header)
        check_int(self, "payload FIFO beats (rx_beats)", rx_beats, *SIZE_LIMITS["rx_beats"])
        check_int(self, "header FIFO frames (rx_frames)", rx_frames,
                  *SIZE_LIMITS["rx_frames"])
        self.rx_beats, self.rx_frames = rx_beats, rx_frames
        super().__init__({
            "i": In(packet_signature(64)),
            "hdr": Out(stream.Signature(header_entry_layout())),
            "pay": Out(stream.Signature(HOST_WORD_BITS)),
            "hdr_level": In(range(rx_frames + 1)),
            "pay_level": In(range(rx_beats + 1)),
            "overflow": Out(32), "rx_beats_max": Out(32), "rx_frames_max": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.check = chk = FrameCheck(header=self.framing.header.value)
        icrc_min = 64 if self.framing.lead_in else self.framing.check_min
        beat, valid = self.i.payload, self.i.valid
        m.d.comb += [self.i.ready.eq(1), chk.beat.eq(beat), chk.en.eq(valid)]

        room = Signal()
        m.d.comb += room.eq((self.pay_level <= self.rx_beats - REST_MAX)
                            & (self.hdr_level != self.rx_frames))
        dropping = Signal()               # the frame being received was not admitted
        keep = Signal()
        m.d.comb += keep.eq(Mux(beat.first, room, ~dropping))
        seen = Signal(range(MAX_FRAME_BEATS + 1))     # beats of this frame before, saturated
        index = Signal(range(MAX_FRAME_BEATS + 1))
        m.d.comb += index.eq(Mux(beat.first, 0, seen))
        b0, b1 = Signal(HOST_WORD_BITS), Signal(HOST_WORD_BITS)
        with m.If(valid):
            m.d.sync += seen.eq(Mux(index == MAX_FRAME_BEATS, index, index + 1))
            with m.If(beat.first):
                m.d.sync += [dropping.eq(~room), b0.eq(beat.data)]
            with m.If(index == 1):
                m.d.sync += b1.eq(beat.data)

        m.d.comb += [
            self.pay.valid.eq(valid & keep & (index >= 2) & (index < MAX_FRAME_BEATS)),
            self.pay.payload.eq(beat.data),
        ]
        entry = self.hdr.payload
        m.d.comb += [
            self.hdr.valid.eq(valid & keep & beat.last),
            entry.b0.eq(Mux(beat.first, beat.data, b0)),
            entry.b1.eq(Mux(beat.first, 0, Mux(index == 1, beat.data, b1))),
            entry.fcs_ok.eq(chk.fcs_ok),
            entry.icrc_ok.eq(chk.icrc_ok & (chk.length >= icrc_min)),
            entry.length.eq(chk.length),
            entry.single.eq(beat.first),
            entry.too_long.eq(index == MAX_FRAME_BEATS),
            entry.rest.eq(Mux(index >= 2, Mux(index == MAX_FRAME_BEATS, REST_MAX, index - 1),
                              0)),
        ]
        with m.If(valid & beat.last & ~keep):
            m.d.sync += self.overflow.eq(self.overflow + 1)
        with m.If(self.pay_level > self.rx_beats_max):
            m.d.sync += self.rx_beats_max.eq(self.pay_level)
        with m.If(self.hdr_level > self.rx_frames_max):
            m.d.sync += self.rx_frames_max.eq(self.hdr_level)
        return m
