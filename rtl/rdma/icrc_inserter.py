"""Append the RoCEv2 invariant CRC (ICRC) to each frame of a stream."""

from amaranth import Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.common.crc32 import CRC32_INIT, CRC32_POLY_REFLECTED, crc32_step
from rtl.common.fcs_inserter import FcsInserter
from rtl.rdma.eth_ip_udp import framing_param
from spec.checks import reject
from spec.formats.packet import check_width, packet_signature

__all__ = ["IcrcInserter", "icrc_lead_in", "icrc_overlay"]


def _unshift(reg, bits):
    """Undo ``bits`` zero-bit steps of the reflected CRC register."""
    for _ in range(bits):
        if reg & 0x80000000:                 # the step XORed the polynomial in
            reg = (((reg ^ CRC32_POLY_REFLECTED) << 1) | 1) & 0xFFFFFFFF
        else:
            reg = (reg << 1) & 0xFFFFFFFF
    return reg


def icrc_lead_in():
    """Six bytes that bring the CRC register from its initial value back to it.

    The ICRC starts with 8 bytes of 0xFF in front of the IP header, but the frame has 14
    bytes (the Ethernet header) there. Replacing bytes 0..5 with this lead-in and bytes
    6..13 with 0xFF makes a plain CRC-32 over the whole masked frame equal the ICRC.
    Two zero bytes, then four bytes ``Y`` with ``step(R2 ^ Y, 0, 4) == INIT``.
    """
    r2 = crc32_step(CRC32_INIT, 0, 2)
    y = r2 ^ _unshift(CRC32_INIT, 32)
    lead = y << 16
    assert crc32_step(CRC32_INIT, lead, 6) == CRC32_INIT
    return lead


def icrc_overlay(fr):
    """``(force, value)``: the bits of a frame's first beat that the ICRC sees as
    constants, and those constants, for a :class:`spec.formats.scaleup.Framing`: the
    lead-in and 8 bytes of 0xFF over the Ethernet header (RoCEv2 only), 0xFF over the
    masked bytes."""
    force = value = 0
    if fr.lead_in:
        force = (1 << 8 * 14) - 1
        value = icrc_lead_in() | (((1 << 64) - 1) << 48)
    for k in fr.icrc_masked:
        force |= 0xFF << (8 * k)
        value |= 0xFF << (8 * k)
    return force, value


class IcrcInserter(wiring.Component):
    """Pass RoCEv2 frames through and append their ICRC (4 bytes, LSB first).

    Ports
    -----
    i : In(packet_signature(width))
        Frames from the Ethernet destination address to the end of the padded payload
        (no ICRC, no FCS), at least 48 bytes long.
    o : Out(packet_signature(width))
        The same frames followed by the ICRC.

    Timing
    ------
    Zero latency, as :class:`~rtl.common.fcs_inserter.FcsInserter` (which it wraps): one
    extra output beat, with ``i.ready`` low, when the last input beat holds more than
    ``width - 4`` bytes.

    The CRC runs over a masked copy of the frame (Ethernet header replaced by the lead-in
    of :func:`icrc_lead_in` and 8 bytes of 0xFF; TOS, TTL, IP and UDP checksums and BTH
    byte 4 set to 0xFF; Ref: IBTA Annex A17); the unmasked bytes are sent. Only the
    64-byte datapath is supported, where all masked bytes sit in the first beat.

    ``header="scaleup"``: the CRC runs from frame byte 0 with ``hop_limit`` and BTH byte
    4 set to 0xFF (:mod:`spec.formats.scaleup`); frames of at least 26 bytes.
    """

    def __init__(self, width=64, header="roce"):
        self.framing = framing_param(self, header)
        self.width = check_width(width, self)
        if width != 64:
            reject(self, f"IcrcInserter datapath width must be 64 bytes, not {width!r}")
        super().__init__({"i": In(packet_signature(width)), "o": Out(packet_signature(width))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.crc = ins = FcsInserter(self.width)
        w8 = 8 * self.width
        force, value = icrc_overlay(self.framing)
        keep = Const(~force & ((1 << w8) - 1), w8)
        masked = Signal(w8)
        m.d.comb += masked.eq((self.i.payload.data & keep) | Const(value, w8))
        m.d.comb += [
            ins.i.valid.eq(self.i.valid),
            self.i.ready.eq(ins.i.ready),
            ins.i.payload.eq(self.i.payload),
            ins.i.payload.data.eq(Mux(self.i.payload.first, masked, self.i.payload.data)),
            self.o.valid.eq(ins.o.valid),
            ins.o.ready.eq(self.o.ready),
            self.o.payload.eq(ins.o.payload),
        ]
        # Restore the real bytes of the first beat (the inserter passes it through, the
        # ICRC lands above byte 48 only).
        unmasked = Signal(w8)
        m.d.comb += unmasked.eq((ins.o.payload.data & keep)
                                | (self.i.payload.data & Const(force, w8)))
        with m.If(ins.o.payload.first):
            m.d.comb += self.o.payload.data.eq(unmasked)
        return m
