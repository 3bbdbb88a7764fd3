"""The saturated rate of an RDMA load point (:mod:`pymodel.load.rdma`): measured on the
model (:func:`saturation`, :func:`steady_saturation`, the ``service_cycles`` of the
offered load) and bounded from the resources a message uses (:func:`rate_bound`)."""

from pymodel.load.rdma_knobs import (
    PARALLEL_ISSUERS,
    SATURATION_TOLERANCE,
    _batch,
    check_load_knobs,
    rung_knobs,
)
from pymodel.load.rdma_measure import _steady_interval, load_per_message
from pymodel.load.rdma_scenario import load_scenario, wire_beats
from pymodel.rdma.point import run_model
from pymodel.workloads.carriers import ISSUERS
from spec.formats.roce import HOST_WORD_BYTES
from spec.host import PROFILES
from spec.load import check_count


def saturation(msg_bytes, messages, seed=1, **knobs):
    """Cycles per message of the saturated sender, one estimate: after the warm-up
    every message arrives at once (:func:`load_scenario` with ``load`` None); the mean
    interval between the remote writes of the steady part of the run, the measured
    messages after the first quarter (:func:`_steady_interval`: the engine's latency
    and the transient while its queues fill are not counted). 1 message: its latency."""
    p = check_load_knobs(msg_bytes, messages, knobs)
    cfg, v, arrivals, warm = load_scenario(msg_bytes, messages, None, None, p, seed)
    per = load_per_message(v, run_model(cfg, v), arrivals, warm)
    if messages == 1:
        return float(per["remote_write"][0] - per["accept"][0])
    return max(1.0, _steady_interval(per["remote_write"], drop=messages // 4,
                                     period=_batch(p, msg_bytes)))


def steady_saturation(msg_bytes, seed=1, start=500, cap=16000,
                      tol=SATURATION_TOLERANCE, **knobs):
    """The saturated rate in the steady state: :func:`saturation` with ``start``
    messages, the run doubled until two successive estimates agree within ``tol``
    (relative to the later one) or the run would pass ``cap`` messages. Returns
    ``{"cycles": the last estimate, "messages": its run, "estimates": [(messages,
    cycles), ...], "stable": bool, "rung": the rung's name}``."""
    check_count("start", start, 2, 1 << 20)
    check_count("cap", cap, start, 1 << 20)
    if not 0 < tol < 1:
        raise ValueError(f"tol must be above 0 and below 1, not {tol!r}")
    p = check_load_knobs(msg_bytes, start, knobs)
    n, est = start, [(start, saturation(msg_bytes, start, seed, **knobs))]
    stable = False
    while 2 * n <= cap:
        n *= 2
        est.append((n, saturation(msg_bytes, n, seed, **knobs)))
        if abs(est[-1][1] - est[-2][1]) <= tol * est[-1][1]:
            stable = True
            break
    return {"cycles": est[-1][1], "messages": est[-1][0], "estimates": est,
            "stable": stable, "rung": rung_knobs(p, msg_bytes)[0]}


def rate_bound(msg_bytes, **knobs):
    """``(cycles, resource, parts)``: the fewest cycles per message the sender can take
    in the steady state whatever the engine does, and the resource that sets it.
    ``parts`` per resource (cycles per message):

    - ``wire``: the WRITE's frame beats (:func:`wire_beats`, one beat a cycle);
    - ``host A down``: the MMIO writes (WQEs by MMIO, or doorbells) and the read
      completions (WQE and payload reads), with their TLP overheads, at the profile's
      bytes per cycle; ``MMIO intake``: one MMIO word a cycle;
    - ``host A up``: the read requests and CQE writes with overheads;
    - ``host B up``: the payload's posted writes (one TLP per ``max_payload``);
    - ``issuer``: the issuer's cycles per message (its profile; a parallel issuer
      fills a batch's WQEs at once).

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
    reads = cpl = 0.0
    if not k["bf"]:                      # one WQE read per batch
        reads += 1 / batch
        cpl += (w * 1 + prof.cpl_overhead) * 1.0          # one WQE word per message
    if not k["inline"]:
        nb = words * w
        reads += -(-nb // prof.max_read_request)
        cpl += nb + prof.cpl_overhead * -(-nb // prof.rcb)
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
    res = max(parts, key=parts.get)
    return parts[res], res, parts
