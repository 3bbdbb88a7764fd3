"""Coordination density of inference steps: attachment pairing, useful bytes, control
actions per useful KiB, host bytes per useful byte, the fastest covered RDMA rung."""

import pytest

from analysis.workloads.carriers import RUNGS, Carrier
from analysis.workloads.generate import Deployment
from analysis.workloads.grid import PAIRINGS, SCENARIOS, carriers, fastest_rdma, run_grid
from analysis.workloads.roofline import decode_roofline
from spec.formats.nic import header_bytes
from spec.host import PROFILES

LLAMA2_TP4 = SCENARIOS[2]


def test_pairings_attach_both_designs_alike():
    assert PAIRINGS["integrated"] == {"nic": {"attachment": "integrated"},
                                      "rdma": {"host": "on_die"}}
    assert PAIRINGS["pcie"] == {"nic": {"attachment": "pcie"}, "rdma": {"host": "pcie"}}
    for pairing, want in (("integrated", {"integrated", "on_die"}), ("pcie", {"pcie"})):
        assert {c.attachment for c in carriers(pairing=pairing).values()} == want
    with pytest.raises(ValueError, match="pairing"):
        carriers(pairing="cxl")


def test_useful_bytes_and_nic_credits_by_hand():
    """Llama-3-70B TP8 one-shot, batch 1: two all-reduces per layer, each GPU pushes
    S = 1 x 8192 x 2 bytes to its 7 peers, then an 8-byte flag to each. On the integrated
    NIC (compact header of 8 bytes, stores of at most 1,024 bytes) S is 16 stores of
    ceil((8 + 1024 + 4) / 64) = 17 beats, a flag one beat; one credit per beat."""
    s = 8192 * 2
    pushes = 80 * 2 * 8 * 7
    nic = Carrier("nic", framing="compact", knobs={"attachment": "integrated"})
    r = decode_roofline("llama-3-70b", Deployment(batch=1, tp=8), carrier=nic, ports=8)
    assert r.useful_bytes_per_token == pushes * s
    beats = 16 * -(-(header_bytes("compact") + 1024 + 4) // 64) + 1
    assert r.credits_per_token == pushes * beats
    assert r.ctrl_per_useful_kb == pytest.approx(beats * 1024 / s)
    assert r.ctrl_ops_per_token == 0 and r.host_bytes_per_useful_byte == 0
    assert r.attachment == "integrated"


def test_nic_behind_pcie_host_bytes_by_hand():
    """Behind PCIe a NIC store is one posted write of at most 256 bytes (the profile's
    MPS); the sender's write and the receiver's DMA write each carry the payload and one
    TLP overhead: 2 x (256 + 24) host bytes per 256 useful bytes."""
    p = PROFILES["pcie"]
    nic = Carrier("nic", framing="compact", knobs={"attachment": "pcie"})
    assert nic.max_chunk == p.max_payload == 256
    c = nic.cost(1024, 3)
    assert c.chunks == 4
    assert c.host_bytes == 4 * 2 * (p.max_payload + p.req_overhead)


def test_nic_pcie_steady_state_at_200_stores():
    from analysis.points import cycle_point
    for size in (64, 256):
        a = cycle_point("nic", msg_bytes=size, messages=200, framing="compact",
                        attachment="pcie")
        b = cycle_point("nic", msg_bytes=size, messages=1000, framing="compact",
                        attachment="pcie")
        for k in ("ii_cycles", "latency_cycles", "host_bytes", "inflight_bits"):
            assert a[k] == b[k], (size, k)


def test_grid_rows_name_pairing_and_fastest_rung_is_covered_and_fastest():
    rows = run_grid((LLAMA2_TP4,), (1, 64), pairings=tuple(PAIRINGS))
    assert len(rows) == 2 * 2 * (1 + len(RUNGS))
    for r in rows:
        want = PAIRINGS[r["pairing"]]["nic" if r["design"] == "nic" else "rdma"]
        assert r["attachment"] == next(iter(want.values()))
    for pairing in PAIRINGS:
        for b in (1, 64):
            best = fastest_rdma(rows, LLAMA2_TP4.label, b, pairing)
            assert best is not None and best["covered"]
            rdma = [r for r in rows if r["pairing"] == pairing and r["batch"] == b
                    and r["design"] != "nic" and r["covered"]]
            assert best["coordination_s"] == min(r["coordination_s"] for r in rdma)


def test_batching_cuts_rdma_control_per_useful_kib():
    """One WQE per message whatever its size: control per useful byte falls as the
    all-reduce messages grow with the batch (batch x hidden x 2 bytes); the NIC's credits
    stay one per 64-byte beat."""
    rows = run_grid((LLAMA2_TP4,), (1, 64), designs={
        "nic": Carrier("nic", framing="compact"),
        "rdma pipelined": Carrier("rdma", rung="pipelined", issuer="gpu",
                                  knobs={"host": "on_die"})})
    get = {(r["design"], r["batch"]): r for r in rows}
    assert (get["rdma pipelined", 64]["ctrl_per_useful_kb"]
            < get["rdma pipelined", 1]["ctrl_per_useful_kb"] / 3)
    assert 16 <= get["nic", 64]["ctrl_per_useful_kb"] <= 18


def test_attention_lever_descriptors_per_mib_by_hand():
    """One model, Llama-3-70B (80 layers, 64 query heads of 128), at four ways of caching
    K and V; one request's KV transfer at TP1, per-block descriptors (blocks of 16
    tokens): a descriptor per (layer, block, K or V) of 16 x kv_heads x 128 x 2 bytes
    (MHA 64 KV heads, GQA 8, MQA 1; MLA: one latent of 16 x (512 + 64) x 2), so
    descriptors per MiB = 2**20 / that, plus the one closing flag: MHA 4, GQA 32, MQA
    256, MLA 56.9. GQA/MQA raise the descriptors per byte; the NIC's credits per KiB
    stay those of its stores (17 beats per 1,024)."""
    from analysis.workloads.grid import lever_rows
    rows = {r["setting"]: r for r in lever_rows(levers=("attention",))}
    assert set(rows) == {"MHA", "GQA", "MQA", "MLA"}
    assert all(r["workload"].startswith("Llama-3-70B") for r in rows.values())
    block = {"MHA": 16 * 64 * 128 * 2, "GQA": 16 * 8 * 128 * 2, "MQA": 16 * 1 * 128 * 2,
             "MLA": 16 * (512 + 64) * 2}
    parts = {"MHA": 2, "GQA": 2, "MQA": 2, "MLA": 1}
    for kind, r in rows.items():
        n = 80 * parts[kind] * 118
        assert r["useful_bytes"] == n * block[kind]
        assert r["rdma_wqes_per_mib"] == pytest.approx((n + 1) * 2**20 / (n * block[kind]))
        beats = block[kind] // 1024 * 17           # 1,024-byte stores of 17 beats each
        assert r["nic_credits_per_kib"] == pytest.approx((n * beats + 1) * 1024
                                                         / (n * block[kind]))
    assert (rows["MHA"]["rdma_ctrl_per_kib"] < rows["GQA"]["rdma_ctrl_per_kib"]
            < rows["MQA"]["rdma_ctrl_per_kib"])
    # The KV read of a step (batch 64, context 2,048) is what they buy, at the grid's
    # calibrated HBM bandwidth: FlashMLA's 3,000 GB/s of the 3.35 TB/s.
    mha = 80 * 2 * 64 * 128 * 2
    assert rows["MHA"]["kv_read_ms"] == pytest.approx(64 * 2048 * mha / 3.0e12 * 1e3)
    with pytest.raises(ValueError, match="levers"):
        lever_rows(levers=("sparsity",))


def test_attention_like_for_like_more_sequences_fit_by_hand():
    """The same model at MHA, GQA, MQA and MLA, TP8 on an 80 GB H100, context 2,048:
    per GPU a sequence caches 2,048 x 80 layers x 2 x (KV heads on the GPU) x 128 x 2
    bytes: MHA 8 of 64 heads, 335.5 MB; GQA and MQA one head (MQA's one head replicated
    on every rank), 41.9 MB; MLA the whole latent, 2,048 x 80 x 576 x 2 = 188.7 MB. The
    most sequences that fit next to the weights: one more would not. GQA fits more than
    8x MHA's sequences (its weights are smaller too) and MLA fewer than GQA; the
    larger batch then lowers RDMA's control per useful KiB, and raises tokens/s per GPU
    (the batch, not the attention, is the coordination lever)."""
    from analysis.workloads.attention import attention_rows, attention_variants
    from analysis.workloads.roofline import ACCELERATORS
    rows = {r["attention"]: r for r in attention_rows()}
    seq = {"MHA": 2048 * 80 * 2 * 8 * 128 * 2, "GQA": 2048 * 80 * 2 * 1 * 128 * 2,
           "MQA": 2048 * 80 * 2 * 1 * 128 * 2, "MLA": 2048 * 80 * 576 * 2}
    hbm = ACCELERATORS["h100-sxm"].hbm_bytes
    for kind, m in attention_variants().items():
        fit = rows[kind]["fit_batch"]
        held = [decode_roofline(m, Deployment(batch=b, tp=8)).held_bytes
                for b in (fit, fit + 1)]
        assert held[0] <= hbm < held[1] and held[1] - held[0] == seq[kind], kind
    fits = [rows[k]["fit_batch"] for k in ("MHA", "MLA", "GQA", "MQA")]
    assert fits == sorted(fits) and fits[2] > 8 * fits[0]
    for r in rows.values():
        assert r["fit_rdma_ctrl_per_kib"] <= r["b64_rdma_ctrl_per_kib"]
        assert r["fit_nic_tok_s_gpu"] >= r["b64_nic_tok_s_gpu"] or r["fit_batch"] < 64
    assert rows["GQA"]["fit_rdma_tok_s_gpu"] > 5 * rows["MHA"]["fit_rdma_tok_s_gpu"]


def test_coalescing_and_block_levers_cut_descriptors_per_mib():
    from analysis.workloads.grid import lever_rows
    rows = lever_rows(levers=("KV block", "coalescing"))
    blk = {r["setting"]: r for r in rows if r["lever"] == "KV block"}
    co = {r["setting"]: r for r in rows if r["lever"] == "coalescing"}
    # Llama-3-70B TP8: one KV head per rank, 128 x 2 bytes per token: blocks of 16, 64,
    # 256 tokens are 4, 16, 64 KiB: 256, 64, 16 descriptors per MiB (+ the flag).
    for bt, want in (("16 tokens", 256), ("64 tokens", 64), ("256 tokens", 16)):
        assert blk[bt]["rdma_wqes_per_mib"] == pytest.approx(want, rel=1e-3)
    # Per layer run: 80 x 2 descriptors of 118 blocks (+ the flag) per 118 x 80 x 2 x 4 KiB.
    assert co["layer"]["rdma_wqes_per_mib"] == pytest.approx(161 * 2**20 / (118 * 160 * 4096))
    assert co["page"]["rdma_ctrl_per_kib"] < co["none"]["rdma_ctrl_per_kib"]


def test_batched_dispatch_same_bytes_fewer_messages():
    from analysis.workloads.generate import decode_step
    per = decode_step("deepseek-v3", Deployment(batch=4, ep=8))
    bat = decode_step("deepseek-v3", Deployment(batch=4, ep=8, dispatch="batched"))
    assert per.total_bytes("data") == bat.total_bytes("data")
    ph = bat.phase_id("L3.moe.dispatch")
    assert bat.phases[ph].qps == 7                     # one QP per peer, not 32 x 7
    # At most one data message per (source, destination) pair and one count per peer.
    assert bat.count("data", phase=ph) <= 8 * 7
    assert bat.count("flag", phase=ph) == 8 * 7
    assert per.count("flag", phase=per.phase_id("L3.moe.dispatch")) == 8 * (256 - 32)
    with pytest.raises(ValueError, match="dispatch"):
        decode_step("deepseek-v3", Deployment(batch=1, ep=8, dispatch="grouped"))


def test_gpu_sync_counts_collectives_by_hand():
    """Llama-3-70B TP8 RS+AG: two all-reduces per layer, 80 layers: 160 collectives;
    DeepSeek-V3 EP32 (TP1): a dispatch and a combine per MoE layer, 58 layers: 116."""
    nic = Carrier("nic", framing="compact")
    r = decode_roofline("llama-3-70b", Deployment(batch=1, tp=8), carrier=nic,
                        allreduce="rsag", ports=8, collective_sync_s=6e-6)
    r0 = decode_roofline("llama-3-70b", Deployment(batch=1, tp=8), carrier=nic,
                         allreduce="rsag", ports=8)
    assert r.sync_s == pytest.approx(160 * 6e-6)
    assert r.step_s == pytest.approx(r0.step_s + 160 * 6e-6)
    e = decode_roofline("deepseek-v3", Deployment(batch=1, ep=32), collective_sync_s=1e-6)
    assert e.sync_s == pytest.approx(116e-6)
    with pytest.raises(ValueError, match="collective_sync_s"):
        decode_roofline("llama-3-8b", Deployment(batch=1), collective_sync_s=-1)


def test_deepep_calibration_payload_by_hand():
    """EP32, 128 tokens per GPU, top-8 of 256 experts (8 per GPU): with the balanced
    routing 32 of a GPU's 1,024 (token, expert) pairs are local, 992 are sent: 992
    dispatch puts of 7,408 B and 248 counts of 8 B; combine 992 x 14,336 B + 248 flags.
    At 50 GB/s the payload alone takes 147 us and 284 us: the model cannot be faster.
    The rows cite DeepEP's pure-RDMA table (README at commit 1a0c8f6: EP32 dispatch 182
    us, combine 350 us), whose RDMA bandwidth column (41 GB/s both) is this payload over
    that time."""
    from analysis.workloads.calibration import DEEPEP_LL, deepep_calibration
    assert (DEEPEP_LL["dispatch_us"], DEEPEP_LL["combine_us"]) == (182.0, 350.0)
    assert "pure RDMA" in DEEPEP_LL["source"] and "1a0c8f6" in DEEPEP_LL["source"]
    rows = deepep_calibration({"nic": Carrier("nic", framing="compact")})
    got = {r["phase"]: r for r in rows}
    assert {r["table"] for r in rows} == {"pure RDMA"}
    assert got["dispatch"]["payload_mb"] * 1e6 == pytest.approx(992 * 7408 + 248 * 8)
    assert got["combine"]["payload_mb"] * 1e6 == pytest.approx(992 * 14336 + 248 * 8)
    for r in rows:
        assert r["at_link_us"] >= r["payload_mb"] * 1e6 / 50e9 * 1e6
        assert r["delivered_gbs"] == pytest.approx(41, abs=1)
    # The acceptance bar: the NIC's dispatch within 25 % of DeepEP's 182 us.
    assert abs(got["dispatch"]["residual"]) < 0.25


def test_deepep_calibration_with_nvlink_peers_by_hand():
    """DeepEP's table after its low-latency kernels began to use NVLink (EP32 dispatch
    155 us, combine 273 us): in nodes of 8 GPUs, 7 of a GPU's 31 peers are on NVLink,
    so the design carries the messages to the other 24: 32 puts each (992 / 31), 768
    dispatch puts of 7,408 B and 768 combine messages of 14,336 B, with 8 counts or
    flags to each of the 24 (one a local expert). At 50 GB/s: 114 us and 220 us."""
    from analysis.workloads.calibration import DEEPEP_LL_NVLINK, deepep_calibration
    rows = deepep_calibration({"nic": Carrier("nic", framing="compact")},
                              DEEPEP_LL_NVLINK)
    got = {r["phase"]: r for r in rows}
    assert {r["table"] for r in rows} == {"NVLink + RDMA"}
    assert got["dispatch"]["payload_mb"] * 1e6 == pytest.approx(768 * 7408 + 192 * 8)
    assert got["combine"]["payload_mb"] * 1e6 == pytest.approx(768 * 14336 + 192 * 8)
    assert round(got["dispatch"]["payload_us"]) == 114
    assert round(got["combine"]["payload_us"]) == 220
    assert got["dispatch"]["published_us"] == 155 and got["combine"]["published_us"] == 273


def test_kv_transfer_rows_name_their_pairing():
    from analysis.workloads.grid import kv_transfer_rows
    rows = kv_transfer_rows(variants=[("page", None)], pairing="pcie")
    assert rows[0]["pairing"] == "pcie" and rows[0]["descriptors"] == 1
    with pytest.raises(ValueError, match="pairing"):
        kv_transfer_rows(pairing="nvlink")
