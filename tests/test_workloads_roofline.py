"""Decode roofline, classifier, NIM calibration, the report section and its CLI."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.workloads.calibration import NIM, nim_calibration
from analysis.workloads.carriers import RUNGS, Carrier
from analysis.workloads.generate import Deployment
from analysis.workloads.grid import SCENARIOS
from analysis.workloads.roofline import ACCELERATORS, decode_roofline
from analysis.workloads.serving import SERVING
from scripts.reporting.inference import inference_section

ROOT = Path(__file__).resolve().parent.parent
H100 = ACCELERATORS["h100-sxm"]


def test_h100_figures_are_the_datasheets():
    # H100 SXM datasheet: 3.35 TB/s, 80 GB, BF16 1,979 and FP8 3,958 TFLOPS with sparsity.
    assert (H100.hbm_bytes_per_s, H100.hbm_bytes) == (3.35e12, 80e9)
    assert (H100.bf16_flops, H100.fp8_flops) == (989e12, 1979e12)


def test_llama3_8b_one_gpu_by_hand():
    r = decode_roofline("llama-3-8b", Deployment(batch=1, context=1000))
    # Weights read: 32 layers x (attention 4096 x 4096 x 2 + 2 x 4096 x 1024 = 41,943,040
    # + MLP 3 x 4096 x 14336 = 176,160,768) + LM head 128,256 x 4096 = 7,504,658,432
    # parameters x 2 bytes; KV: 1000 tokens x 131,072 bytes.
    weights = 15_009_316_864
    kv = 131_072_000
    assert r.weight_bytes == weights and r.kv_bytes == kv
    assert r.memory_s == pytest.approx((weights + kv) / 3.35e12)
    # FLOPs: 2 x 7,504,658,432 + attention 32 layers x 4 x 1000 x 32 heads x 128.
    assert r.flops == pytest.approx(2 * 7_504_658_432 + 32 * 4 * 1000 * 32 * 128)
    assert r.compute_s == pytest.approx(r.flops / 989e12)
    assert r.coordination_s == 0 and r.step_s == r.memory_s
    assert r.bottleneck == "memory" and r.tokens_per_s == pytest.approx(1 / r.step_s)
    assert r.fits


def test_tp_shards_weights_and_kv():
    one = decode_roofline("llama-3-70b", Deployment(batch=8, context=512))
    tp8 = decode_roofline("llama-3-70b", Deployment(batch=8, tp=8, context=512))
    assert tp8.weight_bytes == pytest.approx(one.weight_bytes / 8)
    assert tp8.kv_bytes == pytest.approx(one.kv_bytes / 8)       # 8 KV heads, 1 per GPU
    assert not one.fits and tp8.fits                            # 141 GB of weights


def test_classifier_finds_each_regime():
    # Compute: a huge batch of short contexts on a small model.
    c = decode_roofline("falcon-7b", Deployment(batch=4096, context=1))
    assert c.bottleneck == "compute" and c.remedy == "add compute"
    # Memory: one sequence.
    assert decode_roofline("llama-3-8b", Deployment(batch=1)).bottleneck == "memory"
    # Coordination: DeepSeek-V3 EP64 through today's RDMA engine at batch 64.
    r = decode_roofline("deepseek-v3", Deployment(batch=64, ep=64),
                        carrier=Carrier("rdma", issuer="gpu"))
    assert r.bottleneck == "coordination"
    assert r.remedy == "remove state and control steps"
    assert r.step_s == pytest.approx(max(r.compute_s, r.memory_s) + r.coordination_s)
    assert 0 < r.moving_s < r.coordination_s


def test_moe_reads_only_touched_experts():
    # Batch 1 on EP8 (8 tokens in the step): a GPU's 32 experts per layer are each
    # picked with probability 1 - (1 - 8/256)^8; at batch 256 nearly all are read.
    small = decode_roofline("deepseek-v3", Deployment(batch=1, ep=8, context=1))
    big = decode_roofline("deepseek-v3", Deployment(batch=256, ep=8, context=1))
    expert = 3 * 7168 * 2048
    touched = 32 * (1 - (1 - 8 / 256) ** 8)
    assert big.weight_bytes - small.weight_bytes == pytest.approx(
        58 * expert * (32 * (1 - (1 - 8 / 256) ** 2048) - touched))


def test_nim_calibration():
    rows, t0 = nim_calibration()
    t = NIM["table"]
    assert [r.concurrency for r in rows] == t["concurrency"]
    assert rows[0].measured_ms == 4.63 and rows[4].measured_ms == 7.57   # the two
    assert rows[0].calibrated_ms == pytest.approx(4.63)
    assert t0 == pytest.approx(4.63 - rows[0].model_ms)
    for r in rows:
        assert r.residual == pytest.approx((r.model_ms - r.measured_ms) / r.measured_ms)
        assert r.calibrated_ms == pytest.approx(r.model_ms + t0)
    # The roofline alone is far below NIM at concurrency 1 (a fixed per-step cost it does
    # not model); with that one number fitted it is within 10 % up to concurrency 100.
    assert rows[0].residual < -0.3
    assert all(abs(r.calibrated_residual) < 0.10 for r in rows[:5])
    assert NIM["assumed"]["why_gpus_dtype"] and NIM["assumed"]["why_lengths"]


def test_bad_roofline_arguments():
    with pytest.raises(ValueError, match="accelerator"):
        decode_roofline("llama-3-8b", Deployment(batch=1), accelerator="tpu")
    with pytest.raises(ValueError, match="overhead_s"):
        decode_roofline("llama-3-8b", Deployment(batch=1), overhead_s=-1)
    with pytest.raises(ValueError, match="batch"):
        decode_roofline("llama-3-8b", Deployment(batch=0))


def test_section_small_grid(tmp_path):
    md = inference_section(tmp_path, scenarios=SCENARIOS[3:4] + SCENARIOS[5:6],
                           batches=(1, 16), levers=("coalescing",), fastpath_sizes=(16384,),
                           fastpath_long=(), servings=SERVING[4:])
    assert md.startswith("## Inference")
    for heading in ("Communication per decode step", "KV cache per token",
                    "KV transfer", "Which bottleneck dominates", "Calibration"):
        assert f"### {heading}" in md
    assert "| Llama-3-70B, TP8 one/two-shot | 16 |" in md
    assert "| Llama-3-70B | GQA | 327,680 | 163,840 |" in md
    assert "| DeepSeek-V3 | MLA | 70,272 | 40,016 | 671,026,404,352 | 671 B |" in md
    assert "| none | all | 18,880 | 4,096 |" in md
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert len(pngs) == 7 and all(f"]({p})" in md for p in pngs)
    doc = json.loads((tmp_path / "inference.json").read_text())
    # 2 pairings x 2 scenarios x 2 batches, each the NIC, every rung and the fastest rung.
    assert len(doc["grid"]) == 2 * 2 * 2 * (2 + len(RUNGS))
    assert {r["design"] for r in doc["grid"]} == ({"nic", "rdma fastest"}
                                                  | {f"rdma {n}" for n in RUNGS})
    assert "### Coordination density per design" in md
    assert "### Levers: what each does to coordination density" in md
    assert "### Calibration against DeepEP's low-latency kernels" in md
    assert "### GPU synchronisation per collective" in md
    assert "| coalescing | layer | Llama-3-70B TP8, blocks of 16 | 1,288 |" in md
    assert "| pcie | pcie / pcie | Llama-3-70B, TP8 one/two-shot | 1 |" in md
    # The fast path against the cycle model at 16 KiB, 1 and 248 QPs: both within.
    assert "### The fast path at the inference message sizes" in md
    check = doc["fastpath_check"]
    assert [(r["msg_bytes"], r["qps"]) for r in check] == [(16384, 1), (16384, 248)]
    assert all(r["within"] for r in check) and "Points outside: 0" in md
    # The deployments at TPOT <= 50 ms: both designs, attachment and issue cost named.
    assert "### Deployments at TPOT <= 50 ms" in md
    assert [r["design"] for r in doc["serving"]] == ["NIC", "RDMA"]
    assert all(r["batch"] > 0 and r["attachment"] and r["issue"] for r in doc["serving"])


@pytest.mark.slow(reason=(
    "test_section_small_grid runs the same section code on a small grid and "
    "test_workloads_sweeps.py the calibration, overlap and sweeps on single points (the whole "
    "section, both pairings, is about 60 s of model runs)"))
def test_whole_grid_runs(tmp_path):
    """The whole inference grid runs and writes every point (how long it takes is a
    benchmark figure, not a test: a timed assertion flakes on a busy machine)."""
    md = inference_section(tmp_path, plots=False)
    doc = json.loads((tmp_path / "inference.json").read_text())
    assert len(doc["grid"]) == 2 * len(SCENARIOS) * 9 * (2 + len(RUNGS))
    assert not [r for r in doc["grid"] if r["design"] == "rdma fastest"
                and not r.get("covered", True)]
    assert "DeepSeek-V3, EP64" in md


def _cli(*args):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "inference.py"), *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_cli_help_and_errors(tmp_path):
    h = _cli("--help")
    assert h.returncode == 0 and "--trace MODEL" in h.stdout and "--out" in h.stdout
    bad = _cli("--trace", "falcon-7b", "--tp", "2")
    assert bad.returncode == 2 and "tp (2) must divide num_attention_heads (71)" in bad.stderr
    bad = _cli("--trace", "gpt-5")
    assert bad.returncode == 2 and "model must be one of" in bad.stderr


def test_cli_writes_a_replay_trace(tmp_path):
    out = tmp_path / "t.json"
    r = _cli("--trace", "llama-3-70b", "--kv", "--tp", "8", "--coalesce", "layer",
             "--json", str(out))
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["kind"] == "kv_transfer" and doc["gpus"] == 16
    data = [m for m in doc["messages"] if m["kind"] == "data"]
    assert {m["bytes"] for m in data} == {483_328} and sum(m["count"] for m in data) == 8 * 160
