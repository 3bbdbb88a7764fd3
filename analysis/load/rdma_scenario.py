"""The scenario of an open-loop RDMA load point (:mod:`analysis.load.rdma`'s module doc):
the issuer's timeline of WQEs, doorbells and CQE polls (:func:`build_load`), the ACK
requests of ACK coalescing (:func:`ack_requests`) and the warm-up before the measured
messages (:func:`load_scenario`)."""

import random

from analysis.load.rdma_knobs import (
    ACK_FRAMES_MASK,
    ACK_MSGS_MASK,
    LOAD_POINT_FIELDS,
    PARALLEL_ISSUERS,
    rung_knobs,
)
from analysis.load.traffic import arrival_cycles, qp_sequence
from analysis.rdma.point import ENGINE_KNOBS, run_model
from analysis.scenarios.rdma import ACK_SPAN_BEATS
from analysis.workloads.carriers import ISSUERS
from pymodel.rdma.engine_config import context_words
from pymodel.rdma.system import Config
from pymodel.rdma.verbs import Verbs, cq_log2_for
from spec.formats.roce import HOST_WORD_BYTES, ICRC_BYTES, PSN_BITS
from spec.formats.scaleup import framing
from spec.rdma_engine import SIM_TIMEOUT

_PSN_MASK = (1 << PSN_BITS) - 1


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
    span_cycles = SIM_TIMEOUT // 4
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
            msgs[q], fsum[q] = m & ACK_MSGS_MASK, f & ACK_FRAMES_MASK
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
    v = Verbs(depth=depth, mr_entries=16, cq_log2=cq_log2_for(n),
              qpc_words=context_words(p, "load point"))
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
    cfg = Config(**Config.fields_of({n: p[n] for n in LOAD_POINT_FIELDS}), depth=depth,
                 cq_base=v.cq_base, cq_log2=v.cq_log2, **{x: k[x] for x in ENGINE_KNOBS})
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
    :func:`analysis.load.traffic.arrival_cycles`, or all at that cycle when ``load`` is
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
