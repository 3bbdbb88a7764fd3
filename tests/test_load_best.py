"""The RDMA load generator with the best rung each issuer can use, and the saturated
rate in the steady state, on the golden model: the rung each issuer gets, what the
issuer posts with it, the wire and host-interface bounds (from the frame formats and the
host profile, not from the engine), that no saturation rate is faster than them, the
1 % stability of the steady-state measurement, and a clear error for each bad knob."""

import pytest

from analysis.load.rdma import (
    SATURATION_TOLERANCE,
    ack_requests,
    best_rung,
    build_load,
    check_load_knobs,
    rate_bound,
    rdma_load_run,
    saturation,
    steady_saturation,
    wire_beats,
)
from spec.host import PCIE
from spec.rdma_engine import BLUEFLAME_OFFSET, DOORBELL_OFFSET, LADDER


def test_best_rung_per_issuer_and_size():
    last = LADDER[-1][0]
    # A WQE is at most 4 words of 64 bytes: its own word and 3 of inline payload, 192 B.
    for issuer in ("none", "cpu", "controller"):
        assert best_rung(issuer, 192) == last
        assert best_rung(issuer, 193) == "+doorbell batching 16"
    # The GPU's WQEs are in its own memory: never written by MMIO, never inline.
    assert best_rung("gpu", 64) == "+doorbell batching 16"


def test_wire_beats_from_the_frame_format():
    # Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + RETH 16 = 70 header bytes, ICRC 4, FCS 4.
    assert wire_beats(128) == -(-(70 + 128 + 8) // 64) == 4
    assert wire_beats(4096) == -(-(70 + 4096 + 8) // 64) == 66
    # Two 2 KiB frames: the second without RETH (54 header bytes).
    assert wire_beats(4096, pmtu_log2=11) == (-(-(70 + 2048 + 8) // 64)
                                              + -(-(54 + 2048 + 8) // 64))


def test_cpu_posts_blueflame_inline_unsignalled():
    n = 130
    p = check_load_knobs(128, n, dict(issuer="cpu"))
    cfg, v = build_load(128, [0] * n, [0] * n, p)
    assert v.rung == LADDER[-1][0] and cfg.ack_every > 1
    # Every MMIO write is one WQE by MMIO: its own word and 2 inline payload words.
    assert len(v.writes) == n
    assert all(len(words) == 3 and words[0]["addr"] == BLUEFLAME_OFFSET
               for _, words in v.writes)
    assert all(m.inline for m in v.messages)
    # One signalled WQE per 64 of the QP, and its last one.
    assert [j for j, m in enumerate(v.messages) if m.signalled] == [63, 127, 129]
    # The CPU builds and writes each WQE serially: 55 + 88 cycles apart (issuers.toml).
    rel = [r for r, _ in v.writes]
    assert {b - a for a, b in zip(rel, rel[1:], strict=False)} == {55 + 88}


def test_gpu_fills_a_batch_in_parallel_and_rings_once():
    n = 48
    p = check_load_knobs(128, n, dict(issuer="gpu"))
    _, v = build_load(128, [0] * n, [0] * n, p)
    # 16 WQEs per doorbell, read by the engine (no MMIO WQE, no inline payload).
    assert len(v.writes) == n // 16
    assert all(len(w) == 1 and w[0]["addr"] == DOORBELL_OFFSET for _, w in v.writes)
    assert not any(m.inline for m in v.messages)
    # A batch's WQEs are filled at once (55 cycles), then its doorbell (88): a batch
    # every 143 cycles, the first doorbell after one WQE's time.
    assert [r for r, _ in v.writes] == [55, 55 + 143, 55 + 2 * 143]


def test_ack_requests_guard_pinning_and_the_timer():
    k = dict(ack_every=16, ack_frames=64)
    # More QPs than cache entries: every message asks (a pinned entry blocks others).
    assert ack_requests([0, 1, 2], [0, 1, 2], 128, [False] * 3, k, 32, 16) == [True] * 3
    # One QP, messages close together: only the last asks (the engine's count does
    # the rest); messages further apart than a quarter of the 4,096-cycle timer: each.
    close = ack_requests([0] * 5, [0, 1, 2, 3, 4], 128, [False] * 5, k, 1, 16)
    assert close == [False] * 4 + [True]
    apart = ack_requests([0] * 3, [0, 1100, 2200], 128, [False] * 3, k, 1, 16)
    assert apart == [True] * 3
    # Without coalescing the host never asks.
    assert ack_requests([0] * 3, [0, 1, 2], 128, [False] * 3,
                        dict(ack_every=1, ack_frames=0), 1, 16) == [False] * 3


def test_rate_bound_from_the_host_profile():
    cycles, res, parts = rate_bound(128)
    assert parts["wire"] == 4
    # Node B writes 128 B of payload in one posted-write TLP (MPS 256) with its overhead.
    assert parts["host B up"] == pytest.approx((128 + PCIE.req_overhead)
                                               / PCIE.bytes_per_cycle)
    # The WQE by MMIO: 3 words in one host write with its overhead.
    assert parts["host A down"] == pytest.approx((3 * 64 + PCIE.mmio_overhead)
                                                 / PCIE.bytes_per_cycle)
    assert (cycles, res) == (4, "wire")
    # The CPU issuer's own cost per message bounds it (55 + 88 cycles, issuers.toml).
    assert rate_bound(128, issuer="cpu")[:2] == (143, "issuer")


@pytest.mark.parametrize("msg_bytes, knobs", [
    (128, dict()),
    (128, dict(rung="pipelined")),
    (1024, dict()),
    (128, dict(issuer="gpu")),
    (128, dict(qps=64, popularity="round_robin")),
])
def test_saturation_never_faster_than_the_wire_or_the_host(msg_bytes, knobs):
    sat = steady_saturation(msg_bytes, start=250, cap=1000, **knobs)
    _, _, parts = rate_bound(msg_bytes, ctx=sat["ctx"], **knobs)
    for resource in ("wire", "host A down", "host A up", "host B up", "host B down",
                     "MMIO intake", "read tags", "context entries"):
        assert sat["cycles"] >= parts[resource], resource
    # The issuer's bound is met within the measurement's 1 % (its batches jitter).
    assert sat["cycles"] >= parts["issuer"] * (1 - SATURATION_TOLERANCE)


@pytest.mark.parametrize("qpc_bytes", [64, 256, 1024])
def test_rate_bound_charges_context_misses(qpc_bytes):
    # One miss and one write-back per message at each node, 16 entries (the default):
    # each fill reads the whole context of qpc_bytes (one request TLP per MRRS, one
    # completion per RCB), each write-back is a one-word posted write (the dynamic word).
    w = 64
    reqs = -(-qpc_bytes // PCIE.max_read_request)
    cpls = -(-qpc_bytes // PCIE.rcb)
    ctx = dict(req_misses=1, req_writebacks=1, resp_misses=1, resp_writebacks=1)
    _, _, plain = rate_bound(128, qpc_bytes=qpc_bytes)
    cycles, res, parts = rate_bound(128, ctx=ctx, qpc_bytes=qpc_bytes)
    bpc = PCIE.bytes_per_cycle
    assert parts["host A down"] - plain["host A down"] == pytest.approx(
        (qpc_bytes + cpls * PCIE.cpl_overhead) / bpc)
    assert parts["host B down"] == pytest.approx((qpc_bytes + cpls * PCIE.cpl_overhead) / bpc)
    assert parts["host B up"] - plain["host B up"] == pytest.approx(
        (reqs * PCIE.req_overhead + w + PCIE.req_overhead) / bpc)
    # Little's law: a miss holds its entry for at least one read latency.
    assert parts["context entries"] == pytest.approx(PCIE.read_latency / 16)
    # The best rung for 128 bytes is inline by MMIO (no reads of its own): the fills'
    # completion chunks are every outstanding read.
    assert plain["read tags"] == 0
    assert parts["read tags"] == pytest.approx(cpls * PCIE.read_latency / PCIE.tags)
    assert (cycles, res) == (max(parts["context entries"], parts["read tags"]),
                             max(("context entries", "read tags"), key=parts.get))
    with pytest.raises(ValueError, match="ctx lacks"):
        rate_bound(128, ctx=dict(req_misses=1))


def test_steady_saturation_counts_misses_in_the_steady_state():
    # 64 QPs in turn over 16 entries: every message misses at both nodes once warm.
    sat = steady_saturation(128, start=250, cap=1000, qps=64, popularity="round_robin")
    assert sat["ctx"]["req_misses"] == pytest.approx(1.0)
    assert sat["ctx"]["resp_misses"] == pytest.approx(1.0)
    one = steady_saturation(128, start=250, cap=1000)
    assert one["ctx"]["req_misses"] == 0 and one["ctx"]["resp_misses"] == 0


def test_the_old_transient_is_gone():
    # 200 messages of the pipelined rung once measured 3 cycles a message, faster than
    # the 4 beats of a 128-byte WRITE; the steady part of the run is not.
    assert saturation(128, 200, rung="pipelined") >= wire_beats(128)


def test_steady_saturation_is_stable_to_one_percent():
    sat = steady_saturation(128, start=250, cap=2000)
    (n1, c1), (n2, c2) = sat["estimates"][-2:]
    assert sat["stable"] and n2 == 2 * n1 and sat["cycles"] == c2
    assert abs(c2 - c1) <= SATURATION_TOLERANCE * c2
    assert sat["rung"] == LADDER[-1][0]


def test_one_qp_best_rung_latency_at_ten_percent():
    # The acceptance: p50 at most 35 cycles at 10 % load, 1 QP, best rung.
    row, per = rdma_load_run(128, 300, 0.1, service_cycles=wire_beats(128))
    assert row["rung"] == LADDER[-1][0]
    assert row["latency_p50_cycles"] <= 35
    assert (per["remote_write"] > per["arrival"]).all()


@pytest.mark.parametrize("call, name", [
    (lambda: rdma_load_run(128, 10, 0.5, rung="fastest"), "rung"),
    (lambda: rdma_load_run(256, 10, 0.5, rung=LADDER[-1][0]), "msg_bytes"),
    (lambda: rdma_load_run(128, 10, 0.5, issuer="gpu", rung=LADDER[-1][0]), "gpu"),
    (lambda: rdma_load_run(128, 10, 0.5, rung="sequential"), "sequential"),
    (lambda: rdma_load_run(128, 10, 0.5, ack_every=300), "ack_every"),
    (lambda: steady_saturation(128, tol=0), "tol"),
    (lambda: steady_saturation(128, start=100, cap=50), "cap"),
    (lambda: best_rung("fpga", 128), "issuer"),
])
def test_bad_knobs_name_themselves(call, name):
    with pytest.raises(ValueError, match=name):
        call()
