"""The NIC top with end-to-end completion on Verilator and Icarus, against the model."""

import pytest

from rtl.tops.nic_top import NicTop
from tb.cosim import run_cosim

#: The test top: 16-byte datapath (the L2 header spans two beats), 4 nodes; a completion
#: timeout of 1024 cycles (well above a quiet run's gaps between completions, short
#: enough to see it fire in a few thousand cycles).
TOP = dict(width=16, nodes=4, link_latency=2, mem_words=256, max_payload=512)
TIMEOUT = 1024


def e2e_params(framing, **scenario):
    top = NicTop(framing=framing, items=1024, events=1024, completion="e2e",
                 timeout=TIMEOUT, **TOP)
    params = dict(TOP, framing=framing, credits=top.credits, coalesce=top.coalesce,
                  flush_idle=top.flush_idle, timeout=TIMEOUT, seed=11, **scenario)
    return top, params


@pytest.mark.parametrize("framing", ["compact", "l2"])
@pytest.mark.parametrize("scenario,extra", [("pair", 0), ("all_to_all", 0), ("windows", 0),
                                            ("dropped", 0), ("lost_first", 0),
                                            ("lost_last", 2000), ("forge", 0)])
def test_nic_e2e(sim, framing, scenario, extra, test_id):
    """Frames (completions included), writes, credits, counters, memories, every
    completion at each sender and its tracker's ports equal the model's, cycle for
    cycle; independently of the model: every frame completes with nothing outstanding
    (scenarios without a loss or forgery), a store dropped at the window is reported to
    its sender (``dropped``, ``windows``), a lost completion is recovered by the next
    cumulative one (``lost_first``) or reported by the timeout (``lost_last``), and a
    forged completion is dropped and counted (``forge``)."""
    top, params = e2e_params(framing, scenario=scenario, extra_cycles=extra)
    run_cosim(top, name=f"nic_top_e2e_{framing}", test_module="tb.nic.cocotb_nic_e2e",
              sim=sim, test_id=test_id, params=params)
