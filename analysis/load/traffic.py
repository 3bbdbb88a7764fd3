"""Seeded open-loop traffic, shared by the golden models, the testbenches and the report.

The generator decides *when* each message exists (its arrival cycle), *where* it goes
(the pattern), *which QP* carries it (RDMA popularity) and *when the issuer posts it*
(issuer costs). The co-simulation loads the result into the timed players of the RTL
(each item offered from its release cycle on) and the model reads the same lists, so
both see the same arrivals to the cycle. Everything is a pure function of its
arguments and ``seed`` (Python's :class:`random.Random`; no global state).

Arrivals (:func:`arrival_cycles`): bursts of ``burst`` messages arrive in the same
cycle; the gaps between bursts are geometric (a Bernoulli arrival per cycle, the
discrete Poisson process) with mean ``burst * service_cycles / load``, so that the
offered rate is ``load`` times the saturated rate ``1 / service_cycles``. The first
burst arrives at ``start`` plus one gap.

Parameter checks raise ``ValueError`` naming the parameter (:mod:`spec.load`).
"""

import math
import random
from bisect import bisect_left
from itertools import accumulate

from spec.formats.roce import QPN_BITS
from spec.load import (
    PATTERNS,
    PERCENTILES,
    POPULARITY,
    check_count,
    check_load,
    check_skew,
    percentile_key,
)

__all__ = ["arrival_cycles", "flows", "senders", "qp_sequence", "issue_schedule",
           "percentile", "distribution"]


def arrival_cycles(messages, load, service_cycles, seed, burst=1, start=0):
    """``messages`` arrival cycles (non-decreasing ints) at offered ``load``.

    ``service_cycles``: the cycles per message of the saturated sender (> 0);
    ``burst``: messages per arrival (>= 1). See the module doc.
    """
    check_count("messages", messages)
    load = check_load(load)
    check_count("burst", burst, 1, 1 << 20)
    if (not isinstance(service_cycles, (int, float)) or isinstance(service_cycles, bool)
            or service_cycles <= 0):
        raise ValueError(f"service_cycles must be a number above 0, not {service_cycles!r}")
    rng = random.Random(seed)
    p = min(1.0, load / (burst * service_cycles))     # arrivals per cycle (bursts)
    log_q = math.log1p(-p) if p < 1 else None
    out, t = [], start
    while len(out) < messages:
        if log_q is None:
            gap = 1
        else:
            u = 1.0 - rng.random()                       # (0, 1]
            gap = 1 + int(math.log(u) / log_q)
        t += gap
        out.extend([t] * min(burst, messages - len(out)))
    return out


def senders(pattern, nodes):
    """The nodes that send in ``pattern`` with ``nodes`` nodes."""
    if pattern not in PATTERNS:
        raise ValueError(f"pattern must be one of {PATTERNS}, not {pattern!r}")
    check_count("nodes", nodes, 2, 256)
    if pattern == "pair":
        return [0]
    if pattern == "incast":
        return list(range(1, nodes))
    return list(range(nodes))


def flows(pattern, nodes, messages, seed):
    """``{sender: [destination of each of its messages]}``, ``messages`` per sender."""
    check_count("messages", messages)
    out = {}
    rng = random.Random(seed)
    who = senders(pattern, nodes)
    if pattern == "permutation":
        perm = list(range(nodes))
        while any(perm[i] == i for i in range(nodes)):      # a derangement
            rng.shuffle(perm)
    for s in who:
        if pattern == "pair":
            out[s] = [1] * messages
        elif pattern == "incast":
            out[s] = [0] * messages
        elif pattern == "permutation":
            out[s] = [perm[s]] * messages
        else:
            others = [d for d in range(nodes) if d != s]
            out[s] = [others[rng.randrange(len(others))] for _ in range(messages)]
    return out


def qp_sequence(popularity, qps, messages, seed, skew=0.99, working_set=None):
    """The QP index (0 .. qps - 1) of each of ``messages`` messages.

    Draws from the first ``working_set`` QPs (default ``qps``): sweeping it across the
    context-cache size moves the hit ratio smoothly (uniform: about ``entries /
    working_set`` once it exceeds the cache) where round robin falls off a step.
    """
    if popularity not in POPULARITY:
        raise ValueError(f"popularity must be one of {POPULARITY}, not {popularity!r}")
    check_count("qps", qps, 1, 1 << QPN_BITS)
    check_count("messages", messages)
    skew = check_skew(skew)
    ws = qps if working_set is None else check_count("working_set", working_set, 1, qps)
    if popularity == "round_robin":
        return [k % ws for k in range(messages)]
    rng = random.Random(seed)
    if popularity == "uniform":
        return [rng.randrange(ws) for _ in range(messages)]
    cum = list(accumulate(1.0 / (i + 1) ** skew for i in range(ws)))
    total = cum[-1]
    return [min(ws - 1, bisect_left(cum, rng.random() * total)) for _ in range(messages)]


def issue_schedule(arrivals, rings, signalled, wqe_cycles=0, doorbell_cycles=0,
                   cqe_cycles=0):
    """When one serial issuer posts each message (:class:`IssuerProfile` costs).

    Message ``j`` arrives at ``arrivals[j]`` (non-decreasing); the issuer starts it at
    ``t_j = max(arrivals[j], free)``, spends ``wqe_cycles`` building the WQE, then (if
    ``rings[j]``) ``doorbell_cycles`` on the doorbell, and ``cqe_cycles`` on a CQE poll
    if ``signalled[j]`` (charged to its timeline: it polls between posts). Returns
    ``(post, doorbell)``: per message the cycle its WQE is complete (``t_j +
    wqe_cycles``: the doorbell or BlueFlame write can go from then), and the cycle the
    issuer is free again after it. Costs are rounded to whole cycles.
    """
    w, d, c = (int(round(x)) for x in (wqe_cycles, doorbell_cycles, cqe_cycles))
    if min(w, d, c) < 0:
        raise ValueError("issuer costs must be >= 0")
    post, done, free = [], [], 0
    for a, r, s in zip(arrivals, rings, signalled, strict=True):
        t = max(a, free)
        post.append(t + w)
        free = t + w + (d if r else 0) + (c if s else 0)
        done.append(free)
    return post, done


def percentile(values, q):
    """The nearest-rank ``q``-th percentile (0 < q <= 100) of ``values`` (non-empty)."""
    s = sorted(values)
    if not s:
        raise ValueError("percentile of no values")
    k = max(1, math.ceil(q / 100.0 * len(s) - 1e-9))
    return s[min(k, len(s)) - 1]


def distribution(quantity, values):
    """``{latency_p50_cycles: .., .., latency_max_cycles: ..}`` for ``quantity``."""
    out = {percentile_key(quantity, n): percentile(values, q) for n, q in PERCENTILES}
    out[percentile_key(quantity, "max")] = max(values)
    return out
