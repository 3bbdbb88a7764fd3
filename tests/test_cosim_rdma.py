"""The RDMA engine (RdmaTop: pipelined requester and responder behind PCIe-like host
interfaces) in co-simulation against the golden model.

Every test compares, cycle for cycle, each beat on both links, each remote-write and CQE
mark, the cycle each MMIO word was taken, every counter of both engines, both host
interfaces and both links, and both whole host memories; and checks every frame with
scapy + zlib (independent of the RTL CRC), the CQEs per QP in order and the landed
payload bytes against what was posted (independent of the model).
"""

import pytest

from pymodel.pcap import read_pcapng
from spec.metrics import row_metrics
from spec.rdma_engine import LADDER
from tb.rdma.runner import run_rdma

TOP = {}          # one top (the defaults) for every test: one build per simulator
#: Cycles before the messages of a run with a warm-up start (the first message alone
#: fills both context caches).
WARMUP = 4000


def _run(sim, test_id, **params):
    run_rdma(TOP, params=params, sim=sim, test_id=test_id)


def test_rdma_writes_edge_sizes(sim, test_id):
    """Six WRITEs over two QPs, 1 byte to one MTU + 1 (two segments)."""
    _run(sim, test_id, kind="writes", messages=6, sizes=[1, 63, 65, 128, 4096, 4097], qps=2)


def test_rdma_bad_frames(sim, test_id):
    """Wrong ICRC, wrong FCS, unknown QPN, PSN ahead and behind, bad rkey, out of
    bounds, no write right, truncated, between good frames: each counted under its
    reason, NAKs where due, nothing else written."""
    _run(sim, test_id, kind="bad")


def test_rdma_qp_error_flush_and_reset(sim, test_id):
    """A WRITE with a wrong rkey on QP 0: REM_ACCESS_ERR, QP 0 enters ERR; its two
    WRITEs rung later complete with WR_FLUSH_ERR without a frame, their doorbell counted;
    the host's modify command moves it back to RTS and its next two WRITEs succeed; QP
    1's four WRITEs succeed throughout (the intent: ``qp_error_scenario``)."""
    _run(sim, test_id, kind="qp_error",
         expect=dict(req_qp_errors=1, req_flushed=2, req_doorbell_err_qp=1,
                     req_qp_modifies=1, resp_access_nak=1, req_cqe_writes=10,
                     req_frames=8))


@pytest.mark.slow_variants("icarus", reason=(
    "Verilator runs it; Icarus runs the same top in the other tests of this file"))
def test_rdma_batched_doorbells_over_qps(sim, test_id):
    """Doorbells of 4 WQEs over 3 QPs, one CQE per 2: the CQ order is not the posting
    order (asserted), and the intent check takes the CQEs per QP in order, as RC
    orders them."""
    _run(sim, test_id, kind="writes", messages=24, sizes=[128, 300], qps=3,
         knobs=dict(ring_every=4, signal_every=2), cq_order_differs=True)


@pytest.mark.parametrize("inject_stall", [(1, 0), (3, 32)], ids=["back_to_back", "gaps"])
def test_rdma_receive_overflow(sim, test_id, inject_stall):
    """Frames faster than the responder takes them while a context fill is outstanding:
    a frame whose first beat finds too few free payload beats or no header slot is
    dropped whole and counted as ``overflow``; the frames behind it on its QP get one
    PSN NAK, then are dropped as out of order; nothing else is lost or written (the
    model predicts which frames, cycle-exact)."""
    if sim == "icarus" and inject_stall != (1, 0):
        pytest.skip("Icarus runs the back-to-back case")
    _run(sim, test_id, kind="overflow", inject_stall=list(inject_stall),
         expect_min={"resp_overflow": 1, "resp_psn_nak": 1, "resp_out_of_order": 1})


@pytest.mark.parametrize("pmtu_log2", [8, 12])
def test_rdma_segmentation(sim, test_id, pmtu_log2):
    """Sizes around the path MTU, up to 16 KiB, over three QPs."""
    if sim == "icarus":
        pytest.skip("long scenario: Verilator only (Icarus runs the edge-size test)")
    mtu = 1 << pmtu_log2
    sizes = [1, mtu - 1, mtu, mtu + 1, 2 * mtu + 3, 16384]
    _run(sim, test_id, kind="writes", messages=len(sizes), sizes=sizes, qps=3,
         pmtu_log2=pmtu_log2)


@pytest.mark.slow_variants("verilator-256", reason="16 and 4096 QPs run")
@pytest.mark.parametrize("qps", [16, 256, 4096])
def test_rdma_many_qps(sim, test_id, qps):
    """Round robin over many QPs with a 16-entry context cache: misses, write-backs and
    entries held while their QP has work in flight, on both nodes, still exact."""
    if sim == "icarus":
        pytest.skip("long scenario: Verilator only")
    _run(sim, test_id, kind="writes", messages=100, sizes=[128, 64, 200], qps=qps)


@pytest.mark.parametrize("rung", [name for name, _ in LADDER])
def test_rdma_ladder_rungs(sim, test_id, rung):
    """Every rung of the optimisation ladder (one message at a time, pipelined, doorbell
    batching, WQEs by MMIO with inline data, unsignalled completions, ACK coalescing),
    128-byte messages back to back after a warm-up message."""
    if sim == "icarus" and rung not in ("pipelined", "+ACK coalescing"):
        pytest.skip("Icarus runs the plain and the last rung")
    messages = 6 if rung == "sequential" else 40
    expect_min = {"req_frames": messages}
    if "MMIO" in rung or "signalled" in rung or "ACK" in rung:
        expect_min["req_bf_writes"] = messages
    _run(sim, test_id, kind="writes", messages=messages, sizes=[128], qps=2, rung=rung,
         warmup=WARMUP, expect_min=expect_min)


def test_rdma_headline_rows_and_pcap(sim, tmp_path):
    """run_headline (shortened to three of its rows: pipelined, the best rung, the best
    rung at 4096 QPs over 16 entries; make sim runs them all): rows in the results
    format, RTL equal to the model on every metric, fewer host bytes per message on the
    best rung, context misses at 4096 QPs, a pcap that decodes as RoCEv2 with correct
    ICRCs."""
    if sim == "icarus":
        pytest.skip("Verilator only (the Icarus matrix runs the rungs)")
    from tb.rdma.headline import HEADLINE_ROWS, run_headline
    from tb.rdma.wirecheck import frame_problems

    pipelined, best = LADDER[1][0], LADDER[-1][0]
    rows = [r for r in HEADLINE_ROWS if r[1] in (pipelined, best) and r[4] == "pcie"
            and r[3] == 16]
    assert [(r[1], r[2]) for r in rows] == [(pipelined, 1), (best, 1), (best, 4096)]
    rows = run_headline(sim, tmp_path, messages=24, msg_bytes=128, latency_messages=2,
                        rows=rows)
    for r in rows:
        assert r["design"] == "rdma" and r["framing"] == "rocev2" and r["mismatches"] == 0
        for key in row_metrics("rdma"):
            assert r[f"{key}_rtl"] == r[f"{key}_model"], (r["rung"], key)
    assert rows[0]["host_bytes_rtl"] > rows[1]["host_bytes_rtl"]
    assert rows[2]["ctrl_ops_rtl"]["ctx_misses"] > 1 > rows[1]["ctrl_ops_rtl"]["ctx_misses"]
    frames = read_pcapng(tmp_path / "rdma.pcap")[1]
    assert frames and all(frame_problems(f) == [] for f in frames)

