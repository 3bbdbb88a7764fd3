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


@pytest.mark.slow_variants("verilator-*-l2", reason=(
    "Verilator runs the compact e2e top; Icarus runs both framings"))
@pytest.mark.slow_variants("icarus-*-compact", reason=(
    "Verilator runs every e2e scenario with compact framing, Icarus with L2 framing (and the "
    "compact e2e headline point)"))
@pytest.mark.slow_variants("icarus-all_to_all-0-0-l2", reason=(
    "Icarus runs the same traffic on the same L2 e2e top under 80 % stalls, Verilator "
    "without stalls on the compact top"))
@pytest.mark.parametrize("framing", ["compact", "l2"])
@pytest.mark.parametrize("scenario,extra,stall", [
    ("pair", 0, 0), ("all_to_all", 0, 0), ("all_to_all", 0, 80), ("windows", 0, 0),
    ("dropped", 0, 0), ("lost_first", 0, 0), ("lost_last", 2000, 0), ("forge", 0, 0),
    ("ack_req", 0, 0), ("ack_req_stream", 0, 0)])
def test_nic_e2e(sim, framing, scenario, extra, stall, test_id):
    """Frames (completions included), writes, credits, counters, memories, every
    completion at each sender and its tracker's ports equal the model's, cycle for
    cycle; independently of the model: every frame completes with nothing outstanding
    (scenarios without a loss or forgery), a store dropped at the window is reported to
    its sender (``dropped``, ``windows``), a lost completion is recovered by the next
    cumulative one (``lost_first``) or reported by the timeout (``lost_last``), and a
    forged completion is dropped and counted (``forge``), a store with ``ack_req``
    completes ``flush_idle`` cycles sooner than without (``ack_req``), a stream still
    coalesces 1 per 16 with its flagged tail at once and forged flags are counted
    (``ack_req_stream``). ``all_to_all`` also with the command players stalling (rate 80
    of 256)."""
    top, params = e2e_params(framing, scenario=scenario, extra_cycles=extra,
                             stall_rate=stall)
    run_cosim(top, name=f"nic_top_e2e_{framing}", test_module="tb.nic.cocotb_nic_e2e",
              sim=sim, test_id=test_id, params=params)


#: The credit-against-e2e measurement: the ``make sim`` headline top and scenario (node 0
#: stores 1000 x 128 B to node 1; :data:`spec.nic.HEADLINE_TOP`).
MESSAGES, MSG_BYTES = 1000, 128
#: Stores of the headline points on Icarus, which simulates the busy top about 100x slower
#: than Verilator (docs/bench.md): a quarter of the headline's, still 15 full groups of
#: completions and a flush.
ICARUS_MESSAGES = 250


@pytest.mark.slow(reason=(
    "make sim co-simulates both headline NIC points with credit and with e2e completion "
    "(Verilator, RTL = model, 1000 stores); make test runs the e2e scenarios on the e2e "
    "tops of both framings (test_nic_e2e) and the headline top (test_cosim_nic.py); each "
    "point here is a top of its own (an export of 25 to 40 s)"))
@pytest.mark.parametrize("framing", ["compact", "l2"])
@pytest.mark.parametrize("completion", ["credit", "e2e"])
def test_nic_e2e_headline(sim, framing, completion, test_id):
    """The headline pair with ``credit`` and with ``e2e`` completion: RTL = model, and
    the figures follow from the spec: 1000 frames coalesced 1 in 16 are 62 completions
    and a flush (63, the receiver's only frames), each ``8 + completion_bytes + 4 + 12``
    wire bytes; the store stream is untouched (latency 11, one store every 3 cycles,
    3 credits per store); an e2e completion comes after the remote write. Writes the
    row to ``nic_results.json`` in the run folder (docs/nic.md quotes it)."""
    import json
    import pathlib

    from pymodel.fcs import phy_bytes
    from pymodel.nic.frames import build_frame
    from spec.formats.nic import completion_bytes
    from spec.nic import COMPLETION_DEFAULTS, HEADLINE_TOP
    from tb.nic.headline import point_top

    # The headline point's own top (tb.nic.headline.run_point's build, shared with make
    # sim and the e2e combinations of tests/test_cosim_nic_e2e_combos.py).
    top, name, top_kw = point_top(framing, MSG_BYTES, MESSAGES, completion=completion)
    assert top_kw == HEADLINE_TOP
    messages = MESSAGES if sim == "verilator" else ICARUS_MESSAGES
    params = dict(top_kw, framing=framing, credits=top.credits, scenario="pair", seed=1,
                  messages=messages, msg_bytes=MSG_BYTES, peers=1, completion=completion)
    if completion == "e2e":
        params.update(coalesce=top.coalesce, flush_idle=top.flush_idle, timeout=top.timeout)
    run_dir = run_cosim(top, name=name, test_module="tb.nic.cocotb_nic", sim=sim,
                        test_id=test_id, params=params)
    res = json.loads((pathlib.Path(run_dir) / "nic_results.json").read_text())
    assert res["mismatches"] == 0
    rtl, model = res["rtl"], res["model"]
    assert rtl == model
    store_wire = phy_bytes(build_frame(framing, 0, 1, 0, MSG_BYTES, bytes(MSG_BYTES)))
    assert (rtl["latency_cycles"], rtl["ii_cycles"]) == (11, 3)
    assert rtl["ctrl_ops"]["credit_updates"] == 3
    if completion == "credit":
        assert rtl["wire_bytes"] == store_wire
        assert rtl["ctrl_ops"]["acks_sent"] == 0
        return
    n_cpl = messages // COMPLETION_DEFAULTS["coalesce"] + 1
    cpl_wire = 8 + completion_bytes(framing) + 4 + 12
    assert rtl["ctrl_ops"]["acks_sent"] == rtl["ctrl_ops"]["acks_received"] == n_cpl / messages
    assert rtl["wire_bytes"] == pytest.approx(store_wire + n_cpl * cpl_wire / messages)
    assert rtl["completion_cycles"] > rtl["latency_cycles"]
