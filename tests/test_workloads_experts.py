"""Expert placement and routing (analysis/workloads/experts.py): balanced routing as its
closed form, sampled routing's draws, DeepSeek's redundant experts and the checks."""

import numpy as np
import pytest

from analysis.workloads.config import load_model
from analysis.workloads.experts import gpu_loads, placement, routing_puts, token_gpus
from analysis.workloads.generate import Deployment, check_deployment, decode_step

DSV3 = load_model("deepseek-v3")        # 256 routed experts, 8 per token


def test_balanced_routing_is_the_closed_form():
    """Token u picks experts (u + j E/k) mod E; expert x lives on GPU x // (E / ep)."""
    dep = Deployment(batch=16, ep=8)
    e, k = DSV3.n_routed_experts, DSV3.num_experts_per_tok
    want = np.zeros((8, 8), dtype=np.int64)
    for u in range(16 * 8):                 # 16 tokens on each of the 8 GPUs, in order
        for j in range(k):
            want[u // 16, ((u + j * e // k) % e) // (e // 8)] += 1
    assert np.array_equal(routing_puts(DSV3, dep), want)


def test_sampled_routing_draws_k_distinct_experts_per_token_by_seed():
    dep = Deployment(batch=32, ep=8, routing="sampled", routing_seed=3)
    src, dst, unit = token_gpus(DSV3, dep)
    k = DSV3.num_experts_per_tok
    experts, _ = placement(DSV3, dep)
    picked = experts[unit].reshape(-1, k)
    assert picked.shape == (32 * 8, k)
    assert all(len(set(row)) == k for row in picked.tolist())
    assert np.array_equal(src, np.repeat(np.arange(8), 32 * k))
    again = token_gpus(DSV3, Deployment(batch=32, ep=8, routing="sampled", routing_seed=3))
    other = token_gpus(DSV3, Deployment(batch=32, ep=8, routing="sampled", routing_seed=4))
    assert np.array_equal(again[1], dst) and not np.array_equal(other[1], dst)
    pairs, _ = gpu_loads(DSV3, dep)
    assert pairs.sum() == 32 * 8 * k and pairs.max() > pairs.min()   # chance is uneven


def test_redundant_experts_fill_every_gpu_and_go_to_the_heaviest_experts():
    dep = Deployment(batch=64, ep=72, routing="sampled", redundant_experts=32,
                     expert_skew=1.0)
    experts, gpu = placement(DSV3, dep)
    assert len(experts) == 256 + 32
    assert np.array_equal(np.bincount(gpu, minlength=72), np.full(72, 4))
    reps = np.bincount(experts, minlength=256)
    # weights fall with the expert's index: the replicas go to the lowest-numbered
    assert reps[0] > 1 and reps[-1] == 1 and np.all(np.diff(reps) <= 0)


def test_redundant_experts_lower_the_busiest_gpu_under_skew():
    """Under a skewed router, replicating the heavy experts takes load off the busiest
    GPU (what DeepSeek's load balancer is for)."""
    base = dict(batch=256, ep=32, routing="sampled", expert_skew=1.0)
    plain, _ = gpu_loads(DSV3, Deployment(**base))
    spread, _ = gpu_loads(DSV3, Deployment(**base, redundant_experts=32))
    assert plain.sum() == spread.sum()
    assert spread.max() < plain.max()


def test_a_replicated_expert_takes_its_replicas_in_turn():
    dep = Deployment(batch=64, ep=32, routing="sampled", redundant_experts=32,
                     expert_skew=1.0)
    experts, _ = placement(DSV3, dep)
    _, _, unit = token_gpus(DSV3, dep)
    hot = unit[experts[unit] == 0]          # expert 0 has the most replicas
    first = np.flatnonzero(experts == 0)
    assert len(first) > 1
    assert np.array_equal(hot, first[np.arange(len(hot)) % len(first)])


def test_ep72_needs_the_redundant_experts_and_has_a_qp_per_local_replica():
    with pytest.raises(ValueError, match=r"ep \(72\) must divide n_routed_experts \(256\)"):
        check_deployment("deepseek-v3", Deployment(batch=1, ep=72, routing="sampled"))
    dep = Deployment(batch=2, ep=72, routing="sampled", redundant_experts=32)
    tr = decode_step("deepseek-v3", dep)
    dispatch = [p for p in tr.phases if p.op == "ep_dispatch"]
    assert dispatch and all(p.qps == 4 * 71 for p in dispatch)


@pytest.mark.parametrize("field, value, match", [
    ("routing", "zipf", "routing must be one of"),
    ("expert_skew", -0.5, "expert_skew must be a number >= 0"),
    ("expert_skew", float("nan"), "expert_skew must be a number >= 0"),
    ("routing_seed", -1, "routing_seed must be an integer >= 0"),
    ("redundant_experts", -1, "redundant_experts must be an integer >= 0"),
    ("redundant_experts", 300, r"redundant_experts \(300\) must be at most"),
    ("redundant_experts", 32, "needs routing='sampled'"),
])
def test_bad_routing_fields_are_refused_by_name(field, value, match):
    kw = dict(batch=1, ep=32, routing="balanced" if field == "redundant_experts"
              and value == 32 else "sampled")
    kw[field] = value
    with pytest.raises(ValueError, match=match):
        check_deployment("deepseek-v3", Deployment(**kw))


def test_redundant_experts_need_expert_parallelism():
    with pytest.raises(ValueError, match="needs expert parallelism"):
        check_deployment("llama-3-70b", Deployment(batch=1, tp=8, routing="sampled",
                                                   redundant_experts=8))
