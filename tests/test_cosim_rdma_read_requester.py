"""The requester's READ and atomic blocks (ReadRequesterTop) on Verilator and Icarus,
against their twins and IBTA's rules (tb/rdma/cocotb_read_requester.py)."""

import pytest

from rtl.tops.read_requester_top import ReadRequesterTop
from tb.cosim import run_cosim


@pytest.mark.slow(reason="a top of its own (an export of 25-40 s per simulator); the "
                         "blocks run in the Amaranth simulator in make test "
                         "(tests/test_unit_req_read.py, tests/test_unit_req_read_loop.py)")
def test_read_requester_blocks_cosim(sim, test_id):
    run_cosim(ReadRequesterTop(items=1024), name="read_requester_top",
              test_module="tb.rdma.cocotb_read_requester", sim=sim, test_id=test_id,
              params={"seed": 3, "timeout": 40})
