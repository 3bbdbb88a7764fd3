"""Model configurations of the inference workloads: read from data files, checked, sized.

Each model is a TOML file in ``analysis/workloads/data/models/`` (one per model; the file
name is the model's name). Its ``[fields]`` table gives every architectural value as
``{ value = ..., source = "..." }``: the source is the model's ``config.json`` key (or
model card) the value comes from, or ``derived: ...`` with the formula. :func:`load_model`
reads one, checks every field (type, range, the source is present) and returns a frozen
:class:`ModelConfig`; a bad file raises ``ValueError`` naming the file and the field.

Sizes computed here (all in bytes or parameter counts, exact integers):

- :func:`kv_bytes_per_token`: the KV cache one token adds, over all layers. Multi-head,
  grouped-query and multi-query attention cache a K and a V vector per KV head:
  ``layers x 2 x kv_heads x head_dim x bytes``. MLA caches one compressed latent and the
  shared RoPE key: ``layers x (kv_lora_rank + qk_rope_head_dim) x bytes``; in FP8 it is
  stored as FlashMLA stores it (:func:`kv_bytes_per_token_layer`): the latent in FP8, one
  float32 scale per 128 latent values and the RoPE key kept in BF16, 656 bytes per token
  and layer for DeepSeek-V3.
- :func:`param_counts`: parameters by part (attention, dense MLP, routed and shared
  experts, embeddings, LM head), the total and those a token activates.

No other module reads the data files; everything else takes a :class:`ModelConfig`.
"""

import dataclasses
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

__all__ = ["ModelConfig", "load_model", "model_names", "kv_bytes_per_token",
           "kv_bytes_per_token_layer", "FLASHMLA_SCALE_GROUP",
           "param_counts", "DTYPE_BYTES", "dtype_bytes", "MODELS_DIR",
           "ATTENTION_BASE", "MLA_LATENT", "attention_variants"]

#: Folder of the model data files.
MODELS_DIR = Path(__file__).resolve().parent / "data" / "models"

#: Bytes per element of the data types the workloads use.
DTYPE_BYTES = {"fp8": 1, "bf16": 2, "fp16": 2, "fp32": 4}

_ATTENTION = ("mha", "gqa", "mqa", "mla")
_MLP = {"swiglu": 3, "gelu": 2}          # weight matrices per MLP (gate+up+down, up+down)


def dtype_bytes(name, what="dtype"):
    """Bytes per element of data type ``name``; ``ValueError`` naming ``what`` if unknown."""
    if name not in DTYPE_BYTES:
        raise ValueError(f"{what} must be one of {sorted(DTYPE_BYTES)}, not {name!r}")
    return DTYPE_BYTES[name]


@dataclass(frozen=True)
class ModelConfig:
    """The architecture of one model, as its data file gives it (config.json names).

    Attributes are the data file's fields; ``sources`` maps each field to its source.
    MLA and MoE fields are 0 for models without them; ``first_k_dense_replace`` equals
    ``num_hidden_layers`` for a dense model (every layer has a dense MLP).
    """

    name: str
    title: str
    attention: str
    mlp: str
    parallel_attn: bool
    num_hidden_layers: int
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool
    weights_dtype: str
    params_card: float
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    n_routed_experts: int = 0
    num_experts_per_tok: int = 0
    n_shared_experts: int = 0
    moe_intermediate_size: int = 0
    first_k_dense_replace: int = -1
    config_url: str = ""
    card_url: str = ""
    sources: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        if self.first_k_dense_replace == -1:
            object.__setattr__(self, "first_k_dense_replace", self.num_hidden_layers)
        _check(self)

    @property
    def is_moe(self):
        """Whether the model has routed experts."""
        return self.n_routed_experts > 0

    @property
    def moe_layers(self):
        """Layers whose MLP is a mixture of experts (0 for a dense model)."""
        return self.num_hidden_layers - self.first_k_dense_replace if self.is_moe else 0

    @property
    def dense_layers(self):
        """Layers with a dense MLP."""
        return self.num_hidden_layers - self.moe_layers


_INT_FIELDS = ("num_hidden_layers", "hidden_size", "intermediate_size",
               "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size")
_OPTIONAL_INT = ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim",
                 "v_head_dim", "n_routed_experts", "num_experts_per_tok",
                 "n_shared_experts", "moe_intermediate_size")


def _positive(m, name):
    v = getattr(m, name)
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
        raise ValueError(f"model {m.name!r}: {name} must be a positive integer, not {v!r}")


def _check(m):
    """Raise ``ValueError`` naming the first field of ``m`` that is out of range."""
    for name in _INT_FIELDS:
        _positive(m, name)
    for name in _OPTIONAL_INT:
        v = getattr(m, name)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"model {m.name!r}: {name} must be an integer >= 0, not {v!r}")
    if m.attention not in _ATTENTION:
        raise ValueError(f"model {m.name!r}: attention must be one of {_ATTENTION}, "
                         f"not {m.attention!r}")
    if m.mlp not in _MLP:
        raise ValueError(f"model {m.name!r}: mlp must be one of {sorted(_MLP)}, "
                         f"not {m.mlp!r}")
    dtype_bytes(m.weights_dtype, f"model {m.name!r}: weights_dtype")
    if m.num_attention_heads % m.num_key_value_heads:
        raise ValueError(f"model {m.name!r}: num_key_value_heads ({m.num_key_value_heads}) "
                         f"must divide num_attention_heads ({m.num_attention_heads})")
    if m.attention == "mla":
        _positive(m, "kv_lora_rank")
        _positive(m, "qk_rope_head_dim")
    if m.is_moe:
        for name in ("num_experts_per_tok", "moe_intermediate_size"):
            _positive(m, name)
        if m.num_experts_per_tok > m.n_routed_experts:
            raise ValueError(f"model {m.name!r}: num_experts_per_tok "
                             f"({m.num_experts_per_tok}) exceeds n_routed_experts "
                             f"({m.n_routed_experts})")
    if not 0 <= m.first_k_dense_replace <= m.num_hidden_layers:
        raise ValueError(f"model {m.name!r}: first_k_dense_replace must be 0 to "
                         f"num_hidden_layers, not {m.first_k_dense_replace!r}")
    if not (isinstance(m.params_card, (int, float)) and m.params_card > 0):
        raise ValueError(f"model {m.name!r}: params_card must be a positive number, "
                         f"not {m.params_card!r}")


def model_names():
    """Names of the models with a data file, sorted."""
    return sorted(p.stem for p in MODELS_DIR.glob("*.toml"))


_CACHE = {}


def load_model(name):
    """The :class:`ModelConfig` of model ``name`` (a data file's stem, e.g. ``"llama-3-70b"``).

    A :class:`ModelConfig` passed in is returned as is. Raises ``ValueError`` naming
    ``model`` for an unknown name, and naming the field for a field that is missing its
    source, has an unknown key or is out of range.
    """
    if isinstance(name, ModelConfig):
        return name
    if name not in _CACHE:
        path = MODELS_DIR / f"{name}.toml" if isinstance(name, str) else None
        if path is None or not path.is_file():
            raise ValueError(f"model must be one of {model_names()}, not {name!r}")
        _CACHE[name] = _from_toml(path)
    return _CACHE[name]


def _from_toml(path):
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    head = doc.get("model", {})
    known = {f.name for f in fields(ModelConfig)} - {"sources", "name", "title",
                                                     "config_url", "card_url"}
    values, sources = {}, {}
    for key, item in doc.get("fields", {}).items():
        if key not in known:
            raise ValueError(f"{path.name}: unknown field {key!r}")
        if not isinstance(item, dict) or "value" not in item or not item.get("source"):
            raise ValueError(f"{path.name}: field {key!r} needs a value and a source")
        values[key] = item["value"]
        sources[key] = item["source"]
    if head.get("name") != path.stem:
        raise ValueError(f"{path.name}: [model] name must be {path.stem!r}")
    try:
        return ModelConfig(name=head["name"], title=head.get("title", head["name"]),
                           config_url=head.get("config_url", ""),
                           card_url=head.get("card_url", ""), sources=sources, **values)
    except TypeError as exc:               # a required field missing
        raise ValueError(f"{path.name}: {exc}") from exc


#: Latent values per float32 scale in FlashMLA's FP8 MLA cache (deepseek-ai/FlashMLA
#: README, "FP8 KV cache": each token stores 512 float8_e4m3 latent values, 4 float32
#: scales, one per 128 values, and 64 bfloat16 RoPE values, 656 bytes; pages of 64
#: tokens).
FLASHMLA_SCALE_GROUP = 128
_SCALE_BYTES = 4


def kv_bytes_per_token_layer(model, kv_dtype="bf16"):
    """KV-cache bytes one token adds to one layer of ``model`` (not divided by TP).

    ``2 x kv_heads x head_dim x bytes`` (MHA, GQA, MQA). MLA: ``(kv_lora_rank +
    qk_rope_head_dim) x bytes``, except in FP8, stored as FlashMLA stores it: ``kv_lora_rank
    x 1 + ceil(kv_lora_rank / 128) x 4 + qk_rope_head_dim x 2`` (FP8 latent, float32
    scales, BF16 RoPE key): 512 + 16 + 128 = 656 bytes for DeepSeek-V3.
    """
    m = load_model(model)
    b = dtype_bytes(kv_dtype, "kv_dtype")
    if m.attention == "mla":
        if kv_dtype == "fp8":
            groups = -(-m.kv_lora_rank // FLASHMLA_SCALE_GROUP)
            return (m.kv_lora_rank + groups * _SCALE_BYTES
                    + m.qk_rope_head_dim * DTYPE_BYTES["bf16"])
        return (m.kv_lora_rank + m.qk_rope_head_dim) * b
    return 2 * m.num_key_value_heads * m.head_dim * b


def kv_bytes_per_token(model, kv_dtype="bf16"):
    """KV-cache bytes one token adds over all layers of ``model`` (not divided by TP):
    ``layers x`` :func:`kv_bytes_per_token_layer`. ``kv_dtype`` is a key of
    :data:`DTYPE_BYTES`.
    """
    m = load_model(model)
    return m.num_hidden_layers * kv_bytes_per_token_layer(m, kv_dtype)


def param_counts(model):
    """Parameter counts of ``model`` by part, from its architecture (weights and norms).

    Returns a dict of ints: ``attention`` (per layer), ``dense_mlp`` (per dense layer),
    ``expert`` (one routed or shared expert), ``router`` (per MoE layer), ``norms`` (per
    layer), ``embedding``, ``lm_head`` (0 when tied), ``total`` and ``active`` (the
    parameters one token's forward pass multiplies: attention, dense MLPs, shared and
    ``num_experts_per_tok`` routed experts, LM head). Biases are not counted (none of
    these models has them in its linear layers, Falcon's layer norm bias aside).
    """
    m = load_model(model)
    h = m.hidden_size
    if m.attention == "mla":
        nh, rope, nope, v = (m.num_attention_heads, m.qk_rope_head_dim, m.qk_nope_head_dim,
                             m.v_head_dim)
        q = (h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * nh * (nope + rope)
             if m.q_lora_rank else h * nh * (nope + rope))
        kv = h * (m.kv_lora_rank + rope) + m.kv_lora_rank + m.kv_lora_rank * nh * (nope + v)
        attn = q + kv + nh * v * h
    else:
        q = h * m.num_attention_heads * m.head_dim
        kv = 2 * h * m.num_key_value_heads * m.head_dim
        attn = q + kv + m.num_attention_heads * m.head_dim * h
    norms = 2 * h          # two RMSNorm weights (Falcon: one LayerNorm, weight + bias)
    dense_mlp = _MLP[m.mlp] * h * m.intermediate_size
    expert = _MLP[m.mlp] * h * m.moe_intermediate_size if m.is_moe else 0
    router = m.n_routed_experts * h
    embedding = m.vocab_size * h
    lm_head = 0 if m.tie_word_embeddings else m.vocab_size * h
    per_moe = attn + norms + router + (m.n_routed_experts + m.n_shared_experts) * expert
    total = (m.dense_layers * (attn + norms + dense_mlp) + m.moe_layers * per_moe
             + embedding + lm_head + h)
    active = (m.dense_layers * (attn + dense_mlp) + m.moe_layers
              * (attn + router + (m.num_experts_per_tok + m.n_shared_experts) * expert)
              + (lm_head or embedding))
    return {"attention": attn, "dense_mlp": dense_mlp, "expert": expert, "router": router,
            "norms": norms, "embedding": embedding, "lm_head": lm_head, "total": total,
            "active": active}


#: The model the like-for-like attention rows vary (its layers, width, heads and MLP
#: stay; only how keys and values are cached changes).
ATTENTION_BASE = "llama-3-70b"
#: MLA-style latent of the like-for-like rows: DeepSeek-V3's sizes (config.json
#: ``kv_lora_rank`` 512, ``qk_rope_head_dim`` 64, ``qk_nope_head_dim`` 128,
#: ``v_head_dim`` 128), with its 64 query heads kept.
MLA_LATENT = dict(kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128,
                  v_head_dim=128)


def attention_variants(base=ATTENTION_BASE):
    """One model at four ways of caching keys and values, same layers and width: MHA (a
    KV head per query head), GQA (the model's own KV heads), MQA (one KV head) and an
    MLA-style latent (:data:`MLA_LATENT`). Returns ``{label: ModelConfig}``; each
    variant's changed fields have a ``derived:`` source."""
    m = load_model(base)
    heads = m.num_attention_heads

    def variant(tag, **changes):
        src = dict(m.sources, **{k: f"derived: {m.name} with {k} = {v}"
                                 for k, v in changes.items()})
        return dataclasses.replace(m, name=f"{m.name}-{tag}",
                                   title=f"{m.title} {tag.upper()}", sources=src, **changes)

    return {"MHA": variant("mha", attention="mha", num_key_value_heads=heads),
            "GQA": variant("gqa", attention="gqa"),
            "MQA": variant("mqa", attention="mqa", num_key_value_heads=1),
            "MLA": variant("mla", attention="mla", **MLA_LATENT)}
