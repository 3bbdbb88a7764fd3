"""The RDMA engine on the fabric (RdmaFabricTop: 4 nodes, each a requester and a
responder behind their own PCIe-like host interfaces, on one MAC-routed switch) in
co-simulation against the golden model.

Every test compares, cycle for cycle, each beat on every uplink, each remote-write and
CQE mark, each MMIO accept cycle, every counter (engines, host interfaces, merges,
switch) and every host memory; and checks, independently of the model, every frame
(scapy + zlib), the bytes landed in every node's MRs against what was posted to it, one
CQE per signalled WRITE per QP in order on every sender, and the merges' error flags.
"""

import pytest

from spec.fabric_profiles import rdma_fabric_credits
from spec.rdma import MAX_FRAME_BEATS
from tb.rdma.fabric_runner import run_fabric

pytestmark = pytest.mark.slow_variants("verilator", reason=(
    "Icarus runs the incast and all-to-all cases of the same top"))

TOP = {}          # one top (the defaults: 4 nodes) for every test: one build per simulator
#: Cycles before the measured messages: one message per QP first fills the context
#: caches at both ends (a cold miss costs three PCIe reads in a row, ~2,300 cycles).
WARMUP = 3000


def _run(sim, test_id, **params):
    run_fabric(TOP, params=params, sim=sim, test_id=test_id)


@pytest.mark.slow(reason=(
    "the 4-node top is an export and an Icarus compile of about 2 minutes of CPU (9 MB of "
    "Verilog); make test-all runs it on both simulators, make sim's RDMA gap rows "
    "co-simulate the fabric over reliable links, and in make test the merge, the demux and "
    "the switch hop run against their twins (test_unit_frame_merge.py, "
    "test_unit_switch.py, hop latency) and the fabric's model its incasts "
    "(test_rdma_fabric_model.py)"))
def test_fabric_incast(sim, test_id):
    """Incast 3->1: nodes 1-3 each send 128-byte WRITEs to node 0, open-loop arrivals at
    half of node 0's downlink rate; node 0's uplink carries the ACKs of all three."""
    _run(sim, test_id, pattern="incast", messages=12,
         msg_bytes=128, load=0.5, warmup=WARMUP)


@pytest.mark.slow_variants("icarus", reason=(
    "Icarus runs the fabric's incast (the all-to-all and saturated cases share its top; make "
    "test-all runs them on both simulators)"))
def test_fabric_all_to_all(sim, test_id):
    """All-to-all over 4 nodes, 2 QPs per (sender, destination): every uplink carries
    its node's WRITEs and ACKs, merged whole frame by whole frame."""
    _run(sim, test_id, pattern="all_to_all", messages=12,
         msg_bytes=128, load=0.5, qps=2, warmup=WARMUP)


@pytest.mark.slow_variants("icarus", reason=(
    "Icarus runs the moderate incast and all-to-all; make test-all adds this one"))
def test_fabric_incast_saturated(sim, test_id):
    """Incast 3->1 of 1024-byte WRITEs at full load of node 0's downlink: the switch's
    ingress buffers fill, the merges wait for credits (their requester buffers fill),
    nothing is lost and every cycle still matches."""
    _run(sim, test_id, pattern="incast", messages=40, msg_bytes=1024, load=1.0,
         warmup=WARMUP, expect_merge_wait=True)


#: The 7->1 incast's top: 8 nodes, the least switch ingress buffer (one largest frame of
#: credits) and an uplink merge buffer of 80 beats (its requester held beyond 12 beats of
#: backlog, ``80 - MERGE_ROOM``: one 1 KiB frame waiting for credits), so that in a run
#: short enough for a co-simulation the merges hold their requesters (at the defaults
#: that takes a few hundred 1 KiB messages per sender: tests/test_rdma_fabric_model.py
#: runs them on the model).
INCAST8 = dict(nodes=8, credits=MAX_FRAME_BEATS, merge_depth=80)


@pytest.mark.slow(reason=(
    "its 8-node top (17 MB of Verilog) is an export and an Icarus compile of about 2 minutes "
    "and a Verilator build of several: make test-all co-simulates it; in make test "
    "test_unit_frame_merge.py holds a FrameSender-timed source with the merge's room against "
    "its twin (no overflow at the least depth, the rule tight), and test_rdma_fabric_model.py "
    "runs the 7->1 1 KiB incast at 90 % on the model"))
def test_fabric_incast_7_to_1_is_lossless(sim, test_id):
    """Incast 7->1 of 1 KiB WRITEs at 90 % of node 0's downlink, started cold (no
    warm-up: the first messages bunch up behind the context fills, a burst into node 0):
    the switch's ingress buffers fill, the merges wait for credits and hold their
    requesters between frames (``room`` low: a merge's level passes ``merge_depth -
    MERGE_ROOM``); no beat is lost at a merge (``overflow`` stays 0), every message
    lands and completes, and every cycle matches the model."""
    run_fabric(INCAST8, params=dict(pattern="incast", messages=10, msg_bytes=1024,
                                    load=0.9, seed=3, warmup=0, expect_merge_held=True),
               sim=sim, test_id=test_id)


@pytest.mark.slow(reason=(
    "the 2-node and the 8-node top are an export and a build each; the other tests of this "
    "module run the 4-node top"))
@pytest.mark.parametrize("nodes,pattern", [(2, "pair"), (8, "incast")])
def test_fabric_node_counts(sim, test_id, nodes, pattern):
    """The smallest and the largest top: a pair over 2 nodes, incast 7->1 over 8 (one
    export and build each, so Icarus only, and only in make test-all)."""
    if sim == "verilator":
        pytest.skip("Icarus only: a Verilator build of each top takes minutes")
    run_fabric(dict(nodes=nodes), params=dict(pattern=pattern, messages=6, msg_bytes=128,
                                              load=0.5, warmup=WARMUP),
               sim=sim, test_id=test_id)


#: The paused top: 4 nodes with the pause on, a receive payload FIFO of 128 beats (the
#: least that holds a largest frame plus 64 beats; XOFF above 128 - 64 - 5 = 59 beats)
#: and 16 beats of hysteresis (XON at 43; the default, one largest frame, 66, does not
#: fit under 59), so that a short cold 3->1 incast of 1 KiB WRITEs pauses node 0's
#: downlink (without the pause it drops frames: tests/test_rdma_fabric_model.py).
PAUSE4 = dict(pause=1, rx_beats=128, pause_hysteresis=16)


@pytest.mark.slow(reason=(
    "the paused 4-node top is one more export (a 4-node fabric) and build on each simulator, "
    "and make test reached 10 minutes with it: make test-all co-simulates it; in make test "
    "test_unit_pause.py holds PauseGen against its twin and test_rdma_fabric_model.py runs the "
    "paused incasts on the model"))
def test_fabric_incast_paused(sim, test_id):
    """Incast 3->1 of 12 1 KiB WRITEs per sender at full load from cold, with the pause:
    node 0's responder raises XOFF, the switch's egress toward it holds frames at their
    first beat, the backlog backs up through the switch's ingress credits into the
    merges; no responder drops a frame and no requester resends one, and every beat,
    mark, counter (the pause's ``xoffs`` too) and memory word matches the model."""
    run_fabric(PAUSE4, params=dict(pattern="incast", messages=12, msg_bytes=1024,
                                   load=1.0, seed=1, warmup=0, expect_pause=True),
               sim=sim, test_id=test_id)


#: Two nodes on the NIC's fabric (tb/rdma/headline.py's ``switch`` topology): reliable
#: links, the switch's hop (5 extra cycles: the elastic delay of a hop with
#: backpressure) and credits by the NIC's rule with retry.
PAIR_RETRY = dict(nodes=2, link_retry=1, hop_latency=5,
                  credits=rdma_fabric_credits("board", retry=True))


@pytest.mark.slow(reason=(
    "a two-node fabric top of its own (reliable links, a hop: one more export and build "
    "on each simulator): make sim co-simulates the same configuration in the gap table's "
    "RDMA rows (Verilator, 0 mismatches); in make test, test_rdma_fabric_model.py checks the "
    "cycles the reliable links and the hop add on the model and test_unit_frame_merge.py "
    "the credits-in-use counter"))
def test_fabric_writes_over_reliable_links_and_a_hop(sim, test_id):
    """The ``writes`` kind (the gap table's RDMA runs) on the fabric: 24 WRITEs of 128 B
    back to back over 2 QPs after a warm-up message, node 0 to node 1 over reliable
    links and a 5-cycle hop; every beat, mark, counter (the merges' credits in use too)
    and memory word equals the model's, every frame, CQE and MR byte as posted."""
    from analysis.rdma.point import latency_spacing
    from spec.rdma_engine import LADDER

    run_fabric(PAIR_RETRY, params=dict(kind="writes", messages=25, sizes=[128], qps=2,
                                       warmup=latency_spacing("pcie"), rung=LADDER[-1][0]),
               sim=sim, test_id=test_id)


@pytest.mark.slow(reason=(
    "a two-node fabric top of its own (4-way context caches: one more export and build "
    "on each simulator): make sim co-simulates the same caches in the gap table's row 8 "
    "(256 entries, 4 ways, 4096 QPs; Verilator, 0 mismatches); in make test, "
    "test_cosim_params.py checks that the switch points take and check cache_ways"))
def test_fabric_writes_with_a_4_way_cache(sim, test_id):
    """The ``writes`` kind on the fabric with 4-way context caches at both nodes: 48
    WRITEs of 128 B round robin over 40 QPs through 16 entries (4 sets of 4 ways; every
    message misses, the victims chosen by the pseudo-LRU among busy ways), over reliable
    links and a hop; every beat, mark, counter and memory word equals the model's, every
    frame, CQE and MR byte as posted."""
    from analysis.rdma.point import latency_spacing
    from spec.rdma_engine import LADDER

    run_fabric(dict(PAIR_RETRY, cache_ways=4),
               params=dict(kind="writes", messages=49, sizes=[128], qps=40,
                           warmup=latency_spacing("pcie"), rung=LADDER[-1][0]),
               sim=sim, test_id=test_id)
