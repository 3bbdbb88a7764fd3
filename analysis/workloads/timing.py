"""Communication time of a trace carried by a design: phases timed from per-message costs.

:func:`comm_time` takes a :class:`~analysis.workloads.trace.Trace` and a
:class:`~analysis.workloads.carriers.Carrier` and returns a :class:`CommResult`. Every
per-message number comes from :meth:`Carrier.cost` (the golden model's fast path); this
module only schedules them. The rules (cycles of 1 ns):

Sender
    A GPU sends its messages of a phase back to back through one engine, data first and
    flags last (the trace's row order). Message ``j`` occupies the sender ``c_j =
    cost.cycles`` (the slower of the engine's ``ii`` and the issuer's posting cycles). The
    GPU's last message lands ``T_send = sum(c_j, j < n) + issuer_n + latency_n`` after
    the phase starts (its issuer cost, then its engine latency).
Fence (the NIC's ``sm`` issuer)
    Each flag waits behind a system-scope fence that orders the GPU's data stores of the
    phase before it: ``Carrier.fence_cycles`` of the phase's last data message from that
    GPU (its last store's completion as the NIC's model computes it: the link credit of
    its last beat), added to the flag's issuer cycles (the flag waits for all of it),
    once per flag; on a fabric profile the credit loop is the profile's first link,
    ``2 x (link - 2)`` cycles longer than on ``board``. The flags of a phase are fenced
    by parallel warps, one per peer (as the RDMA engine's parallel issuer posts on every
    QP at once): a flag occupies the sender ``fence / peers`` (the phase's peers, at most
    254). A GPU with no data in the phase fences nothing. 0 for every other issuer.
Receiver
    A GPU receiving several messages of a phase is busy ``ii`` per message (the engine's
    per-message occupancy, the sender's figure used as the receiver's: both designs move a
    message's beats at one beat per cycle): ``T_recv = sum(ii_j) + max(latency_j - ii_j)``.
Phase
    Done when every GPU is done sending and receiving: ``D = max over GPUs of
    max(T_send, T_recv)``. A phase starts when every phase in its ``deps`` is done:
    ``end(p) = max(end(d) for d in deps, 0) + D(p)``; the communication time of the trace
    is the largest ``end``. (Compute between phases is not in the trace; the roofline adds
    it.)
Ports
    ``ports > 1`` gives each GPU that many independent copies of the design (engine,
    link and issuer each), its messages dealt round robin over them: the sums above
    are divided by ``ports`` (no contention between the copies is modelled). One port is
    one 64-byte-per-cycle link (512 Gb/s); an NVLink-class GPU has several.
Switch
    A trace with a reducing switch (``trace.switch``, in-switch reduction) has rows to
    and from the switch's endpoint. A GPU's rows to the switch count as its sends, the
    switch's deliveries as its receives (``ii`` each, as above); the switch itself is not
    timed (its capacity and fairness are the fabric's, not modelled here) and every row
    has the same path latency as a GPU-to-GPU message. Such a trace needs a fabric
    profile with ``in_switch_reduction``. Totals count the rows the GPUs send.
Moving and organising
    ``moving`` is the part of that time the GPU's links (``ports`` x 64 bytes per cycle)
    need just for the payload bytes: per phase, the most payload bytes any GPU sends,
    divided by the link rate, summed over the phases of the critical path.
    ``organising`` is the rest: headers, control actions, waits, posting.

Totals (over all GPUs and messages): messages, payload and wire bytes, control actions
(all, and by kind: ``credit_updates`` are the NIC's link-level credits, one per 64-byte
beat, with no host-interface traffic; the other kinds are the RDMA engine's per-message
actions), host-interface bytes (the RDMA engine's, both nodes, TLP overheads included;
0 for the NIC, whose stores come from the accelerator's fabric), issuer WQEs,
doorbells, CQEs and cycles (fences included), the flags behind a fence (``fences``) and
their wait (``fence_cycles``). ``useful_bytes`` are the payload bytes of the trace's
``data`` messages (flags and counts excluded); ``inflight_bits`` is the largest state one
copy of the design holds in flight over the trace's message classes (per GPU and port:
the engine's high-water mark while it streams that class back to back).

Over nodes (``scale_out``, a :class:`ScaleOut`)
    GPUs are in nodes of ``node_gpus`` (GPU ``g`` in node ``g // node_gpus``). A message
    between two nodes is carried by the design under study on ``ports`` scale-out ports
    per GPU of ``link_bytes_per_cycle`` each (a 400 Gb/s NIC a GPU by default,
    :data:`SCALE_OUT_BYTES_PER_CYCLE`): the design's per-message ``ii`` (its beats at 64
    bytes a cycle) is stretched by ``64 / link_bytes_per_cycle`` and its latency by the
    same extra cycles (the last byte leaves later). A message inside a node is carried
    at the same time by ``inside`` on ``inside_ports`` ports (the node's scale-up
    fabric, the same for every design compared). Each part's phases are timed by the
    rules above on their own (separate links, separate engines); a phase lasts the
    longer of its two parts, and the dependencies chain the phases as above. Both parts
    cross one switch hop of ``fabric``. Totals, ``moving`` excepted, are the design's:
    the messages between nodes.
"""

from dataclasses import dataclass

import numpy as np

from analysis.workloads.trace import KINDS

__all__ = ["comm_time", "CommResult", "DATAPATH_BYTES_PER_CYCLE", "ScaleOut",
           "SCALE_OUT_BYTES_PER_CYCLE"]

#: Bytes per cycle of one link of the designs (SPEC.md: 64 bytes per 1 GHz cycle).
DATAPATH_BYTES_PER_CYCLE = 64
#: The most peers the NIC model takes (analysis.workloads.carriers).
_MAX_PEERS = 254
#: Bytes per 1 ns cycle of one GPU's scale-out port: 400 Gb/s = 50 GB/s.
# Ref: NVIDIA DGX H100 datasheet: eight single-port ConnectX-7 VPI adapters, 400 Gb/s
# InfiniBand or Ethernet each, one per GPU; DeepSeek-V3 technical report (arXiv
# 2412.19437), Sec. 3.2.2: InfiniBand at 50 GB/s per GPU between nodes.
SCALE_OUT_BYTES_PER_CYCLE = 50


@dataclass(frozen=True)
class ScaleOut:
    """A deployment over nodes (module doc, "Over nodes"): ``node_gpus`` GPUs a node;
    ``inside``, the carrier of the messages inside a node, on ``inside_ports`` ports a
    GPU; the design's messages between nodes on ports of ``link_bytes_per_cycle`` (at
    most :data:`DATAPATH_BYTES_PER_CYCLE`). ``ValueError`` naming a bad field."""

    node_gpus: int
    inside: object
    inside_ports: int = 8
    link_bytes_per_cycle: float = SCALE_OUT_BYTES_PER_CYCLE

    def __post_init__(self):
        for k in ("node_gpus", "inside_ports"):
            v = getattr(self, k)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{k} must be an integer >= 1, not {v!r}")
        v = self.link_bytes_per_cycle
        if (not isinstance(v, (int, float)) or isinstance(v, bool)
                or not 0 < v <= DATAPATH_BYTES_PER_CYCLE):
            raise ValueError(f"link_bytes_per_cycle must be a number in (0, "
                             f"{DATAPATH_BYTES_PER_CYCLE}], not {v!r}")
        if not hasattr(self.inside, "cost"):
            raise ValueError(f"inside must be a Carrier, not {self.inside!r}")


@dataclass(frozen=True)
class CommResult:
    """Communication of one trace on one carrier (see the module doc).

    ``phase_cycles`` and ``phase_end`` are per phase (trace order); ``critical`` lists the
    phase ids of the critical path. Totals are over all GPUs.
    """

    carrier: str
    ports: int
    cycles: float
    moving_cycles: float
    phase_cycles: np.ndarray
    phase_end: np.ndarray
    critical: tuple
    messages: int
    payload_bytes: int
    wire_bytes: float
    ctrl_ops: float
    ctrl_by_kind: dict
    ctrl_bytes: float
    host_bytes: float
    wqes: float
    doorbells: float
    cqes: float
    issuer_cycles: float
    engine_messages: int
    useful_bytes: int = 0
    inflight_bits: float = 0.0
    fences: float = 0.0
    fence_cycles: float = 0.0

    @property
    def organising_cycles(self):
        """Cycles of the critical path that are not payload bytes on a link."""
        return self.cycles - self.moving_cycles


def _fences(trace, carrier, conns, g, extra):
    """Per-row fence cycles of one message: a flag's wait for the completion of its
    GPU's last data message of the phase (rows are sorted data before flags), plus
    ``extra`` (the fabric's longer credit loop)."""
    c = trace.columns
    fence = np.zeros(len(trace))
    if carrier.design != "nic" or carrier.issuer.name != "sm":
        return fence
    skey = c["phase"] * g + c["src"]
    idx = np.arange(len(trace))
    data = c["kind"] == KINDS.index("data")
    last = np.full(int(skey.max()) + 1, -1)
    np.maximum.at(last, skey[data], idx[data])
    j = last[skey]
    flag = (c["kind"] == KINDS.index("flag")) & (j >= 0)
    memo = {}
    for i in np.flatnonzero(flag):
        k = (int(c["bytes"][j[i]]), int(conns[j[i]]))
        if k not in memo:
            memo[k] = carrier.fence_cycles(*k) + extra
        fence[i] = memo[k]
    return fence


def _row_costs(trace, carrier, g, fence_extra=0, rate=DATAPATH_BYTES_PER_CYCLE):
    """Per-row cost arrays (cycles, ii, issuer, latency, ctrl ops, fences, ...), on ports
    of ``rate`` bytes a cycle (the design's ``ii`` stretched by ``64 / rate``)."""
    c = trace.columns
    conns = np.array([max(p.qps if carrier.design == "rdma" else p.peers, 1)
                      for p in trace.phases], dtype=np.int64)[c["phase"]]
    key = c["bytes"] * (1 << 20) + conns                # conns < 2**20, bytes < 2**43
    uniq, inv = np.unique(key, return_inverse=True)
    costs = [carrier.cost(int(k >> 20), int(k & ((1 << 20) - 1))) for k in uniq]
    names = ("cycles", "ii_cycles", "issuer_cycles", "latency_cycles", "ctrl_ops",
             "ctrl_bytes", "wire_bytes", "wqes", "doorbells", "cqes", "chunks",
             "host_bytes", "inflight_bits")
    out = {n: np.array([getattr(x, n) or 0 for x in costs], dtype=float)[inv]
           for n in names}
    kinds = sorted({k for x in costs for k in x.ctrl_by_kind})
    out["by_kind"] = {k: np.array([x.ctrl_by_kind.get(k, 0) for x in costs],
                                  dtype=float)[inv] for k in kinds}
    if rate != DATAPATH_BYTES_PER_CYCLE:
        extra = out["ii_cycles"] * (DATAPATH_BYTES_PER_CYCLE / rate - 1)
        out["ii_cycles"] = out["ii_cycles"] + extra
        out["latency_cycles"] = out["latency_cycles"] + extra
        out["cycles"] = np.maximum(out["cycles"], out["ii_cycles"])
    out["fence"] = _fences(trace, carrier, conns, g, fence_extra)
    # Warps fence in parallel, one per peer: a flag occupies the sender 1/peers of its
    # fence, and waits for the whole of it (its issuer cycles).
    out["cycles"] = out["cycles"] + out["fence"] / np.minimum(conns, _MAX_PEERS)
    out["issuer_cycles"] = out["issuer_cycles"] + out["fence"]
    return out


def comm_time(trace, carrier, ports=1, fabric="board", scale_out=None):
    """Time and totals of ``trace`` carried by ``carrier`` over ``ports`` copies of the
    design per GPU (module doc).

    ``fabric``: a profile of :data:`spec.fabric_profiles.FABRIC_PROFILES` (``board``,
    ``rack``, ``pod``) for the path between two GPUs: every message's latency grows by
    the profile's one-way latency (link, switch hop, link) less the ``board`` path the
    engine models were run on (6 cycles), the same for both designs.
    ``scale_out``: a :class:`ScaleOut` when the GPUs are in nodes (module doc, "Over
    nodes"): the design carries the messages between nodes only, on its scale-out ports.

    Returns a :class:`CommResult` (an empty trace gives zeros). ``ValueError`` if
    ``ports`` is not an integer >= 1, ``fabric`` is not a profile, the trace needs
    in-switch reduction the profile does not have, or ``scale_out`` is not a
    :class:`ScaleOut` whose nodes divide the trace's GPUs (in-switch reduction over nodes
    is not modelled).
    """
    from spec.fabric_profiles import FABRIC_PROFILES, fabric_profile
    if not isinstance(ports, int) or isinstance(ports, bool) or ports < 1:
        raise ValueError(f"ports must be an integer >= 1, not {ports!r}")
    fabric_profile(fabric)
    if trace.switch and not fabric_profile(fabric).in_switch_reduction:
        raise ValueError(f"fabric {fabric!r} has no in-switch reduction for this trace "
                         f"(allreduce='nvls'); a profile with in_switch_reduction: "
                         f"{[k for k, v in FABRIC_PROFILES.items() if v.in_switch_reduction]}")
    c = trace.columns
    if scale_out is None:
        part = _part(trace, np.ones(len(trace), dtype=bool), carrier, ports, fabric)
        phase_cycles, moving = part["phase_cycles"], part["moving"]
    else:
        if not isinstance(scale_out, ScaleOut):
            raise ValueError(f"scale_out must be a ScaleOut, not {scale_out!r}")
        if trace.switch or trace.gpus % scale_out.node_gpus:
            raise ValueError(f"scale_out: node_gpus ({scale_out.node_gpus}) must divide "
                             f"the trace's {trace.gpus} GPUs, and in-switch reduction "
                             f"over nodes is not modelled (switch={trace.switch})")
        cross = c["src"] // scale_out.node_gpus != c["dst"] // scale_out.node_gpus
        part = _part(trace, cross, carrier, ports, fabric, scale_out.link_bytes_per_cycle)
        inside = _part(trace, ~cross, scale_out.inside, scale_out.inside_ports, fabric)
        phase_cycles = np.maximum(part["phase_cycles"], inside["phase_cycles"])
        moving = np.maximum(part["moving"], inside["moving"])
    n_ph = len(trace.phases)
    end = np.zeros(n_ph)
    via = np.full(n_ph, -1)
    for p in trace.phases:
        start = 0.0
        for d in p.deps:
            if end[d] > start:
                start, via[p.id] = end[d], d
        end[p.id] = start + phase_cycles[p.id]
    path = []
    k = int(np.argmax(end)) if n_ph else -1
    while k >= 0:
        path.append(k)
        k = int(via[k])
    path.reverse()
    return CommResult(
        carrier=carrier.name, ports=ports, cycles=float(end.max()) if n_ph else 0.0,
        moving_cycles=float(moving[path].sum()) if path else 0.0,
        phase_cycles=phase_cycles, phase_end=end, critical=tuple(path),
        messages=part["messages"], payload_bytes=part["sent_bytes"],
        engine_messages=part["engine_messages"], ctrl_by_kind=part["by_kind"],
        useful_bytes=part["useful"], inflight_bits=part["inflight"], **part["totals"])


def _part(trace, keep, carrier, ports, fabric, rate=DATAPATH_BYTES_PER_CYCLE):
    """Per-phase times, ``moving`` and totals of the rows ``keep`` of ``trace`` on
    ``carrier`` (module doc: sender, fence, receiver, phase, ports, switch)."""
    from spec.fabric_profiles import fabric_profile, one_way
    hop = one_way(fabric) - one_way("board")
    if not keep.all():
        trace = type(trace)(trace.kind, trace.model, trace.deployment, trace.gpus,
                            trace.phases, {k: v[keep] for k, v in trace.columns.items()},
                            trace.switch)
    c = trace.columns
    n_ph, gpus = len(trace.phases), trace.gpus
    g = gpus + (1 if trace.switch else 0)          # endpoints: the GPUs and the switch
    phase_cycles = np.zeros(n_ph)
    moving = np.zeros(n_ph)
    if len(trace):
        # The fence waits for the last store's link credit: its loop is the first link's
        # (spec.fabric_profiles.credit_loop), longer on a fabric than on ``board``.
        r = _row_costs(trace, carrier, g,
                       2 * (fabric_profile(fabric).link - fabric_profile("board").link),
                       rate)
        r["latency_cycles"] = r["latency_cycles"] + hop
        cnt = c["count"].astype(float)
        # Sender: groups of (phase, src) are contiguous, data rows before flags.
        skey = c["phase"] * g + c["src"]
        last = np.flatnonzero(np.r_[skey[1:] != skey[:-1], True])
        ssum = np.bincount(skey, weights=cnt * r["cycles"], minlength=n_ph * g)
        t_send = np.zeros(n_ph * g)
        lk = skey[last]
        t_send[lk] = ((ssum[lk] - r["cycles"][last]) / ports + r["issuer_cycles"][last]
                      + r["latency_cycles"][last])
        # Receiver.
        rkey = c["phase"] * g + c["dst"]
        rsum = np.bincount(rkey, weights=cnt * r["ii_cycles"], minlength=n_ph * g)
        tail = np.zeros(n_ph * g)
        np.maximum.at(tail, rkey, r["latency_cycles"] - r["ii_cycles"])
        t_recv = np.where(rsum > 0, rsum / ports + tail, 0)
        phase_cycles = np.maximum(t_send, t_recv).reshape(n_ph, g)[:, :gpus].max(axis=1)
        sent = np.bincount(skey, weights=cnt * c["bytes"], minlength=n_ph * g)
        moving = sent.reshape(n_ph, g)[:, :gpus].max(axis=1) / (rate * ports)
        own = cnt * (c["src"] < gpus)               # rows a GPU sends
        totals = {k: float((own * r[k]).sum()) for k in
                  ("wire_bytes", "ctrl_ops", "ctrl_bytes", "host_bytes", "wqes",
                   "doorbells", "cqes", "issuer_cycles")}
        engine_messages = int((own * r["chunks"]).sum())
        by_kind = {k: float((own * v).sum()) for k, v in r["by_kind"].items()}
        inflight = float(r["inflight_bits"].max())
        totals["fences"] = float((own * (r["fence"] > 0)).sum())
        totals["fence_cycles"] = float((own * r["fence"]).sum())
    else:
        inflight = 0.0
        by_kind = {}
        totals = dict.fromkeys(("wire_bytes", "ctrl_ops", "ctrl_bytes", "host_bytes",
                                "wqes", "doorbells", "cqes", "issuer_cycles", "fences",
                                "fence_cycles"), 0.0)
        engine_messages = 0
    own_rows = c["src"] < gpus
    return dict(
        phase_cycles=phase_cycles, moving=moving, totals=totals, by_kind=by_kind,
        inflight=inflight, engine_messages=engine_messages,
        messages=int(c["count"][own_rows].sum()),
        sent_bytes=int((c["bytes"] * c["count"])[own_rows].sum()),
        useful=int((c["bytes"] * c["count"])[own_rows & (c["kind"] == 0)].sum()))
