"""Coordination density of inference steps: attachment pairing, useful bytes, control
actions per useful KiB, host bytes per useful byte, the fastest covered RDMA rung."""

import pytest

from pymodel.workloads.carriers import RUNGS, Carrier
from pymodel.workloads.generate import Deployment
from pymodel.workloads.grid import PAIRINGS, SCENARIOS, carriers, fastest_rdma, run_grid
from pymodel.workloads.roofline import decode_roofline
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
    from pymodel.points import cycle_point
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
