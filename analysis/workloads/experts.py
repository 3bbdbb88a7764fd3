"""Where the routed experts live and which GPU each token's experts are on, for the EP
dispatch and combine of a decode step (:mod:`analysis.workloads.decode_trace`) and the
roofline's busiest GPU (:mod:`analysis.workloads.roofline`).

Routing (:data:`ROUTING`, ``Deployment.routing``)
    ``balanced``: deterministic and exactly even, token ``u`` (numbered over the whole step,
    GPU by GPU) picks experts ``(u + j x E / k) mod E`` for ``j < k``. ``sampled``: each
    token draws ``k`` distinct experts at random, expert ``i`` with weight
    ``(i + 1) ** -expert_skew`` (``expert_skew`` 0: every expert alike, so the only
    imbalance is the step's chance), from a generator seeded with ``routing_seed``;
    the same draw serves every MoE layer of the step. Real routers are trained towards
    balance (DeepSeek-V3's auxiliary-loss-free bias, arXiv 2412.19437 Sec. 2.1.2) but a
    step's tokens still land unevenly; ``sampled`` with skew 0 is that chance alone, a
    lower bound on a real router's imbalance.
Placement
    Without redundant experts GPU ``g`` holds experts ``g x E / ep`` to ``(g + 1) x E /
    ep - 1``. With ``redundant_experts = r`` there are ``E + r`` slots, ``(E + r) / ep``
    per GPU, as DeepSeek-V3 deploys (Sec. 3.4.1: 32 redundant experts, each GPU one
    extra beside its 8, at EP32) and as its load balancer places them (deepseek-ai/EPLB,
    README: replicate the heavy-loaded experts, then pack the replicas onto GPUs to even
    their loads). Here, from the expected loads (the weights above): each of the ``r``
    replicas goes, one at a time, to the expert with the largest load per replica (ties:
    the lowest expert); the ``E + r`` replicas, each carrying its expert's load divided by
    its replicas, are packed largest first onto the least-loaded GPU that has a free slot
    (ties: the lowest GPU). A token sent to a replicated expert takes its replicas in
    turn (the ``c``-th token of that expert in step order takes replica ``c mod
    replicas``).
"""

from functools import lru_cache

import numpy as np

from analysis.workloads.deployment import ROUTING, tokens_per_rank

__all__ = ["ROUTING", "expert_weights", "placement", "token_gpus", "routing_puts",
           "gpu_loads"]

def expert_weights(m, dep):
    """The expected share of each of the ``E`` routed experts (a float array summing to
    1): ``(i + 1) ** -expert_skew``, normalised."""
    w = np.arange(1, m.n_routed_experts + 1, dtype=np.float64) ** -float(dep.expert_skew)
    return w / w.sum()


def placement(m, dep):
    """The replicas of the routed experts: ``(expert, gpu)``, two int64 arrays of
    ``E + redundant_experts`` entries (module doc), ordered by expert then replica."""
    e, n, r = m.n_routed_experts, dep.ep, dep.redundant_experts
    if r == 0:
        experts = np.arange(e, dtype=np.int64)
        return experts, experts // (e // n)
    load = expert_weights(m, dep)
    reps = np.ones(e, dtype=np.int64)
    for _ in range(r):
        reps[np.argmax(load / reps)] += 1
    experts = np.repeat(np.arange(e, dtype=np.int64), reps)
    unit = load[experts] / reps[experts]
    slots = (e + r) // n
    gpu = np.empty(len(experts), dtype=np.int64)
    held = np.zeros(n)
    free = np.full(n, slots, dtype=np.int64)
    for i in np.argsort(-unit, kind="stable"):
        room = np.flatnonzero(free)
        g = room[np.argmin(held[room])]
        gpu[i] = g
        held[g] += unit[i]
        free[g] -= 1
    return experts, gpu


def _token_sources(dep):
    """The GPU of every token of the step: each GPU dispatches its TP rank's share."""
    share = tokens_per_rank(dep.batch, dep.tp)
    return np.repeat(np.arange(dep.ep, dtype=np.int64), [share[g % dep.tp]
                                                         for g in range(dep.ep)])


def _token_experts(m, dep, tokens):
    """``(tokens, k)`` experts picked by each token (module doc)."""
    e, k = m.n_routed_experts, m.num_experts_per_tok
    if dep.routing == "balanced":
        u = np.arange(tokens, dtype=np.int64)
        return (u[:, None] + np.arange(k, dtype=np.int64)[None, :] * (e // k)) % e
    rng = np.random.default_rng(dep.routing_seed)
    # k draws without replacement by weight: the k largest of log(w) + Gumbel noise.
    keys = np.log(expert_weights(m, dep))[None, :] + rng.gumbel(size=(tokens, e))
    return np.argsort(-keys, axis=1, kind="stable")[:, :k].astype(np.int64)


@lru_cache(maxsize=64)
def token_gpus(m, dep):
    """``(src, dst, unit)``: for every (token, picked expert) pair of the step, in token
    order, the GPU that sends it, the GPU of the replica that serves it and that
    replica's index into :func:`placement`'s arrays (read-only int64 arrays; cached, as
    the trace and the roofline both ask for them)."""
    src_of_token = _token_sources(dep)
    picked = _token_experts(m, dep, len(src_of_token)).ravel()
    experts, gpu = placement(m, dep)
    first = np.searchsorted(experts, np.arange(m.n_routed_experts))
    reps = np.bincount(experts, minlength=m.n_routed_experts)
    order = np.argsort(picked, kind="stable")        # step order within each expert
    seen = np.empty(len(picked), dtype=np.int64)
    counts = np.bincount(picked, minlength=m.n_routed_experts)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    seen[order] = np.arange(len(picked)) - np.repeat(starts, counts)
    unit = first[picked] + seen % reps[picked]
    src = np.repeat(src_of_token, m.num_experts_per_tok)
    out = src, gpu[unit], unit
    for a in out:
        a.flags.writeable = False
    return out


def routing_puts(m, dep):
    """``puts[src, dst]``: (token, expert) pairs GPU ``src`` sends to GPU ``dst`` in one
    MoE layer (an ``(ep, ep)`` int64 array; the diagonal is local, not sent)."""
    src, dst, _ = token_gpus(m, dep)
    puts = np.zeros((dep.ep, dep.ep), dtype=np.int64)
    np.add.at(puts, (src, dst), 1)
    return puts


def gpu_loads(m, dep):
    """``(pairs, touched)``: per GPU, the (token, expert) pairs it serves in one MoE layer
    and the replicas it holds that serve at least one token (two int64 arrays of
    ``ep``)."""
    _, dst, unit = token_gpus(m, dep)
    _, gpu = placement(m, dep)
    pairs = np.bincount(dst, minlength=dep.ep)
    touched = np.bincount(gpu[np.unique(unit)], minlength=dep.ep)
    return pairs.astype(np.int64), touched.astype(np.int64)
