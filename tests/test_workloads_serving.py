"""Deployments at a latency target (analysis/workloads/serving.py): the messages between
nodes by hand, tokens/s per GPU at TPOT <= 50 ms from the step, and the limits."""

import pytest

from analysis.workloads.generate import Deployment, decode_step
from analysis.workloads.serving import SERVING, Serving, between_nodes, serving_rows

MIXTRAL = Serving("Mixtral-8x7B EP8, one scale-up domain", "mixtral-8x7b", ep=8, ports=8)


def test_between_nodes_keeps_the_messages_that_cross_by_hand():
    """Llama-3.1-405B TP16 over two nodes of 8, reduce-scatter + all-gather: each GPU
    sends a chunk and a flag to each of its 15 peers per phase, 8 of them in the other
    node, so 8/15 of the messages cross; the phases stay."""
    tr = decode_step("llama-3.1-405b", Deployment(batch=1, tp=16), allreduce="rsag")
    x = between_nodes(tr, 8)
    assert x.messages * 15 == tr.messages * 8
    assert x.phases == tr.phases
    c = x.columns
    assert all((c["src"] // 8) != (c["dst"] // 8))


def test_serving_rows_by_hand():
    """Mixtral-8x7B EP8 (8 attention groups of one GPU, one expert each), batches 1, 2
    and 4: every row is within 50 ms, names its attachment and issue cost, and its
    tokens/s per GPU is the batch's tokens (batch x 8 groups) over the step over 8 GPUs."""
    rows = serving_rows((MIXTRAL,), batches=(1, 2, 4))
    assert [r["design"] for r in rows] == ["NIC", "RDMA"]
    for r in rows:
        assert r["batch"] == 4 and r["limit"] == "largest batch tried"
        assert 0 < r["tpot_ms"] <= 50
        assert r["tok_s_gpu"] == pytest.approx(4 * 8 / (r["tpot_ms"] * 1e-3) / 8)
        assert r["attachment"] in ("integrated", "on_die") and r["issue"]
    assert rows[1]["rung"] != "-" and "per QP" in rows[1]["issue"]


def test_a_target_no_batch_meets_gives_batch_0():
    rows = serving_rows((MIXTRAL,), batches=(1, 2), target_s=1e-3)
    assert all(r["batch"] == 0 and r["limit"] == "TPOT" and r["tpot_ms"] is None
               for r in rows)


def test_the_table_has_both_designs_for_every_deployment():
    labels = [s.label for s in SERVING]
    assert any("DeepSeek-V3" in x and "nodes" in x for x in labels)
    assert any("DeepSeek-V3" in x and "one scale-up domain" in x for x in labels)
    assert sum("Llama-3.1-405B TP16" in x for x in labels) == 2
    assert any("Mixtral" in x for x in labels)
