"""Open-loop load on the RDMA engine (the two-node :class:`RdmaTop`), on the golden model.

One sender (node A's host) posts ``messages`` RDMA WRITEs of ``msg_bytes``. Each message
*arrives* (the application hands it over) at a cycle of
:func:`pymodel.load.traffic.arrival_cycles`, goes to a QP drawn by
:func:`pymodel.load.traffic.qp_sequence`, and is *posted* by one serial issuer whose
costs come from an issuer profile (:data:`pymodel.workloads.carriers.ISSUERS`: ``none``,
``cpu``, ``gpu``, ``controller``, ...): it builds the WQE in host memory
(``wqe_cycles``), rings the QP's doorbell (``doorbell_cycles``; the doorbell's MMIO
write is released the cycle the WQE is complete) and polls one CQE per signalled
message (``cqe_cycles``, charged to its timeline). Doorbell batching is opportunistic,
as a good issuer does it: the issuer rings after ``doorbell_batch`` WQEs or as soon as
no further message is waiting, one doorbell per QP with unannounced WQEs. Every
``signal_every``-th message of a QP (by the issuer's count) asks for a CQE, and the
last one of each QP.

The model plays the MMIO player's words at their release cycles exactly as the RTL's
timed player does, so a co-simulation of the same scenario (:func:`build_load`) is
compared cycle for cycle (tests/test_cosim_rdma_load.py).

Latency under load counts from *arrival*: the remote write of the message's last byte
minus its arrival (queueing at the issuer, the engine and the host interface included);
completion likewise (the CQE that tells the host, the next one of its QP for an
unsignalled message). Before the measured messages, a warm-up posts one WRITE to
each of the most used QPs that the context caches hold (:func:`load_scenario`), so
that the measurement starts from the steady state, not from cold caches; it is not
measured. ``service_cycles`` (for the offered load) is the saturated
sender's cycles per message: the same scenario with every message arriving at cycle 0
(:func:`saturation`), as ``ib_write_bw`` would measure it with this issuer.
"""

import random

import numpy as np

from pymodel.load.traffic import arrival_cycles, distribution, qp_sequence
from pymodel.rdma.metrics import per_message
from pymodel.rdma.point import ENGINE_KNOBS, knobs_of, run_model
from pymodel.rdma.system import Config
from pymodel.rdma.verbs import Verbs, cq_log2_for
from pymodel.workloads.carriers import ISSUERS
from spec.host import PROFILES
from spec.load import LOAD_DEFAULTS, check_count, check_load, check_skew

__all__ = ["build_load", "rdma_load_run", "saturation", "load_row", "load_per_message",
           "check_load_knobs", "load_scenario", "warm_qps", "RDMA_LOAD_DEFAULTS",
           "LOAD_ISSUERS", "LOAD_KNOBS"]

#: The issuer profiles a load point may name (``cpu_framework`` is a framework's cost,
#: used by the inference carriers, not an issuer of single WRITEs).
LOAD_ISSUERS = ("none", "cpu", "gpu", "controller")

#: Knobs of a load point and their defaults.
RDMA_LOAD_DEFAULTS = {"qps": 1, "cache_entries": 16, "host": "pcie", "link_latency": 6,
                      "pmtu_log2": 12, "issuer": "none", "popularity": "round_robin",
                      "skew": LOAD_DEFAULTS["skew"], "working_set": None, "burst": 1,
                      "ack_every": 1, "ack_frames": 0}


#: The knobs that shape the traffic (the rest are the top's and the engine's).
LOAD_KNOBS = ("qps", "issuer", "popularity", "skew", "working_set", "burst", "pmtu_log2")


def check_load_knobs(msg_bytes, messages, k):
    """Every knob of ``k`` checked (``ValueError`` naming the first bad one) and the
    defaults filled in."""
    unknown = sorted(set(k) - set(RDMA_LOAD_DEFAULTS))
    if unknown:
        raise ValueError(f"unknown RDMA load knob(s) {unknown}; known: "
                         f"{sorted(RDMA_LOAD_DEFAULTS)}")
    p = dict(RDMA_LOAD_DEFAULTS, **k)
    check_count("messages", messages, 1, 1 << 20)
    check_count("msg_bytes", msg_bytes, 1, 1 << 16)
    check_count("qps", p["qps"], 1, 4096)
    ce = check_count("cache_entries", p["cache_entries"], 16, 256)
    if ce & (ce - 1):
        raise ValueError(f"cache_entries must be a power of two, not {ce!r}")
    check_count("link_latency", p["link_latency"], 1, 1024)
    check_count("pmtu_log2", p["pmtu_log2"], 8, 12)
    check_count("burst", p["burst"], 1, 1 << 20)
    check_skew(p["skew"])
    if p["working_set"] is not None:
        check_count("working_set", p["working_set"], 1, p["qps"])
    if p["issuer"] not in LOAD_ISSUERS:
        raise ValueError(f"issuer must be one of {LOAD_ISSUERS}, not {p['issuer']!r}")
    if p["host"] not in PROFILES:
        raise ValueError(f"host must be one of {sorted(PROFILES)}, not {p['host']!r}")
    return p


def build_load(msg_bytes, arrivals, qseq, p, seed=1, depth=1 << 22):
    """``(cfg, verbs)``: the scenario of one load run (module doc): message ``j`` arrives
    at ``arrivals[j]`` (non-decreasing) on QP ``qseq[j]``; ``p`` the checked knobs."""
    n = len(arrivals)
    iss = ISSUERS[p["issuer"]]
    rng = random.Random(seed ^ 0x5EED)
    per_qp = {}
    for q in qseq:
        per_qp[q] = per_qp.get(q, 0) + 1
    v = Verbs(depth=depth, mr_entries=16, cq_log2=cq_log2_for(n))
    qp = {q: v.create_qp(q, (q * 7 + 3) % 4096, sq_log2=max(0, (per_qp[q] - 1).bit_length()),
                         pmtu_log2=p["pmtu_log2"], psn_a=(q * 977) & 0xFFFFFF,
                         psn_b=(q * 977) & 0xFFFFFF)
          for q in sorted(per_qp)}
    stride = -(-msg_bytes // 64) * 64
    raddr, rkey = v.reg_mr(stride * n, index=3)
    last = {q: j for j, q in enumerate(qseq)}
    count = dict.fromkeys(per_qp, 0)
    coalesce = p["ack_every"] > 1 or p["ack_frames"] > 0
    w, d, c = (int(round(x)) for x in (iss.wqe_cycles, iss.doorbell_cycles, iss.cqe_cycles))
    free, batch, pending = 0, 0, []
    for j, (a, q) in enumerate(zip(arrivals, qseq, strict=True)):
        count[q] += 1
        signalled = count[q] % iss.signal_every == 0 or last[q] == j
        # With ACK coalescing, the last WQE of a QP asks for an ACK (its cache entry
        # is released at once; see pymodel.scenarios.rdma.writes_scenario).
        v.post_write(qp[q], rng.randbytes(msg_bytes), raddr + stride * j, rkey,
                     wr_id=0x1000_0000 + j, signalled=signalled,
                     ack_req=coalesce and last[q] == j)
        t = max(a, free)
        ready = t + w                       # the WQE is in host memory
        free = ready + (c if signalled else 0)
        batch += 1
        if q not in pending:
            pending.append(q)
        waiting = j + 1 < n and arrivals[j + 1] <= free
        if batch >= iss.doorbell_batch or not waiting:
            for k, pq in enumerate(pending):     # one doorbell per QP, in turn
                v.ring(qp[pq], ready + k * d)
            free += d * len(pending)
            batch, pending = 0, []
    k = knobs_of(None, {"ack_every": p["ack_every"], "ack_frames": p["ack_frames"]})
    cfg = Config(cache_entries=p["cache_entries"], host=p["host"],
                 link_latency=p["link_latency"], depth=depth, cq_base=v.cq_base,
                 cq_log2=v.cq_log2, **{x: k[x] for x in ENGINE_KNOBS})
    return cfg, v


def warm_qps(qseq, cache_entries):
    """The QPs the warm-up touches: the ``cache_entries`` most used of ``qseq`` (ties:
    the lower index), in order of first use."""
    counts = {}
    for q in qseq:
        counts[q] = counts.get(q, 0) + 1
    top = set(sorted(counts, key=lambda q: (-counts[q], q))[:cache_entries])
    return [q for q in dict.fromkeys(qseq) if q in top]


def load_scenario(msg_bytes, messages, load, service_cycles, p, seed=1, depth=1 << 22):
    """``(cfg, verbs, arrivals, warm)``: a warm-up, then the measured messages.

    The warm-up posts one WRITE to each QP of :func:`warm_qps` at cycle 0 (so that the
    steady state's popular contexts are cached at both ends, as in a long-running
    system); the measured messages arrive from the cycle after the warm-up's last CQE
    on (found by running the warm-up alone on the model) by
    :func:`pymodel.load.traffic.arrival_cycles`, or all at that cycle when ``load`` is
    None (the saturated run). ``warm`` is the number of warm-up messages (the first ones
    of ``verbs.messages``); ``arrivals`` those of the measured messages."""
    qseq = qp_sequence(p["popularity"], p["qps"], messages, seed, skew=p["skew"],
                       working_set=p["working_set"])
    warm = warm_qps(qseq, p["cache_entries"])
    cfg, v = build_load(msg_bytes, [0] * len(warm), warm, p, seed, depth)
    run = run_model(cfg, v)
    start = 1 + max(c for c, _ in run["completed"])
    warm_counts = (run["req"]["misses"] + run["resp"]["misses"], run["req"]["doorbells"])
    if load is None:
        arrivals = [start] * messages
    else:
        arrivals = arrival_cycles(messages, load, service_cycles, seed, burst=p["burst"],
                                  start=start)
    cfg, v = build_load(msg_bytes, [0] * len(warm) + arrivals, warm + qseq, p, seed,
                        depth)
    v.warm_counts = warm_counts          # context misses and doorbells of the warm-up
    return cfg, v, arrivals, len(warm)


def load_per_message(verbs, run, arrivals, warm=0):
    """Per-message ``arrival``, ``accept``, ``remote_write``, ``completion`` arrays of a
    run (the model's or the RTL's records, same shapes), for the measured messages (the
    first ``warm`` are the warm-up); ``RuntimeError`` if a message was not written or
    not completed."""
    starts = verbs.write_starts()
    qpn_b = {q.qpn_a: q.qpn_b for q in verbs.qps.values()}
    lat, comp = per_message(verbs.messages, starts, run["mmio_stamps"], run["written"],
                            run["completed"], qpn_b)
    accept = [run["mmio_stamps"][starts[m.announce]] for m in verbs.messages]
    if any(x is None for x in lat) or any(x is None for x in comp):
        raise RuntimeError("RDMA model: a message was not written or not completed")
    accept, lat, comp = accept[warm:], lat[warm:], comp[warm:]
    if len(accept) != len(arrivals):
        raise ValueError(f"{len(arrivals)} arrivals for {len(accept)} measured messages")
    return {"arrival": np.asarray(arrivals, dtype=np.int64),
            "accept": np.asarray(accept, dtype=np.int64),
            "remote_write": np.asarray([a + x for a, x in zip(accept, lat, strict=True)],
                                       dtype=np.int64),
            "completion": np.asarray([a + x for a, x in zip(accept, comp, strict=True)],
                                     dtype=np.int64)}


def saturation(msg_bytes, messages, seed=1, **knobs):
    """Cycles per message of the saturated sender: after the warm-up every message
    arrives at once (:func:`load_scenario` with ``load`` None); the mean interval
    between their remote writes, ``(last - first) / (messages - 1)`` (1 message: its
    latency), so that the engine's latency does not count."""
    p = check_load_knobs(msg_bytes, messages, knobs)
    cfg, v, arrivals, warm = load_scenario(msg_bytes, messages, None, None, p, seed)
    per = load_per_message(v, run_model(cfg, v), arrivals, warm)
    if messages == 1:
        return float(per["remote_write"][0] - per["accept"][0])
    return max(1.0, _steady_interval(per["remote_write"]))


def rdma_load_run(msg_bytes, messages, load, seed=1, service_cycles=None, **knobs):
    """One open-loop point. Returns ``(row, per)``: ``per`` the measured messages'
    arrays (``arrival``, ``accept``, ``remote_write``, ``completion``, absolute cycles)
    and ``row`` the offered load, ``service_cycles``, offered and achieved messages per
    cycle, and the latency/completion distributions (:data:`spec.load.DISTRIBUTION_KEYS`,
    from arrival). ``service_cycles`` defaults to :func:`saturation` of the same point
    (pass it to reuse one measurement across loads)."""
    p = check_load_knobs(msg_bytes, messages, knobs)
    load = check_load(load)
    if service_cycles is None:
        service_cycles = saturation(msg_bytes, messages, seed, **knobs)
    cfg, v, arrivals, warm = load_scenario(msg_bytes, messages, load, service_cycles, p,
                                           seed)
    run = run_model(cfg, v)
    per = load_per_message(v, run, arrivals, warm)
    return load_row(per, load, service_cycles, run, v.warm_counts), per


def load_row(per, load, service_cycles, run=None, warm_counts=(0, 0)):
    """The row of a load run from its measured messages' arrays (the model's or the
    RTL's); ``achieved_per_cycle`` is the rate of their remote writes,
    ``(n - 1) / (last - first)``; with ``run``, context misses (both nodes) and
    doorbells per measured message (the warm-up's ``warm_counts`` taken off)."""
    n = len(per["arrival"])
    rw = per["remote_write"]
    steady = _steady_interval(rw) if n > 1 else 0
    row = {"load": load, "service_cycles": service_cycles,
           "offered_per_cycle": load / service_cycles,
           "achieved_per_cycle": 1 / steady if steady else None, "messages": n}
    row.update(distribution("latency", (rw - per["arrival"]).tolist()))
    row.update(distribution("completion", (per["completion"] - per["arrival"]).tolist()))
    if run is not None:
        misses = run["req"]["misses"] + run["resp"]["misses"] - warm_counts[0]
        row["ctx_misses"] = misses / n
        row["doorbells"] = (run["req"]["doorbells"] - warm_counts[1]) / n
    return row


def _steady_interval(remote_writes):
    """Mean cycles between remote writes: ``(last - first) / (n - 1)``."""
    w = np.asarray(remote_writes)
    return float(w.max() - w.min()) / (len(w) - 1)
