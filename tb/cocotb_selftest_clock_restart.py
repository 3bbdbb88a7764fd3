"""Self-test of :meth:`tb.harness.Harness.reset`: a clock started by a later test stays on
the grid of the first, and the design sees a whole reset.

Each cocotb test builds its own :class:`tb.harness.Harness`, as the pyuvm tests do;
cocotb stops a test's clock when the test ends. The first test ends half a cycle and a
step after a rising edge (the clock low); the second resets again and requires every
rising edge on a multiple of ``CLOCK_NS`` and the top's cycle counter ``now`` as after
the first reset: 0 when ``reset`` returns (the edge after which ``rst`` falls), 0 in
cycle 0, 1 in cycle 1.
"""

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge, Timer
from cocotb.utils import get_sim_steps, get_sim_time

from tb.harness import CLOCK_NS, Harness

_AFTER_RESET = [(0, True), (0, True), (1, True)]


async def _cycles_after_reset(dut):
    """``(now, edge time is on the grid)`` when reset returns and at the next two rising
    edges."""
    await Harness(dut).reset()
    period = get_sim_steps(CLOCK_NS, "ns")
    seen = []
    for _ in range(3):
        await ReadOnly()
        seen.append((int(dut.now.value), get_sim_time("step") % period == 0))
        await RisingEdge(dut.clk)
    return seen


@cocotb.test()
async def first_test_ends_off_the_grid(dut):
    seen = await _cycles_after_reset(dut)
    assert seen == _AFTER_RESET, seen
    await ClockCycles(dut.clk, 5)
    await FallingEdge(dut.clk)
    await Timer(1, "step")
    assert not int(dut.clk.value)


@cocotb.test()
async def second_test_resets_on_the_grid(dut):
    seen = await _cycles_after_reset(dut)
    assert seen == _AFTER_RESET, seen
