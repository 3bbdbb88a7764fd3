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
sender's cycles per message: the same scenario with every message arriving at once
after the warm-up (:func:`saturation`), as ``ib_write_bw`` would measure it with this
issuer, over the steady part of the run (:func:`steady_saturation` doubles the run until
the rate is stable to 1 %).

**The rung.** Each issuer posts with the best rung of the optimisation ladder
(:data:`spec.rdma_engine.LADDER`) it can use (:func:`best_rung`, the ``rung`` knob
``"best"``; any ladder rung may be named instead):

- the engine alone (``none``), the hardware ``controller`` and the ``cpu``: the last
  rung, ``+ACK coalescing`` (each WQE written by MMIO into the BlueFlame buffer with
  its payload inline, one signalled WQE per 64 of a QP, AckReq every 16 messages or 64
  frames) for messages of at most :func:`pymodel.rdma.verbs.inline_limit` bytes (192);
  above that ``+doorbell batching 16``, the best rung without inline data (the issuer
  rings after up to 16 WQEs, as soon as no further message is waiting);
- the GPU (``gpu``, IBGDA as NVSHMEM and DeepEP use it): its WQEs are in GPU memory,
  which the engine reads over PCIe peer to peer, so no BlueFlame and no inline data:
  ``+doorbell batching 16``, the WQEs of a batch filled in parallel by the lanes of a
  warp (NVSHMEM's parallel submission: one WQE per lane, then one doorbell), every WQE
  signalled (DeepEP sets ``MLX5_WQE_CTRL_CQ_UPDATE`` on each). The host-interface
  profile has one read latency for every read, so the peer-to-peer WQE read is the
  profile's WQE read: 560 cycles with ``pcie``, pcie-bench's median 64-byte DMA read
  (:mod:`spec.host`, [pcie-bench]). No published latency of a NIC's read of GPU memory
  across a PCIe switch was found; the host-memory figure stands for it (its path is no
  shorter: NIC, switch, GPU BAR, HBM).

With ACK coalescing the host asks for an ACK (``WQE_ACK_REQ``) on a QP's last message,
on every message when QPs share cache entries (more QPs than entries: a message that
does not ask keeps its entry pinned), and before a QP's un-acknowledged span would reach
:data:`pymodel.scenarios.rdma.ACK_SPAN_BEATS` wire beats or a quarter of the transport
timeout in cycles (the timer's guard, :func:`ack_requests`).
"""

import random

import numpy as np

from pymodel.load.traffic import arrival_cycles, distribution, qp_sequence
from pymodel.rdma.metrics import per_message
from pymodel.rdma.point import ENGINE_KNOBS, knobs_of, run_model
from pymodel.rdma.system import Config
from pymodel.rdma.verbs import Verbs, cq_log2_for, inline_limit
from pymodel.scenarios.rdma import ACK_SPAN_BEATS
from pymodel.workloads.carriers import ISSUERS
from spec.formats.roce import HOST_WORD_BYTES, ICRC_BYTES, PSN_BITS
from spec.formats.scaleup import framing
from spec.host import PROFILES
from spec.load import LOAD_DEFAULTS, check_count, check_load, check_skew
from spec.rdma_engine import LADDER, REQUESTER_DEFAULTS
from spec.rdma_stages import ACK_FRAMES_BITS, ACK_MSGS_BITS

__all__ = ["build_load", "rdma_load_run", "saturation", "load_row", "load_per_message",
           "check_load_knobs", "load_scenario", "warm_qps", "RDMA_LOAD_DEFAULTS",
           "LOAD_ISSUERS", "LOAD_KNOBS", "best_rung", "rung_knobs", "ack_requests",
           "steady_saturation", "rate_bound", "wire_beats", "PARALLEL_ISSUERS",
           "SATURATION_TOLERANCE"]

_PSN_MASK = (1 << PSN_BITS) - 1
_ACK_MSGS_MASK, _ACK_FRAMES_MASK = (1 << ACK_MSGS_BITS) - 1, (1 << ACK_FRAMES_BITS) - 1

#: The issuer profiles a load point may name (``cpu_framework`` is a framework's cost,
#: used by the inference carriers, not an issuer of single WRITEs).
LOAD_ISSUERS = ("none", "cpu", "gpu", "controller")
#: Issuers that fill the WQEs of one doorbell batch in parallel (one per lane of a warp,
#: then one doorbell): NVSHMEM's IBGDA transport, whose point is "a highly parallel
#: submission of requests to the network interface" (NVSHMEM best-practice guide,
#: "Tuning the queue-pair Type and Configuration for IBGDA"). A batch of at most 16
#: WQEs fits in one warp of 32 lanes.
PARALLEL_ISSUERS = ("gpu",)
#: Issuers that can write WQEs by MMIO with inline data (BlueFlame): not the GPU,
#: whose WQEs are in its own memory (IBGDA).
BLUEFLAME_ISSUERS = ("none", "cpu", "controller")
#: Relative agreement of two successive saturation estimates (the run doubled) that
#: :func:`steady_saturation` takes as stable.
SATURATION_TOLERANCE = 0.01

#: Knobs of a load point and their defaults.
RDMA_LOAD_DEFAULTS = {"qps": 1, "cache_entries": 16, "host": "pcie", "link_latency": 6,
                      "pmtu_log2": 12, "issuer": "none", "popularity": "round_robin",
                      "skew": LOAD_DEFAULTS["skew"], "working_set": None, "burst": 1,
                      "ack_every": None, "ack_frames": None, "rung": "best"}


#: The knobs that shape the traffic (the rest are the top's and the engine's).
LOAD_KNOBS = ("qps", "issuer", "popularity", "skew", "working_set", "burst", "pmtu_log2",
              "rung")


def best_rung(issuer, msg_bytes):
    """The name of the best :data:`spec.rdma_engine.LADDER` rung ``issuer`` can use for
    WRITEs of ``msg_bytes`` (module doc): the last rung for an issuer that writes WQEs
    by MMIO and a message carried inline (at most
    :func:`pymodel.rdma.verbs.inline_limit` bytes), else ``+doorbell batching 16``."""
    if issuer not in LOAD_ISSUERS:
        raise ValueError(f"issuer must be one of {LOAD_ISSUERS}, not {issuer!r}")
    if issuer in BLUEFLAME_ISSUERS and msg_bytes <= inline_limit():
        return LADDER[-1][0]
    return "+doorbell batching 16"


def rung_knobs(p, msg_bytes):
    """``(rung name, knobs)`` of checked load knobs ``p``: the rung's
    :data:`spec.rdma_engine.RUNG_KNOBS`, with ``ack_every``/``ack_frames`` of ``p`` on top
    where given (not None)."""
    name = best_rung(p["issuer"], msg_bytes) if p["rung"] == "best" else p["rung"]
    k = knobs_of(name)
    for x in ("ack_every", "ack_frames"):
        if p[x] is not None:
            k[x] = p[x]
    return name, k


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
    names = [n for n, _ in LADDER]
    if p["rung"] != "best" and p["rung"] not in names:
        raise ValueError(f"rung must be 'best' or one of {names}, not {p['rung']!r}")
    _, k = rung_knobs(p, msg_bytes)
    if k["serial"]:
        raise ValueError("rung 'sequential' is not a load rung (one message in flight "
                         "at a time): use 'pipelined' or later")
    if k["inline"] and msg_bytes > inline_limit():
        raise ValueError(f"rung {p['rung']!r} carries the payload inline: msg_bytes must "
                         f"be at most {inline_limit()}, not {msg_bytes}")
    if k["bf"] and p["issuer"] not in BLUEFLAME_ISSUERS:
        raise ValueError(f"rung {p['rung']!r} writes WQEs by MMIO, which issuer "
                         f"{p['issuer']!r} does not (its WQEs are in its own memory)")
    for x in ("ack_every", "ack_frames"):
        if p[x] is not None:
            check_count(x, p[x], 0, _ACK_MSGS_MASK if x == "ack_every" else _ACK_FRAMES_MASK)
    return p


def wire_beats(msg_bytes, pmtu_log2=12, header="roce"):
    """Wire beats (64 bytes, one a cycle) of one WRITE of ``msg_bytes``: its frames'
    headers (:mod:`spec.formats.scaleup`'s framing, RETH on the first), payload padded
    to 4 bytes, ICRC and FCS."""
    f, mtu = framing(header), 1 << pmtu_log2
    segs = [min(mtu, msg_bytes - k) for k in range(0, max(msg_bytes, 1), mtu)]
    return sum(-(-((f.reth_bytes if i == 0 else f.plain_bytes) + -(-n // 4) * 4
                   + ICRC_BYTES + 4) // 64) for i, n in enumerate(segs))


def ack_requests(qseq, posts, msg_bytes, signalled, knobs, qps, cache_entries,
                 pmtu_log2=12):
    """Per message (QPs ``qseq``, posted at cycles ``posts``, in the order the engine
    takes them): whether the host sets ``WQE_ACK_REQ`` (module doc). Without ACK
    coalescing never (the engine asks on every message)."""
    n = len(qseq)
    if not (knobs["ack_every"] > 1 or knobs["ack_frames"] > 0):
        return [False] * n
    if qps > cache_entries:
        return [True] * n
    beats = wire_beats(msg_bytes, pmtu_log2)
    frames = max(1, -(-msg_bytes // (1 << pmtu_log2)))
    span_cycles = REQUESTER_DEFAULTS["timeout"] // 4
    nxt, seen = {}, {}
    for j, q in enumerate(qseq):
        if q in seen:
            nxt[seen[q]] = j
        seen[q] = j
    out = [False] * n
    start, msgs, fsum = {}, {}, {}
    for j, q in enumerate(qseq):
        start.setdefault(q, j)
        m, f = msgs.get(q, 0) + 1, fsum.get(q, 0) + frames
        engine = (signalled[j] or knobs["ack_every"] <= 1 or m >= knobs["ack_every"]
                  or (knobs["ack_frames"] != 0 and f >= knobs["ack_frames"]))
        k = nxt.get(j)
        s0 = start[q]
        out[j] = (k is None or (k + 1 - s0) * beats > ACK_SPAN_BEATS
                  or posts[k] - posts[s0] > span_cycles)
        if engine or out[j]:
            del start[q]
            msgs[q], fsum[q] = 0, 0
        else:
            msgs[q], fsum[q] = m & _ACK_MSGS_MASK, f & _ACK_FRAMES_MASK
    return out


def build_load(msg_bytes, arrivals, qseq, p, seed=1, depth=1 << 22):
    """``(cfg, verbs)``: the scenario of one load run (module doc): message ``j`` arrives
    at ``arrivals[j]`` (non-decreasing) on QP ``qseq[j]``; ``p`` the checked knobs. The
    rung (:func:`rung_knobs`) decides how the issuer announces work: with ``bf`` each WQE
    is written by MMIO (its payload inline with ``inline``), which rings for it; else
    doorbells, batched opportunistically up to the rung's ``ring_every`` (or the issuer
    profile's batch if larger). ``verbs.rung`` is the rung's name."""
    n = len(arrivals)
    iss = ISSUERS[p["issuer"]]
    rung, k = rung_knobs(p, msg_bytes)
    rng = random.Random(seed ^ 0x5EED)
    per_qp = {}
    for q in qseq:
        per_qp[q] = per_qp.get(q, 0) + 1
    v = Verbs(depth=depth, mr_entries=16, cq_log2=cq_log2_for(n))
    stride = 2 if k["inline"] else 0
    qp = {q: v.create_qp(q, (q * 7 + 3) % 4096, sq_log2=max(0, (per_qp[q] - 1).bit_length()),
                         pmtu_log2=p["pmtu_log2"], psn_a=(q * 977) & _PSN_MASK,
                         psn_b=(q * 977) & _PSN_MASK, stride_log2=stride)
          for q in sorted(per_qp)}
    span = -(-msg_bytes // HOST_WORD_BYTES) * HOST_WORD_BYTES
    raddr, rkey = v.reg_mr(span * n, index=3)
    last = {q: j for j, q in enumerate(qseq)}
    count = dict.fromkeys(per_qp, 0)
    every = max(iss.signal_every, k["signal_every"])
    batch_most = 1 if k["bf"] else max(iss.doorbell_batch, k["ring_every"])
    parallel = p["issuer"] in PARALLEL_ISSUERS
    w, d, c = (int(round(x)) for x in (iss.wqe_cycles, iss.doorbell_cycles, iss.cqe_cycles))
    signalled = []
    for q in qseq:
        count[q] += 1
        signalled.append(count[q] % every == 0)
    for j in last.values():
        signalled[j] = True
    # The issuer's timeline: each batch (one message with bf) starts when its first
    # message has arrived and the issuer is free; a serial issuer builds its WQEs one
    # after the other, a parallel one all at once; then one doorbell per QP of the batch
    # (or the MMIO writes of the WQEs, which ring), then the CQE polls.
    posts, rings = [0] * n, []
    free, j = 0, 0
    while j < n:
        t = max(arrivals[j], free)
        group = [j]
        while (len(group) < batch_most and group[-1] + 1 < n
               and arrivals[group[-1] + 1] <= (t if parallel else t + w * len(group))):
            group.append(group[-1] + 1)
        for i, m in enumerate(group):
            posts[m] = t + (w if parallel else w * (i + 1))
        ready = posts[group[-1]]
        qs = list(dict.fromkeys(qseq[m] for m in group))
        rings.append((group, qs, ready))
        free = (ready + (0 if k["bf"] else d * (len(qs) - 1)) + d
                + c * sum(signalled[m] for m in group))
        j = group[-1] + 1
    ack_req = ack_requests(qseq, posts, msg_bytes, signalled, k, p["qps"],
                           p["cache_entries"], p["pmtu_log2"])
    for group, qs, ready in rings:
        for m in group:
            q = qseq[m]
            v.post_write(qp[q], rng.randbytes(msg_bytes), raddr + span * m, rkey,
                         wr_id=0x1000_0000 + m, signalled=signalled[m],
                         inline=bool(k["inline"]), ack_req=ack_req[m])
            if k["bf"]:
                v.blueflame(qp[q], posts[m])
        if not k["bf"]:
            for i, pq in enumerate(qs):        # one doorbell per QP, in turn
                v.ring(qp[pq], ready + i * d)
    v.rung = rung
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
    row = load_row(per, load, service_cycles, run, v.warm_counts)
    row["rung"] = v.rung
    return row, per


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


def _steady_interval(remote_writes, drop=0, period=1):
    """Mean cycles between remote writes, the first ``drop`` (in time order) left out:
    ``(w[m] - w[0]) / m`` of the rest, ``m`` the most intervals that are a whole number
    of ``period`` messages (an issuer that announces batches of ``period`` messages
    makes the writes come in bursts; a window of whole bursts measures their rate, one
    cut inside a burst would not). Fewer than ``period + 1`` messages: all of them."""
    w = np.sort(np.asarray(remote_writes))[drop:]
    m = len(w) - 1
    if m >= period:
        m -= m % period
    return float(w[m] - w[0]) / m


def _batch(p, msg_bytes):
    """Messages per announcement of a saturated issuer: 1 with WQEs by MMIO, else the
    doorbell batch (:func:`build_load`)."""
    _, k = rung_knobs(p, msg_bytes)
    return 1 if k["bf"] else max(ISSUERS[p["issuer"]].doorbell_batch, k["ring_every"])
