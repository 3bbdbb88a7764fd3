"""Memory model and credit counter on Verilator and Icarus, against the golden model."""

import pytest

from rtl.tops.mem_credit_top import MemCreditTop
from tb.cosim import run_cosim


@pytest.mark.slow_variants("verilator-*", reason=(
    "memory and credit counter run on Verilator inside the NIC tops; Icarus alone"))
@pytest.mark.parametrize("stall_rate", [0, 96])
def test_memory_and_credit_counter(sim, stall_rate, test_id):
    """Random reads/writes (with same-word read-during-write) and credit take/give that
    underflows and overflows: read data, its cycle, final memory and every counter
    observation match the model."""
    params = dict(width=16, depth=64, latency=4, max_credits=8)
    run_cosim(MemCreditTop(**params, items=1024), name="mem_credit_top",
              test_module="tb.cocotb_mem_credit", sim=sim, test_id=test_id,
              params=dict(params, seed=3 + stall_rate, ops=800, stall_rate=stall_rate))
