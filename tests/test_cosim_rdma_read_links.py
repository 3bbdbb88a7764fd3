"""READs and atomics with faults on the B->A link (node A's receive stage takes each
beat of a READ RESPONSE as it comes): a mixed chunk (WRITEs, READs, atomics; kind
``mixed`` of tb/rdma/cocotb_rdma.py) on the soak's mixed top over plain links with
corrupted, duplicated and dropped frames on B->A (node A drops a bad FCS/ICRC as
``read_bad`` and a repeated READ RESPONSE as ``read_duplicates``,
rtl/rdma/req/response_intake.py), and over reliable links (``link_retry``) with those
faults on both links. Model only (fast): every operation's successful CQE, READ bytes,
atomic values and WRITEs once (``tb.rdma.reads.mixed_checks``); co-simulated: RTL =
model on every beat of both links, every counter, both memories and every cycle.
With selective repeat (``selective`` = 1) too: a QP with READs or atomics in its window
goes back N (docs/recovery.md, "READs and atomics under selective repeat")."""

import json

import pytest

from analysis.scenarios.mix import PRESETS, counts
from tb.rdma import reads
from tb.rdma.cocotb_rdma import config, run_model, scenario
from tb.rdma.runner import run_rdma
from tb.rdma.wirecheck import msn_problems
from tb.soak.rdma import MIXED_ACK_TIMEOUT, MIXED_TOP, SIZES
from tests.test_rdma_msn import qp_pairs, wire_msn_problems
from tests.test_soak_mix import Board, _memories, twelve_mixed_end_well

#: Faults of the soak's kinds, a few % each (FaultSettings rates per 65,535): with seed 25
#: on B->A the plain link corrupts a READ RESPONSE and duplicates one (figures below).
FAULTS = dict(seed=25, corrupt_rate=4000, drop_rate=2000, dup_rate=6000)
CHUNK = dict(kind="mixed", messages=12, mix="mixed", sizes=SIZES, qps=2, seed=3,
             ack_timeout=MIXED_ACK_TIMEOUT)
#: Plain links, faults on B->A only.
PLAIN = dict(CHUNK, faults_ba=FAULTS)
#: Reliable links (a top of its own: ``link_retry`` is a build parameter).
RETRY_TOP = dict(MIXED_TOP, link_retry=True)
RETRY = dict(CHUNK, faults_ab=dict(FAULTS, seed=125), faults_ba=FAULTS)


def test_reads_over_corrupting_and_duplicating_b_to_a_link():
    """The B->A link corrupts, duplicates and drops frames with READs on: node A drops
    the corrupted READ RESPONSE (bad ICRC/FCS) and the duplicate, each counted, and
    every operation still ends once and whole."""
    m = twelve_mixed_end_well(MIXED_TOP, PLAIN)
    ba = m["links"]["ba"]
    assert ba["corrupted"] > 0 and ba["duplicated"] > 0 and ba["dropped"] > 0
    assert ba["lost"] == ba["overflow"] == 0
    assert m["req"]["read_bad"] > 0 and m["req"]["read_duplicates"] > 0


def test_reads_over_reliable_links_with_faults():
    """READs over reliable links whose wires corrupt, duplicate and drop frames each
    way: the links resend, every operation ends once and whole, and node A never sees
    a bad or repeated response."""
    m = twelve_mixed_end_well(RETRY_TOP, RETRY)
    for name in ("ab", "ba"):
        link = m["links"][name]
        assert link["corrupted"] + link["duplicated"] + link["dropped"] > 0, name
        assert link["tx_resent_frames"] > 0 and link["full"] == 0, name
    assert m["links"]["ba"]["rx_fcs_bad"] > 0
    assert m["req"]["read_bad"] == m["req"]["read_duplicates"] == 0


def test_reads_over_reliable_links_without_faults():
    """Fault-free reliable links (the closed timing of ReliableStream) with READs: the
    same chunk ends, nothing resent."""
    m = twelve_mixed_end_well(RETRY_TOP, CHUNK)
    assert m["links"]["ba"]["tx_resent_frames"] == m["links"]["ab"]["tx_resent_frames"] == 0


@pytest.mark.slow(reason=(
    "the soak's mixed top, a top of its own (make test was over 10 minutes): make test "
    "runs this case in the model (test_reads_over_corrupting_and_duplicating_b_to_a_link), "
    "node A's requester on damaged and repeated READ RESPONSEs against its twin "
    "(test_fuzz_req.py's chunk), and READs over faulted reliable links in co-simulation "
    "(below)"))
def test_reads_over_corrupting_b_to_a_link_cosim(sim, test_id):
    run_rdma(MIXED_TOP, params=dict(PLAIN), sim=sim, test_id=test_id)


@pytest.mark.slow_variants("verilator", reason=(
    "RdmaTop with reads and link_retry is a top of its own (a Verilator build of about "
    "a minute); Icarus runs the same case in make test"))
def test_reads_over_reliable_links_with_faults_cosim(sim, test_id):
    run_rdma(RETRY_TOP, params=dict(RETRY), sim=sim, test_id=test_id)


#: Selective repeat with READs and atomics, one QP. ``lost_response``: 20 mixed
#: operations, 4.6 % of B->A frames dropped: the READ RESPONSE of PSN 1 is lost, node A's
#: intake discards the responses after it and asks a rewind (resending the READ alone
#: left the atomic and a later READ unanswered and the QP in RETRY_EXC_ERR after eight
#: timer rewinds of a WRITE). ``both_links``: 30 operations, 9.2 % of A->B frames dropped
#: too: WRITEs placed out of order right after a lost READ or atomic, which node B then
#: consumes with it (without that, such a WRITE was accepted, and written, again).
SELECTIVE = {
    "lost_response": dict(kind="mixed", messages=20, mix="mixed", sizes=SIZES, qps=1,
                          seed=4, ack_timeout=MIXED_ACK_TIMEOUT, selective=1,
                          faults_ba=dict(seed=11, drop_rate=3000)),
    "both_links": dict(kind="mixed", messages=30, mix="mixed", sizes=SIZES, qps=1, seed=2,
                       ack_timeout=MIXED_ACK_TIMEOUT, selective=1,
                       faults_ab=dict(seed=5, drop_rate=6000),
                       faults_ba=dict(seed=9, drop_rate=3000)),
}


@pytest.mark.parametrize("case", SELECTIVE)
def test_selective_repeat_with_reads_ends_every_operation(case):
    """The golden model of :data:`SELECTIVE`: every operation ends with its successful
    CQE, its READ bytes or atomic value, each WRITE written once (the model-free
    checks, node B's payload words written among them); a frame was lost on each
    faulted link; every ACK's and NAK's MSN counts the request messages it acknowledges
    (:func:`tb.rdma.wirecheck.msn_problems`)."""
    p = dict(SELECTIVE[case], top=MIXED_TOP)
    cfg, knobs = config(MIXED_TOP, p)
    v, inject, _ = scenario(p, cfg, knobs)
    model = run_model(cfg, v, inject, (1, 0))
    sb = Board()
    fig = reads.mixed_checks(sb, v, _memories(cfg, model))
    assert sb.mismatches == [] and fig["lost"] == 0 and fig["corrupted_bytes"] == 0
    want = counts(PRESETS["mixed"], p["messages"])
    assert (fig["writes_ok"], fig["reads_ok"], fig["atomics_ok"]) == (
        want["write"], want["read"], want["atomic"])
    for link in ("ab", "ba"):
        assert (model["links"][link]["dropped"] >= 1) == bool(p.get(f"faults_{link}")), link
    problems, checked = msn_problems([f for _, f in model["wire_ab"]],
                                     [f for _, f in model["wire_ba"]], qp_pairs(v))
    assert problems == [] and checked > 0, problems
    if case == "both_links":
        assert model["resp"]["sr_placed"] >= 1
    else:
        assert model["req"]["read_rewinds"] >= 1


@pytest.mark.slow(reason=(
    "the soak's mixed top, a top of its own (make test was over 10 minutes): make test "
    "runs these cases in the model (test_selective_repeat_with_reads_ends_every_operation) "
    "and selective repeat on WRITEs in co-simulation (test_cosim_rdma_recovery.py)"))
@pytest.mark.parametrize("case", SELECTIVE)
def test_selective_repeat_with_reads_cosim(sim, test_id, case):
    """:data:`SELECTIVE` in co-simulation: RTL = model on every beat of both links,
    every counter, both memories and every cycle (the completion unit's count of READs
    and atomics per window slot and the rewinds that go back N on it; node B's READs
    and atomics consuming the placed PSNs after them), and the model-free checks of a
    mixed chunk, the MSN of every ACK and NAK among them."""
    p = dict(SELECTIVE[case], out_json="m.json")
    out = json.loads((run_rdma(MIXED_TOP, params=p, sim=sim, test_id=test_id) / "m.json")
                     .read_text())
    problems, checked = wire_msn_problems(p, out["frames"], MIXED_TOP)
    assert problems == [] and checked > 0, problems
