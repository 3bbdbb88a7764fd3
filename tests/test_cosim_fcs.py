"""FCS inserter and checker on Verilator and Icarus, against the golden model."""

import pytest

from rtl.tops.fcs_top import FcsTop
from tb.cosim import run_cosim

# Beats needed for lengths 1..300 and four long frames, plus margin, per width.
DEPTH = {8: 8192, 32: 4096, 64: 2048}


@pytest.mark.slow_variants("verilator-8", "verilator-32", reason=(
    "Icarus runs every width (make test-all: every width on Verilator too)"))
@pytest.mark.slow_variants("verilator-64", reason=(
    "Icarus runs every length at W = 8, 32 and 64 on the same tops; the 64-bit FCS blocks run "
    "on Verilator inside every NIC top"))
@pytest.mark.parametrize("width", [8, 32, 64])
def test_fcs_every_length_with_and_without_stalls(sim, width, test_id):
    """Every length 1..300 and random longer frames, both chains, 0 and 25% stalls.

    The cocotb module compares every output beat, the cycle of every transfer and the
    checker's counters with the model, checks each FCS against zlib, and checks that a
    flipped model bit is caught.
    """
    run_cosim(FcsTop(width, depth=DEPTH[width]), name=f"fcs_top_w{width}",
              test_module="tb.cocotb_fcs", sim=sim, test_id=test_id,
              params={"width": width, "seed": 1000 + width, "max_len": 300,
                      "long_frames": 4})
