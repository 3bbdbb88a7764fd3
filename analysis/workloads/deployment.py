"""How a model is deployed for the workload generator (:mod:`analysis.workloads.generate`):
the :class:`Deployment` of a decode step, its checks, the per-rank shares both traces
use, and the size of a completion flag."""

from dataclasses import dataclass

import numpy as np

from analysis.workloads.config import dtype_bytes, load_model

#: Bytes of a completion flag or counter: one 8-byte RDMA WRITE or store (an InfiniBand
#: atomic operates on 8 bytes; DeepEP's masked fetch-add on 4).
FLAG_BYTES = 8
#: EP dispatch/combine layouts: one put per (token, expert) (DeepEP low latency) or one
#: message per (source, destination GPU) per phase.
DISPATCH = ("per_token", "batched")
#: How tokens pick their experts (:mod:`analysis.workloads.experts`): exactly even, or
#: drawn at random by the experts' weights.
ROUTING = ("balanced", "sampled")


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
        :data:`analysis.workloads.config.DTYPE_BYTES`.
    weights_dtype, kv_dtype : str or None
        Weights (``None``: the model's own) and KV cache, for the roofline.
    context : int
        Tokens each sequence has in its KV cache at this step (the roofline's KV reads).
    dispatch_fp8 : bool
        DeepEP's FP8 dispatch (default) or BF16.
    dispatch : str
        EP message layout (:data:`DISPATCH`): ``"per_token"`` (DeepEP low latency,
        default) or ``"batched"`` (one message per destination GPU and phase).
    redundant_experts : int
        Extra replicas of routed experts (DeepSeek-V3's redundant experts), 0 by default:
        ``ep`` must divide ``E + redundant_experts``; above 0 only with
        ``routing="sampled"`` (balanced routing is already exactly even).
    routing : str
        :data:`ROUTING` (:mod:`analysis.workloads.experts`): ``"balanced"`` (default) or
        ``"sampled"``.
    expert_skew : float
        ``sampled`` routing's popularity exponent (expert ``i`` weighs ``(i + 1) **
        -expert_skew``), >= 0; 0 (default): every expert alike.
    routing_seed : int
        The seed of ``sampled`` routing's draw.
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
    redundant_experts: int = 0
    routing: str = "balanced"
    expert_skew: float = 0.0
    routing_seed: int = 0


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
    ``weights_dtype``, ``kv_dtype`` (unknown type), ``dispatch`` (unknown layout),
    ``routing`` (unknown), ``expert_skew`` (not a number >= 0), ``routing_seed`` (not an
    integer >= 0), ``redundant_experts`` (not an integer >= 0, above 0 without EP or
    with balanced routing, or more than the routed experts; with ``ep``, ``ep`` not
    dividing the slots).
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
    if dep.routing not in ROUTING:
        raise ValueError(f"routing must be one of {ROUTING}, not {dep.routing!r}")
    if (not isinstance(dep.expert_skew, (int, float)) or isinstance(dep.expert_skew, bool)
            or not dep.expert_skew >= 0 or dep.expert_skew == float("inf")):
        raise ValueError(f"expert_skew must be a number >= 0, not {dep.expert_skew!r}")
    _int("routing_seed", dep.routing_seed, 0)
    redundant = _int("redundant_experts", dep.redundant_experts, 0)
    if m.num_attention_heads % dep.tp:
        raise ValueError(f"tp ({dep.tp}) must divide num_attention_heads "
                         f"({m.num_attention_heads}) of {m.name}")
    kv = m.num_key_value_heads
    if m.attention != "mla" and kv % dep.tp and dep.tp % kv:
        raise ValueError(f"tp ({dep.tp}) must divide, or be a multiple of, "
                         f"num_key_value_heads ({kv}) of {m.name}")
    if redundant and not (m.is_moe and dep.ep > 1):
        raise ValueError(f"redundant_experts ({redundant}) needs expert parallelism "
                         f"(ep > 1 on a MoE model)")
    if dep.ep > 1:
        if not m.is_moe:
            raise ValueError(f"ep ({dep.ep}) must be 1: {m.name} has no routed experts")
        if redundant > m.n_routed_experts:
            raise ValueError(f"redundant_experts ({redundant}) must be at most "
                             f"n_routed_experts ({m.n_routed_experts}) of {m.name}")
        if redundant and dep.routing == "balanced":
            raise ValueError(f"redundant_experts ({redundant}) needs routing='sampled': "
                             f"balanced routing is already exactly even")
        if (m.n_routed_experts + redundant) % dep.ep:
            what = (f"n_routed_experts + redundant_experts ({m.n_routed_experts} + "
                    f"{redundant})" if redundant else
                    f"n_routed_experts ({m.n_routed_experts})")
            raise ValueError(f"ep ({dep.ep}) must divide {what} of {m.name}")
        if dep.ep % dep.tp:
            raise ValueError(f"ep ({dep.ep}) must be a multiple of tp ({dep.tp})")
    return m, dep



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


