"""Check the Ethernet FCS of each packet of a stream."""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.common.crc32 import Crc32Core
from spec.formats.packet import check_width, packet_signature

__all__ = ["FcsChecker"]


class FcsChecker(wiring.Component):
    """Pass frames through unchanged and judge the FCS in their last 4 bytes.

    Ports
    -----
    i : In(packet_signature(width))
        Frames with FCS.
    o : Out(packet_signature(width))
        The same frames, unchanged (FCS included), zero latency, ``i.ready = o.ready``.
    fcs_ok : Out(1)
        Combinational: with ``o.valid & o.payload.last``, the frame's FCS is correct.
    frames_ok, frames_bad : Out(32)
        Frames passed with a correct / incorrect FCS since reset (wrap at 2**32).

    Every frame, whatever its length, is judged by the residue rule: the CRC register
    after the whole frame must hold :data:`CRC32_RESIDUE`. The checker never drops: the
    consumer decides what to do with a bad frame (and checks lengths itself).
    """

    def __init__(self, width):
        self.width = check_width(width, self)
        super().__init__({
            "i": In(packet_signature(width)),
            "o": Out(packet_signature(width)),
            "fcs_ok": Out(1),
            "frames_ok": Out(32),
            "frames_bad": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.crc = crc = Crc32Core(self.width)
        wiring.connect(m, wiring.flipped(self.i), wiring.flipped(self.o))
        handshake = Signal()
        m.d.comb += [
            handshake.eq(self.i.valid & self.i.ready),
            crc.beat.eq(self.i.payload),
            crc.en.eq(handshake),
            self.fcs_ok.eq(crc.residue_ok),
        ]
        with m.If(handshake & self.i.payload.last):
            with m.If(crc.residue_ok):
                m.d.sync += self.frames_ok.eq(self.frames_ok + 1)
            with m.Else():
                m.d.sync += self.frames_bad.eq(self.frames_bad + 1)
        return m
