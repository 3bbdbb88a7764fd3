"""A cocotb module whose only test fails: the harness must report it (tests/test_harness.py)."""

import cocotb
from cocotb.triggers import Timer


@cocotb.test()
async def deliberately_failing(dut):
    await Timer(1, "ns")
    assert int(dut.now.value) == 12345, "this failure is what the harness test expects"
