"""Workload generator: the messages of one decode step, and of one KV-cache transfer.

:func:`decode_step` returns the :class:`~pymodel.workloads.trace.Trace` of one decode step
of a model on a :class:`Deployment`; :func:`kv_transfer` the trace of moving one request's
KV cache from its prefill GPUs to its decode GPUs. Only network traffic is emitted: a
message a GPU would send to itself (a local expert) is not.

Decode step, per layer, in order (each phase waits for the one before it):

Tensor parallelism (``tp > 1``, Megatron-LM: Shoeybi et al. 2019, Sec. 3)
    Two all-reduces per layer (after attention and after the MLP; one for a model with
    parallel attention and MLP, Falcon) of ``S = B x hidden x bytes(dtype)`` per GPU.
    ``allreduce="oneshot"``: one phase in which every GPU pushes its whole ``S`` to each of
    the ``tp - 1`` others (each then reduces locally). ``allreduce="rsag"``: a reduce-
    scatter phase (every GPU sends chunk ``j`` of ``ceil(S / tp)`` bytes to GPU ``j``)
    then an all-gather phase (every GPU sends its reduced chunk to the others): ``2 (tp -
    1)`` messages of ``S / tp`` per GPU. In every phase each GPU also sends one flag of
    :data:`FLAG_BYTES` to each peer after its data.
Expert parallelism (``ep > 1``, MoE layers; DeepEP's low-latency kernels)
    Attention runs data-parallel across ``ep / tp`` groups of ``tp`` GPUs, each with
    its own ``B`` sequences; the routed experts are spread ``E / ep`` per GPU. Each TP
    rank dispatches its share of the group's ``B`` tokens (``B // tp``, the first ``B %
    tp`` ranks one more). Dispatch: one put per (token, routed expert on another GPU) of
    ``16 + H + (H / 128) x 4`` bytes (FP8 values with one float scale per 128, plus a
    16-byte header; ``16 + 2H`` with ``dispatch_fp8=False``); then one count per remote
    expert (``E - E / ep`` per GPU). Combine: the reverse puts of ``2H`` bytes (BF16) and
    one flag per (local expert, remote GPU). DeepEP keeps ``(E / ep) x (ep - 1)`` QPs per
    GPU (one per local expert and peer). With ``tp > 1`` the group then all-gathers the
    combined tokens: ``tp - 1`` messages of ``(B / tp) x H x bytes(dtype)``.
Routing
    Balanced and deterministic: token ``u`` (numbered over the whole step, GPU by GPU)
    picks experts ``(u + j x E / k) mod E`` for ``j < k`` (``k`` experts per token), so
    every expert gets the same number of tokens (+-1) and a token's experts are spread
    over GPUs. With ``dispatch="batched"`` (a lever, not DeepEP's low-latency layout)
    a GPU packs every token it sends to one GPU in one message per phase (the per-token
    puts' bytes added up), keeps one QP per peer (``ep - 1``) and sends one count or
    flag per peer. Real routers are skewed (DeepSeek-V3 also limits each token to 4 nodes);
    that changes the counts per pair of GPUs, not the number of puts per token.

KV transfer (disaggregated prefill -> decode, vLLM paged KV cache)
    The prompt's ``ceil(prompt_tokens / block_tokens)`` blocks (vLLM's default block is
    16 tokens) go from prefill GPU ``r`` to decode GPU ``tp + r`` (the same TP rank).
    With a decode TP ``b`` other than the prefill TP ``a`` (``decode_tp``), decode rank
    ``d`` (GPU ``a + d``) takes each KV head it caches from a prefill rank that caches
    it (of several holders, the ``d mod holders``-th), as vLLM's NIXL connector reads a
    decode rank's heads from prefill rank ``d // (b / a)``: a prefill rank then sends
    ``b / a`` slices of ``kv_heads / b`` heads per block (``b > a``: more, smaller
    descriptors), or a decode rank gathers from ``a / b`` prefill ranks (``a > b``: as
    many descriptors per prefill GPU, ``a / b`` times as many arriving at each decode
    GPU). A rank's heads of one block are taken as one contiguous range (a head-major
    block layout, vLLM's HND). MLA: decode rank ``d`` takes the whole latent from
    prefill rank ``d mod a``.
    One block of one layer is ``block_tokens x kv_heads_per_gpu x head_dim x bytes``
    for K and again for V (MLA: one latent of ``kv_lora_rank + qk_rope_head_dim`` per
    token, replicated on every TP rank). ``coalesce="none"``: one transfer per (layer,
    block, K or V), NIXL and Mooncake's per-block descriptors. ``"layer"``: one per
    (layer, K or V, run of contiguous blocks). ``"page"``: one per run of contiguous
    blocks covering every layer (a layout that keeps all layers of a block in one page,
    vLLM issue 53237). Blocks are allocated in runs of ``run_blocks`` (``None``: one run).
    Each GPU ends with one flag to its peer.
"""

from dataclasses import asdict, dataclass

import numpy as np

from pymodel.workloads.config import dtype_bytes, kv_bytes_per_token_layer, load_model
from pymodel.workloads.trace import TraceBuilder

__all__ = ["Deployment", "decode_step", "kv_transfer", "check_deployment",
           "kv_heads_per_gpu", "kv_block_bytes", "dispatch_bytes", "combine_bytes",
           "tokens_per_rank", "attention_groups", "deepep_qps", "FLAG_BYTES", "kv_tp_pairs",
           "check_kv_tp",
           "ALLREDUCE", "COALESCE", "DISPATCH", "VLLM_BLOCK_TOKENS"]

#: Bytes of a completion flag or counter: one 8-byte RDMA WRITE or store (an InfiniBand
#: atomic operates on 8 bytes; DeepEP's masked fetch-add on 4).
FLAG_BYTES = 8
#: DeepEP low-latency dispatch message header: ``sizeof(int4)`` (source token index and
#: three reserved ints), csrc/kernels/internode_ll.cu ``num_bytes_per_msg``.
DISPATCH_HEADER = 16
#: Hidden values per FP8 scale (a float) in DeepEP's FP8 dispatch.
FP8_GROUP = 128
ALLREDUCE = ("oneshot", "rsag")
#: EP dispatch/combine layouts: one put per (token, expert) (DeepEP low latency) or one
#: message per (source, destination GPU) per phase.
DISPATCH = ("per_token", "batched")
COALESCE = ("none", "layer", "page")
#: vLLM's default KV-cache block (tokens), ``--block-size`` default 16.
VLLM_BLOCK_TOKENS = 16


@dataclass(frozen=True)
class Deployment:
    """How a model is run for one decode step.

    Parameters
    ----------
    batch : int
        Sequences decoded per step by each attention group (a TP group; for an expert-
        parallel MoE deployment there are ``ep / tp`` groups), at least 1.
    tp, ep : int
        Tensor- and expert-parallel degrees, at least 1. ``ep > 1`` needs a MoE model,
        ``ep`` dividing its routed experts and ``tp`` dividing ``ep``.
    dtype : str
        Activations on the wire (TP all-reduce, EP combine, TP all-gather): a key of
        :data:`pymodel.workloads.config.DTYPE_BYTES`.
    weights_dtype, kv_dtype : str or None
        Weights (``None``: the model's own) and KV cache, for the roofline.
    context : int
        Tokens each sequence has in its KV cache at this step (the roofline's KV reads).
    dispatch_fp8 : bool
        DeepEP's FP8 dispatch (default) or BF16.
    dispatch : str
        EP message layout (:data:`DISPATCH`): ``"per_token"`` (DeepEP low latency,
        default) or ``"batched"`` (one message per destination GPU and phase).
    """

    batch: int
    tp: int = 1
    ep: int = 1
    dtype: str = "bf16"
    weights_dtype: str | None = None
    kv_dtype: str = "bf16"
    context: int = 2048
    dispatch_fp8: bool = True
    dispatch: str = "per_token"


def _int(name, value, low=1):
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, not {value!r}")
    return int(value)


def check_deployment(model, dep):
    """Check ``dep`` against ``model``; return ``(ModelConfig, Deployment)``.

    Raises ``ValueError`` naming the field: ``model`` (unknown), ``batch``, ``tp``,
    ``ep``, ``context`` (not a positive integer), ``tp`` (does not divide the attention
    heads, or neither divides nor is a multiple of the KV heads), ``ep`` (above 1 for a
    dense model, not dividing the routed experts, not a multiple of ``tp``), ``dtype``,
    ``weights_dtype``, ``kv_dtype`` (unknown type), ``dispatch`` (unknown layout).
    """
    m = load_model(model)
    if not isinstance(dep, Deployment):
        raise ValueError(f"deployment must be a Deployment, not {type(dep).__name__}")
    _int("batch", dep.batch)
    _int("tp", dep.tp)
    _int("ep", dep.ep)
    _int("context", dep.context)
    dtype_bytes(dep.dtype, "dtype")
    dtype_bytes(dep.kv_dtype, "kv_dtype")
    if dep.weights_dtype is not None:
        dtype_bytes(dep.weights_dtype, "weights_dtype")
    if dep.dispatch not in DISPATCH:
        raise ValueError(f"dispatch must be one of {DISPATCH}, not {dep.dispatch!r}")
    if m.num_attention_heads % dep.tp:
        raise ValueError(f"tp ({dep.tp}) must divide num_attention_heads "
                         f"({m.num_attention_heads}) of {m.name}")
    kv = m.num_key_value_heads
    if m.attention != "mla" and kv % dep.tp and dep.tp % kv:
        raise ValueError(f"tp ({dep.tp}) must divide, or be a multiple of, "
                         f"num_key_value_heads ({kv}) of {m.name}")
    if dep.ep > 1:
        if not m.is_moe:
            raise ValueError(f"ep ({dep.ep}) must be 1: {m.name} has no routed experts")
        if m.n_routed_experts % dep.ep:
            raise ValueError(f"ep ({dep.ep}) must divide n_routed_experts "
                             f"({m.n_routed_experts}) of {m.name}")
        if dep.ep % dep.tp:
            raise ValueError(f"ep ({dep.ep}) must be a multiple of tp ({dep.tp})")
    return m, dep


def kv_heads_per_gpu(model, tp):
    """KV heads each TP rank caches: ``kv_heads / tp``, or 1 (replicated) when ``tp``
    exceeds the KV heads (vLLM replicates them)."""
    m = load_model(model)
    return max(1, m.num_key_value_heads // tp)


def kv_block_bytes(model, tp=1, block_tokens=VLLM_BLOCK_TOKENS, kv_dtype="bf16"):
    """Bytes of one KV-cache block of one layer on one TP rank: K (or V) for MHA, GQA,
    MQA; the latent for MLA (replicated on every rank; in FP8 FlashMLA's layout,
    :func:`~pymodel.workloads.config.kv_bytes_per_token_layer`)."""
    m = load_model(model)
    _int("block_tokens", block_tokens)
    b = dtype_bytes(kv_dtype, "kv_dtype")
    if m.attention == "mla":
        return block_tokens * kv_bytes_per_token_layer(m, kv_dtype)
    return block_tokens * kv_heads_per_gpu(m, tp) * m.head_dim * b


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


def tokens_per_rank(batch, tp):
    """Tokens each of the ``tp`` ranks of a group dispatches: ``batch // tp``, the first
    ``batch % tp`` ranks one more (a list of ``tp`` ints)."""
    return [batch // tp + (1 if r < batch % tp else 0) for r in range(tp)]


def attention_groups(model, dep):
    """Attention (TP) groups in the deployment: ``ep / tp`` for an expert-parallel MoE
    deployment, else 1. Tokens decoded per step = ``batch x attention_groups``."""
    m = load_model(model)
    return dep.ep // dep.tp if (m.is_moe and dep.ep > 1) else 1


def deepep_qps(experts, ep):
    """QPs per GPU that DeepEP's low-latency mode creates: ``(E / ep) x (ep - 1)``."""
    return (experts // ep) * (ep - 1)


def _peers(g, n):
    """The other GPUs of a group of ``n`` starting at ``g``, as two arrays (src, dst)."""
    a = np.arange(n, dtype=np.int64)
    src, dst = np.meshgrid(a, a, indexing="ij")
    off = src != dst
    return g + src[off], g + dst[off]


def _allreduce(b, name, layer, dep_ids, groups, tp, nbytes, mode, op="tp_allreduce"):
    """Phases and rows of one all-reduce of ``nbytes`` per GPU in every TP group;
    returns the id of its last phase."""
    srcs, dsts = [], []
    for g in groups:
        s, d = _peers(g, tp)
        srcs.append(s)
        dsts.append(d)
    src, dst = np.concatenate(srcs), np.concatenate(dsts)
    if mode == "oneshot":
        p = b.phase(f"{name}.ar", op, layer, dep_ids, tp - 1, tp - 1)
        b.add(p, src, dst, nbytes, 1, "data")
        b.add(p, src, dst, FLAG_BYTES, 1, "flag")
        return p
    chunk = -(-nbytes // tp)
    p1 = b.phase(f"{name}.rs", op + "_rs", layer, dep_ids, tp - 1, tp - 1)
    b.add(p1, src, dst, chunk, 1, "data")
    b.add(p1, src, dst, FLAG_BYTES, 1, "flag")
    p2 = b.phase(f"{name}.ag", op + "_ag", layer, (p1,), tp - 1, tp - 1)
    b.add(p2, src, dst, chunk, 1, "data")
    b.add(p2, src, dst, FLAG_BYTES, 1, "flag")
    return p2


def _routing(m, dep):
    """Per-step put counts of the balanced routing: an ``(n, n)`` int64 array
    ``puts[src, dst]`` of (token, expert) pairs GPU ``src`` sends to GPU ``dst``
    (diagonal: local, not sent)."""
    n, e, k, tp = dep.ep, m.n_routed_experts, m.num_experts_per_tok, dep.tp
    per_gpu = e // n
    share = tokens_per_rank(dep.batch, tp)
    src_of_token = np.repeat(np.arange(n, dtype=np.int64), [share[g % tp] for g in range(n)])
    u = np.arange(len(src_of_token), dtype=np.int64)
    experts = (u[:, None] + np.arange(k, dtype=np.int64)[None, :] * (e // k)) % e
    dst = experts // per_gpu
    puts = np.zeros((n, n), dtype=np.int64)
    np.add.at(puts, (np.repeat(src_of_token, k), dst.ravel()), 1)
    return puts


def decode_step(model, deployment, *, allreduce="oneshot"):
    """The trace of one decode step of ``model`` on ``deployment`` (module doc).

    Parameters
    ----------
    model : str or ModelConfig
        A model name (:func:`pymodel.workloads.config.model_names`) or its config.
    deployment : Deployment
    allreduce : {"oneshot", "rsag"}
        How TP all-reduces are sent.

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
    act = dtype_bytes(dep.dtype, "dtype")
    moe_ep = m.is_moe and dep.ep > 1
    n = dep.ep if moe_ep else dep.tp
    groups = list(range(0, n, dep.tp))
    b = TraceBuilder("decode_step", m.name, dict(asdict(dep), allreduce=allreduce), n)
    h = m.hidden_size
    s = dep.batch * h * act
    last = ()
    puts = _routing(m, dep) if moe_ep else None
    for layer in range(m.num_hidden_layers):
        is_moe_layer = moe_ep and layer >= m.first_k_dense_replace
        name = f"L{layer}"
        if dep.tp > 1 and not m.parallel_attn:
            last = (_allreduce(b, f"{name}.attn", layer, last, groups, dep.tp, s,
                               allreduce),)
        if is_moe_layer:
            last = (_moe(b, m, dep, name, layer, last, puts),)
            if dep.tp > 1:
                share = -(-dep.batch // dep.tp) * h * act
                srcs, dsts = zip(*(_peers(g, dep.tp) for g in groups), strict=True)
                p = b.phase(f"{name}.moe.ag", "tp_allgather", layer, last, dep.tp - 1,
                            dep.tp - 1)
                src, dst = np.concatenate(srcs), np.concatenate(dsts)
                b.add(p, src, dst, share, 1, "data")
                b.add(p, src, dst, FLAG_BYTES, 1, "flag")
                last = (p,)
        elif dep.tp > 1:             # parallel attention + MLP: one all-reduce of both
            part = "block" if m.parallel_attn else "mlp"
            last = (_allreduce(b, f"{name}.{part}", layer, last, groups, dep.tp, s,
                               allreduce),)
    return b.build()


def _moe(b, m, dep, name, layer, deps, puts):
    """Dispatch and combine phases of one MoE layer; returns the combine phase id."""
    n, e = dep.ep, m.n_routed_experts
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


def _kv_heads_held(m, tp, rank):
    """The KV heads TP rank ``rank`` of ``tp`` caches (replicated above the KV heads)."""
    kvh = m.num_key_value_heads
    if tp <= kvh:
        return range(rank * kvh // tp, (rank + 1) * kvh // tp)
    return range(rank * kvh // tp, rank * kvh // tp + 1)


def kv_tp_pairs(model, tp, decode_tp):
    """``{(prefill rank, decode rank): KV heads}`` of a KV transfer from a TP ``tp``
    prefill instance to a TP ``decode_tp`` decode instance (module doc); the heads are
    ``None`` for MLA (the whole latent)."""
    m = load_model(model)
    pairs = {}
    for d in range(decode_tp):
        if m.attention == "mla":
            pairs[(d % tp, d)] = None
            continue
        for h in _kv_heads_held(m, decode_tp, d):
            holders = [r for r in range(tp) if h in _kv_heads_held(m, tp, r)]
            key = (holders[d % len(holders)], d)
            pairs[key] = pairs.get(key, 0) + 1
    return pairs


def check_kv_tp(model, name, tp):
    """``ValueError`` naming ``name`` unless ``tp`` is a TP degree a KV transfer of
    ``model`` can have (an integer >= 1 dividing the attention heads and dividing, or a
    multiple of, the KV heads)."""
    m = load_model(model)
    _int(name, tp)
    if m.num_attention_heads % tp:
        raise ValueError(f"{name} ({tp}) must divide num_attention_heads "
                         f"({m.num_attention_heads}) of {m.name}")
    kv = m.num_key_value_heads
    if m.attention != "mla" and kv % tp and tp % kv:
        raise ValueError(f"{name} ({tp}) must divide, or be a multiple of, "
                         f"num_key_value_heads ({kv}) of {m.name}")


def kv_transfer(model, *, prompt_tokens, tp=1, block_tokens=VLLM_BLOCK_TOKENS,
                kv_dtype="bf16", coalesce="none", run_blocks=None, decode_tp=None):
    """The trace of one request's KV cache moving from prefill to decode (module doc).

    Parameters
    ----------
    model : str or ModelConfig
    prompt_tokens : int
        Tokens whose KV cache moves (at least 1); whole blocks are sent.
    tp : int
        TP degree of the prefill instance (GPUs ``0..tp-1``) and, unless ``decode_tp``
        says otherwise, of the decode instance (GPUs ``tp..2tp-1``, rank to rank); must
        divide the attention heads and divide, or be a multiple of, the KV heads.
    decode_tp : int or None
        TP degree of the decode instance (GPUs ``tp..tp+decode_tp-1``; module doc);
        ``None``: ``tp``. The same checks as ``tp``.
    block_tokens : int
        Tokens per KV-cache block (vLLM default 16).
    kv_dtype : str
    coalesce : {"none", "layer", "page"}
    run_blocks : int or None
        Contiguous blocks per allocation run (``None``: all blocks contiguous).

    Returns
    -------
    Trace
        ``kind="kv_transfer"``, one phase ``"kv"`` (op ``kv_transfer``; QPs and peers per
        GPU: the most decode ranks one prefill rank sends to, 1 when the TPs match).
        ``Trace.count("data", src=0)`` is the descriptors prefill GPU 0 posts; each
        prefill GPU ends with a flag to each decode GPU it sent to.

    Raises
    ------
    ValueError
        Naming the field: ``prompt_tokens``, ``tp``, ``decode_tp``, ``block_tokens``,
        ``run_blocks``, ``coalesce``, ``kv_dtype``, ``model``.
    """
    m = load_model(model)
    _int("prompt_tokens", prompt_tokens)
    check_kv_tp(m, "tp", tp)
    decode_tp = tp if decode_tp is None else decode_tp
    check_kv_tp(m, "decode_tp", decode_tp)
    if coalesce not in COALESCE:
        raise ValueError(f"coalesce must be one of {COALESCE}, not {coalesce!r}")
    head = kv_block_bytes(m, m.num_key_value_heads, block_tokens, kv_dtype)  # 1 head
    pairs = kv_tp_pairs(m, tp, decode_tp)
    src = np.array([p[0] for p in pairs], dtype=np.int64)
    dst = np.array([tp + p[1] for p in pairs], dtype=np.int64)
    block = np.array([head if h is None else h * head for h in pairs.values()],
                     dtype=np.int64)
    fan = int(np.bincount(src).max())
    blocks = -(-prompt_tokens // block_tokens)
    run = blocks if run_blocks is None else _int("run_blocks", run_blocks)
    runs = [min(run, blocks - i) for i in range(0, blocks, run)]
    parts = 1 if m.attention == "mla" else 2
    layers = m.num_hidden_layers
    b = TraceBuilder("kv_transfer", m.name,
                     dict(prompt_tokens=prompt_tokens, tp=tp, decode_tp=decode_tp,
                          block_tokens=block_tokens, kv_dtype=kv_dtype, coalesce=coalesce,
                          run_blocks=run_blocks),
                     tp + decode_tp)
    p = b.phase("kv", "kv_transfer", -1, (), fan, fan)
    if coalesce == "none":
        b.add(p, src, dst, block, layers * parts * blocks, "data")
    else:
        sizes = {}
        for r in runs:
            sizes[r] = sizes.get(r, 0) + 1
        for r, k in sizes.items():
            if coalesce == "layer":
                b.add(p, src, dst, r * block, layers * parts * k, "data")
            else:
                b.add(p, src, dst, r * block * layers * parts, k, "data")
    b.add(p, src, dst, FLAG_BYTES, 1, "flag")
    return b.build()
