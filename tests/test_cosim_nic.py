"""The NIC top (4 nodes, switch, links, credits) on Verilator and Icarus, against the model."""

import pytest

from rtl.tops.nic_top import NicTop
from tb.cosim import run_cosim

#: The test top: 16-byte datapath (the L2 header spans two beats), 4 nodes.
TOP = dict(width=16, nodes=4, link_latency=2, mem_words=256, max_payload=512)


def nic_params(framing, **scenario):
    top = NicTop(framing=framing, items=2048, events=2048, **TOP)
    params = dict(TOP, framing=framing, credits=top.credits, **scenario)
    return top, params


@pytest.mark.slow_variants("verilator-*-l2", reason=(
    "Verilator runs the compact NIC top; Icarus runs both framings"))
@pytest.mark.slow_variants("icarus-*-compact", reason=(
    "Verilator runs every scenario with compact framing, Icarus with L2 framing"))
@pytest.mark.slow_variants("icarus-edges-0-l2", "icarus-all_to_all-0-l2", reason=(
    "Icarus runs the same traffic on the same L2 top under 80 % stalls (edges-80, "
    "all_to_all-80), Verilator without stalls on the compact top"))
@pytest.mark.parametrize("framing", ["compact", "l2"])
@pytest.mark.parametrize("scenario,stall_rate", [("pair", 0), ("edges", 0), ("edges", 80),
                                                 ("all_to_all", 0),
                                                 ("all_to_all", 80), ("remap", 0),
                                                 ("hotspot", 0),
                                                 ("bad", 40), ("windows", 0),
                                                 ("spoof", 0)])
def test_nic_scenarios(sim, framing, scenario, stall_rate, test_id):
    """Frames byte for byte and cycle for cycle, every memory write and its cycle, every
    credit return, drop counters and final memories equal the model's. ``windows`` also
    writes per-source receive windows (played from cycle 0, one write racing the
    frames) and checks, independently of the model, that each memory holds exactly the
    authorised stores. ``spoof`` has a node forge another's source id: the switch drops
    and counts exactly its frames, and every memory holds exactly the legitimate stores
    (checked independently of the model too)."""
    top, params = nic_params(framing, scenario=scenario, seed=11, count=6,
                             stall_rate=stall_rate, messages=12, msg_bytes=128)
    run_cosim(top, name=f"nic_top_{framing}", test_module="tb.nic.cocotb_nic", sim=sim,
              test_id=test_id, params=params)
