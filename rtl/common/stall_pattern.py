"""A seeded, free-running stall pattern (the LFSR of :mod:`spec.lfsr`) for RTL stimulus."""

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from spec.lfsr import LFSR_TAPS

__all__ = ["StallPattern"]


class StallPattern(wiring.Component):
    """Stall or go in every cycle, from a 16-bit LFSR started at ``seed`` on reset.

    Ports
    -----
    seed : In(16)
        Held constant while the design runs; 0 is read as 1 (an LFSR can not hold 0).
    rate : In(8)
        Stall when the low byte of the LFSR state is below ``rate``: a stall probability
        of about ``rate / 256``; 0 never stalls.
    stall : Out(1)
        Combinational. The LFSR is :mod:`spec.lfsr` (``LFSR_TAPS``), stepped once a
        cycle. In cycle ``c`` after reset it is a pure function of ``(seed, rate, c)``,
        so a model reproduces it exactly (:func:`pymodel.stall.stall_pattern`).
    """

    seed: In(16)
    rate: In(8)
    stall: Out(1)

    def elaborate(self, platform):
        m = Module()
        started = Signal()
        reg = Signal(16)
        cur = Signal(16)
        m.d.comb += cur.eq(Mux(started, reg, Mux(self.seed == 0, 1, self.seed)))
        m.d.sync += [
            started.eq(1),
            reg.eq((cur >> 1) ^ Mux(cur[0], LFSR_TAPS, 0)),
        ]
        m.d.comb += self.stall.eq(cur[:8] < self.rate)
        return m
