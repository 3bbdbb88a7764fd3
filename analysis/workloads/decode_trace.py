"""The trace of one decode step (:func:`decode_step`; the phases, messages and routing are
described in :mod:`analysis.workloads.generate`'s module doc): TP all-reduces and
all-gathers, and the EP dispatch and combine of DeepEP's low-latency kernels."""

from dataclasses import asdict

import numpy as np

from analysis.workloads.config import dtype_bytes
from analysis.workloads.deployment import (
    FLAG_BYTES,
    _int,
    check_deployment,
    deepep_qps,
)
from analysis.workloads.experts import routing_puts
from analysis.workloads.trace import TraceBuilder

#: DeepEP low-latency dispatch message header: ``sizeof(int4)`` (source token index and
#: three reserved ints), csrc/kernels/internode_ll.cu ``num_bytes_per_msg``.
DISPATCH_HEADER = 16
#: Hidden values per FP8 scale (a float) in DeepEP's FP8 dispatch.
FP8_GROUP = 128
ALLREDUCE = ("oneshot", "rsag", "ring", "nvls", "auto")
#: How a TP collective tells its receiver the data is there: ``separate`` (the data, then
#: an 8-byte flag the receiver polls, after the sender's fence) or ``ll128`` (the flag
#: inside every 128-byte line, NCCL's LL128 protocol: 120 bytes of data and 8 of flag per
#: line, src/include/device.h NCCL_LL128_LINEELEMS 16 and NCCL_LL128_DATAELEMS 15 8-byte
#: elements; no flag message, the receiver polls the lines themselves).
FLAGS = ("separate", "ll128")
LL128_LINE, LL128_DATA = 128, 120


def _send(b, p, src, dst, nbytes, flags):
    """The data of one collective phase and how its receiver learns of it (:data:`FLAGS`)."""
    if flags == "ll128":
        b.add(p, src, dst, -(-nbytes // LL128_DATA) * LL128_LINE, 1, "data")
    else:
        b.add(p, src, dst, nbytes, 1, "data")
        b.add(p, src, dst, FLAG_BYTES, 1, "flag")
#: Largest all-reduce (bytes per GPU) that ``allreduce="auto"`` sends one-shot, by the
#: most GPUs of the group it applies to, as vLLM's custom all-reduce chooses
#: (csrc/custom_all_reduce.cuh, ``allreduce``: with full NVLink, the one-stage kernel
#: below 512 KiB at up to 4 GPUs and below 256 KiB at up to 8, the two-stage reduce-scatter
#: + all-gather above; 2 GPUs always one-stage).
ONESHOT_MAX_BYTES = ((2, None), (4, 512 * 1024), (8, 256 * 1024))
#: Groups vLLM's custom all-reduce serves and the largest all-reduce it takes (bytes per
#: GPU, exclusive); any other all-reduce goes to NCCL. Ref: vLLM
#: vllm/distributed/device_communicators/custom_all_reduce.py, ``CustomAllreduce``:
#: ``_SUPPORTED_WORLD_SIZES = [2, 4, 6, 8]``, ``max_size=8192 * 1024``.
CUSTOM_AR_GPUS = (2, 4, 6, 8)
CUSTOM_AR_MAX_BYTES = 8192 * 1024


def allreduce_mode(mode, tp, nbytes):
    """``"oneshot"``, ``"rsag"``, ``"ring"`` or ``"nvls"`` for an all-reduce of
    ``nbytes`` per GPU over ``tp`` GPUs: ``mode`` itself, or with ``"auto"`` as vLLM
    chooses: its custom all-reduce (:data:`CUSTOM_AR_GPUS`, below
    :data:`CUSTOM_AR_MAX_BYTES`; one-shot or two-shot by :data:`ONESHOT_MAX_BYTES`), else
    NCCL's ring. (NCCL would take NVLS on a fabric with in-switch reduction; ``auto``
    does not know the fabric, so ``nvls`` is asked for by name.)"""
    if mode != "auto":
        return mode
    if tp not in CUSTOM_AR_GPUS or nbytes >= CUSTOM_AR_MAX_BYTES:
        return "ring"
    for gpus, limit in ONESHOT_MAX_BYTES:
        if tp <= gpus:
            return "oneshot" if limit is None or nbytes < limit else "rsag"
    return "rsag"


def dispatch_bytes(hidden, fp8=True):
    """DeepEP low-latency dispatch message: ``16 + H + (H / 128) x 4`` (FP8) or
    ``16 + 2H`` (BF16)."""
    _int("hidden", hidden)
    if fp8:
        return DISPATCH_HEADER + hidden + -(-hidden // FP8_GROUP) * 4
    return DISPATCH_HEADER + 2 * hidden


def combine_bytes(hidden):
    """DeepEP low-latency combine message: ``2H`` (BF16)."""
    return 2 * _int("hidden", hidden)

def _peers(g, n):
    """The other GPUs of a group of ``n`` starting at ``g``, as two arrays (src, dst)."""
    a = np.arange(n, dtype=np.int64)
    src, dst = np.meshgrid(a, a, indexing="ij")
    off = src != dst
    return g + src[off], g + dst[off]


def _allreduce(b, name, layer, dep_ids, groups, tp, nbytes, mode, op="tp_allreduce",
               flags="separate", channels=1, node_gpus=0):
    """Phases and rows of one all-reduce of ``nbytes`` per GPU in every TP group;
    returns the id of its last phase."""
    mode = allreduce_mode(mode, tp, nbytes)
    chunk = -(-nbytes // tp)
    first = np.asarray(groups, dtype=np.int64)
    if mode == "ring":
        # 2 (tp - 1) dependent steps; in each, every GPU sends one chunk to its successor
        # on each of ``channels`` parallel rings, a piece of chunk / channels on each.
        src, dst = _ring_edges(first, tp, channels, node_gpus)
        piece = -(-chunk // channels)
        last = tuple(dep_ids)
        for k in range(2 * (tp - 1)):
            p = b.phase(f"{name}.ring{k}", op + ("_rs" if k == 0 else "_ring"), layer,
                        last, channels, 1)
            if flags == "ll128":
                b.add(p, src, dst, -(-piece // LL128_DATA) * LL128_LINE, 1, "data")
            else:
                b.add(p, src, dst, piece, 1, "data")
                b.add(p, src, dst, FLAG_BYTES, 1, "flag")
            last = (p,)
        return last[0]
    if mode == "nvls":
        return _nvls(b, name, layer, dep_ids, first, tp, chunk, op)
    srcs, dsts = [], []
    for g in groups:
        s, d = _peers(g, tp)
        srcs.append(s)
        dsts.append(d)
    src, dst = np.concatenate(srcs), np.concatenate(dsts)
    if mode == "oneshot":
        p = b.phase(f"{name}.ar", op, layer, dep_ids, tp - 1, tp - 1)
        _send(b, p, src, dst, nbytes, flags)
        return p
    p1 = b.phase(f"{name}.rs", op + "_rs", layer, dep_ids, tp - 1, tp - 1)
    _send(b, p1, src, dst, chunk, flags)
    p2 = b.phase(f"{name}.ag", op + "_ag", layer, (p1,), tp - 1, tp - 1)
    _send(b, p2, src, dst, chunk, flags)
    return p2


def _ring_edges(first, tp, channels, node_gpus):
    """``(src, dst)``: one edge per (group, channel, GPU) of the rings. Channel ``c``'s
    ring goes through the nodes in order (``node_gpus`` GPUs each; 0: the group is one
    node) and, inside each, from its ``c``-th GPU on (mod ``node_gpus``), so each channel
    leaves a node from a different GPU, as NCCL spreads its channels over a node's NICs
    (one NIC per GPU here)."""
    ng = node_gpus or tp
    if tp % ng:
        raise ValueError(f"node_gpus must divide the TP group ({tp}), not {node_gpus!r}")
    j = np.arange(ng, dtype=np.int64)
    srcs, dsts = [], []
    for c in range(channels):
        order = np.concatenate([n * ng + (c + j) % ng for n in range(tp // ng)])
        srcs.append((first[:, None] + order[None, :]).ravel())
        dsts.append((first[:, None] + np.roll(order, -1)[None, :]).ravel())
    return np.concatenate(srcs), np.concatenate(dsts)


def _nvls(b, name, layer, dep_ids, first, tp, chunk, op):
    """An all-reduce by the switch (NVLS-style, the trace's ``switch`` endpoint), in one
    phase: every GPU sends its whole buffer once to the switch as ``tp`` chunks (one per
    GPU's share, its own included) and the switch delivers each GPU the sum of its share;
    every GPU sends its reduced share once and the switch multicasts it to the ``tp - 1``
    others. One phase, because NCCL's NVLS all-reduce runs the two at once over the
    buffer's chunks (src/device/all_reduce.h, ``RunWorkColl<ncclFuncAllReduce, ...,
    NCCL_ALGO_NVLS, ...>``: the block's warps split into scatter, reduce and gather
    groups), so a GPU's outbound link carries ``S + S / tp`` while its inbound carries
    ``S``; the second switch traversal of a chunk (reduced, then multicast) is not added
    to the phase's latency. Then a flag each GPU sends the switch once and the switch
    delivers to the others. Returns the phase's id."""
    gpus = (first[:, None] + np.arange(tp, dtype=np.int64)[None, :]).ravel()
    sw = np.full(len(gpus), b.gpus, dtype=np.int64)
    p = b.phase(f"{name}.nvls", op, layer, dep_ids, 1, 1)
    b.add(p, gpus, sw, chunk, tp + 1, "data")       # tp shares to reduce, 1 to multicast
    b.add(p, sw, gpus, chunk, tp, "data")           # its reduced share, tp - 1 multicast
    b.add(p, gpus, sw, FLAG_BYTES, 1, "flag")
    b.add(p, sw, gpus, FLAG_BYTES, tp - 1, "flag")
    return p


def decode_step(model, deployment, *, allreduce="oneshot", flags="separate", channels=1,
                node_gpus=0):
    """The trace of one decode step of ``model`` on ``deployment`` (module doc).

    Parameters
    ----------
    model : str or ModelConfig
        A model name (:func:`analysis.workloads.config.model_names`) or its config.
    deployment : Deployment
    allreduce : {"oneshot", "rsag", "ring", "nvls", "auto"}
        How TP all-reduces are sent: one-shot, reduce-scatter + all-gather, NCCL's ring
        (``2 (tp - 1)`` dependent steps to the next GPU), in-switch reduction (``nvls``:
        the trace gets a switch endpoint; only a fabric profile with
        ``in_switch_reduction`` times it), or ``auto`` as vLLM chooses
        (:func:`allreduce_mode`).
    flags : {"separate", "ll128"}
        How the TP collectives' receivers learn the data is there (:data:`FLAGS`): a
        flag message after the data, or LL128 lines (the data rows then carry the
        lines' flag bytes, 128 per 120 of data). EP dispatch and combine keep DeepEP's
        counts and flags.
    channels : int
        The parallel rings of ``ring`` (NCCL's channels: a ring's bandwidth is its
        channels' sum, src/graph/tuning.cc ``busBw = nChannels * speed``); each ring step's
        chunk is split over them.
    node_gpus : int
        GPUs per node for the ring's order when the group spans nodes (0: one node;
        :func:`_ring_edges`).

    Returns
    -------
    Trace
        ``kind="decode_step"``. Phases chain in layer order (each waits for the one
        before); GPUs are numbered group by group (TP group ``g`` is GPUs ``g x tp`` to
        ``g x tp + tp - 1``). A deployment without TP or EP gives an empty trace.

    Raises
    ------
    ValueError
        Naming the field, for a bad deployment (:func:`check_deployment`) or an unknown
        ``allreduce``.
    """
    m, dep = check_deployment(model, deployment)
    if allreduce not in ALLREDUCE:
        raise ValueError(f"allreduce must be one of {ALLREDUCE}, not {allreduce!r}")
    if flags not in FLAGS:
        raise ValueError(f"flags must be one of {FLAGS}, not {flags!r}")
    _int("channels", channels)
    _int("node_gpus", node_gpus, low=0)
    if allreduce == "nvls" and flags == "ll128":
        raise ValueError("flags='ll128' is for GPU-to-GPU collectives, not allreduce='nvls'")
    act = dtype_bytes(dep.dtype, "dtype")
    moe_ep = m.is_moe and dep.ep > 1
    n = dep.ep if moe_ep else dep.tp
    groups = list(range(0, n, dep.tp))
    b = TraceBuilder("decode_step", m.name, dict(asdict(dep), allreduce=allreduce,
                                                    flags=flags, channels=channels,
                                                    node_gpus=node_gpus), n,
                     switch=allreduce == "nvls" and dep.tp > 1)
    h = m.hidden_size
    s = dep.batch * h * act
    last = ()
    puts = routing_puts(m, dep) if moe_ep else None
    for layer in range(m.num_hidden_layers):
        is_moe_layer = moe_ep and layer >= m.first_k_dense_replace
        name = f"L{layer}"
        if dep.tp > 1 and not m.parallel_attn:
            last = (_allreduce(b, f"{name}.attn", layer, last, groups, dep.tp, s,
                               allreduce, flags=flags, channels=channels,
                               node_gpus=node_gpus),)
        if is_moe_layer:
            last = (_moe(b, m, dep, name, layer, last, puts),)
            if dep.tp > 1:
                share = -(-dep.batch // dep.tp) * h * act
                srcs, dsts = zip(*(_peers(g, dep.tp) for g in groups), strict=True)
                p = b.phase(f"{name}.moe.ag", "tp_allgather", layer, last, dep.tp - 1,
                            dep.tp - 1)
                src, dst = np.concatenate(srcs), np.concatenate(dsts)
                _send(b, p, src, dst, share, flags)
                last = (p,)
        elif dep.tp > 1:             # parallel attention + MLP: one all-reduce of both
            part = "block" if m.parallel_attn else "mlp"
            last = (_allreduce(b, f"{name}.{part}", layer, last, groups, dep.tp, s,
                               allreduce, flags=flags, channels=channels,
                               node_gpus=node_gpus),)
    return b.build()


def _moe(b, m, dep, name, layer, deps, puts):
    """Dispatch and combine phases of one MoE layer; returns the combine phase id."""
    n, e = dep.ep, m.n_routed_experts + dep.redundant_experts      # e: expert slots
    src, dst = np.nonzero(puts)
    cnt = puts[src, dst]
    off = src != dst
    src, dst, cnt = src[off], dst[off], cnt[off]
    fsrc, fdst = _peers(0, n)
    d_bytes, c_bytes = dispatch_bytes(m.hidden_size, dep.dispatch_fp8), combine_bytes(
        m.hidden_size)
    if dep.dispatch == "batched":
        qps, local = n - 1, 1
        p = b.phase(f"{name}.moe.dispatch", "ep_dispatch", layer, deps, qps, n - 1)
        b.add(p, src, dst, cnt * d_bytes, 1, "data")      # one message per (src, dst)
        b.add(p, fsrc, fdst, FLAG_BYTES, local, "flag")
        c = b.phase(f"{name}.moe.combine", "ep_combine", layer, (p,), qps, n - 1)
        b.add(c, dst, src, cnt * c_bytes, 1, "data")
        b.add(c, fsrc, fdst, FLAG_BYTES, local, "flag")
        return c
    local = e // n
    qps = deepep_qps(e, n)
    p = b.phase(f"{name}.moe.dispatch", "ep_dispatch", layer, deps, qps, n - 1)
    b.add(p, src, dst, d_bytes, cnt, "data")
    b.add(p, fsrc, fdst, FLAG_BYTES, local, "flag")       # a count per remote expert
    c = b.phase(f"{name}.moe.combine", "ep_combine", layer, (p,), qps, n - 1)
    b.add(c, dst, src, c_bytes, cnt, "data")
    b.add(c, fsrc, fdst, FLAG_BYTES, local, "flag")       # a flag per (local expert, peer)
    return c

