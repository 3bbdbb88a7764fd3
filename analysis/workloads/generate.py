"""Workload generator: the messages of one decode step, and of one KV-cache transfer.

:func:`decode_step` returns the :class:`~analysis.workloads.trace.Trace` of one decode step
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
Routing and placement (:mod:`analysis.workloads.experts`)
    ``routing="balanced"`` (default): deterministic, token ``u`` (numbered over the whole
    step, GPU by GPU) picks experts ``(u + j x E / k) mod E`` for ``j < k`` (``k``
    experts per token), so every expert gets the same number of tokens (+-1) and a
    token's experts are spread over GPUs. ``routing="sampled"``: each token draws its
    experts at random (seeded), so a step's GPUs receive unequal shares; with
    ``redundant_experts`` the experts have ``E + r`` replicas placed as DeepSeek's
    load balancer does, and a GPU keeps one QP per local replica and peer. With
    ``dispatch="batched"`` (a lever, not DeepEP's low-latency layout) a GPU packs every
    token it sends to one GPU in one message per phase (the per-token puts' bytes added
    up), keeps one QP per peer (``ep - 1``) and sends one count or flag per peer.
    DeepSeek-V3 also limits each token to 4 nodes; that changes the counts per pair of
    GPUs, not the number of puts per token.

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

The generator is split by concern: the deployment and its checks
(:mod:`analysis.workloads.deployment`), the decode step
(:mod:`analysis.workloads.decode_trace`) and the KV transfer
(:mod:`analysis.workloads.kv_trace`); this module re-exports their names.
"""

from analysis.workloads.decode_trace import (
    ALLREDUCE,
    DISPATCH_HEADER,  # noqa: F401  (re-exported for callers of this module)
    FP8_GROUP,  # noqa: F401
    combine_bytes,
    decode_step,
    dispatch_bytes,
)
from analysis.workloads.deployment import (
    DISPATCH,
    FLAG_BYTES,
    Deployment,
    attention_groups,
    check_deployment,
    deepep_qps,
    tokens_per_rank,
)
from analysis.workloads.kv_trace import (
    COALESCE,
    VLLM_BLOCK_TOKENS,
    check_kv_tp,
    kv_block_bytes,
    kv_heads_per_gpu,
    kv_tp_pairs,
    kv_transfer,
)

__all__ = ["Deployment", "decode_step", "kv_transfer", "check_deployment",
           "kv_heads_per_gpu", "kv_block_bytes", "dispatch_bytes", "combine_bytes",
           "tokens_per_rank", "attention_groups", "deepep_qps", "FLAG_BYTES", "kv_tp_pairs",
           "check_kv_tp",
           "ALLREDUCE", "COALESCE", "DISPATCH", "VLLM_BLOCK_TOKENS"]
