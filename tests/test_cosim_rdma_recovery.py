"""RDMA go-back-N recovery (RdmaTop) over faulty links, in co-simulation against the model.

Every test compares, cycle for cycle, each beat on both links, each remote-write and CQE
mark, the MMIO accept cycles, every counter of both engines, both host interfaces and
both links and both whole host memories with the golden model; and, independently of the
model, that node B's buffers hold exactly the posted data (each message written once:
payload words written = words posted), that every CQE is SUCCESS and in order per QP,
and that the faults the test names did happen (``expect_min``/``expect``, read on the
RTL counters). Windows, timers and retry counts are per QP.
One top (the defaults) for every test but one; the run-time transport timeout
(``ack_timeout`` port) is set to :data:`ACK_TIMEOUT` cycles instead of the default 4096,
which spares idle cycles in the simulators and is still well above the ACK delays of
these scenarios (a few hundred cycles). The default top keeps a window slot per QP
(4096 slots) and its timer scan visits one slot a cycle, so an expiry is seen
:data:`ACK_TIMEOUT` to :data:`ACK_TIMEOUT` + 4096 cycles after the QP's last progress;
with a slot per cache entry (``windows`` 0) within 256 cycles of it.
"""

import json

import pytest

from analysis.scenarios.rdma import seed_dropping_only
from pymodel.fabric.faulty_link import FaultPattern, FaultSettings
from spec.host import PROFILES
from tb.rdma.runner import run_rdma
from tests.test_rdma_msn import LOSSY_MULTI_FRAME, wire_msn_problems

#: Why most of this module's tests are slow on Icarus (``make test-all`` runs them).
_ICARUS_RUNS_SOME = (
    "Verilator runs every recovery scenario on the same top; Icarus runs the drop and corrupt "
    "ones (make test-all: all of them on both simulators)")

TOP = {}
#: Transport timeout of these runs (cycles).
ACK_TIMEOUT = 1024
#: Sizes around a 256-byte path MTU (one to five frames per message).
AROUND_MTU = [1, 255, 256, 257, 700, 64]


def _run(sim, test_id, faults_ab=None, faults_ba=None, top=TOP, **params):
    params.setdefault("kind", "writes")
    params.setdefault("ack_timeout", ACK_TIMEOUT)
    run_rdma(top, params=dict(params, faults_ab=faults_ab or {}, faults_ba=faults_ba or {}),
             sim=sim, test_id=test_id)


def test_recovery_drop(sim, test_id):
    """About 10 % of the WRITE frames dropped: NAK-driven and timer-driven rewinds."""
    _run(sim, test_id, messages=12, sizes=AROUND_MTU, qps=3, pmtu_log2=8,
         faults_ab=dict(seed=39, drop_rate=6554),
         expect_min=dict(ab_dropped=3, req_retransmissions=1, req_seq_naks=1,
                         resp_out_of_order=1))


def test_recovery_corrupt(sim, test_id):
    """About 10 % of the WRITE frames with a flipped bit: dropped on FCS, recovered."""
    _run(sim, test_id, messages=12, sizes=AROUND_MTU, qps=3, pmtu_log2=8,
         faults_ab=dict(seed=9, corrupt_rate=6554),
         expect_min=dict(ab_corrupted=3, resp_fcs_bad=3, req_retransmissions=1,
                         req_seq_naks=1))


@pytest.mark.slow_variants("icarus", reason=_ICARUS_RUNS_SOME)
def test_recovery_duplicate(sim, test_id):
    """Duplicated WRITEs and ACKs: duplicates are not written but ACKed again, late
    ACKs are counted and ignored, nothing is resent."""
    _run(sim, test_id, messages=12, sizes=AROUND_MTU, qps=3, pmtu_log2=8,
         faults_ab=dict(seed=28, dup_rate=13107), faults_ba=dict(seed=29, dup_rate=13107),
         expect_min=dict(ab_duplicated=2, ba_duplicated=1, resp_duplicates=2,
                         req_ack_unexpected=1),
         expect=dict(req_retransmissions=0))


@pytest.mark.slow_variants("icarus", reason=_ICARUS_RUNS_SOME)
def test_recovery_bursts(sim, test_id):
    """Drops in bursts of 3 and corruptions in bursts of 2 on the WRITE link."""
    _run(sim, test_id, messages=12, sizes=AROUND_MTU, qps=2, pmtu_log2=8,
         faults_ab=dict(seed=63, drop_rate=3277, drop_burst=3, corrupt_rate=1000,
                        corrupt_burst=2),
         expect_min=dict(ab_dropped=3, ab_corrupted=2, req_retransmissions=3))


@pytest.mark.slow_variants("icarus", reason=_ICARUS_RUNS_SOME)
def test_recovery_ack_link(sim, test_id):
    """ACKs dropped, corrupted and duplicated: later (cumulative) ACKs of a QP retire
    the messages whose ACK was lost; duplicate ACKs are counted and ignored."""
    _run(sim, test_id, messages=12, sizes=AROUND_MTU, qps=3, pmtu_log2=8,
         faults_ba=dict(seed=22, drop_rate=9830, corrupt_rate=6554, dup_rate=6554),
         expect_min=dict(ba_dropped=2, ba_corrupted=1, req_ack_dropped=1))


#: Five QPs, 1 to 5 frames per message (sizes around the 256-byte MTU), every fault on
#: both links.
MANY_QPS = dict(messages=16, sizes=[1, 255, 256, 257, 511, 512, 513, 1100], qps=5,
                pmtu_log2=8,
                faults_ab=dict(seed=66, drop_rate=2000, corrupt_rate=2000, dup_rate=2000,
                               drop_burst=2),
                faults_ba=dict(seed=73, drop_rate=2000, corrupt_rate=2000, dup_rate=2000))
MANY_QPS_SEEN = dict(ab_dropped=1, ab_corrupted=1, ab_duplicated=1, ba_dropped=1,
                     req_seq_naks=1, resp_out_of_order=1)


@pytest.mark.slow_variants("icarus", reason=_ICARUS_RUNS_SOME)
def test_recovery_many_qps_both_links(sim, test_id):
    """:data:`MANY_QPS` on the default top: every loss is repaired (by a NAK, a later
    cumulative ACK or a timer, as the model says)."""
    _run(sim, test_id, **MANY_QPS, expect_min=MANY_QPS_SEEN)


@pytest.mark.slow_variants("icarus", reason=(
    "the windows 0 top is an export and compile of its own (see "
    "test_rdma_4096_qps_over_16_entries_pinned); test_recovery_many_qps_both_links runs the "
    "scenario on the default top"))
def test_recovery_many_qps_both_links_pinned(sim, test_id):
    """:data:`MANY_QPS` on a top with a window slot per cache entry (``windows`` 0): its
    timer scan sees an expiry within 256 cycles, and the losses no NAK repairs are
    repaired by the timer (``req_timeouts``)."""
    if sim == "verilator":
        pytest.skip("a build of its own: Icarus runs it (test_cosim_rdma_unpinned.py "
                    "builds the same top)")
    _run(sim, test_id, top={"windows": 0}, **MANY_QPS,
         expect_min=dict(MANY_QPS_SEEN, req_timeouts=1))


@pytest.mark.slow_variants("icarus", reason=_ICARUS_RUNS_SOME)
def test_recovery_timeout_only(sim, test_id):
    """The last WRITE frame is lost: no later frame can cause a NAK, only the transport
    timer recovers (one rewind, one frame resent)."""
    seed = seed_dropping_only(3)
    _run(sim, test_id, messages=4, sizes=[128], qps=1,
         faults_ab=dict(seed=seed, drop_rate=3277),
         expect=dict(ab_dropped=1, req_timeouts=1, req_seq_naks=0,
                     req_retransmissions=1, resp_duplicates=0))


def test_recovery_full_window(sim, test_id):
    """Doorbells of 16 WQEs each for 300 WRITEs while 255 ACKs in a row are lost: the
    255 messages whose ACKs were lost stay in the window (at least 255 records in use),
    nothing is lost, and the first ACK that gets through retires the whole window (ACKs
    are cumulative). (A pool too small for the window, where the WQE fetch stage waits
    for free records, is test_unit_requester.py's ``window`` and ``pool`` cases.)"""
    if sim == "icarus":
        pytest.skip("long scenario: Verilator only")
    _run(sim, test_id, messages=300, sizes=[1], qps=1, knobs=dict(ring_every=16),
         faults_ba=dict(seed=1, drop_rate=1, drop_burst=255),
         expect_min=dict(req_records_max=255, ba_dropped=255),
         expect=dict(req_cqe_writes=300))


@pytest.mark.slow_variants("icarus", reason=_ICARUS_RUNS_SOME)
def test_recovery_loss_on_one_qp(sim, test_id):
    """Two QPs in turn; only frames of QP 0 are dropped (the seed is chosen so): QP 0
    rewinds and resends its own messages, QP 1 resends nothing (per-QP windows, as the
    IBTA has them)."""
    seed = _seed_losing_only_qp0(messages=8, rate=6554)
    _run(sim, test_id, messages=8, sizes=[128], qps=2,
         faults_ab=dict(seed=seed, drop_rate=6554),
         resend_only_qps=[0],
         expect_min=dict(ab_dropped=1, req_retransmissions=1))


@pytest.mark.slow_variants("icarus", reason=_ICARUS_RUNS_SOME)
def test_recovery_retry_limit(sim, test_id):
    """Every WRITE frame is lost: the first message is resent for ``retry_limit`` (7)
    timer expiries, then completes with RETRY_EXC_ERR at the eighth; its QP enters ERR
    (IBTA Vol 1 table 91) and the second message, in the window behind it, completes with
    WR_FLUSH_ERR at once (no timer of its own); nothing lands at node B."""
    _run(sim, test_id, messages=2, sizes=[100], qps=1, ack_timeout=256,
         faults_ab=dict(seed=1, drop_rate=65535),
         cqe_status=["RETRY_EXC_ERR", "WR_FLUSH_ERR"],
         expect=dict(req_timeouts=8, req_seq_naks=0, req_cqe_writes=2, resp_frames_ok=0,
                     req_qp_errors=1, req_flushed=1))


#: Two QPs of 128-byte WRITEs (one WRITE ONLY frame each), about 5 % of the WRITE frames
#: dropped: the scenario of the selective-repeat comparison.
LOSSY = dict(kind="writes", messages=40, sizes=[128], qps=2, ack_timeout=ACK_TIMEOUT,
             faults_ab=dict(seed=11, drop_rate=3277), faults_ba={}, out_json="m.json")


def _resent_frames(frames):
    """WRITE frames sent again on the A->B link: a (destination QP, PSN) seen before.
    Counted on the recorded wire, independently of the engines' counters."""
    seen, again = set(), 0
    for _, text in frames:
        frame = bytes.fromhex(text)
        if len(frame) < 54 or not 6 <= frame[42] <= 10:      # not an RDMA WRITE
            continue
        key = (frame[47:50], frame[51:54])
        again += key in seen
        seen.add(key)
    return again


@pytest.mark.slow_variants("icarus", reason=_ICARUS_RUNS_SOME)
def test_recovery_selective_repeat(sim, test_id):
    """:data:`LOSSY` with go-back-N and with selective repeat (``selective`` port = 1,
    both engines) on the same seed: each run equals the model (frames, memories, cycles)
    and delivers every WRITE (the independent checks of every run); the responder places
    frames out of order only with selective repeat, and fewer frames are sent again."""
    resent = {}
    for selective in (0, 1):
        expect = dict(ab_dropped=2, resp_sr_placed=1) if selective else dict(ab_dropped=2)
        run = run_rdma(TOP, params=dict(LOSSY, selective=selective, expect_min=expect,
                                        **({} if selective else
                                           {"expect": dict(resp_sr_placed=0)})),
                       sim=sim, test_id=f"{test_id}_{'sr' if selective else 'gbn'}")
        out = json.loads((run / "m.json").read_text())
        assert out["mismatches"] == 0 and out["lost"] == 0 and out["messages"] == 40
        resent[selective] = _resent_frames(out["frames"])
        if selective:
            problems, checked = wire_msn_problems(LOSSY, out["frames"])
            assert problems == [] and checked > 0, problems
    assert 0 < resent[1] < resent[0], resent


@pytest.mark.slow_variants("icarus", reason=_ICARUS_RUNS_SOME)
def test_recovery_selective_repeat_multi_frame(sim, test_id):
    """Selective repeat with WRITEs of 1 to 5 frames and losses on both links
    (:data:`tests.test_rdma_msn.LOSSY_MULTI_FRAME`): RTL = model, every WRITE delivered,
    frames placed out of order, and, independently of the model, the AETH MSN of every
    ACK and NAK on the B->A wire counts the request messages it acknowledges."""
    p = dict(LOSSY_MULTI_FRAME, out_json="m.json",
             expect_min=dict(ab_dropped=1, ba_dropped=1, resp_sr_placed=1))
    out = json.loads((run_rdma(TOP, params=p, sim=sim, test_id=test_id) / "m.json")
                     .read_text())
    assert out["mismatches"] == 0 and out["lost"] == 0
    problems, checked = wire_msn_problems(p, out["frames"])
    assert problems == [] and checked > 0, problems


@pytest.mark.slow(reason=(
    "the windows-0 top is one more export and build on each simulator (make test went to 10 "
    "minutes with it): make test-all co-simulates it; in make test test_unit_requester.py "
    "holds the held timer against its twin in the Amaranth simulator (a rewind's resends "
    "behind 400-cycle reads, one rewind, no timeout)"))
def test_recovery_timer_restarts_when_resends_leave(sim, test_id):
    """Every WRITE frame is lost and the timeout (256 cycles) is shorter than the two
    host reads (a WQE read, then a payload read: 560 cycles each over ``pcie``) after
    which a resent frame leaves; on the top with a window slot per cache entry its timer
    scan sees an expiry within 256 cycles. The timer is held from each rewind's walk
    until the resent frame leaves and restarts then, so each of the 7 rewinds resends
    both messages once: each frame leaves 8 times, each time more than the timeout and
    two host reads after the last. (Restarted at the walk, the timer expired while the
    resends were still in the pipeline: a rewind every 512 cycles, resends queued
    behind resends.) The co-simulation compares every beat with the model; the gaps
    are read on the model's wire."""
    from tb.rdma.cocotb_rdma import config, run_model, scenario

    params = dict(kind="writes", messages=2, sizes=[100], qps=1, ack_timeout=256,
                  faults_ab=dict(seed=1, drop_rate=65535))
    _run(sim, test_id, top={"windows": 0}, **params,
         cqe_status=["RETRY_EXC_ERR", "WR_FLUSH_ERR"],
         expect=dict(req_timeouts=8, req_rewinds=7, req_retransmissions=14))
    cfg, knobs = config({"windows": 0}, params)
    v, inject, _ = scenario(params, cfg, knobs)
    sends = {}
    for t, frame in run_model(cfg, v, inject, (1, 0))["wire_ab"]:
        sends.setdefault(frame[51:54], []).append(t[0] if isinstance(t, list) else t)
    floor = 256 + 2 * PROFILES["pcie"].read_latency
    assert len(sends) == 2 and all(len(ts) == 8 for ts in sends.values())
    assert all(b - a > floor for ts in sends.values() for a, b in zip(ts, ts[1:], strict=False))


@pytest.mark.slow_variants("icarus", reason=_ICARUS_RUNS_SOME)
def test_recovery_nak_storm(sim, test_id):
    """A NAK storm: eight QPs, 96 one-beat WRITEs, about 10 % of the WRITE frames
    dropped, so several QPs lose frames at once and their NAKs and ACKs arrive while
    other QPs' rewinds are pending. The ACK queue keeps one event per window slot and
    merges the rest into it: no event is lost (``req_ack_lost`` 0) and the ACK receiver
    never waits (``req_ack_wait_cycles`` 0); several QPs rewind. Every message
    completes, RTL equal to the model."""
    _run(sim, test_id, messages=96, sizes=[64], qps=8,
         faults_ab=dict(seed=3, drop_rate=6554),
         expect_min=dict(ab_dropped=4, req_seq_naks=2, req_rewinds=2),
         expect=dict(req_ack_lost=0, req_ack_wait_cycles=0))


def _seed_losing_only_qp0(messages, rate):
    """The first A->B link seed for which the golden model, running the two-QP scenario
    of :func:`test_recovery_loss_on_one_qp`, loses at least one frame and only frames
    of QP 0 (resends included)."""
    from tb.rdma.cocotb_rdma import config, run_model, scenario

    for seed in range(1, 400):
        params = dict(kind="writes", messages=messages, sizes=[128], qps=2,
                      ack_timeout=ACK_TIMEOUT, faults_ab=dict(seed=seed, drop_rate=rate))
        cfg, knobs = config(TOP, params)
        v, inject, _ = scenario(params, cfg, knobs)
        model = run_model(cfg, v, inject, (1, 0))
        pattern = FaultPattern(FaultSettings(seed=seed, drop_rate=rate))
        lost = [frame for _, frame in model["wire_ab"] if pattern.next()[0]["drop"]]
        qp0 = v.qps[0].qpn_b
        if lost and all(int.from_bytes(f[47:50], "big") == qp0 for f in lost):
            return seed
    raise ValueError("no seed loses only QP 0's frames")
