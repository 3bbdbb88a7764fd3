"""The faulty link on Verilator and Icarus, against the golden model."""

import pytest

from pymodel.fabric.faulty_link import FaultSettings, rate_per_65535
from rtl.tops.faulty_link_top import FaultyLinkTop
from tb.cosim import run_cosim

RATE = rate_per_65535(0.05)

#: Beats of the player and the recorder (300 frames of up to 300 bytes, plus copies).
DEPTH = {8: 8192, 64: 2048}


@pytest.mark.slow_variants("verilator-8", reason=(
    "Verilator builds the 64-bit faulty link; Icarus runs both widths"))
@pytest.mark.slow_variants("verilator-64", reason=(
    "the faulty link runs on Verilator inside the L2 retry top; Icarus runs it alone"))
@pytest.mark.parametrize("width", [8, 64])
def test_faulty_link_at_five_percent(sim, width, test_id):
    """300 frames of 1..300 bytes (FCS included) with about 50% source gaps; drop,
    corruption and duplication each at about 5% with bursts of 2.

    The cocotb module compares every output beat and its cycle, every input cycle, the
    counters and the flags with the model, checks that only flipped frames fail their FCS
    and that a flipped model bit is caught.
    """
    sizes = dict(width=width, latency=3, max_frame_beats=-(-300 // width) + 2, fifo_depth=64)
    settings = FaultSettings(seed=0x5A17 + width, drop_rate=RATE, corrupt_rate=RATE,
                             dup_rate=RATE, drop_burst=2, corrupt_burst=2, dup_burst=2)
    run_cosim(FaultyLinkTop(**sizes, depth=DEPTH[width]), name=f"faulty_link_top_w{width}",
              test_module="tb.cocotb_faulty_link", sim=sim, test_id=test_id,
              params=dict(sizes, seed=41 + width, frames=300, src_stall_seed=0xACE1,
                          src_stall_rate=128, settings=settings.ports()))
