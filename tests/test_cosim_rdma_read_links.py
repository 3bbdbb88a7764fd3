"""READs and atomics with faults on the B->A link (node A's receive stage takes each
beat of a READ RESPONSE as it comes): a mixed chunk (WRITEs, READs, atomics; kind
``mixed`` of tb/rdma/cocotb_rdma.py) on the soak's mixed top over plain links with
corrupted, duplicated and dropped frames on B->A (node A drops a bad FCS/ICRC as
``read_bad`` and a repeated READ RESPONSE as ``read_duplicates``,
rtl/rdma/req/response_intake.py), and over reliable links (``link_retry``) with those
faults on both links. Model only (fast): every operation's successful CQE, READ bytes,
atomic values and WRITEs once (``tb.rdma.reads.mixed_checks``); co-simulated: RTL =
model on every beat of both links, every counter, both memories and every cycle."""

import pytest

from tb.rdma.runner import run_rdma
from tb.soak.rdma import MIXED_ACK_TIMEOUT, MIXED_TOP, SIZES
from tests.test_soak_mix import twelve_mixed_end_well

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
