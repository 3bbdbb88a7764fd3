"""The RDMA engine (RdmaTop) in co-simulation against the golden model.

Every test compares, cycle for cycle, each beat on both links, each remote write and
CQE event, the doorbell accept cycles, every counter and both whole host memories, and
checks every frame with scapy + zlib (independent of the RTL CRC).
"""

import pytest

from spec.metrics import row_metrics
from tb.rdma.runner import run_rdma

TOP = {}          # one top (the defaults) for every test: one build per simulator


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


@pytest.mark.parametrize("inject_stall", [(1, 0), (3, 64)], ids=["back_to_back", "gaps"])
def test_rdma_receive_overflow(sim, test_id, inject_stall):
    """Frames faster than the responder takes them: a frame whose first beat finds no
    frame slot or too few free beats is dropped whole and counted as ``overflow``; the
    frames behind it on its QP get one PSN NAK, then are dropped as out of order;
    nothing else is lost or written (the model predicts which frames, cycle-exact)."""
    if sim == "icarus" and inject_stall != (1, 0):
        pytest.skip("Icarus runs the back-to-back case")
    _run(sim, test_id, kind="overflow", inject_stall=list(inject_stall),
         expect_min={"resp_overflow": 1, "resp_psn_nak": 1, "resp_out_of_order": 1})


@pytest.mark.parametrize("pmtu_log2", [8, 12])
def test_rdma_segmentation(sim, test_id, pmtu_log2):
    """Sizes around the path MTU, up to 16 KiB, with doorbell stalls."""
    if sim == "icarus":
        pytest.skip("long scenario: Verilator only (Icarus runs the edge-size test)")
    mtu = 1 << pmtu_log2
    sizes = [1, mtu - 1, mtu, mtu + 1, 2 * mtu + 3, 16384]
    _run(sim, test_id, kind="writes", messages=len(sizes), sizes=sizes, qps=3,
         pmtu_log2=pmtu_log2, db_stall=[5, 128])


@pytest.mark.parametrize("qps", [16, 256, 4096])
def test_rdma_many_qps(sim, test_id, qps):
    """Round robin over many QPs with a 16-entry context cache: misses and write-backs
    on both nodes, still exact."""
    if sim == "icarus":
        pytest.skip("long scenario: Verilator only")
    _run(sim, test_id, kind="writes", messages=100, sizes=[128, 64, 200], qps=qps)


def test_rdma_headline_rows_and_pcap(sim, tmp_path):
    """run_headline (shortened): rows in the results format, RTL equal to the model, more
    cycles per message and context misses with 4096 QPs than with 1, a pcap that
    decodes as RoCEv2 with correct ICRCs."""
    if sim == "icarus":
        pytest.skip("Verilator only (the Icarus matrix runs the edge-size test)")
    from pymodel.rdma.frames import ETH_OVERHEAD
    from tb.rdma.headline import run_headline
    from tb.rdma.wirecheck import frame_problems

    rows = run_headline(sim, tmp_path, messages=24, msg_bytes=128)
    assert [r["qps"] for r in rows] == [1, 4096]
    for r in rows:
        assert r["design"] == "rdma" and r["framing"] == "rocev2" and r["mismatches"] == 0
        for key in row_metrics("rdma"):
            assert r[f"{key}_rtl"] == r[f"{key}_model"], key
        ops = r["ctrl_ops_rtl"]
        for op in ("doorbells", "wqe_reads", "ctx_lookups", "acks_sent", "cqe_writes"):
            assert ops[op] >= 1, op
    one, many = rows
    assert many["ctrl_ops_rtl"]["ctx_misses"] > one["ctrl_ops_rtl"]["ctx_misses"]
    assert many["ii_cycles_rtl"] > one["ii_cycles_rtl"]
    frames = _pcap_frames(tmp_path / "rdma.pcap")
    assert len(frames) == 2 * 2 * 24                  # a WRITE ONLY and an ACK per message
    assert all(frame_problems(f) == [] for f in frames)
    assert rows[0]["wire_bytes_rtl"] == sum(len(f) + ETH_OVERHEAD for f in frames) / 48


def _pcap_frames(path):
    import struct
    raw = path.read_bytes()
    out, pos = [], 0
    while pos < len(raw):
        kind, size = struct.unpack_from("<II", raw, pos)
        if kind == 6:
            cap = struct.unpack_from("<I", raw, pos + 20)[0]
            out.append(raw[pos + 28:pos + 28 + cap])
        pos += size
    return out
