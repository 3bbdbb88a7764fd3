"""A point-to-point link: a fixed-latency delay line of packet beats."""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from spec.checks import check_int
from spec.formats.packet import check_width, packet_layout, packet_signature

__all__ = ["Link"]


class Link(wiring.Component):
    """Carry beats from ``i`` to ``o`` exactly ``latency`` cycles later.

    Parameters
    ----------
    width : int
        Datapath width in bytes.
    latency : int
        Cycles from a beat accepted on ``i`` to the same beat valid on ``o`` (1 to 1024).

    Ports
    -----
    i : In(packet_signature(width))
        Always ready: a wire can not push back. Flow control (credits) is the business
        of the endpoints, never of the link.
    o : Out(packet_signature(width))
        ``valid`` for one cycle per beat; ``o.ready`` is ignored (the receiver must take
        the beat or count it as dropped).
    beats : Out(32)
        Beats carried since reset.
    """

    def __init__(self, width, latency):
        self.width = check_width(width, self)
        self.latency = check_int(self, "link latency (cycles)", latency, 1, 1024)
        super().__init__({
            "i": In(packet_signature(width)),
            "o": Out(packet_signature(width)),
            "beats": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.i.ready.eq(1)
        valid, payload = self.i.valid, self.i.payload
        for k in range(self.latency):
            v = Signal(name=f"stage{k}_valid")
            p = Signal(packet_layout(self.width), name=f"stage{k}_payload")
            m.d.sync += [v.eq(valid), p.eq(payload)]
            valid, payload = v, p
        m.d.comb += [self.o.valid.eq(valid), self.o.payload.eq(payload)]
        with m.If(self.i.valid):
            m.d.sync += self.beats.eq(self.beats + 1)
        return m
