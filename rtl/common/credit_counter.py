"""Link-level flow-control credits: one counter per link, never per peer."""

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from spec.checks import check_int

__all__ = ["CreditCounter"]


class CreditCounter(wiring.Component):
    """The sender's count of free receive-buffer slots on one link.

    Parameters
    ----------
    max_credits : int
        The receiver's buffer size in slots (1 to 65535); the count starts full.

    Ports
    -----
    take : In(1)
        The sender uses one credit this cycle. Legal only while ``available``.
    give : In(range(max_credits + 1))
        Credits returned by the receiver this cycle (0 when none).
    credits : Out(range(max_credits + 1))
        The count, updated at each clock edge to ``credits - take + give``.
    available : Out(1)
        ``credits > 0``, combinational from the count (a credit returned this cycle is
        usable next cycle).
    underflow, overflow : Out(1)
        Sticky error flags. A ``take`` with no credit is ignored and sets ``underflow``;
        a count that would exceed ``max_credits`` saturates and sets ``overflow``.
        Neither happens while both ends follow the protocol; tests assert they stay low.
    """

    def __init__(self, max_credits):
        check_int(self, "max_credits", max_credits, 1, 65535)
        self.max_credits = max_credits
        super().__init__({
            "take": In(1),
            "give": In(range(max_credits + 1)),
            "credits": Out(range(max_credits + 1), init=max_credits),
            "available": Out(1),
            "underflow": Out(1),
            "overflow": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cap = self.max_credits
        taken = Signal()
        total = Signal(range(2 * cap + 1))
        m.d.comb += [
            self.available.eq(self.credits != 0),
            taken.eq(self.take & self.available),
            total.eq(self.credits + self.give - taken),
        ]
        m.d.sync += self.credits.eq(Mux(total > cap, cap, total))
        with m.If(self.take & ~self.available):
            m.d.sync += self.underflow.eq(1)
        with m.If(total > cap):
            m.d.sync += self.overflow.eq(1)
        return m
