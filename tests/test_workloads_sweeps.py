"""The grid's step calibration (NIM overhead, HBM efficiency), the dual micro-batch
overlap, KV transfers between different prefill and decode TPs, and the sweeps with their
CLI options (each bad option named)."""

import json

import pytest

from analysis.workloads.calibration import HBM_EFFICIENCY, NIM, NIM_FIT, nim_calibration
from analysis.workloads.generate import Deployment, kv_tp_pairs, kv_transfer
from analysis.workloads.grid import SCENARIOS, carriers, run_grid
from analysis.workloads.roofline import decode_roofline
from analysis.workloads.sweeps import (
    SweepError,
    block_rows,
    context_rows,
    kv_tp_rows,
    link_rows,
)
from scripts.inference import main

# Llama-3.1-8B (= Llama-3-8B's shapes), by hand (tests/test_workloads_roofline.py):
# 7,504,658,432 parameters read per step; FP8 KV at NIM's mean context of 1,500 tokens:
# 1,500 x 32 layers x 8 KV heads x 128 x 2 (K, V) x 1 byte = 98,304,000 bytes a sequence.
W_FP8 = 7_504_658_432
KV_SEQ = 1500 * 32 * 8 * 128 * 2
BW = 3000e9                     # FlashMLA's 3,000 GB/s: 3.35 TB/s x 3000 / 3350


def test_hbm_efficiency_is_flashmla_over_the_datasheet():
    assert HBM_EFFICIENCY * 3.35e12 == pytest.approx(BW)


def test_nim_fit_by_hand_and_checked_at_concurrency_100():
    t0 = 4.63e-3 - (W_FP8 + KV_SEQ) / BW                       # fitted at concurrency 1
    assert NIM_FIT.overhead_s == pytest.approx(t0)
    assert NIM_FIT.hbm_efficiency == HBM_EFFICIENCY
    at100 = (W_FP8 + 100 * KV_SEQ) / BW + t0
    assert NIM["table"]["itl_ms"][NIM["table"]["concurrency"].index(100)] == 7.57
    assert NIM_FIT.check_concurrency == 100
    assert NIM_FIT.check_residual == pytest.approx(at100 / 7.57e-3 - 1)
    assert abs(NIM_FIT.check_residual) < 0.05                 # within 5 % at 100
    rows, t0_ms = nim_calibration(hbm_efficiency=HBM_EFFICIENCY)
    assert t0_ms == pytest.approx(t0 * 1e3)
    assert rows[4].calibrated_ms == pytest.approx(at100 * 1e3)


def test_grid_applies_the_calibration_by_default():
    # Llama-3-8B, 1 GPU, batch 1, context 2048, BF16: weights 2 x 7,504,658,432 bytes,
    # KV 2048 x 32 x 8 x 128 x 2 x 2 = 268,435,456 bytes; memory-bound.
    nbytes = 2 * W_FP8 + 2048 * 32 * 8 * 128 * 2 * 2
    nic = {"nic": carriers()["nic"]}
    (cal,) = run_grid(SCENARIOS[:1], (1,), designs=nic)
    (pure,) = run_grid(SCENARIOS[:1], (1,), designs=nic, calibration="pure")
    assert cal["calibration"] == "nim" and pure["calibration"] == "pure"
    assert pure["step_s"] == pytest.approx(nbytes / 3.35e12)
    assert cal["memory_s"] == pytest.approx(nbytes / BW)
    assert cal["step_s"] == pytest.approx(nbytes / BW + NIM_FIT.overhead_s)
    assert cal["bottleneck"] == "memory"                      # the overhead is no regime
    with pytest.raises(ValueError, match="calibration"):
        run_grid(SCENARIOS[:1], (1,), designs=nic, calibration="guess")


def test_two_micro_batches_take_the_max_not_the_sum():
    nic = carriers()["nic"]
    dep = Deployment(batch=5, tp=4)
    r = decode_roofline("llama-2-7b", dep, carrier=nic, ports=8, micro_batches=2,
                        overhead_s=1e-3)
    a = decode_roofline("llama-2-7b", Deployment(batch=3, tp=4), carrier=nic, ports=8)
    b = decode_roofline("llama-2-7b", Deployment(batch=2, tp=4), carrier=nic, ports=8)
    wa, wb = (max(x.compute_s, x.memory_s) for x in (a, b))
    ma, mb = a.coordination_s, b.coordination_s
    assert r.overlapped and r.tokens == 5
    assert r.step_s == pytest.approx(max(wa, mb) + max(wb, ma) + 1e-3)
    # Each micro-batch reads the weights again.
    assert r.weight_bytes == pytest.approx(a.weight_bytes + b.weight_bytes)
    assert r.messages == a.messages + b.messages
    # Where it does not apply (batch 1, one GPU) the step is the plain sum.
    one = decode_roofline("llama-2-7b", Deployment(batch=1, tp=4), carrier=nic, ports=8,
                          micro_batches=2)
    assert not one.overlapped
    assert one.step_s == pytest.approx(max(one.compute_s, one.memory_s)
                                       + one.coordination_s)
    assert not decode_roofline("llama-3-8b", Deployment(batch=4), micro_batches=2).overlapped


@pytest.mark.parametrize("kw, field", [(dict(micro_batches=3), "micro_batches"),
                                       (dict(hbm_efficiency=0), "hbm_efficiency"),
                                       (dict(hbm_efficiency=1.5), "hbm_efficiency")])
def test_bad_calibration_arguments_name_the_field(kw, field):
    with pytest.raises(ValueError, match=field):
        decode_roofline("llama-3-8b", Deployment(batch=2), **kw)


# Llama-3-70B: 80 layers, 8 KV heads of 128; 1,888 prompt tokens = 118 blocks of 16;
# one head of one block: 16 x 128 x 2 bytes = 4,096.
def test_kv_transfer_prefill_tp2_to_decode_tp8_by_hand():
    tr = kv_transfer("llama-3-70b", prompt_tokens=1888, tp=2, decode_tp=8)
    assert tr.gpus == 10
    # Prefill rank 0 holds heads 0-3, decode rank d head d: 4 slices of 1 head per block.
    assert kv_tp_pairs("llama-3-70b", 2, 8) == {(0, 0): 1, (0, 1): 1, (0, 2): 1, (0, 3): 1,
                                                (1, 4): 1, (1, 5): 1, (1, 6): 1, (1, 7): 1}
    assert tr.sizes("data", src=0) == {4096: 80 * 118 * 2 * 4}
    assert tr.count("flag", src=0) == 4
    assert tr.phases[0].qps == 4
    layer = kv_transfer("llama-3-70b", prompt_tokens=1888, tp=2, decode_tp=8,
                        coalesce="layer")
    assert layer.sizes("data", src=0) == {118 * 4096: 80 * 2 * 4}


def test_kv_transfer_prefill_tp8_to_decode_tp2_and_equal_tps():
    tr = kv_transfer("llama-3-70b", prompt_tokens=1888, tp=8, decode_tp=2)
    assert tr.sizes("data", src=0) == {4096: 80 * 118 * 2}
    c = tr.columns
    into = sum(int(n) for d, n, k in zip(c["dst"], c["count"], c["kind"], strict=True)
               if d == 8 and k == 0)
    assert into == 4 * 80 * 118 * 2                # decode rank 0 gathers from 4 ranks
    same = kv_transfer("llama-3-70b", prompt_tokens=1888, tp=8, decode_tp=8)
    plain = kv_transfer("llama-3-70b", prompt_tokens=1888, tp=8)
    assert same.sizes("data") == plain.sizes("data") == {4096: 8 * 18_880}
    # MLA: every rank holds the whole latent (576 BF16 values a token): decode rank d
    # takes it from prefill rank d mod 1.
    mla = kv_transfer("deepseek-v3", prompt_tokens=1888, tp=1, decode_tp=4)
    assert mla.sizes("data", src=0) == {16 * 576 * 2: 4 * 61 * 118}


def test_bad_decode_tp_names_the_field():
    with pytest.raises(ValueError, match="decode_tp"):
        kv_transfer("llama-3-70b", prompt_tokens=16, tp=8, decode_tp=3)
    with pytest.raises(ValueError, match="decode_tp"):
        kv_transfer("llama-3-70b", prompt_tokens=16, tp=8, decode_tp=0)


def test_sweeps_by_hand():
    blocks = block_rows(block_sizes=(16, 64))
    assert [r["descriptors"] for r in blocks] == [80 * 2 * 118, 80 * 2 * 30]
    tps = kv_tp_rows(prefill_tp=(2, 8), decode_tp=(8,))
    assert [(r["descriptors"], r["descriptors_in"]) for r in tps] == [
        (4 * 18_880, 18_880), (18_880, 18_880)]
    ctx = context_rows(batch=1, contexts=(512, 2048))
    # Llama-3-70B TP8: 327,680 BF16 KV bytes a token, 1 of 8 KV heads a GPU.
    assert [r["kv_gb"] * 1e9 for r in ctx] == pytest.approx([512 * 40_960, 2048 * 40_960])
    assert ctx[0]["nic_comm_us"] == ctx[1]["nic_comm_us"]     # the cache does not move
    links = link_rows(model="llama-2-7b", tp=4, ep=1, batch=1, links=(1, 8))
    assert links[1]["nic_comm_us"] < links[0]["nic_comm_us"]
    with pytest.raises(SweepError, match="contexts") as e:
        context_rows(contexts=(0,))
    assert e.value.param == "contexts"


@pytest.mark.parametrize("argv, option", [
    (["--sweep", "kv-tp", "--decode-tp", "3"], "--decode-tp"),
    (["--sweep", "kv-tp", "--prefill-tp", "0"], "--prefill-tp"),
    (["--sweep", "block", "--block-sizes", "16,x"], "--block-sizes"),
    (["--sweep", "links", "--links", "0"], "--links"),
    (["--sweep", "context", "--contexts", "-512"], "--contexts"),
    (["--sweep", "block", "--contexts", "512"], "--contexts"),
    (["--sweep", "context", "--tp", "3"], "--tp"),
    (["--sweep", "links", "--block-tokens", "4"], "--block-tokens"),
    (["--sweep", "block", "--prompt-tokens", "0"], "--prompt-tokens"),
    (["--sweep", "context", "--model", "gpt-5"], "--model"),
    (["--sweep", "scale"], "--sweep"),
    (["--decode-tp", "4"], "--decode-tp"),
    (["--links", "2"], "--links"),
])
def test_cli_bad_sweep_option_is_named(argv, option, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert option in capsys.readouterr().err


def test_cli_sweeps_print_tables_and_json(tmp_path, capsys):
    out = tmp_path / "b.json"
    assert main(["--sweep", "block", "--block-sizes", "16,64", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| 16 | 18,880 | 18,880 | 4,096 |" in text
    assert [r["descriptors"] for r in json.loads(out.read_text())] == [18_880, 4_800]
    assert main(["--sweep", "kv-tp", "--prefill-tp", "2", "--decode-tp", "8"]) == 0
    assert "| 2 | 8 | 75,520 | 18,880 | 4,096 |" in capsys.readouterr().out
    tr = tmp_path / "t.json"
    assert main(["--trace", "llama-3-70b", "--kv", "--tp", "2", "--decode-tp", "8",
                 "--json", str(tr)]) == 0
    assert json.loads(tr.read_text())["gpus"] == 10


def test_block_sweep_cost_per_byte_falls_with_the_block():
    """The KV block sweep's RDMA cost per byte does not rise with the block: a WRITE of a
    larger block carries more payload per header, WQE and doorbell, and the engine
    streams its frames at the wire's rate, so the cycles a WRITE occupies the sender
    (the slower of the engine's ii and the issuer's posting) per payload byte fall or
    stay from 16 to 256 tokens a block (4 to 64 KiB), and never go below the wire's
    64 bytes per cycle. The sweep's own carrier (pairing integrated, pipelined rung,
    posted by a CPU at Kalia's rate), with 200 messages a point to keep it short."""
    from analysis.workloads.carriers import Carrier
    from analysis.workloads.grid import KV_RUNG, LEVER_KV_ISSUER, PAIRING, PAIRINGS
    car = Carrier("rdma", rung=KV_RUNG, issuer=LEVER_KV_ISSUER,
                  knobs=PAIRINGS[PAIRING]["rdma"], messages=200)
    sizes = [4096 * k for k in (1, 2, 3, 4, 8, 16)]
    per_byte = [car.cost(b).cycles / b for b in sizes]
    assert all(b <= a for a, b in zip(per_byte, per_byte[1:], strict=False)), per_byte
    assert min(per_byte) > 1 / 64
