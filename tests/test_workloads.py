"""The inference workload generator (analysis.workloads) against hand-computed counts.

Every expected number below is worked out by hand from the models' config.json values
(written in the comment next to it), never taken from the generator's own output.
"""

import json

import pytest

from analysis.workloads.config import (
    ModelConfig,
    kv_bytes_per_token,
    load_model,
    model_names,
    param_counts,
)
from analysis.workloads.generate import (
    Deployment,
    combine_bytes,
    decode_step,
    deepep_qps,
    dispatch_bytes,
    kv_transfer,
)
from analysis.workloads.trace import TraceBuilder, trace_from_dict

# -- model data ----------------------------------------------------------------------------


@pytest.mark.parametrize("model,dtype,want", [
    ("llama-3-70b", "bf16", 327_680),   # 80 layers x 2 (K, V) x 8 KV heads x 128 x 2 B
    ("llama-2-7b", "bf16", 524_288),    # 32 x 2 x 32 x 128 x 2
    ("falcon-7b", "bf16", 8_192),       # 32 x 2 x 1 x 64 x 2
    ("deepseek-v3", "bf16", 70_272),    # 61 x (512 latent + 64 RoPE) x 2
    ("llama-3-8b", "bf16", 131_072),    # 32 x 2 x 8 x 128 x 2
    ("llama-3-70b", "fp8", 163_840),    # 80 x 2 x 8 x 128 x 1
    # FlashMLA's FP8 layout: 61 x (512 FP8 latent + 512 / 128 x 4 B scales + 64 x 2 B RoPE)
    ("deepseek-v3", "fp8", 61 * (512 + 16 + 128)),
])
def test_kv_bytes_per_token(model, dtype, want):
    assert kv_bytes_per_token(model, dtype) == want


def test_flashmla_fp8_layout_per_layer_and_block():
    from analysis.workloads.config import kv_bytes_per_token_layer
    from analysis.workloads.generate import kv_block_bytes
    m = load_model("deepseek-v3")
    per_layer = m.kv_lora_rank * 1 + (m.kv_lora_rank // 128) * 4 + m.qk_rope_head_dim * 2
    assert per_layer == 656
    assert kv_bytes_per_token_layer(m, "fp8") == per_layer
    assert kv_block_bytes(m, block_tokens=64, kv_dtype="fp8") == 64 * 656


def test_falcon_7b_parameters_by_hand():
    # h = 4544, 32 layers, 71 query heads of 64 = h, one KV head, GELU MLP 4h, one
    # LayerNorm (weight + bias) per layer, 65,024-token vocabulary tied to the LM head.
    h, layers, vocab = 4544, 32, 65024
    attention = h * h + 2 * h * 64 + h * h          # q, one K and one V head, o
    mlp = 2 * h * 4 * h
    per_layer = attention + mlp + 2 * h
    want = layers * per_layer + vocab * h + h       # + the final norm's weight
    assert want == 6_921_716_160
    assert param_counts("falcon-7b")["total"] == want
    assert load_model("falcon-7b").params_card == 7.0e9   # the card's rounded "7B"


def test_every_model_file_loads_with_a_source_per_field():
    names = model_names()
    for want in ("llama-3-8b", "llama-3-70b", "llama-2-7b", "falcon-7b", "deepseek-v3"):
        assert want in names
    for name in names:
        m = load_model(name)
        assert m.name == name
        assert m.sources and all(m.sources.values())
        assert "num_hidden_layers" in m.sources


@pytest.mark.parametrize("model,card,tolerance", [
    ("llama-3-8b", 8.03e9, 0.01), ("llama-3-70b", 70.6e9, 0.01),
    ("llama-2-7b", 6.74e9, 0.01), ("falcon-7b", 6.92e9, 0.01),
    ("deepseek-v3", 671e9, 0.01), ("llama-3.1-405b", 405e9, 0.01),
    ("mixtral-8x7b", 46.7e9, 0.01)])
def test_parameter_counts_match_the_model_cards(model, card, tolerance):
    assert abs(param_counts(model)["total"] - card) / card < tolerance


def test_mixtral_8x7b_shape():
    """Mixtral: 8 experts of a full SwiGLU MLP (3 x 4,096 x 14,336), top-2, in every one of
    32 layers; 12.9B parameters a token by its paper (12.7B here: the paper's count
    includes the embeddings)."""
    m = load_model("mixtral-8x7b")
    assert (m.num_hidden_layers, m.moe_layers, m.dense_layers) == (32, 32, 0)
    assert (m.n_routed_experts, m.num_experts_per_tok) == (8, 2)
    assert param_counts(m)["expert"] == 3 * 4096 * 14336
    assert abs(param_counts(m)["active"] - 12.9e9) / 12.9e9 < 0.02


def test_deepseek_v3_shape():
    m = load_model("deepseek-v3")
    assert (m.num_hidden_layers, m.moe_layers, m.hidden_size) == (61, 58, 7168)
    assert (m.n_routed_experts, m.num_experts_per_tok) == (256, 8)
    assert (m.kv_lora_rank, m.qk_rope_head_dim) == (512, 64)
    # Activated per token: model card 37B.
    assert abs(param_counts(m)["active"] - 37e9) / 37e9 < 0.03


# -- EP dispatch / combine (DeepEP low latency) --------------------------------------------

def test_deepep_message_sizes():
    assert dispatch_bytes(7168) == 7_408          # 16 + 7168 + 7168 / 128 x 4
    assert dispatch_bytes(7168, fp8=False) == 14_352     # 16 + 2 x 7168
    assert combine_bytes(7168) == 14_336          # 2 x 7168
    assert deepep_qps(256, 8) == 224              # 32 local experts x 7 peers
    assert deepep_qps(256, 64) == 252             # 4 x 63


def test_deepseek_ep8_batch1_hand_counts():
    tr = decode_step("deepseek-v3", Deployment(batch=1, ep=8))
    # Token u = GPU g picks experts g, g+32, ..., g+224: one on each of the 8 GPUs
    # (32 experts per GPU), its own GPU's is local: 7 puts per token, 8 GPUs -> 56.
    d = "L3.moe.dispatch"
    assert tr.sizes("data", phase=d) == {7_408: 56}
    assert tr.sizes("data", phase="L3.moe.combine") == {14_336: 56}
    # One count per remote expert: 256 - 32 = 224 per GPU per phase.
    assert tr.count("flag", phase=d, src=0) == 224
    assert tr.count("flag", phase="L60.moe.combine", src=5) == 224
    # No traffic in the 3 dense layers (no TP); 58 MoE layers x 2 phases.
    assert len(tr.phases) == 116
    assert tr.phases[0].name == "L3.moe.dispatch"
    assert tr.phases[tr.phase_id(d)].qps == 224
    # Per step: 58 x 2 x (56 puts + 8 GPUs x 224 flags) = 214,368 messages.
    assert tr.messages == 214_368
    assert tr.gpus == 8


def test_deepseek_ep8_batch16_hand_counts():
    tr = decode_step("deepseek-v3", Deployment(batch=16, ep=8))
    # 16 tokens per GPU, each with one local expert of 8: 16 x 7 = 112 puts per GPU.
    assert tr.count("data", phase="L10.moe.dispatch", src=3) == 112
    assert tr.total_bytes("data") == 58 * 8 * 112 * (7_408 + 14_336)


def test_moe_with_tp_dispatches_a_share_and_all_gathers():
    tr = decode_step("deepseek-v3", Deployment(batch=4, tp=2, ep=8))
    # 4 GPU groups of TP2; every MoE layer: attention all-reduce, dispatch, combine,
    # all-gather; dense layers: attention and MLP all-reduces.
    names = [p.name for p in tr.phases]
    assert names[:6] == ["L0.attn.ar", "L0.mlp.ar", "L1.attn.ar", "L1.mlp.ar",
                         "L2.attn.ar", "L2.mlp.ar"]
    assert names[6:10] == ["L3.attn.ar", "L3.moe.dispatch", "L3.moe.combine", "L3.moe.ag"]
    # Each TP rank dispatches 2 of its group's 4 tokens: 2 x 8 experts, 1 local each.
    assert tr.count("data", phase="L3.moe.dispatch", src=0) == 14
    # All-gather: 1 peer, ceil(4 / 2) x 7168 x 2 bytes.
    assert tr.sizes("data", phase="L3.moe.ag", src=0) == {28_672: 1}
    # All-reduce in a TP2 group: 4 x 7168 x 2 bytes to the one peer.
    assert tr.sizes("data", phase="L3.attn.ar", src=1) == {57_344: 1}


# -- TP all-reduce -------------------------------------------------------------------------

def test_tp_oneshot_small_config():
    tr = decode_step("llama-3-8b", Deployment(batch=4, tp=2))
    # S = 4 x 4096 x 2 = 32,768 bytes; 2 all-reduces per layer x 32 layers = 64 phases;
    # per phase each GPU pushes S to its one peer, then one flag.
    assert len(tr.phases) == 64
    assert tr.sizes("data") == {32_768: 128}
    assert tr.sizes("flag") == {8: 128}
    assert tr.messages == 256
    assert tr.sizes("data", phase="L7.mlp.ar", src=1) == {32_768: 1}


def test_tp_rsag_small_config():
    tr = decode_step("llama-2-7b", Deployment(batch=2, tp=4), allreduce="rsag")
    # S = 2 x 4096 x 2 = 16,384; chunk S / 4 = 4,096; per phase each GPU sends 3 chunks
    # and 3 flags; 2 phases (RS, AG) x 2 all-reduces x 32 layers = 128 phases.
    assert len(tr.phases) == 128
    assert tr.sizes("data") == {4_096: 128 * 4 * 3}
    assert tr.count("flag", src=2) == 128 * 3
    assert tr.phases[tr.phase_id("L0.attn.rs")].peers == 3


def test_tp_oneshot_llama70b_tp8():
    tr = decode_step("llama-3-70b", Deployment(batch=1, tp=8))
    # S = 8192 x 2 = 16,384; 160 phases; per GPU per phase 7 pushes + 7 flags.
    assert len(tr.phases) == 160
    assert tr.count("data", src=0) == 160 * 7
    assert tr.messages == 160 * 8 * 14


def test_phases_chain_in_order():
    tr = decode_step("llama-3-8b", Deployment(batch=1, tp=2), allreduce="rsag")
    assert tr.phases[0].deps == ()
    for p in tr.phases[1:]:
        assert p.deps == (p.id - 1,)
    ag = tr.phases[tr.phase_id("L0.attn.ag")]
    assert ag.deps == (tr.phase_id("L0.attn.rs"),)


def test_single_gpu_has_no_traffic():
    tr = decode_step("falcon-7b", Deployment(batch=8))
    assert tr.messages == 0 and tr.phases == []


# -- KV transfer ---------------------------------------------------------------------------

def test_kv_transfer_llama70b_tp8_plain():
    # NIXL issue 1514: 80 layers x 2 (K, V) x 118 blocks = 18,880 descriptors per GPU,
    # each 16 tokens x (8 KV heads / 8) x 128 x 2 bytes = 4,096.
    tr = kv_transfer("llama-3-70b", prompt_tokens=118 * 16, tp=8)
    assert tr.sizes("data", src=0) == {4_096: 18_880}
    assert tr.count("data") == 8 * 18_880
    assert tr.count("flag", src=7) == 1
    assert tr.gpus == 16
    assert tr.count("data", src=3) == 80 * 2 * 118


def test_kv_transfer_coalesced():
    kw = dict(prompt_tokens=118 * 16, tp=8)
    # One per (layer, K/V, run): 160 runs of 118 x 4,096 = 483,328 bytes.
    assert kv_transfer("llama-3-70b", coalesce="layer", **kw).sizes("data", src=0) == \
        {483_328: 160}
    # Runs of 8 blocks: 14 runs of 8 and one of 6 -> 80 x 2 x 15 = 2,400 descriptors.
    tr = kv_transfer("llama-3-70b", coalesce="layer", run_blocks=8, **kw)
    assert tr.sizes("data", src=0) == {8 * 4_096: 80 * 2 * 14, 6 * 4_096: 80 * 2}
    # Whole pages (all layers of a block): one per run, 118 x 4,096 x 160 bytes.
    assert kv_transfer("llama-3-70b", coalesce="page", **kw).sizes("data", src=0) == \
        {77_332_480: 1}


def test_kv_transfer_partial_block_and_mla():
    # 17 tokens need 2 blocks of 16; Llama-2-7B TP1: 32 layers x 2 x 2 blocks, each
    # 16 x 32 x 128 x 2 = 131,072 bytes.
    assert kv_transfer("llama-2-7b", prompt_tokens=17).sizes("data") == {131_072: 128}
    # DeepSeek-V3 MLA: one latent per (layer, block): 16 x 576 x 2 = 18,432 bytes,
    # replicated on every TP rank; 61 layers x 4 blocks.
    tr = kv_transfer("deepseek-v3", prompt_tokens=64, tp=2)
    assert tr.sizes("data", src=1) == {18_432: 61 * 4}


# -- replay format -------------------------------------------------------------------------

def test_trace_json_round_trip():
    tr = decode_step("llama-3-8b", Deployment(batch=1, tp=2))
    doc = json.loads(tr.to_json())
    assert doc["format"] == "scaleup-vs-rdma/trace" and doc["cycle_ns"] == 1
    m = doc["messages"][0]
    assert set(m) == {"id", "src", "dst", "bytes", "count", "phase", "layer", "kind", "deps"}
    back = trace_from_dict(doc)
    assert back.messages == tr.messages
    for k in tr.columns:
        assert back.columns[k].tolist() == tr.columns[k].tolist()
    assert [p.deps for p in back.phases] == [p.deps for p in tr.phases]


def test_trace_expanded_one_entry_per_message():
    tr = kv_transfer("falcon-7b", prompt_tokens=32)
    # 32 layers x 2 x 2 blocks = 128 data messages + 1 flag, one GPU each way.
    rows = tr.records(expand=True)
    assert len(rows) == 129
    assert all(r["count"] == 1 for r in rows)
    assert [r["id"] for r in rows] == list(range(129))
    assert trace_from_dict(tr.to_dict(expand=True)).messages == 129
    with pytest.raises(ValueError, match="limit"):
        tr.records(expand=True, limit=100)


# -- bad configurations: a clear error naming the field ------------------------------------

@pytest.mark.parametrize("model,dep,field", [
    ("gpt-5", Deployment(batch=1), "model"),
    ("llama-3-8b", Deployment(batch=0), "batch"),
    ("llama-3-8b", Deployment(batch=-3), "batch"),
    ("falcon-7b", Deployment(batch=1, tp=2), "tp"),            # 71 heads
    ("llama-3-70b", Deployment(batch=1, tp=3), "tp"),          # 64 heads
    ("llama-3-8b", Deployment(batch=1, tp=0), "tp"),
    ("llama-3-8b", Deployment(batch=1, ep=2), "ep"),           # no experts
    ("deepseek-v3", Deployment(batch=1, ep=3), "ep"),          # 256 experts
    ("deepseek-v3", Deployment(batch=1, tp=16, ep=8), "ep"),   # ep not a multiple of tp
    ("llama-3-8b", Deployment(batch=1, dtype="int3"), "dtype"),
    ("llama-3-8b", Deployment(batch=1, kv_dtype="int3"), "kv_dtype"),
    ("llama-3-8b", Deployment(batch=1, weights_dtype="fp4x"), "weights_dtype"),
    ("llama-3-8b", Deployment(batch=1, context=0), "context"),
])
def test_bad_deployment_names_the_field(model, dep, field):
    with pytest.raises(ValueError, match=rf"\b{field}\b"):
        decode_step(model, dep)


def test_tp_incompatible_with_kv_heads():
    m = ModelConfig(name="toy", title="toy", attention="gqa", mlp="swiglu",
                    parallel_attn=False, num_hidden_layers=2, hidden_size=768,
                    intermediate_size=2048, num_attention_heads=12, num_key_value_heads=4,
                    head_dim=64, vocab_size=1000, tie_word_embeddings=False,
                    weights_dtype="bf16", params_card=1e8)
    with pytest.raises(ValueError, match=r"tp \(6\).*num_key_value_heads \(4\)"):
        decode_step(m, Deployment(batch=1, tp=6))


@pytest.mark.parametrize("kw,field", [
    (dict(prompt_tokens=0), "prompt_tokens"),
    (dict(prompt_tokens=-16), "prompt_tokens"),
    (dict(prompt_tokens=16, block_tokens=0), "block_tokens"),
    (dict(prompt_tokens=16, run_blocks=0), "run_blocks"),
    (dict(prompt_tokens=16, coalesce="zip"), "coalesce"),
    (dict(prompt_tokens=16, tp=3), "tp"),
    (dict(prompt_tokens=16, kv_dtype="x"), "kv_dtype"),
])
def test_bad_kv_transfer_names_the_field(kw, field):
    with pytest.raises(ValueError, match=rf"\b{field}\b"):
        kv_transfer("llama-3-70b", **kw)


def test_bad_allreduce_names_the_field():
    with pytest.raises(ValueError, match="allreduce"):
        decode_step("llama-3-8b", Deployment(batch=1, tp=2), allreduce="tree")


@pytest.mark.parametrize("field,value", [
    ("hidden_size", 0), ("num_hidden_layers", -1), ("num_attention_heads", 0),
    ("n_routed_experts", -8), ("attention", "linear"), ("weights_dtype", "int3")])
def test_bad_model_field_names_the_field(field, value):
    base = dict(load_model("llama-3-8b").__dict__)
    base.pop("sources")
    base[field] = value
    with pytest.raises(ValueError, match=field):
        ModelConfig(**base)


def test_data_file_needs_a_source_per_field(tmp_path, monkeypatch):
    import analysis.workloads.config as cfg
    text = (cfg.MODELS_DIR / "llama-3-8b.toml").read_text()
    bad = text.replace('hidden_size = { value = 4096, source = "config.json hidden_size" }',
                       'hidden_size = { value = 4096 }')
    assert bad != text
    (tmp_path / "llama-3-8b.toml").write_text(bad)
    monkeypatch.setattr(cfg, "MODELS_DIR", tmp_path)
    monkeypatch.setattr(cfg, "_CACHE", {})
    with pytest.raises(ValueError, match="hidden_size"):
        cfg.load_model("llama-3-8b")


def test_trace_builder_refuses_bad_messages():
    b = TraceBuilder("decode_step", "toy", {}, 2)
    p = b.phase("x", "op", 0, (), 1, 1)
    with pytest.raises(ValueError, match="bytes"):
        b.add(p, 0, 1, 0, 1, "data")
    with pytest.raises(ValueError, match="itself"):
        b.add(p, 1, 1, 8, 1, "data")
    with pytest.raises(ValueError, match="GPU numbers"):
        b.add(p, 0, 2, 8, 1, "data")
    with pytest.raises(ValueError, match="not yet added"):
        b.phase("y", "op", 0, (5,), 1, 1)


def test_auto_allreduce_follows_vllms_custom_all_reduce_by_hand():
    """``allreduce="auto"`` as vLLM's custom all-reduce chooses (csrc/custom_all_reduce.cuh):
    one-shot below 256 KiB at up to 8 GPUs (512 KiB at up to 4, always at 2), reduce-
    scatter + all-gather above. Llama-3-70B TP8 all-reduces batch x 8,192 x 2 bytes: 15
    sequences (240 KiB) go one-shot, 16 (256 KiB) in two shots."""
    from analysis.workloads.decode_trace import allreduce_mode
    assert allreduce_mode("auto", 8, 256 * 1024 - 1) == "oneshot"
    assert allreduce_mode("auto", 8, 256 * 1024) == "rsag"
    assert allreduce_mode("auto", 4, 256 * 1024) == "oneshot"
    assert allreduce_mode("auto", 4, 512 * 1024) == "rsag"
    assert allreduce_mode("auto", 2, 8 * 1024 * 1024 - 1) == "oneshot"
    assert allreduce_mode("oneshot", 8, 1 << 30) == "oneshot"
    names = {b: {p.name.rsplit(".", 1)[1] for p in
                 decode_step("llama-3-70b", Deployment(batch=b, tp=8), allreduce="auto").phases}
             for b in (15, 16)}
    assert names == {15: {"ar"}, 16: {"rs", "ag"}}
    with pytest.raises(ValueError, match="allreduce"):
        decode_step("llama-3-70b", Deployment(batch=1, tp=8), allreduce="tree")



def test_ll128_flags_ride_in_the_data_by_hand():
    """``flags="ll128"``: NCCL's LL128 lines carry 120 bytes of data and 8 of flag in every
    128 (src/include/device.h: 16 elements of 8 bytes, 15 of data), so a TP collective
    sends no flag message and its data grows by 128/120. Llama-3-8B TP2, batch 1: each
    all-reduce pushes 8,192 bytes, ceil(8,192 / 120) = 69 lines of 128 = 8,832 bytes;
    64 phases of 2 messages instead of 4."""
    sep = decode_step("llama-3-8b", Deployment(batch=1, tp=2))
    ll = decode_step("llama-3-8b", Deployment(batch=1, tp=2), flags="ll128")
    assert sep.count("flag") == 128 and ll.count("flag") == 0
    assert ll.sizes("data") == {69 * 128: 128} and sep.sizes("data") == {8192: 128}
    assert ll.messages * 2 == sep.messages
    with pytest.raises(ValueError, match="flags"):
        decode_step("llama-3-8b", Deployment(batch=1, tp=2), flags="ll")
