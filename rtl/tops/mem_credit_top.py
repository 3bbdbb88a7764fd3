"""Co-simulation top of the memory model and the credit counter, driven by players."""

from amaranth import Mux
from amaranth.lib import data
from amaranth.lib.wiring import Out

from rtl.common.credit_counter import CreditCounter
from rtl.common.latency_memory import LatencyMemory
from rtl.sim.harness_top import HarnessTop

__all__ = ["MemCreditTop", "mem_op_layout", "credit_op_layout", "credit_obs_layout"]


def mem_op_layout(width, depth):
    """One memory operation per cycle: an optional read and an optional write."""
    return data.StructLayout({
        "rd": 1, "rd_addr": range(depth),
        "wr": 1, "wr_addr": range(depth), "wr_data": 8 * width, "wr_be": width,
    })


def credit_op_layout(max_credits):
    return data.StructLayout({"take": 1, "give": range(max_credits + 1)})


def credit_obs_layout(max_credits):
    """What the counter shows in the cycle an operation is applied."""
    return data.StructLayout({"credits": range(max_credits + 1), "available": 1,
                              "underflow": 1, "overflow": 1})


class MemCreditTop(HarnessTop):
    """``mem_ops -> LatencyMemory -> rd_data`` and ``credit_ops -> CreditCounter -> credit_obs``.

    The memory has no backpressure, so the ``rd_data`` recorder must run without stalls.
    Extra ports: ``underflow``, ``overflow`` of the counter.
    """

    def __init__(self, width=16, depth=64, latency=4, max_credits=8, items=1024):
        self.width, self.depth, self.latency, self.max_credits = width, depth, latency, max_credits
        self.memory = LatencyMemory(width, depth, latency)
        self.counter = CreditCounter(max_credits)
        super().__init__(
            players={"mem_ops": (mem_op_layout(width, depth), items),
                     "credit_ops": (credit_op_layout(max_credits), items)},
            recorders={"rd_data": (8 * width, items),
                       "credit_obs": (credit_obs_layout(max_credits), items)},
            ports={"underflow": Out(1), "overflow": Out(1)})

    def elaborate_design(self, m, players, recorders):
        m.submodules.memory = mem = self.memory
        m.submodules.counter = cnt = self.counter
        ops, cops = players["mem_ops"].o, players["credit_ops"].o
        m.d.comb += [
            ops.ready.eq(1),
            mem.rd_addr.valid.eq(ops.valid & ops.payload.rd),
            mem.rd_addr.payload.eq(ops.payload.rd_addr),
            mem.wr.valid.eq(ops.valid & ops.payload.wr),
            mem.wr.payload.addr.eq(ops.payload.wr_addr),
            mem.wr.payload.data.eq(ops.payload.wr_data),
            mem.wr.payload.be.eq(ops.payload.wr_be),
            recorders["rd_data"].i.valid.eq(mem.rd_data.valid),
            recorders["rd_data"].i.payload.eq(mem.rd_data.payload),
            cops.ready.eq(1),
            cnt.take.eq(cops.valid & cops.payload.take),
            cnt.give.eq(Mux(cops.valid, cops.payload.give, 0)),
            recorders["credit_obs"].i.valid.eq(cops.valid),
            recorders["credit_obs"].i.payload.credits.eq(cnt.credits),
            recorders["credit_obs"].i.payload.available.eq(cnt.available),
            recorders["credit_obs"].i.payload.underflow.eq(cnt.underflow),
            recorders["credit_obs"].i.payload.overflow.eq(cnt.overflow),
            self.underflow.eq(cnt.underflow),
            self.overflow.eq(cnt.overflow),
        ]
