"""The credit return path of a link: one credit pulse a cycle, delayed like the link."""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.fabric.link import CHAIN_MAX, MAX_DELAY, DelayLine
from spec.checks import check_int

__all__ = ["CreditReturn"]


class CreditReturn(wiring.Component):
    """Carry ``i`` (one returned credit) to ``o`` exactly ``latency`` cycles later.

    Credits travel in the reverse direction of the link as a sideband (on a real PHY:
    in idle/control code groups between frames, so they cost no frame bytes).

    Ports
    -----
    i : In(1)
        The receiver freed one buffer beat this cycle.
    o : Out(1)
        The same pulse ``latency`` cycles later (1 to 4096), for the sender's counter.
        A :class:`rtl.fabric.link.DelayLine`: registers when short, a memory when long.
    """

    def __init__(self, latency):
        self.latency = check_int(self, "credit return latency (cycles)", latency, 1, MAX_DELAY)
        super().__init__({"i": In(1), "o": Out(1)})

    def elaborate(self, platform):
        m = Module()
        if self.latency > CHAIN_MAX:
            m.submodules.delay = d = DelayLine(1, self.latency)
            m.d.comb += [d.i.eq(self.i), self.o.eq(d.o)]
            return m
        # Short: the register chain written out here (the netlist, and so the area
        # figures of the NIC node, of a plain chain).
        stage = self.i
        for k in range(self.latency):
            nxt = Signal(name=f"stage{k}")
            m.d.sync += nxt.eq(stage)
            stage = nxt
        m.d.comb += self.o.eq(stage)
        return m
