"""Whole-memory reads through ``$writememh`` files agree with VPI reads (tests/test_harness.py).

On MemCreditTop's memory (its players stay empty, so nothing writes it after the load):
the file of a snapshot gives the same words as VPI, a partial snapshot gives its words
and refuses more, a snapshot must follow a rising edge, and (Icarus, which has four-state
values) a word with X bits is an error naming it, as through VPI.
"""

import random

import cocotb
from cocotb.triggers import FallingEdge, RisingEdge, Timer
from cocotb.types import LogicArray

from tb.harness import Harness, dump_memory, load_memory


def _expect_error(kind, text, call):
    try:
        call()
    except kind as exc:
        assert text in str(exc), f"{kind.__name__} without {text!r}: {exc}"
        return
    raise AssertionError(f"no {kind.__name__} ({text!r})")


@cocotb.test()
async def file_reads_equal_vpi_reads(dut):
    h = Harness(dut)
    mem = dut.memory.mem
    depth = len(mem)
    width = len(mem[0])
    rng = random.Random(11)
    values = [rng.getrandbits(width) for _ in range(depth)]
    values[0], values[-1] = (1 << width) - 1, 1
    load_memory(mem, values)
    await h.reset()
    await RisingEdge(dut.clk)

    await h.snapshot([(mem, None)], read_only=False)
    from_file = dump_memory(mem, depth)
    middle = dump_memory(mem, 5, start=depth // 2)
    await Timer(1, "step")                      # the snapshot is stale: VPI from here
    from_vpi = dump_memory(mem, depth)
    assert from_file == values, "the file's words differ from the loaded ones"
    assert from_vpi == values, "VPI's words differ from the loaded ones"
    assert middle == values[depth // 2:depth // 2 + 5]

    await RisingEdge(dut.clk)
    await h.snapshot([(mem, 7)], read_only=False)
    assert dump_memory(mem, 7) == values[:7]
    _expect_error(RuntimeError, "holds 7 words; 8 asked", lambda: dump_memory(mem, 8))

    await FallingEdge(dut.clk)
    try:
        await h.snapshot([(mem, None)], read_only=False)
    except RuntimeError as exc:
        assert "rising edge" in str(exc)
    else:
        raise AssertionError("a snapshot after a falling edge was taken")

    if "icarus" in cocotb.SIM_NAME.lower():
        await RisingEdge(dut.clk)
        mem[3].value = LogicArray("X" * width)
        await RisingEdge(dut.clk)
        await h.snapshot([(mem, None)], read_only=False)
        _expect_error(ValueError, "[3] holds", lambda: dump_memory(mem, depth))
