"""A set-associative context cache (the tops' ``cache_ways``) in co-simulation against
the golden model: every beat on both links, every counter of both engines, both host
memories, cycle for cycle (the comparison of test_cosim_rdma.py).
"""

import pytest

from tb.rdma.runner import FEATURES_TOP, run_rdma

pytestmark = pytest.mark.slow_variants("verilator", reason=(
    "Icarus runs the same scenario on the same 4-way top (one more Verilator build of about a "
    "minute); test_unit_context_cache.py checks the cache against its twin"))

#: 4 ways, 16 entries in use: 4 sets of 4 ways. 24 QPs round robin put 6 QPs in each
#: set (QP ``q`` in set ``q % 4``), more than its ways: misses evict other ways of the
#: set, picked by the pseudo-LRU or skipped while busy.
#: The shared feature top: 4 ways (and a one-cycle link, the READ FIFO: tb.rdma.runner).
TOP = FEATURES_TOP
QPS = 24
MESSAGES = 72


def test_rdma_ways_4_colliding_sets(sim, test_id):
    """Three rounds over 24 QPs, 128-byte WRITEs: at least the first lookup of each QP
    misses at each engine, and 24 QPs in 16 entries make misses evict."""
    run_rdma(TOP, params=dict(kind="writes", messages=MESSAGES, sizes=[128], qps=QPS,
                              cache_entries=16,
                              expect_min={"req_frames": MESSAGES, "req_misses": QPS,
                                          "resp_misses": QPS}),
             sim=sim, test_id=test_id)


@pytest.mark.slow_variants("icarus", reason=(
    "16 s of Icarus (make test was at 10 minutes): the 4-way top co-simulates its colliding "
    "sets on Icarus, test_unit_completion_ways.py holds the completion unit with ways against "
    "its twin, and the recovery co-simulations run on the default top"))
def test_rdma_ways_4_recovery_drop(sim, test_id):
    """The same top and colliding sets with about 10 % of the WRITE frames dropped: the
    rewinds resend at the entry the completion unit's probes find (the QP may sit in any
    way of its set), timers and NAKs as with one way. Each drop leaves a hole the
    responder NAKs or the timer finds, so at least one frame is resent."""
    run_rdma(TOP, params=dict(kind="writes", messages=48, sizes=[128, 300], qps=QPS,
                              pmtu_log2=8, cache_entries=16, ack_timeout=1024,
                              faults_ab=dict(seed=39, drop_rate=6554),
                              expect_min={"ab_dropped": 1, "req_retransmissions": 1}),
             sim=sim, test_id=test_id)
