"""Open-loop load on the RDMA engine (RdmaTop) in co-simulation against the golden model.

Arrivals from the seeded generator (analysis.load.traffic), QPs by popularity, an issuer
profile's posting costs (analysis.load.rdma): the cocotb test compares every beat, mark,
MMIO accept cycle, counter and both memories exactly and checks every frame and CQE
independently (tb/rdma/cocotb_rdma.py). Here, in addition: the co-simulation's model side
is the model-only load runner's run (the report's grid uses that runner), the RTL's
per-message cycles equal the model's, and latency from arrival is never below the
engine's unloaded latency.
"""

import pytest

from analysis.load.rdma import rdma_load_run, saturation
from tb.rdma.load_run import run_rdma_load

CASES = {
    # 8 QPs by Zipf over 16 cache entries, the CPU issuer, near saturation.
    # The rung is named: the co-simulation's engine ports (ACK coalescing) follow it.
    "zipf_cpu": dict(msg_bytes=128, load=0.9, qps=8, popularity="zipf", issuer="cpu",
                     rung="+ACK coalescing"),
    # 64 QPs drawn uniformly over 16 entries (misses), bursts of 4, the GPU issuer
    # (one doorbell per up to 4 WQEs).
    "uniform_gpu_burst": dict(msg_bytes=128, load=0.6, qps=64, popularity="uniform",
                              issuer="gpu", burst=4),
}


@pytest.mark.slow_variants("icarus-*", reason=(
    "Verilator runs both load cases on the RdmaTop that Icarus runs in test_cosim_rdma.py"))
@pytest.mark.parametrize("case", sorted(CASES))
def test_rdma_open_loop_matches_model(sim, test_id, case):
    c = dict(CASES[case])
    messages = 40 if sim == "verilator" else 16
    kn = {k: v for k, v in c.items() if k not in ("msg_bytes", "load")}
    service = saturation(c["msg_bytes"], 32, **kn)
    res = run_rdma_load(sim, test_id, messages=messages, service_cycles=service, **c)
    assert res["mismatches"] == 0
    assert res["per_rtl"] is not None and res["per_rtl"] == res["per_model"]
    row, per = rdma_load_run(c["msg_bytes"], messages, c["load"], service_cycles=service,
                             **kn)
    assert {k: v.tolist() for k, v in per.items()} == res["per_model"]
    assert res["rtl"]["latency_p99_cycles"] == row["latency_p99_cycles"]
    lat = [w - a for w, a in zip(res["per_rtl"]["remote_write"],
                                 res["per_rtl"]["arrival"], strict=True)]
    assert len(lat) == messages and min(lat) > 0
    # Doorbells are released at or after arrival (the issuer never posts early).
    assert all(acc >= arr for acc, arr in zip(res["per_rtl"]["accept"],
                                              res["per_rtl"]["arrival"], strict=True))


@pytest.mark.parametrize("top", [{"cache_ways": 4}, {"cache_ways": 2}, {"miss_queue": 8}])
def test_load_scenario_warms_up_on_the_tops_engine(top):
    """The co-simulated load run's stimulus (the cocotb test's scenario for a top) is the
    model-only point's on the same engine: the warm-up that sets the arrivals' start runs
    with the top's build fields too. With a 4-way cache the 16 warm QPs of 64 by Zipf
    miss less than direct mapped, so the measured arrivals start earlier: a warm-up on the
    default engine would give another stimulus than the point the row names (no simulator
    here: the stimulus and the model's side only)."""
    from tb.rdma.cocotb_rdma import config, scenario

    kn = dict(qps=64, popularity="zipf", issuer="gpu")
    service = saturation(128, 32, **kn)
    p = dict(kind="load", msg_bytes=128, messages=30, load=1.0, service_cycles=service,
             seed=1, cache_entries=16, knobs={}, **kn)
    cfg, knobs = config(top, p)
    v = scenario(p, cfg, knobs)[0]
    _, per = rdma_load_run(128, 30, 1.0, service_cycles=service, **kn, **top)
    assert list(v.arrivals) == per["arrival"].tolist()
    if "cache_ways" in top:             # the case the warm-up's engine decides
        _, plain = rdma_load_run(128, 30, 1.0, service_cycles=service, **kn)
        assert per["arrival"][0] < plain["arrival"][0]
