"""Judge the FCS, the ICRC and the length of the frames on a packet stream."""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.common import gf2
from rtl.common.crc32 import CRC32_RESIDUE, Crc32Core, crc32_step
from rtl.rdma.eth_ip_udp import framing_param
from rtl.rdma.icrc_inserter import icrc_overlay
from spec.checks import reject
from spec.formats.packet import check_width, packet_layout
from spec.formats.roce import HOST_WORD_BITS

__all__ = ["FrameCheck"]


def _parity(value, rows):
    return Cat(*[(value & row).xor() for row in rows])


class FrameCheck(wiring.Component):
    """Watch a stream of RoCEv2 frames (with ICRC and FCS) and judge each one.

    Ports
    -----
    beat : In(packet_layout(64))
        The beat on the watched stream.
    en : In(1)
        The beat is transferred this cycle.
    fcs_ok, icrc_ok : Out(1)
        Combinational, meaningful in the cycle of the last beat: the FCS (last 4 bytes)
        is correct; the ICRC (the 4 bytes before the FCS, IBTA Annex A17 masking) is
        correct.
    length : Out(16)
        Combinational: bytes of the frame up to and including ``beat``.

    Zero latency, no state but the CRC registers and the byte count; a ``first`` beat
    restarts everything. The ICRC check needs no stripping of the FCS: after a frame and
    its ICRC the CRC register holds the residue, and 4 more bytes ``f`` take it to
    ``T(residue ^ f)`` with ``T`` the linear 32-bit zero step, so the check is
    ``T^-1(reg) ^ f == residue``. Frames shorter than 48 bytes are judged bad.

    ``header="scaleup"``: the ICRC of :mod:`spec.formats.scaleup` (from frame byte 0,
    ``hop_limit`` and BTH byte 4 masked); frames shorter than
    :data:`~spec.formats.scaleup.SCALEUP_CHECK_MIN_BYTES` (23) are judged bad.
    """

    def __init__(self, width=64, header="roce"):
        self.framing = framing_param(self, header)
        check_width(width, self)
        if width != 64:
            reject(self, f"FrameCheck datapath width must be 64 bytes, not {width!r}")
        super().__init__({
            "beat": In(packet_layout(64)), "en": In(1),
            "fcs_ok": Out(1), "icrc_ok": Out(1), "length": Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.fcs = fcs = Crc32Core(64)
        m.submodules.icrc = icrc = Crc32Core(64)
        beat = self.beat
        m.d.comb += [fcs.beat.eq(beat), fcs.en.eq(self.en), self.fcs_ok.eq(fcs.residue_ok)]

        force, value = icrc_overlay(self.framing)
        masked = Signal(HOST_WORD_BITS)
        keep = Const(~force & ((1 << HOST_WORD_BITS) - 1), HOST_WORD_BITS)
        m.d.comb += masked.eq((beat.data & keep) | Const(value, HOST_WORD_BITS))
        m.d.comb += [
            icrc.beat.eq(beat),
            icrc.beat.data.eq(Mux(beat.first, masked, beat.data)),
            icrc.en.eq(self.en),
        ]

        # The last 4 bytes of the frame, which may start in the previous beat.
        tail = Signal(32)
        with m.If(self.en):
            m.d.sync += tail.eq(beat.data[480:])
        window = Signal(544)
        m.d.comb += window.eq(Cat(tail, beat.data))
        fcs_bytes = Signal(32)
        m.d.comb += fcs_bytes.eq((window >> (beat.nbytes * 8)[:10])[:32])
        unstep = gf2.inverse(gf2.matrix_of(lambda s: crc32_step(s, 0, 4), 32, 32))
        reg = Signal(32)
        m.d.comb += reg.eq(~icrc.crc)

        count = Signal(16)
        m.d.comb += self.length.eq(Mux(beat.first, 0, count) + beat.nbytes)
        with m.If(self.en):
            m.d.sync += count.eq(self.length)
        m.d.comb += self.icrc_ok.eq(
            ((_parity(reg, unstep) ^ fcs_bytes) == CRC32_RESIDUE)
            & (self.length >= self.framing.check_min))
        return m
