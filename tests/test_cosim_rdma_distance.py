"""RdmaTop at a distance: its link stands for a rack-class path (400 cycles one way,
spec.fabric_profiles ``rack``), a delay line in a memory. 200 WRITEs of 128 B on the best
rung of the ladder, back to back after a warm-up message: RTL = model on every beat,
stamp, counter and memory word (the scoreboard of tb.rdma.cocotb_rdma), and the rate is
that of the short link (the window records and the transport timer cover the round trip,
spec.fabric_profiles.rdma_records / rdma_timeout)."""

import dataclasses
import json

import pytest

from analysis.rdma.point import reduce_run, run_model
from analysis.scenarios.rdma import writes_scenario
from spec.fabric_profiles import one_way, rdma_records, rdma_timeout
from spec.rdma_engine import LADDER, SIM_TIMEOUT, TOP_DEFAULTS
from tb.rdma.cocotb_rdma import config
from tb.rdma.runner import run_rdma

LATENCY = one_way("rack")                  # 400 cycles
MESSAGES, WARMUP = 200, 4000
PARAMS = dict(kind="writes", messages=MESSAGES, sizes=[128], qps=1, rung=LADDER[-1][0],
              warmup=WARMUP)


def _model_ii(link_latency):
    cfg, knobs = config({"link_latency": link_latency}, PARAMS)
    v = writes_scenario(MESSAGES, [128], 1, depth=cfg.depth, mr_entries=cfg.mr_entries,
                        warmup=WARMUP, **knobs)
    cfg = dataclasses.replace(cfg, cq_base=v.cq_base, cq_log2=v.cq_log2)
    return reduce_run(v, run_model(cfg, v), MESSAGES)["ii_cycles"]


@pytest.mark.slow(reason=(
    "the engine's link latency is co-simulated in test_cosim_rdma_link_latency.py and at "
    "pod distance in make sim's gap rows (Verilator, RTL = model); the records and timer "
    "rules are checked on the model; the point is a top of its own (an export of about "
    "30 s)"))
def test_rdma_best_rung_at_rack_distance(sim, test_id, tmp_path):
    assert LATENCY == 400
    # Today's records and timer are what the rules give for this path's round trip
    # at most; the run checks that they do not limit it.
    assert TOP_DEFAULTS["records"] <= rdma_records("rack")
    assert SIM_TIMEOUT <= rdma_timeout("rack")
    out = tmp_path / "row.json"
    run_rdma({"link_latency": LATENCY}, params=dict(PARAMS, out_json=str(out)), sim=sim,
             test_id=test_id)
    row = json.loads(out.read_text())
    assert row["mismatches"] == 0 and row["messages"] == MESSAGES
    rtl, model = row["rtl"], row["model"]
    for key in ("ii_cycles", "latency_cycles", "completion_cycles", "wire_bytes"):
        assert rtl[key] == model[key], key
    c = row["counters"]
    assert c["req_timeouts"] == 0 and c["req_frames"] == MESSAGES
    # Records in use at most: the whole run in flight at once (a round trip of 800
    # cycles holds more than 200 messages at one per 4 cycles), below the pool.
    assert 0 < c["req_records_max"] <= MESSAGES < TOP_DEFAULTS["records"]
    # Distance costs no rate: the steady state is that of the 6-cycle link (model).
    assert rtl["ii_cycles"] == _model_ii(TOP_DEFAULTS["link_latency"])
    # ... and only latency: the payload lands at least one way later (oracle: the
    # definition of the link).
    assert rtl["latency_cycles"] >= LATENCY
