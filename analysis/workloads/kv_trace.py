"""The trace of one request's KV cache moving from prefill to decode (:func:`kv_transfer`;
the blocks, TP pairs and coalescing are described in :mod:`analysis.workloads.generate`'s
module doc), and the KV-cache sizes it uses."""

import numpy as np

from analysis.workloads.config import dtype_bytes, kv_bytes_per_token_layer, load_model
from analysis.workloads.deployment import FLAG_BYTES, _int
from analysis.workloads.trace import TraceBuilder

COALESCE = ("none", "layer", "page")
#: vLLM's default KV-cache block (tokens), ``--block-size`` default 16.
VLLM_BLOCK_TOKENS = 16


def kv_heads_per_gpu(model, tp):
    """KV heads each TP rank caches: ``kv_heads / tp``, or 1 (replicated) when ``tp``
    exceeds the KV heads (vLLM replicates them)."""
    m = load_model(model)
    return max(1, m.num_key_value_heads // tp)


def kv_block_bytes(model, tp=1, block_tokens=VLLM_BLOCK_TOKENS, kv_dtype="bf16"):
    """Bytes of one KV-cache block of one layer on one TP rank: K (or V) for MHA, GQA,
    MQA; the latent for MLA (replicated on every rank; in FP8 FlashMLA's layout,
    :func:`~analysis.workloads.config.kv_bytes_per_token_layer`)."""
    m = load_model(model)
    _int("block_tokens", block_tokens)
    b = dtype_bytes(kv_dtype, "kv_dtype")
    if m.attention == "mla":
        return block_tokens * kv_bytes_per_token_layer(m, kv_dtype)
    return block_tokens * kv_heads_per_gpu(m, tp) * m.head_dim * b



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
