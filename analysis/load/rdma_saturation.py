"""The saturated rate of an RDMA load point (:mod:`analysis.load.rdma`): measured on the
model (:func:`saturation`, :func:`steady_saturation`, the ``service_cycles`` of the
offered load) and bounded from the resources a message uses (:func:`rate_bound`)."""

from analysis.load.rdma_knobs import (
    PARALLEL_ISSUERS,
    SATURATION_TOLERANCE,
    _batch,
    check_load_knobs,
    rung_knobs,
)
from analysis.load.rdma_measure import _steady_interval, load_per_message
from analysis.load.rdma_scenario import load_scenario, wire_beats
from analysis.rdma.point import run_model
from analysis.workloads.carriers import ISSUERS
from pymodel.rdma.engine_config import context_words
from spec.formats.roce import HOST_WORD_BYTES
from spec.host import PROFILES
from spec.load import check_count

#: The context-cache counts of a run that :func:`rate_bound` charges (per node: fills,
#: one per miss, and write-backs).
CTX_COUNTS = tuple(f"{side}_{c}" for side in ("req", "resp") for c in ("misses", "writebacks"))


def saturation(msg_bytes, messages, seed=1, counts=False, **knobs):
    """Cycles per message of the saturated sender, one estimate: after the warm-up
    every message arrives at once (:func:`load_scenario` with ``load`` None); the mean
    interval between the remote writes of the steady part of the run, the measured
    messages after the first quarter (:func:`_steady_interval`: the engine's latency
    and the transient while its queues fill are not counted). 1 message: its latency.
    With ``counts``: ``(cycles, counts)``, ``counts`` the run's context-cache counters
    (:data:`CTX_COUNTS`: fills and write-backs of each node since reset)."""
    p = check_load_knobs(msg_bytes, messages, knobs)
    cfg, v, arrivals, warm = load_scenario(msg_bytes, messages, None, None, p, seed)
    run = run_model(cfg, v)
    per = load_per_message(v, run, arrivals, warm)
    if messages == 1:
        cycles = float(per["remote_write"][0] - per["accept"][0])
    else:
        cycles = max(1.0, _steady_interval(per["remote_write"], drop=messages // 4,
                                           period=_batch(p, msg_bytes)))
    if not counts:
        return cycles
    return cycles, {f"{side}_{c}": run[side][c] for side in ("req", "resp")
                    for c in ("misses", "writebacks")}


def steady_saturation(msg_bytes, seed=1, start=500, cap=16000,
                      tol=SATURATION_TOLERANCE, **knobs):
    """The saturated rate in the steady state: :func:`saturation` with ``start``
    messages, the run doubled until two successive estimates agree within ``tol``
    (relative to the later one) or the run would pass ``cap`` messages. Returns
    ``{"cycles": the last estimate, "messages": its run, "estimates": [(messages,
    cycles), ...], "stable": bool, "rung": the rung's name, "ctx": context-cache
    fills and write-backs per message of each node in the steady state}``: the
    difference of the last two runs' counts over the messages the last run adds (the
    first run's compulsory misses are not counted), or the one run's counts per message
    when no doubling fit under ``cap``."""
    check_count("start", start, 2, 1 << 20)
    check_count("cap", cap, start, 1 << 20)
    if not 0 < tol < 1:
        raise ValueError(f"tol must be above 0 and below 1, not {tol!r}")
    p = check_load_knobs(msg_bytes, start, knobs)
    n = start
    cycles, counts = saturation(msg_bytes, start, seed, counts=True, **knobs)
    est, runs = [(start, cycles)], [(start, counts)]
    stable = False
    while 2 * n <= cap:
        n *= 2
        cycles, counts = saturation(msg_bytes, n, seed, counts=True, **knobs)
        est.append((n, cycles))
        runs.append((n, counts))
        if abs(est[-1][1] - est[-2][1]) <= tol * est[-1][1]:
            stable = True
            break
    (n1, c1), (n2, c2) = ((0, dict.fromkeys(CTX_COUNTS, 0)), runs[0]) if len(runs) == 1 \
        else runs[-2:]
    ctx = {k: max(0, c2[k] - c1[k]) / (n2 - n1) for k in CTX_COUNTS}
    return {"cycles": est[-1][1], "messages": est[-1][0], "estimates": est,
            "stable": stable, "rung": rung_knobs(p, msg_bytes)[0], "ctx": ctx}


def rate_bound(msg_bytes, ctx=None, **knobs):
    """``(cycles, resource, parts)``: the fewest cycles per message the sender can take
    in the steady state whatever the engine does, and the resource that sets it.
    ``ctx``: context-cache fills (``*_misses``) and write-backs per message of each node
    (:func:`steady_saturation`'s ``ctx``), charged to the host interfaces and to the
    cache's entries; None charges no context traffic (every context stays cached).
    ``parts`` per resource (cycles per message):

    - ``wire``: the WRITE's frame beats (:func:`wire_beats`, one beat a cycle);
    - ``host A down``: the MMIO writes (WQEs by MMIO, or doorbells) and the read
      completions (WQE and payload reads), with their TLP overheads, at the profile's
      bytes per cycle; ``MMIO intake``: one MMIO word a cycle;
    - ``host A up``: the read requests and CQE writes with overheads;
    - ``host B up``: the payload's posted writes (one TLP per ``max_payload``);
    - ``issuer``: the issuer's cycles per message (its profile; a parallel issuer
      fills a batch's WQEs at once);
    - with ``ctx``: each fill reads the whole context, ``W`` host words (the point's size)
      (its request TLPs up, one per ``max_read_request``; its completions down, one
      per ``rcb``) and each write-back is a one-word posted write up (the dynamic
      word), on node A's interface for the
      requester and node B's for the responder (``host B down``: the responder's fill
      completions); ``context entries``: Little's law on the cache, a miss holds its
      entry for at least the fill's read latency, so ``misses * read_latency /
      cache_entries`` cycles a message at each node;
    - ``read tags``: Little's law on the host's outstanding reads, each completion chunk
      (at most ``rcb`` bytes) holds one of ``tags`` for the read latency: ``chunks *
      read_latency / tags`` (WQE and payload reads; with ``ctx`` also each fill's
      chunks, per node).

    Doorbells and WQE reads are counted at one per ``ring_every`` messages, CQEs at one
    per ``signal_every`` (the rung's policy, the bound of a long run)."""
    p = check_load_knobs(msg_bytes, 1, knobs)
    _, k = rung_knobs(p, msg_bytes)
    prof, iss = PROFILES[p["host"]], ISSUERS[p["issuer"]]
    w = HOST_WORD_BYTES
    words = -(-msg_bytes // w)
    batch = 1 if k["bf"] else max(iss.doorbell_batch, k["ring_every"])
    every = max(iss.signal_every, k["signal_every"])
    parts = {"wire": float(wire_beats(msg_bytes, p["pmtu_log2"]))}
    if k["bf"]:
        mmio_words = 1 + (words if k["inline"] else 0)
        mmio = mmio_words * w + prof.mmio_overhead
    else:
        mmio_words = 1 / batch
        mmio = (8 + prof.mmio_overhead) / batch
    reads = cpl = chunks = 0.0
    if not k["bf"]:                      # one WQE read per batch
        reads += 1 / batch
        cpl += (w * 1 + prof.cpl_overhead) * 1.0          # one WQE word per message
        chunks += -(-batch * w // prof.rcb) / batch
    if not k["inline"]:
        nb = words * w
        reads += -(-nb // prof.max_read_request)
        cpl += nb + prof.cpl_overhead * -(-nb // prof.rcb)
        chunks += -(-nb // prof.rcb)
    parts["MMIO intake"] = float(mmio_words)
    parts["host A down"] = (mmio + cpl) / prof.bytes_per_cycle
    parts["host A up"] = (reads * prof.req_overhead
                          + (w + prof.req_overhead) / every) / prof.bytes_per_cycle
    parts["host B up"] = (msg_bytes + prof.req_overhead * -(-msg_bytes // prof.max_payload)
                          ) / prof.bytes_per_cycle
    if p["issuer"] in PARALLEL_ISSUERS:
        parts["issuer"] = (iss.wqe_cycles + iss.doorbell_cycles) / batch \
            + iss.cqe_cycles / every
    else:
        parts["issuer"] = (iss.wqe_cycles + iss.doorbell_cycles / batch
                           + iss.cqe_cycles / every)
    tags = {"A": chunks, "B": 0.0}
    if ctx is not None:
        missing = [c for c in CTX_COUNTS if c not in ctx]
        if missing:
            raise ValueError(f"ctx lacks {missing}: it needs {list(CTX_COUNTS)}")
        fb = HOST_WORD_BYTES * context_words(p, "rate bound")   # a fill: the whole context
        f_reqs, f_cpls = -(-fb // prof.max_read_request), -(-fb // prof.rcb)
        for side, host in (("req", "A"), ("resp", "B")):
            fills, wbs = ctx[f"{side}_misses"], ctx[f"{side}_writebacks"]
            down = f"host {host} down"
            parts[down] = parts.get(down, 0.0) + fills * (fb + f_cpls * prof.cpl_overhead) \
                / prof.bytes_per_cycle
            parts[f"host {host} up"] += (fills * f_reqs * prof.req_overhead
                                         + wbs * (w + prof.req_overhead)) / prof.bytes_per_cycle
            tags[host] += fills * f_cpls
        parts["context entries"] = max(ctx["req_misses"], ctx["resp_misses"]) \
            * prof.read_latency / p["cache_entries"]
    parts["read tags"] = max(tags.values()) * prof.read_latency / prof.tags
    res = max(parts, key=parts.get)
    return parts[res], res, parts
