"""Decode-step roofline: compute, weight and KV-cache reads, and communication per step.

For one decode step of a model on a :class:`~analysis.workloads.generate.Deployment`,
per GPU (every GPU of these deployments does the same work; ``T`` is the tokens the
step decodes, ``batch x attention groups``; ``tp`` the TP degree, ``ep`` the EP degree):

Weights read
    Everything but the routed experts is sharded ``tp`` ways: ``(layers x attention +
    dense layers x dense MLP + MoE layers x (router + shared experts) + LM head) / tp``
    parameters. Routed experts: a GPU holds ``E / ep`` of each MoE layer's ``E`` experts
    and reads those at least one token picked; with balanced independent routing a
    given expert is picked by one of ``T`` tokens with probability ``1 - (1 - k / E)^T``
    (``k`` experts per token; ``ep = 1``: the expected touched experts of all ``E``,
    ``tp``-sharded). Times ``bytes(weights_dtype)``. With ``routing="sampled"``
    (:mod:`analysis.workloads.experts`) the GPUs differ and the busiest sets the step: a
    GPU holds ``(E + redundant_experts) / ep`` experts, and the figures are those of the
    step's drawn routing, the most replicas any GPU has touched and (for FLOPs) the most
    (token, expert) pairs any GPU serves.
KV cache read
    ``batch x context x kv_bytes_per_token x share``: ``share`` is the fraction of KV heads
    a TP rank holds (``kv_heads_per_gpu / kv_heads``; 1 for MLA, whose latent every rank
    holds).
FLOPs
    ``2 x batch x (non-routed parameters / tp)`` for the linear layers (every TP rank
    multiplies the whole group's batch by its shard), ``2 x T x k / ep x expert
    parameters`` per MoE layer for the routed experts this GPU serves, and attention:
    ``4 x context x heads x head_dim / tp`` per token and layer (scores and values; MLA
    absorbed: ``2 x context x heads x (kv_lora + rope + kv_lora) / tp``).
Time
    ``compute = FLOPs / peak`` (FP8 peak for FP8 weights, else BF16), ``memory = bytes /
    (HBM bandwidth x hbm_efficiency)``, ``coordination`` = the communication time of the
    step's trace on a carrier (:func:`analysis.workloads.timing.comm_time`; 1 cycle = 1
    ns), ``sync`` = ``collective_sync_s`` per collective. Compute and memory overlap,
    communication does not (decode's all-reduces and DeepEP's low-latency
    dispatch/combine sit between the layers' compute):
    ``step = max(compute, memory) + coordination + sync + overhead``. Per-token latency
    is ``step`` (each sequence gets one token per step); throughput ``T / step``.
    ``hbm_efficiency`` and ``overhead`` are 1 and 0 for the pure roofline; the grid uses
    the NIM fit (:data:`analysis.workloads.calibration.NIM_FIT`).
Two micro-batches (``micro_batches=2``)
    DeepSeek's dual micro-batch overlap in decoding (DeepSeek-V3 technical report,
    arXiv 2412.19437, section 3.4.2; DeepEP README, low-latency kernels: a hook-based
    overlap that occupies no SMs): the batch is split in two, ``a = ceil(B / 2)`` and
    ``b = floor(B / 2)`` sequences, and while one micro-batch computes the other
    communicates. Each micro-batch is a step of its own (its own trace; its weights are
    read again: ``W`` = its ``max(compute, memory)``, ``M`` = its ``coordination +
    sync``), and the step becomes ``max(W_a, M_b) + max(W_b, M_a) + overhead`` instead of
    the sum. It applies where the step communicates and ``B >= 2``; elsewhere (batch 1,
    one GPU) the step is the plain sum and ``overlapped`` is False. The rule is taken
    over the whole step (the layers are alike, so the per-layer maxima add up to it).
    Default off (``micro_batches=1``): the grid compares what each interface costs,
    which the overlap would hide; the V3 report gives it as something DeepSeek explores
    for decoding and DeepEP offers it as an option.
Bottleneck
    The largest of ``compute``, ``memory`` and ``coordination``, with the seed's remedy:
    compute -> add compute; memory (reading cached state: weights and the KV cache,
    which a model keeps instead of recomputing) -> cache and share (batch to share
    weight reads, GQA/MQA/MLA to share the cache); coordination -> remove state and
    control steps.
Capacity
    ``fits``: the weights a GPU holds (all of its shard and experts) plus its KV cache fit
    its HBM. Nothing else (activations, workspace) is counted.
"""

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

from analysis.workloads.config import dtype_bytes, kv_bytes_per_token, param_counts
from analysis.workloads.experts import gpu_loads
from analysis.workloads.generate import (
    attention_groups,
    check_deployment,
    decode_step,
    kv_heads_per_gpu,
)
from analysis.workloads.timing import comm_time

__all__ = ["Accelerator", "ACCELERATORS", "load_accelerators", "decode_roofline",
           "StepResult", "REMEDY", "CLASSES", "COLLECTIVE_OPS"]

CLASSES = ("compute", "memory", "coordination")
#: Phase ops that start a collective (an RS+AG all-reduce counts once, at its
#: reduce-scatter): where :func:`decode_roofline` adds ``collective_sync_s``.
COLLECTIVE_OPS = ("tp_allreduce", "tp_allreduce_rs", "tp_allgather", "ep_dispatch",
                  "ep_combine")
#: The seed's framework: what to do in each regime.
REMEDY = {"compute": "add compute",
          "memory": "cache and share (batch, GQA/MQA/MLA, smaller types)",
          "coordination": "remove state and control steps"}


@dataclass(frozen=True)
class Accelerator:
    """Peak figures of one accelerator (data file ``data/accelerators.toml``)."""

    name: str
    title: str
    hbm_bytes_per_s: float
    hbm_bytes: float
    bf16_flops: float
    fp8_flops: float
    source: str


_ACCELERATORS_FILE = Path(__file__).resolve().parent / "data" / "accelerators.toml"


def load_accelerators(path=_ACCELERATORS_FILE):
    """``{name: Accelerator}`` from a data file."""
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    return {k: Accelerator(name=k, **v) for k, v in doc.items()}


ACCELERATORS = load_accelerators()


@dataclass(frozen=True)
class StepResult:
    """One decode step on one deployment (module doc). Times in seconds, sizes in bytes,
    per GPU unless named ``total``. ``ctrl_ops`` is every control action of the step (all
    GPUs); ``ctrl_ops_per_token`` counts the per-message actions (doorbells, WQE reads,
    context lookups, misses and write-backs, ACKs, CQEs) per decoded token and
    ``credits_per_token`` the NIC's link-level credit updates (one per 64-byte beat)
    apart; ``ctrl_bytes_per_token`` is their host-interface bytes and
    ``host_bytes_per_token`` all the RDMA engine's host-interface bytes (payload, control
    and TLP overheads, both nodes; 0 for the NIC)."""

    model: str
    batch: int
    tp: int
    ep: int
    gpus: int
    tokens: int
    carrier: str
    ports: int
    flops: float
    weight_bytes: float
    kv_bytes: float
    compute_s: float
    memory_s: float
    coordination_s: float
    moving_s: float
    overhead_s: float
    step_s: float
    tokens_per_s: float
    messages: int
    ctrl_ops: float
    ctrl_ops_per_token: float
    credits_per_token: float
    ctrl_bytes_per_token: float
    host_bytes_per_token: float
    held_bytes: float
    fits: bool
    attachment: str = "-"
    useful_bytes_per_token: float = 0.0
    inflight_bits_per_token: float = 0.0
    sync_s: float = 0.0
    hbm_efficiency: float = 1.0
    overlapped: bool = False

    @property
    def ctrl_per_token(self):
        """Every control action of the step per decoded token: the RDMA engine's
        per-message actions plus the NIC's link credit updates (a design has one kind or
        the other)."""
        return self.ctrl_ops_per_token + self.credits_per_token

    @property
    def ctrl_per_useful_kb(self):
        """Control actions per 1,024 bytes of ``data`` payload (flags and counts are not
        useful bytes); 0 without communication."""
        u = self.useful_bytes_per_token
        return self.ctrl_per_token * 1024 / u if u else 0.0

    @property
    def host_bytes_per_useful_byte(self):
        """Host-interface bytes (payload, control, TLP overheads, both ends) per useful
        byte; 0 for a design without a host interface (the integrated NIC)."""
        u = self.useful_bytes_per_token
        return self.host_bytes_per_token / u if u else 0.0

    @property
    def bottleneck(self):
        """``"compute"``, ``"memory"`` or ``"coordination"``: the largest term."""
        terms = dict(zip(CLASSES, (self.compute_s, self.memory_s,
                                   self.coordination_s + self.sync_s), strict=True))
        return max(terms, key=terms.get)

    @property
    def remedy(self):
        return REMEDY[self.bottleneck]

    @property
    def organising_s(self):
        """Communication time that is not payload on the links."""
        return self.coordination_s - self.moving_s


def _per_gpu_work(m, dep, tokens):
    """``(weight bytes read, weight bytes held, FLOPs, KV bytes)`` of one GPU."""
    pc = param_counts(m)
    wb = dtype_bytes(dep.weights_dtype or m.weights_dtype, "weights_dtype")
    head = pc["lm_head"] or pc["embedding"]
    shared = (m.num_hidden_layers * pc["attention"] + m.dense_layers * pc["dense_mlp"]
              + m.moe_layers * (pc["router"] + m.n_shared_experts * pc["expert"]) + head)
    shared /= dep.tp
    e, k = m.n_routed_experts, m.num_experts_per_tok
    if m.is_moe:
        if dep.ep > 1 and dep.routing == "sampled":
            pairs, hit = gpu_loads(m, dep)      # the busiest GPU sets the step
            held_e = (e + dep.redundant_experts) / dep.ep
            routed_tokens, touched = float(pairs.max()), float(hit.max())
        else:
            if dep.ep > 1:
                local, held_e, routed_tokens = e / dep.ep, e / dep.ep, tokens * k / dep.ep
            else:
                local, held_e, routed_tokens = e / dep.tp, e / dep.tp, tokens * k / dep.tp
            touched = local * (1 - (1 - k / e) ** tokens)
    else:
        touched = held_e = routed_tokens = 0
    read = (shared + m.moe_layers * touched * pc["expert"]) * wb
    held = (shared + m.moe_layers * held_e * pc["expert"]) * wb
    if m.attention == "mla":
        attn = 2 * m.num_attention_heads * (2 * m.kv_lora_rank + m.qk_rope_head_dim)
        share = 1.0
    else:
        attn = 4 * m.num_attention_heads * m.head_dim
        share = kv_heads_per_gpu(m, dep.tp) / m.num_key_value_heads
    flops = (2 * dep.batch * shared + 2 * routed_tokens * m.moe_layers * pc["expert"]
             + dep.batch * dep.context * m.num_hidden_layers * attn / dep.tp)
    kv = dep.batch * dep.context * kv_bytes_per_token(m, dep.kv_dtype) * share
    return read, held, flops, kv


def decode_roofline(model, deployment, *, accelerator="h100-sxm", carrier=None,
                    allreduce="oneshot", ports=1, overhead_s=0.0, trace=None,
                    collective_sync_s=0.0, hbm_efficiency=1.0, micro_batches=1,
                    fabric="board", scale_out=None):
    """The :class:`StepResult` of one decode step (module doc).

    Parameters
    ----------
    model : str or ModelConfig
    deployment : Deployment
    accelerator : str or Accelerator
        A key of :data:`ACCELERATORS` (``h100-sxm``, ``h200-sxm``).
    carrier : Carrier or None
        Carries the step's messages; ``None``: no communication is timed (``coordination``
        0; use for a single GPU or to see compute and memory alone).
    allreduce : {"oneshot", "rsag", "ring", "nvls", "auto"}
    ports : int
        Copies of the design per GPU (:func:`analysis.workloads.timing.comm_time`).
    overhead_s : float
        A fixed time added to every step (the calibration's per-step overhead; 0 for the
        pure roofline).
    trace : Trace or None
        The step's trace when already generated (else :func:`decode_step` makes it).
    collective_sync_s : float
        GPU-side synchronisation added per collective of the step (an all-reduce, an
        all-gather, a dispatch, a combine; :data:`COLLECTIVE_OPS`), on top of the
        interface's time; 0 for the pure roofline (the calibration's values:
        :data:`analysis.workloads.calibration.GPU_SYNC_S`). Reported as ``sync_s``.
    hbm_efficiency : float
        The fraction of the HBM bandwidth reached, in (0, 1] (1 for the pure roofline;
        the NIM fit's: :data:`analysis.workloads.calibration.NIM_FIT`).
    micro_batches : {1, 2}
        2: DeepSeek's dual micro-batch overlap (module doc); ``trace`` is then ignored
        (each micro-batch has its own). The result's sizes, times and counts are the two
        micro-batches' sums, its per-token figures over both.
    fabric : str
        The path between GPUs (:func:`analysis.workloads.timing.comm_time`): ``board``
        (the engine models' own), ``rack`` or ``pod`` (:mod:`spec.fabric_profiles`).
    scale_out : ScaleOut or None
        GPUs in nodes: the carrier takes the messages between nodes on its scale-out
        ports, ``scale_out.inside`` those inside a node
        (:class:`analysis.workloads.timing.ScaleOut`).

    Raises
    ------
    ValueError
        For a bad deployment (naming the field), accelerator, overhead, sync,
        ``hbm_efficiency`` or ``micro_batches``.
    """
    m, dep = check_deployment(model, deployment)
    if isinstance(accelerator, str):
        if accelerator not in ACCELERATORS:
            raise ValueError(f"accelerator must be one of {sorted(ACCELERATORS)}, "
                             f"not {accelerator!r}")
        accelerator = ACCELERATORS[accelerator]
    if not (isinstance(overhead_s, (int, float)) and overhead_s >= 0):
        raise ValueError(f"overhead_s must be a number >= 0, not {overhead_s!r}")
    if not (isinstance(collective_sync_s, (int, float)) and collective_sync_s >= 0):
        raise ValueError(f"collective_sync_s must be a number >= 0, "
                         f"not {collective_sync_s!r}")
    if not (isinstance(hbm_efficiency, (int, float)) and 0 < hbm_efficiency <= 1):
        raise ValueError(f"hbm_efficiency must be a number in (0, 1], "
                         f"not {hbm_efficiency!r}")
    if micro_batches not in (1, 2) or isinstance(micro_batches, bool):
        raise ValueError(f"micro_batches must be 1 or 2, not {micro_batches!r}")
    if micro_batches == 2 and dep.batch >= 2 and (carrier is not None
                                                   or collective_sync_s):
        return _two_micro_batches(m, dep, accelerator, carrier, allreduce, ports,
                                  overhead_s, collective_sync_s, hbm_efficiency, fabric,
                                  scale_out)
    groups = attention_groups(m, dep)
    tokens = dep.batch * groups
    gpus = dep.tp * groups
    read, held, flops, kv = _per_gpu_work(m, dep, tokens)
    fp8 = (dep.weights_dtype or m.weights_dtype) == "fp8"
    compute_s = flops / (accelerator.fp8_flops if fp8 else accelerator.bf16_flops)
    memory_s = (read + kv) / (accelerator.hbm_bytes_per_s * hbm_efficiency)
    comm_s = moving_s = 0.0
    messages, ctrl, credits, ctrl_bytes, host_bytes = 0, 0.0, 0.0, 0.0, 0.0
    useful, inflight = 0, 0.0
    name = attach = "none"
    sync_s = 0.0
    if carrier is not None or collective_sync_s:
        tr = trace if trace is not None else decode_step(m, dep, allreduce=allreduce,
                                                         channels=ports)
        sync_s = collective_sync_s * sum(p.op in COLLECTIVE_OPS for p in tr.phases)
    if carrier is not None:
        r = comm_time(tr, carrier, ports=ports, fabric=fabric, scale_out=scale_out)
        comm_s, moving_s = r.cycles * 1e-9, r.moving_cycles * 1e-9
        messages, ctrl, name = r.messages, r.ctrl_ops, carrier.name
        credits = r.ctrl_by_kind.get("credit_updates", 0.0)
        ctrl_bytes, host_bytes = r.ctrl_bytes, r.host_bytes
        useful, attach = r.useful_bytes, carrier.attachment
        inflight = r.inflight_bits * ports * gpus      # every GPU holds its peak
    step = max(compute_s, memory_s) + comm_s + overhead_s + sync_s
    return StepResult(
        model=m.name, batch=dep.batch, tp=dep.tp, ep=dep.ep, gpus=gpus, tokens=tokens,
        carrier=name, ports=ports, flops=flops, weight_bytes=read, kv_bytes=kv,
        compute_s=compute_s, memory_s=memory_s, coordination_s=comm_s, moving_s=moving_s,
        overhead_s=overhead_s, step_s=step, tokens_per_s=tokens / step if step else math.inf,
        messages=messages, ctrl_ops=ctrl, ctrl_ops_per_token=(ctrl - credits) / tokens,
        credits_per_token=credits / tokens, ctrl_bytes_per_token=ctrl_bytes / tokens,
        host_bytes_per_token=host_bytes / tokens,
        held_bytes=held + kv, fits=held + kv <= accelerator.hbm_bytes, attachment=attach,
        useful_bytes_per_token=useful / tokens, inflight_bits_per_token=inflight / tokens,
        sync_s=sync_s, hbm_efficiency=hbm_efficiency)


def _two_micro_batches(m, dep, acc, carrier, allreduce, ports, overhead_s, sync, eta,
                       fabric="board", scale_out=None):
    """The overlapped step of two micro-batches (module doc, "Two micro-batches")."""
    from dataclasses import replace
    half = [replace(dep, batch=-(-dep.batch // 2)), replace(dep, batch=dep.batch // 2)]
    a, b = (decode_roofline(m, d, accelerator=acc, carrier=carrier, allreduce=allreduce,
                            ports=ports, collective_sync_s=sync, hbm_efficiency=eta,
                            fabric=fabric, scale_out=scale_out)
            for d in half)
    work = [max(x.compute_s, x.memory_s) for x in (a, b)]
    comm = [x.coordination_s + x.sync_s for x in (a, b)]
    step = max(work[0], comm[1]) + max(work[1], comm[0]) + overhead_s
    tokens = a.tokens + b.tokens

    def per_token(field):
        return (getattr(a, field) * a.tokens + getattr(b, field) * b.tokens) / tokens

    summed = {f: getattr(a, f) + getattr(b, f) for f in (
        "flops", "weight_bytes", "kv_bytes", "compute_s", "memory_s", "coordination_s",
        "moving_s", "messages", "ctrl_ops", "sync_s")}
    inflight = max(a.inflight_bits_per_token * a.tokens, b.inflight_bits_per_token
                   * b.tokens) / tokens            # one micro-batch communicates at a time
    held = a.held_bytes + b.kv_bytes
    return StepResult(
        model=a.model, batch=dep.batch, tp=a.tp, ep=a.ep, gpus=a.gpus, tokens=tokens,
        carrier=a.carrier, ports=ports, overhead_s=overhead_s, step_s=step,
        tokens_per_s=tokens / step, ctrl_ops_per_token=per_token("ctrl_ops_per_token"),
        credits_per_token=per_token("credits_per_token"),
        ctrl_bytes_per_token=per_token("ctrl_bytes_per_token"),
        host_bytes_per_token=per_token("host_bytes_per_token"), held_bytes=held,
        fits=held <= acc.hbm_bytes, attachment=a.attachment,
        useful_bytes_per_token=per_token("useful_bytes_per_token"),
        inflight_bits_per_token=inflight, hbm_efficiency=eta, overlapped=True, **summed)
