"""The requester's miss queue (:class:`rtl.rdma.req.miss_queue.MissQueue`, the top's
``miss_queue``) in co-simulation of RdmaTop against the golden model.

64 QPs by Zipf popularity over 16 context-cache entries, saturated, the GPU issuer (WQEs
fetched from host memory: one doorbell per batch): the popular QPs stay cached, the
others miss, and their items step aside while the fills are on their way. The cocotb
test compares every beat on both links, every counter, both host memories and every
record cycle for cycle, and checks frames and CQEs independently
(tb/rdma/cocotb_rdma.py). Here, in addition: the model's run with the miss queue
differs from the run without it (items did pass), and the RTL's per-message cycles
equal the model's.
"""

import json

import pytest

from analysis.load.rdma import rdma_load_run, saturation
from tb.rdma.runner import run_rdma

#: The point: 128-byte WRITEs, 64 QPs by Zipf over 16 entries, the GPU issuer.
KNOBS = dict(qps=64, popularity="zipf", issuer="gpu")
MSG_BYTES, LOAD, DEPTH = 128, 1.0, 8


@pytest.mark.slow(reason=(
    "a top of its own (miss_queue 8, off by default: one more export and build on each "
    "simulator; make test reached 10 minutes with it): make test-all co-simulates it; in make "
    "test test_unit_miss_queue.py holds the miss queue against its twin and the requester's "
    "model runs with one"))
def test_rdma_miss_queue_matches_model(sim, test_id):
    messages = 40 if sim == "verilator" else 20
    service = saturation(MSG_BYTES, 32, **KNOBS)
    # The model alone: with the side queue some message lands earlier than without it
    # (an item of a cached QP passed one waiting for its fill), none later in total.
    _, with_mq = rdma_load_run(MSG_BYTES, messages, LOAD, service_cycles=service,
                               miss_queue=DEPTH, **KNOBS)
    _, without = rdma_load_run(MSG_BYTES, messages, LOAD, service_cycles=service, **KNOBS)
    early = [a < b for a, b in zip(with_mq["remote_write"], without["remote_write"],
                                   strict=True)]
    assert any(early)
    assert sum(with_mq["remote_write"]) < sum(without["remote_write"])
    params = dict(kind="load", msg_bytes=MSG_BYTES, messages=messages, load=LOAD,
                  service_cycles=service, seed=1, cache_entries=16, knobs={},
                  out_json="m.json", **KNOBS)
    folder = run_rdma({"miss_queue": DEPTH}, params=params, sim=sim, test_id=test_id)
    got = json.loads((folder / "m.json").read_text())
    assert got["mismatches"] == 0
    assert got["per_rtl"] is not None and got["per_rtl"] == got["per_model"]
    assert got["per_model"]["remote_write"] == with_mq["remote_write"].tolist()
    assert len(got["per_rtl"]["remote_write"]) == messages
