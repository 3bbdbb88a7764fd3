"""The trace of one decode step (:func:`decode_step`; the phases, messages and routing are
described in :mod:`pymodel.workloads.generate`'s module doc): TP all-reduces and
all-gathers, and the EP dispatch and combine of DeepEP's low-latency kernels."""

from dataclasses import asdict

import numpy as np

from pymodel.workloads.config import dtype_bytes
from pymodel.workloads.deployment import (
    FLAG_BYTES,
    _int,
    check_deployment,
    deepep_qps,
)
from pymodel.workloads.experts import routing_puts
from pymodel.workloads.trace import TraceBuilder

#: DeepEP low-latency dispatch message header: ``sizeof(int4)`` (source token index and
#: three reserved ints), csrc/kernels/internode_ll.cu ``num_bytes_per_msg``.
DISPATCH_HEADER = 16
#: Hidden values per FP8 scale (a float) in DeepEP's FP8 dispatch.
FP8_GROUP = 128
ALLREDUCE = ("oneshot", "rsag", "auto")
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
#: + all-gather above; 2 GPUs always one-stage). Larger groups: two-shot (vLLM's custom
#: all-reduce stops at 8 GPUs; NCCL's ring, which takes over there, is not modelled).
ONESHOT_MAX_BYTES = ((2, None), (4, 512 * 1024), (8, 256 * 1024))


def allreduce_mode(mode, tp, nbytes):
    """``"oneshot"`` or ``"rsag"`` for an all-reduce of ``nbytes`` per GPU over ``tp``
    GPUs: ``mode`` itself, or with ``"auto"`` as :data:`ONESHOT_MAX_BYTES` says."""
    if mode != "auto":
        return mode
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
               flags="separate"):
    """Phases and rows of one all-reduce of ``nbytes`` per GPU in every TP group;
    returns the id of its last phase."""
    srcs, dsts = [], []
    for g in groups:
        s, d = _peers(g, tp)
        srcs.append(s)
        dsts.append(d)
    src, dst = np.concatenate(srcs), np.concatenate(dsts)
    if allreduce_mode(mode, tp, nbytes) == "oneshot":
        p = b.phase(f"{name}.ar", op, layer, dep_ids, tp - 1, tp - 1)
        _send(b, p, src, dst, nbytes, flags)
        return p
    chunk = -(-nbytes // tp)
    p1 = b.phase(f"{name}.rs", op + "_rs", layer, dep_ids, tp - 1, tp - 1)
    _send(b, p1, src, dst, chunk, flags)
    p2 = b.phase(f"{name}.ag", op + "_ag", layer, (p1,), tp - 1, tp - 1)
    _send(b, p2, src, dst, chunk, flags)
    return p2


def decode_step(model, deployment, *, allreduce="oneshot", flags="separate"):
    """The trace of one decode step of ``model`` on ``deployment`` (module doc).

    Parameters
    ----------
    model : str or ModelConfig
        A model name (:func:`pymodel.workloads.config.model_names`) or its config.
    deployment : Deployment
    allreduce : {"oneshot", "rsag", "auto"}
        How TP all-reduces are sent (``auto``: one-shot or reduce-scatter + all-gather
        by size and group, as vLLM's custom all-reduce chooses; :func:`allreduce_mode`).
    flags : {"separate", "ll128"}
        How the TP collectives' receivers learn the data is there (:data:`FLAGS`): a
        flag message after the data, or LL128 lines (the data rows then carry the
        lines' flag bytes, 128 per 120 of data). EP dispatch and combine keep DeepEP's
        counts and flags.

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
    act = dtype_bytes(dep.dtype, "dtype")
    moe_ep = m.is_moe and dep.ep > 1
    n = dep.ep if moe_ep else dep.tp
    groups = list(range(0, n, dep.tp))
    b = TraceBuilder("decode_step", m.name, dict(asdict(dep), allreduce=allreduce,
                                                    flags=flags), n)
    h = m.hidden_size
    s = dep.batch * h * act
    last = ()
    puts = routing_puts(m, dep) if moe_ep else None
    for layer in range(m.num_hidden_layers):
        is_moe_layer = moe_ep and layer >= m.first_k_dense_replace
        name = f"L{layer}"
        if dep.tp > 1 and not m.parallel_attn:
            last = (_allreduce(b, f"{name}.attn", layer, last, groups, dep.tp, s,
                               allreduce, flags=flags),)
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
                               allreduce, flags=flags),)
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

