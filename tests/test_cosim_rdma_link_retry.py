"""RdmaTop over reliable links (``link_retry=True``) in co-simulation against the golden
model: every beat, stamp, counter (the reliable links' included) and memory word equal
(the scoreboard of tb.rdma.cocotb_rdma). 128-byte WRITEs on the best rung of the ladder:
without faults each message's latency grows by the WRITE frame's extra cycles on the
A->B link and its completion also by the ACK's on B->A (``n + 1`` for a frame of ``n``
beats, ReliableLink's timing), at the same steady-state rate; with a few % of frames
dropped each way the links resend them and the engine's go-back-N never fires."""

import json

import pytest

from tb.rdma.runner import run_rdma
from tests.test_rdma_link_retry import ACK_BEATS, BEST, MESSAGES, WARMUP, WRITE_BEATS, _writes

pytestmark = pytest.mark.slow_variants("verilator", reason=(
    "Icarus runs both cases (RdmaTop with link_retry is one more Verilator build of about a "
    "minute); the model's reliable link is checked against ReliableLinkModel in "
    "test_rdma_link_retry.py"))

TOP = {"link_retry": True}
PARAMS = dict(kind="writes", messages=MESSAGES, sizes=[128], qps=1, rung=BEST,
              warmup=WARMUP)
DROPS = dict(seed=5, drop_rate=2000)           # about 3 % of frames, each way


def _run(sim, test_id, tmp_path, **extra):
    out = tmp_path / "row.json"
    run_rdma(TOP, params=dict(PARAMS, out_json=str(out), **extra), sim=sim, test_id=test_id)
    row = json.loads(out.read_text())
    assert row["mismatches"] == 0 and row["messages"] == MESSAGES
    for key in ("ii_cycles", "latency_cycles", "completion_cycles", "wire_bytes",
                "latency", "completion"):
        assert row["rtl"][key] == row["model"][key], key
    return row


def test_rdma_link_retry_writes(sim, test_id, tmp_path):
    row = _run(sim, test_id, tmp_path)
    rtl, c = row["rtl"], row["counters"]
    _, plain = _writes(False)
    assert rtl["ii_cycles"] == plain["ii_cycles"]
    assert [b - a for a, b in zip(plain["latency"], rtl["latency"], strict=True)] == \
        [WRITE_BEATS + 1] * MESSAGES
    assert rtl["completion_cycles"] - plain["completion_cycles"] == \
        WRITE_BEATS + 1 + ACK_BEATS + 1
    assert c["ab_tx_frames"] == c["ab_rx_frames_ok"] == c["req_frames"] == MESSAGES
    assert c["ab_tx_resent_frames"] == c["ba_tx_resent_frames"] == 0
    assert c["ab_full"] == c["ba_full"] == 0


def test_rdma_link_retry_recovers_drops(sim, test_id, tmp_path):
    row = _run(sim, test_id, tmp_path, faults_ab=DROPS,
               faults_ba=dict(DROPS, seed=DROPS["seed"] + 1),
               expect={"req_retransmissions": 0, "req_timeouts": 0, "ab_full": 0,
                       "ba_full": 0})
    c = row["counters"]
    assert c["ab_dropped"] + c["ba_dropped"] > 0
    assert c["ab_tx_resent_frames"] + c["ba_tx_resent_frames"] > 0
    assert c["ab_rx_frames_ok"] == c["req_frames"] == MESSAGES
    assert row["lost"] == 0 and row["corrupted_bytes"] == 0

