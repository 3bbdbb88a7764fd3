"""The open-loop traffic generator and the RDMA load runner, without a simulator:
statistics of the arrivals, the patterns, QP popularity, the issuer's timeline, the
percentiles, and a clear error for every bad traffic parameter."""

import math

import numpy as np
import pytest

from analysis.load.rdma import rdma_load_run, saturation
from analysis.load.traffic import (
    arrival_cycles,
    distribution,
    flows,
    issue_schedule,
    percentile,
    qp_sequence,
    senders,
)


def test_arrivals_offer_the_requested_rate():
    a = np.asarray(arrival_cycles(20000, 0.25, 10, seed=3))
    assert np.all(np.diff(a) >= 1)
    # Mean gap service / load = 40 cycles; the sample mean of 20,000 geometric gaps
    # (sd 39.5) is within 2 % of it.
    assert abs(np.diff(a).mean() - 40) < 0.8
    assert arrival_cycles(50, 0.25, 10, seed=3) == arrival_cycles(50, 0.25, 10, seed=3)
    assert arrival_cycles(50, 0.25, 10, seed=3) != arrival_cycles(50, 0.25, 10, seed=4)


def test_bursts_arrive_together():
    a = arrival_cycles(12, 0.5, 8, seed=1, burst=4)
    assert [len(set(a[k:k + 4])) for k in range(0, 12, 4)] == [1, 1, 1]
    assert len(set(a)) == 3


def test_patterns():
    assert senders("incast", 8) == list(range(1, 8))
    f = flows("incast", 4, 5, seed=1)
    assert sorted(f) == [1, 2, 3] and all(d == [0] * 5 for d in f.values())
    p = flows("permutation", 6, 3, seed=2)
    dst = [p[s][0] for s in range(6)]
    assert sorted(dst) == list(range(6)) and all(d != s for s, d in enumerate(dst))
    a = flows("all_to_all", 4, 200, seed=5)
    for s, d in a.items():
        assert s not in d and set(d) == set(range(4)) - {s}
    assert flows("pair", 2, 3, seed=1) == {0: [1, 1, 1]}


def test_popularity():
    assert qp_sequence("round_robin", 4, 6, seed=1) == [0, 1, 2, 3, 0, 1]
    z = qp_sequence("zipf", 64, 20000, seed=1, skew=0.99)
    counts = np.bincount(z, minlength=64)
    # Zipf(0.99): QP 0 about twice QP 1, far more than the last QP.
    assert 1.6 < counts[0] / counts[1] < 2.4 and counts[0] > 20 * counts[63]
    u = qp_sequence("uniform", 64, 20000, seed=1)
    assert np.bincount(u, minlength=64).min() > 200
    assert max(qp_sequence("uniform", 64, 1000, seed=1, working_set=20)) < 20
    assert qp_sequence("zipf", 8, 100, seed=1, skew=0) != qp_sequence("zipf", 8, 100,
                                                                     seed=1, skew=2)


def test_issuer_timeline():
    # Two messages at cycle 0, costs WQE 10, doorbell 5, CQE 3: the second waits for the
    # issuer (10 + 5 + 3 cycles).
    post, done = issue_schedule([0, 0, 100], [1, 1, 1], [1, 1, 0], 10, 5, 3)
    assert post == [10, 28, 110] and done == [18, 36, 115]


def test_percentiles_nearest_rank():
    v = list(range(1, 1001))
    d = distribution("latency", v[::-1])
    assert d == {"latency_p50_cycles": 500, "latency_p90_cycles": 900,
                 "latency_p99_cycles": 990, "latency_p999_cycles": 999,
                 "latency_max_cycles": 1000}
    assert percentile([7], 99.9) == 7
    assert percentile([1, 2, 3, 4], 50) == 2


@pytest.mark.parametrize("call, name", [
    (lambda: arrival_cycles(10, 1.5, 10, 1), "load"),
    (lambda: arrival_cycles(10, 0, 10, 1), "load"),
    (lambda: arrival_cycles(10, 0.5, 0, 1), "service_cycles"),
    (lambda: arrival_cycles(10, 0.5, 10, 1, burst=0), "burst"),
    (lambda: qp_sequence("zipf", 8, 10, 1, skew=-0.5), "skew"),
    (lambda: qp_sequence("uniform", 0, 10, 1), "qps"),
    (lambda: qp_sequence("hot", 8, 10, 1), "popularity"),
    (lambda: qp_sequence("uniform", 8, 10, 1, working_set=9), "working_set"),
    (lambda: flows("ring", 4, 10, 1), "pattern"),
    (lambda: flows("incast", 1, 10, 1), "nodes"),
    (lambda: rdma_load_run(128, 10, 1.01), "load"),
    (lambda: rdma_load_run(128, 10, 0.5, qps=0), "qps"),
    (lambda: rdma_load_run(128, 10, 0.5, skew=-1, popularity="zipf"), "skew"),
    (lambda: rdma_load_run(128, 10, 0.5, issuer="fpga"), "issuer"),
    (lambda: rdma_load_run(128, 10, 0.5, cache_entries=24), "cache_entries"),
    (lambda: rdma_load_run(128, 10, 0.5, colour=1), "colour"),
])
def test_bad_traffic_parameters_are_named(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_rdma_tail_grows_with_load():
    """The same 300 messages over 64 QPs (uniform, 16 cache entries): the p99 latency
    from arrival at 90 % of saturation exceeds the one at 20 %, and neither is below
    the unloaded median."""
    kn = dict(qps=64, popularity="uniform")
    s = saturation(128, 64, **kn)
    lo, _ = rdma_load_run(128, 300, 0.2, service_cycles=s, **kn)
    hi, _ = rdma_load_run(128, 300, 0.9, service_cycles=s, **kn)
    assert hi["latency_p99_cycles"] > lo["latency_p99_cycles"]
    assert lo["latency_p50_cycles"] <= lo["latency_p99_cycles"] <= lo["latency_max_cycles"]
    assert math.isclose(lo["offered_per_cycle"], 0.2 / s)
