"""The NIC top under open-loop load (timed command players) on Verilator and Icarus,
against the model, with a model-free oracle (each store landed once, where it was sent).
The model alone: tests/test_load_nic.py."""

import json
from pathlib import Path

import pytest

from rtl.tops.nic_top import NicTop
from tb.cosim import run_cosim

#: The load top: a 16-byte datapath (the L2 header spans two beats, so a store's release
#: holds a header beat before its first command beat is taken), 1024 words per memory
#: (a 128-byte slot per store of each sender at 8 nodes), players and recorders sized
#: for 32 stores of 128 B per sender (incast 7 -> 1 writes 7 x 32 x 8 words at node 0).
TOP = dict(width=16, link_latency=2, mem_words=1024, max_payload=512)
ITEMS, EVENTS = 256, 2048

#: The 4-node top of tests/test_cosim_nic.py (its build is shared; 256 words per memory:
#: a sender's stores to one destination wrap around its 1 KiB region, in order).
#: It must stay equal to that file's TOP (without ``nodes``), or the build is not shared.
SHARED_TOP = dict(width=16, link_latency=2, mem_words=256, max_payload=512)

#: Messages per sender: Icarus runs NicTop at a few hundred cycles a second.
MESSAGES = {"verilator": 32, "icarus": 16}


@pytest.mark.slow_variants("*-incast-8-*", reason=(
    "incast 3->1 runs on both simulators (the 8-node top is one more build each)"))
@pytest.mark.slow_variants("icarus-*", reason=(
    "Verilator runs every pattern on the headline top; Icarus runs the same top and checks "
    "in test_cosim_nic.py (a load run is about 10 s on Icarus)"))
@pytest.mark.parametrize("pattern,nodes,load,burst", [("incast", 4, 0.5, 1),
                                                      ("incast", 8, 0.3, 1),
                                                      ("all_to_all", 4, 0.8, 1),
                                                      ("permutation", 4, 0.9, 1),
                                                      ("all_to_all", 4, 0.6, 4)])
def test_nic_load(sim, pattern, nodes, load, burst, test_id):
    """Open-loop arrivals: every wire beat, accept, memory write, credit and their
    cycles, counters and memories, the per-message accept, remote write and completion
    cycles and the load row (latency from arrival) equal the model's; each store landed
    once, where it was sent; stores queued (some accepted after their arrival). With
    ``burst`` 4, four stores of a sender arrive in the same cycle."""
    if nodes == 4:
        # The 4-node top of tests/test_cosim_nic.py, shared build: Verilator runs it with
        # the compact framing, Icarus with L2 (as there).
        framing = "compact" if sim == "verilator" else "l2"
        top_params = SHARED_TOP
        top = NicTop(framing=framing, items=2048, events=2048, **top_params)
        name = f"nic_top_{framing}"
    else:
        framing, top_params = "l2", TOP
        top = NicTop(framing=framing, nodes=nodes, items=ITEMS, events=EVENTS, **TOP)
        name = f"nic_load_n{nodes}"
    params = dict(top_params, pattern=pattern, nodes=nodes, msg_bytes=128,
                  messages=MESSAGES[sim], load=load, seed=7, burst=burst, framing=framing)
    run_dir = run_cosim(top, name=name, test_module="tb.nic.cocotb_load",
                        sim=sim, test_id=test_id, params=params)
    res = json.loads((Path(run_dir) / "load_results.json").read_text())
    assert res["mismatches"] == 0 and res["checked"] > 0
    assert res["rtl"] == res["model"]
    senders = nodes - 1 if pattern == "incast" else nodes
    assert res["rtl"]["messages"] == MESSAGES[sim] * senders
    assert res["rtl"]["queue_max_cycles"] > 0, "no store waited: raise the load"


#: The pcie attachment's top: host words are 64 bytes.
PCIE_TOP = dict(width=64, link_latency=2, mem_words=512, max_payload=1024,
                attachment="pcie")


@pytest.mark.slow_variants("icarus", reason=(
    "the pcie attachment's releases are model-tested (tests/test_load_nic.py); make test-all "
    "co-simulates it on both simulators"))
@pytest.mark.slow_variants("verilator", reason=(
    "Icarus runs the pcie load case (the Verilator build takes about 100 s); Verilator runs "
    "the integrated load cases"))
def test_nic_load_pcie(sim, test_id):
    """Behind the pcie attachment the players are the hosts: a release delays a host's
    posted write as it delays a command, and incast 3 -> 1 under load equals the model
    (the host interfaces' counters too) with the same model-free oracle."""
    top = NicTop(framing="l2", nodes=4, items=ITEMS, events=EVENTS, **PCIE_TOP)
    params = dict(PCIE_TOP, pattern="incast", nodes=4, msg_bytes=128,
                  messages=MESSAGES[sim], load=0.6, seed=7, burst=1, framing="l2")
    run_dir = run_cosim(top, name="nic_load_n4_pcie", test_module="tb.nic.cocotb_load",
                        sim=sim, test_id=test_id, params=params)
    res = json.loads((Path(run_dir) / "load_results.json").read_text())
    assert res["mismatches"] == 0 and res["checked"] > 0
    assert res["rtl"] == res["model"]
    assert res["rtl"]["messages"] == 3 * MESSAGES[sim]
    assert res["rtl"]["queue_max_cycles"] > 0, "no store waited: raise the load"
