"""TP all-reduces as engines run them: NCCL's ring where vLLM hands the all-reduce to
NCCL, and in-switch reduction (NVLS-style) on a fabric profile that has it."""

import pytest

from analysis.workloads import Carrier, Deployment, comm_time, decode_step


def test_auto_allreduce_hands_what_vllm_does_not_take_to_nccls_ring():
    """vLLM's custom all-reduce serves 2, 4, 6 or 8 GPUs and all-reduces below 8 MiB
    (custom_all_reduce.py: ``_SUPPORTED_WORLD_SIZES = [2, 4, 6, 8]``, ``max_size=8192 *
    1024``); the rest goes to NCCL, whose all-reduce on one domain without in-switch
    reduction is its ring."""
    from analysis.workloads.decode_trace import allreduce_mode
    mib8 = 8 * 1024 * 1024
    assert allreduce_mode("auto", 2, mib8) == "ring"
    assert allreduce_mode("auto", 8, mib8 - 1) == "rsag"
    assert allreduce_mode("auto", 8, mib8) == "ring"
    for tp in (3, 16, 72):
        assert allreduce_mode("auto", tp, 1024) == "ring"


def test_ring_allreduce_by_hand():
    """NCCL's ring (tuning.cc: ``nsteps = 2 * (nRanks - 1)`` for an all-reduce): Llama-3-8B
    TP4, batch 2: S = 2 x 4096 x 2 = 16,384 bytes, chunks of 4,096; 6 dependent steps per
    all-reduce, in each GPU i sends its chunk to GPU i + 1 (mod 4), over 2 channels as 2
    messages of 2,048 and 2 flags."""
    tr = decode_step("llama-3-8b", Deployment(batch=2, tp=4), allreduce="ring", channels=2)
    ar = [p for p in tr.phases if p.name.startswith("L0.attn.")]
    assert len(ar) == 6
    assert all(p.deps == (q.id,) for q, p in zip(ar, ar[1:], strict=False))
    c = tr.columns
    first = c["phase"] == ar[0].id
    assert sorted(zip(c["src"][first].tolist(), c["dst"][first].tolist(),
                      c["bytes"][first].tolist(), c["count"][first].tolist(),
                      strict=True)) == sorted(
        [(i, (i + 1) % 4, 2048, 2) for i in range(4)] + [(i, (i + 1) % 4, 8, 2)
                                                          for i in range(4)])
    assert len(tr.phases) == 2 * 32 * 6
    with pytest.raises(ValueError, match="channels"):
        decode_step("llama-3-8b", Deployment(batch=2, tp=4), allreduce="ring", channels=0)


def test_nvls_allreduce_by_hand():
    """In-switch reduction: each GPU sends its buffer once to the switch (4 shares of S/4)
    and its reduced share once more (multicast); it receives its reduced share and the 3
    others'. Llama-3-8B TP4, batch 2: S = 16,384, so 5 x 4,096 sent and 4 x 4,096
    received per GPU, one phase per all-reduce; the switch is endpoint 4."""
    tr = decode_step("llama-3-8b", Deployment(batch=2, tp=4), allreduce="nvls")
    assert tr.switch and tr.gpus == 4
    assert len(tr.phases) == 2 * 32
    c = tr.columns
    p0 = (c["phase"] == 0) & (c["kind"] == 0)
    for g in range(4):
        out = p0 & (c["src"] == g)
        into = p0 & (c["dst"] == g)
        assert set(c["dst"][out].tolist()) == {4} and set(c["src"][into].tolist()) == {4}
        assert int((c["bytes"] * c["count"])[out].sum()) == 5 * 4096
        assert int((c["bytes"] * c["count"])[into].sum()) == 4 * 4096
    with pytest.raises(ValueError, match="ll128"):
        decode_step("llama-3-8b", Deployment(batch=2, tp=4), allreduce="nvls", flags="ll128")


def test_nvls_needs_a_fabric_with_in_switch_reduction():
    """Only a profile whose source names in-switch reduction times an ``nvls`` trace:
    ``rack`` (Tomahawk Ultra's in-network collectives); ``board`` and ``pod`` refuse it,
    naming the fabric."""
    from spec.fabric_profiles import FABRIC_PROFILES
    assert [k for k, v in FABRIC_PROFILES.items() if v.in_switch_reduction] == ["rack"]
    tr = decode_step("llama-3-8b", Deployment(batch=2, tp=4), allreduce="nvls")
    car = Carrier("nic")
    for fabric in ("board", "pod"):
        with pytest.raises(ValueError, match=f"fabric '{fabric}' has no in-switch"):
            comm_time(tr, car, fabric=fabric)
    assert comm_time(tr, car, fabric="rack").cycles > 0


def test_nvls_sends_fewer_bytes_than_two_shot_and_is_faster_when_bytes_bound():
    """Per GPU and all-reduce, two-shot sends and receives 2 (tp - 1) / tp x S (1.75 S at
    TP8); in-switch reduction sends S + S / tp (1.125 S) and receives S. Llama-3-70B TP8,
    batch 128 (S = 2 MiB), 8 ports on the ``rack`` fabric: bytes-bound, so the NIC's
    communication falls by at least a quarter (1.125 / 1.75 = 0.64 of the bytes)."""
    dep = Deployment(batch=128, tp=8)
    rs, nv = (decode_step("llama-3-70b", dep, allreduce=a) for a in ("rsag", "nvls"))
    g0 = lambda tr: int((tr.columns["bytes"] * tr.columns["count"])[  # noqa: E731
        (tr.columns["src"] == 0) & (tr.columns["kind"] == 0)].sum())
    s = 128 * 8192 * 2
    assert g0(rs) == 160 * 2 * 7 * (s // 8)
    assert g0(nv) == 160 * 9 * (s // 8)
    car = Carrier("nic")
    a, b = (comm_time(tr, car, ports=8, fabric="rack").cycles for tr in (rs, nv))
    assert b < 0.75 * a


def test_ring_over_two_nodes_leaves_each_node_from_every_gpu_once_by_hand():
    """Llama-3.1-405B TP16 over two nodes of 8, ring over 8 channels: channel c runs
    through each node from its c-th GPU on, so it leaves node 0 from GPU (c + 7) mod 8
    and node 1 from GPU 8 + (c + 7) mod 8. Over the 8 channels every GPU sends exactly
    one piece (and its flag) to the other node per ring step."""
    from analysis.workloads.serving import between_nodes
    tr = decode_step("llama-3.1-405b", Deployment(batch=8, tp=16), allreduce="ring",
                     channels=8, node_gpus=8)
    x = between_nodes(tr, 8)
    c = x.columns
    step = (c["phase"] == 0) & (c["kind"] == 0)
    assert sorted(c["src"][step].tolist()) == list(range(16))
    assert all((c["src"][step] // 8) != (c["dst"][step] // 8))
    assert set(c["count"][step].tolist()) == {1}
    chunk = -(-8 * 16384 * 2 // 16)
    assert set(c["bytes"][step].tolist()) == {-(-chunk // 8)}
    with pytest.raises(ValueError, match="node_gpus"):
        decode_step("llama-3.1-405b", Deployment(batch=8, tp=16), allreduce="ring",
                    node_gpus=6)


def test_a_switch_trace_round_trips_through_the_replay_format():
    """``switch`` is written and read back; the switch's rows keep their endpoint."""
    from analysis.workloads.trace import trace_from_dict
    tr = decode_step("llama-3-8b", Deployment(batch=2, tp=4), allreduce="nvls")
    doc = tr.to_dict()
    assert doc["switch"] is True
    back = trace_from_dict(doc)
    assert back.switch and back.messages == tr.messages
    assert all((back.columns[k] == tr.columns[k]).all() for k in tr.columns)
