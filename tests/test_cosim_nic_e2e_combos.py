"""End-to-end completion beside the other NIC options: behind the ``pcie`` host
interface, over reliable links (link-level retry), and both at ``pod`` distance, as
:func:`tb.nic.headline.run_point` measures them (the gap table's rows). RTL = model on
every frame (completions included), write, credit, stamp and completion; the figures
checked from the spec where they follow from it."""

import pytest

from pymodel.fcs import phy_bytes
from pymodel.nic.frames import build_frame
from spec.fabric_profiles import fabric_profile, one_way
from spec.formats.nic import completion_bytes, frame_beats
from spec.metrics import row_metrics
from spec.nic import COMPLETION_DEFAULTS, HEADLINE_TOP
from tb.nic.headline import HEADLINE_DEPTH, run_point

pytestmark = pytest.mark.slow_variants("verilator-*", reason=(
    "Icarus runs every case (each combination of e2e with pcie, retry or pod is one more "
    "Verilator build, six in all); Verilator runs the e2e top at board (test_cosim_nic_e2e.py) "
    "and the pcie and retry tops with credit completion, and NicTx's completion merge under "
    "link backpressure is unit-tested against its twin in the Amaranth simulator "
    "(test_unit_nic_e2e.py)"))

#: Stores of 128 B from node 0 to node 1: enough for a steady window past the first
#: credit round trip at ``pod`` (as tests/test_cosim_nic_retry_pod.py). The points run on
#: the headline's players and recorders (``HEADLINE_DEPTH``, a capacity), so that each
#: shares its build with the gap table's row of ``make sim`` and the integrated one with
#: tests/test_cosim_nic_e2e.py's e2e headline point.
STORES, MSG_BYTES = 250, 128


@pytest.mark.slow(reason=(
    "make sim co-simulates each of these points (the gap tables' rows with end-to-end "
    "completion, Verilator, RTL = model); make test runs e2e behind pcie "
    "(test_e2e_scenarios_behind_pcie), e2e over reliable links with faults "
    "(test_e2e_over_faulty_reliable_links) and the e2e tops of both framings "
    "(test_cosim_nic_e2e.py); each point here is a top of its own (an export of 25 to 40 s)"))
@pytest.mark.parametrize("attachment,retry,fabric", [
    ("integrated", False, "board"), ("pcie", False, "board"), ("integrated", True, "board"),
    ("pcie", True, "pod")])
def test_e2e_point(sim, attachment, retry, fabric, test_id):
    """RTL = model (the row's ``mismatches`` and every metric); independently of both:
    node 1 sends one completion for the warm-up store (alone, it asks, ``ack_req``) and
    ``ceil(STORES / coalesce)`` for the rest (one per 16 frames, the last 10 completed
    at once: the last store asks, behind PCIe through the host write's register
    offset), so ``acks_sent`` per store is that over the ``STORES + 1`` stores of the
    run (the warm-up counted, as the engine counts its warm-up message), every one
    accepted at node 0; the stores leave at the wire limit (an L2
    frame of 128 B is 3 beats of 64 B: one store every 3 cycles; behind PCIe the host's
    posted writes keep up: 152 bytes per store on the down link); a store completes
    after its last write (the completion crosses the fabric back: at least one
    ``one_way`` more); behind PCIe 304 host bytes per store (docs/host_interface.md:
    one posted write of 128 + 24 bytes into the sender, one of 128 + 24 out of the
    receiver). The wire bytes per store: the store frame's and the completions' share,
    each frame with preamble and inter-frame gap (8 + 12 bytes). The first case is the
    integrated baseline of docs/nic.md's table."""
    w = HEADLINE_TOP["width"]
    row = run_point(sim, "l2", MSG_BYTES, STORES, attachment=attachment, fabric=fabric,
                    retry=retry, completion="e2e", test_id=test_id, depth=HEADLINE_DEPTH,
                    latency_messages=2)
    assert row["mismatches"] == 0
    for key in row_metrics("nic", host=attachment == "pcie"):
        assert row[f"{key}_rtl"] == row[f"{key}_model"], key
    assert (row["attachment"], row["fabric"], row["completion"], row["reliability"]) == (
        attachment, fabric, "e2e", "link-retry" if retry else "none")
    assert row["messages"] == STORES
    cpls = 1 + -(-STORES // COMPLETION_DEFAULTS["coalesce"])
    assert cpls == 17
    assert row["ctrl_ops_rtl"]["acks_sent"] == cpls / (STORES + 1)
    assert row["ctrl_ops_rtl"]["acks_received"] == cpls / (STORES + 1)
    beats = frame_beats(w, "l2", MSG_BYTES)
    assert beats == 3
    assert row["ii_cycles_rtl"] == beats
    store = phy_bytes(build_frame("l2", 0, 1, 0, MSG_BYTES, bytes(MSG_BYTES)))
    cpl = 8 + completion_bytes("l2") + 4 + 12
    assert (store, cpl) == (172, 84)
    assert row["wire_bytes_rtl"] == store + cpls * cpl / (STORES + 1)
    if attachment == "pcie":
        assert row["host_bytes_rtl"] == (128 + 24) + (128 + 24)
    profile = fabric_profile(fabric)
    assert row["latency_cycles_rtl"] >= one_way(profile)
    assert row["completion_cycles_rtl"] >= row["latency_cycles_rtl"] + one_way(profile)


@pytest.mark.slow_variants("verilator", reason=(
    "on Verilator the compact e2e headline point's top is one more build: make sim runs the "
    "one-at-a-time run of every NIC row on Verilator with RTL = model checked (make test-all: "
    "this test on both simulators)"))
@pytest.mark.slow_variants("icarus", reason=(
    "make sim runs the one-at-a-time run of every NIC row (Verilator, RTL = model); the "
    "compact e2e headline point's top runs on Icarus in test_cosim_nic_e2e.py"))
def test_e2e_point_latency_is_one_store_at_a_time(sim, test_id):
    """A row's latency and completion come from its one-at-a-time run: the compact
    headline point with e2e completion gives the lone store's figures derived from the
    path (tests/test_unit_nic_e2e.py, :func:`lone_compact_store`: written 11 cycles and
    completed 21 cycles after its accept), RTL = model; the rate and wire bytes stay
    those of the back-to-back run (one store every 3 beats, the completions' share of
    ``1 + ceil(stores / 16)`` frames over the warm-up store and the others). With
    ``latency_messages=0`` (the back-to-back medians) the completion is later: a store
    waits for the rest of its group of 16."""
    from tests.test_unit_nic_e2e import lone_compact_store

    stores = 40
    row = run_point(sim, "compact", MSG_BYTES, stores, completion="e2e", test_id=test_id,
                    depth=HEADLINE_DEPTH)
    assert row["mismatches"] == 0
    write, done = lone_compact_store()
    for side in ("rtl", "model"):
        assert (row[f"latency_cycles_{side}"], row[f"completion_cycles_{side}"]) == (
            write, done)
    assert row["ii_cycles_rtl"] == frame_beats(HEADLINE_TOP["width"], "compact", MSG_BYTES)
    cpl = 8 + completion_bytes("compact") + 4 + 12
    store = phy_bytes(build_frame("compact", 0, 1, 0, MSG_BYTES, bytes(MSG_BYTES)))
    assert row["wire_bytes_rtl"] == store + (1 + -(-stores // 16)) * cpl / (stores + 1)
    b2b = run_point(sim, "compact", MSG_BYTES, stores, completion="e2e",
                    test_id=f"{test_id}-b2b", latency_messages=0, depth=HEADLINE_DEPTH)
    assert b2b["mismatches"] == 0
    assert b2b["completion_cycles_rtl"] > done
    assert b2b["ii_cycles_rtl"] == row["ii_cycles_rtl"]


#: The small top of the e2e and retry scenario tests (16-byte datapath, 4 nodes); a
#: completion timeout of 1024 cycles (tests/test_cosim_nic_e2e.py).
TOP16 = dict(width=16, nodes=4, link_latency=2, mem_words=256, max_payload=512)
TIMEOUT = 1024


@pytest.mark.slow_variants("icarus-signalling", reason=(
    "damaged signalling runs on the retry top with credit completion "
    "(test_cosim_nic_retry.py); make test keeps dropped frames under e2e completion"))
@pytest.mark.parametrize("faults", ["drop", "signalling"])
def test_e2e_over_faulty_reliable_links(sim, faults, test_id):
    """All-to-all stores (1 B to 1 KiB) from 4 nodes over 8 faulty wires with link
    retry and e2e completion: the completion frames share the reliable links (replayed
    like stores); frames, cycles, writes, credits, link counters, memories, every
    completion at each tracker and the trackers' ports equal the model's; independently
    of the model the retry hides every fault from the end-to-end layer: every frame
    completed, nothing outstanding, timed out or dropped (tb.nic.cocotb_nic_retry)."""
    from rtl.tops.nic_top import NicTop
    from tb.cosim import run_cosim
    from tests.test_cosim_nic_retry import FAULTS

    top = NicTop(framing="compact", items=1024, events=1024, retry=True, completion="e2e",
                 timeout=TIMEOUT, **TOP16)
    params = dict(TOP16, framing="compact", credits=top.credits, seed=21, count=8,
                  stall_rate=0, faults=vars(FAULTS[faults]), expect_damage=True,
                  expect_signalling=faults == "signalling", completion="e2e",
                  coalesce=top.coalesce, flush_idle=top.flush_idle, timeout=TIMEOUT)
    run_cosim(top, name="nic_retry_e2e_top_compact", test_module="tb.nic.cocotb_nic_retry",
              sim=sim, test_id=test_id, params=params)


#: The pcie top of the e2e scenarios: the host interface moves 64-byte words.
TOP64 = dict(width=64, nodes=4, link_latency=2, mem_words=256, max_payload=512)


@pytest.mark.slow_variants("icarus-lost_*", reason=(
    "the lost-completion scenarios run without PCIe in test_cosim_nic_e2e.py; make test keeps "
    "the dropped store and the forged completion behind PCIe"))
@pytest.mark.parametrize("scenario,extra", [
    ("dropped", 0), ("lost_first", 0), ("lost_last", 2000), ("forge", 0)])
def test_e2e_scenarios_behind_pcie(sim, scenario, extra, test_id):
    """The e2e scenarios of tests/test_cosim_nic_e2e.py behind the PCIe host interface
    (stores as the host's posted writes, received frames as posted DMA writes): RTL =
    model, and each scenario's own oracle (tb.nic.cocotb_nic_e2e): a store dropped at
    the window is reported to its sender, a lost completion is recovered by the next
    cumulative one or reported by the timeout, a forged completion is dropped and
    counted."""
    from rtl.tops.nic_top import NicTop
    from tb.cosim import run_cosim

    top = NicTop(framing="l2", items=1024, events=1024, completion="e2e", timeout=TIMEOUT,
                 attachment="pcie", **TOP64)
    params = dict(TOP64, framing="l2", credits=top.credits, coalesce=top.coalesce,
                  flush_idle=top.flush_idle, timeout=TIMEOUT, seed=11, scenario=scenario,
                  extra_cycles=extra, stall_rate=0, attachment="pcie")
    run_cosim(top, name="nic_top_e2e_pcie_l2", test_module="tb.nic.cocotb_nic_e2e",
              sim=sim, test_id=test_id, params=params)


def test_combination_parameters():
    """The combinations build (NicTop and its model); what is still wrong is refused
    with an error naming the parameter: the ``pcie`` attachment's 64-byte datapath, an
    unknown ``completion`` of :func:`run_point` (before anything is built)."""
    from pymodel.nic.system import NicSystemModel
    from rtl.tops.nic_top import NicTop
    from spec.checks import silence
    from spec.nic import link_credits

    top = NicTop(width=64, nodes=2, mem_words=64, items=16, events=16, retry=True,
                 attachment="pcie", completion="e2e", fabric="pod")
    assert (top.e2e, top.pcie, top.retry, top.fabric) == (True, True, True, "pod")
    assert len(top.gens) == len(top.trks) == len(top.his) == 2
    silence(top)
    model = NicSystemModel(64, "l2", 2, 2, 64, 512, link_credits(64, 512), retry=True,
                           attachment="pcie", completion="e2e")
    assert (model.e2e, model.pcie, model.retry) == (True, True, True)
    with pytest.raises(ValueError, match="width"):
        NicTop(width=16, attachment="pcie", completion="e2e", retry=True)
    with pytest.raises(ValueError, match="completion"):
        run_point("icarus", "l2", 128, 4, completion="ack")
