"""Corrupt chosen beats of a link, for bad-frame tests."""

from amaranth import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from spec.formats.packet import check_width, packet_signature

__all__ = ["FaultInjector"]


class FaultInjector(wiring.Component):
    """Pass beats through; flip byte lane 0 of the beats that ``faults`` names.

    Ports
    -----
    i : In(packet_signature(width))
        Beats from a link (``ready`` is always 1).
    o : Out(packet_signature(width))
        The same beats, zero latency; beat number ``n`` (counted from 0 since reset) has
        lane 0 inverted when ``faults`` offers ``n``.
    faults : In(stream.Signature(32))
        Increasing beat numbers to corrupt; one is consumed per corrupted beat.
    """

    def __init__(self, width):
        self.width = check_width(width, self)
        super().__init__({
            "i": In(packet_signature(width)),
            "o": Out(packet_signature(width)),
            "faults": In(stream.Signature(32)),
        })

    def elaborate(self, platform):
        m = Module()
        count = Signal(32)
        hit = Signal()
        m.d.comb += [
            self.i.ready.eq(1),
            self.o.valid.eq(self.i.valid),
            hit.eq(self.i.valid & self.faults.valid & (self.faults.payload == count)),
            self.o.payload.eq(self.i.payload.as_value() ^ Mux(hit, 0xFF, 0)),
            self.faults.ready.eq(hit),
        ]
        with m.If(self.i.valid):
            m.d.sync += count.eq(count + 1)
        return m
