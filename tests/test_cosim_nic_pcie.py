"""The NIC with the ``pcie`` attachment (a host interface per node: the stores arrive as
host posted writes, the received ones leave as posted DMA writes) on Verilator and
Icarus, against the model, with a hand-computed oracle for the host-interface figures."""

import pytest

from analysis.fastpath import fast_point
from analysis.points import cycle_point
from pymodel.nic.system import NicSystemModel
from rtl.tops.nic_top import NicTop
from spec.metrics import row_metrics
from tb.nic.headline import run_point

#: The test top: the host interface moves 64-byte words, so the datapath is 64 bytes.
TOP = dict(width=64, nodes=2, link_latency=2, mem_words=256, max_payload=512)

#: Per 128-byte store, by hand from the TLP sizes of docs/host_interface.md (24 bytes per
#: host posted write and per posted DMA write, pcie-model): one host write into the
#: sender (128 + 24 bytes, down) and one DMA write out of the receiver (128 + 24, up).
ORACLE_128 = {"host_bytes": (128 + 24) + (128 + 24),
              "host_tlps": {"read_req": 0, "write": 1, "completion": 0, "mmio": 1}}


@pytest.mark.slow_variants("verilator-*", reason=(
    "a Verilator build of the PCIe-attached NIC for two tests (make test was over 10 minutes): "
    "Icarus runs both sizes on the same top"))
@pytest.mark.parametrize("msg_bytes", [128, 320])
def test_nic_pcie(sim, msg_bytes, test_id):
    """Frames, stamps, memory writes and their cycles, credits, receive counters,
    host-interface counters and memories: RTL = model (the row's ``mismatches``), and
    every metric's ``_rtl`` equals its ``_model``. 128-byte stores meet the oracle: 304
    host bytes and 2 TLPs each. 320 bytes cross the 256-byte MPS: each store is two host
    writes (256 + 64 bytes), two frames, two DMA writes (messages = host writes).
    24 stores of 128 B and 12 of 320 B size the players alike: one build for both."""
    assert ORACLE_128["host_bytes"] == 304
    stores = 24 if msg_bytes == 128 else 12
    row = run_point(sim, "l2", msg_bytes, stores, top=TOP, test_id=test_id,
                    attachment="pcie")
    assert row["mismatches"] == 0
    assert row["attachment"] == "pcie"
    for key in row_metrics("nic", host=True):
        assert row[f"{key}_rtl"] == row[f"{key}_model"], key
    if msg_bytes == 128:
        assert row["messages"] == 24
        for side in ("rtl", "model"):
            assert row[f"host_bytes_{side}"] == ORACLE_128["host_bytes"]
            assert row[f"host_tlps_{side}"] == ORACLE_128["host_tlps"]
    else:        # per host write: the mean of 256 + 24 and 64 + 24, at both nodes
        assert row["host_bytes_rtl"] == 2 * ((256 + 24) + (64 + 24)) / 2


def test_bad_attachment():
    with pytest.raises(ValueError, match="attachment"):
        NicTop(attachment="cxl")
    with pytest.raises(ValueError, match="attachment"):
        NicSystemModel(64, "l2", 2, 2, 256, 512, 8, attachment="cxl")
    with pytest.raises(ValueError, match="width"):
        NicTop(width=16, attachment="pcie")


def test_model_point_meets_the_oracle():
    """``analysis.points`` (the report's grid) runs the ``pcie`` attachment on the cycle
    model: 128-byte stores meet the hand oracle; the fast path says it does not cover it
    (the grid then falls back to the cycle model)."""
    pt = cycle_point("nic", msg_bytes=128, messages=40, framing="l2", attachment="pcie")
    assert pt["host_bytes"] == ORACLE_128["host_bytes"]
    assert pt["host_tlps"] == ORACLE_128["host_tlps"]
    assert pt["messages"] == 40
    assert cycle_point("nic", msg_bytes=128, messages=40, framing="l2")["host_bytes"] is None
    with pytest.raises(ValueError, match="outside the fast path"):
        fast_point("nic", msg_bytes=128, messages=40, framing="l2", attachment="pcie")


def test_report_host_table():
    """The report's host-interface table: the NIC row's bytes and TLPs are the oracle's,
    and each row's TLP overheads plus its payload give its bytes with the payload at
    least twice the message (no row is flagged short)."""
    from scripts.reporting.grid import model_row, rung_points
    from scripts.reporting.tables import host_table
    rows = [model_row(("nic", dict(framing="l2", msg_bytes=128, peers=1,
                                   attachment="pcie"), 40)),
            model_row(("rdma", dict(msg_bytes=128, qps=1, cache_entries=16), 40))]
    rows += [model_row((d, p, 40)) for d, p in rung_points()[1:3]]
    lines = host_table(rows, [])
    nic = next(line for line in lines if line.startswith("| NIC"))
    assert "1 x 24 + 1 x 24 = 48 | 304 |" in nic
    assert len(lines) == 2 + len(rows)
    assert not any("short" in line for line in lines)


@pytest.mark.parametrize("peers", [3, 15])
def test_model_pcie_with_several_peers(peers):
    """Round robin to several receivers behind their own host interfaces: each
    receiver's DMA writes give its own messages their remote-write cycles (the model
    indexed every message into each receiver's writes and failed for 3 or 15 peers).
    Every store takes the same path as with one peer, so the latency is the same."""
    one = cycle_point("nic", msg_bytes=128, messages=60, framing="l2", attachment="pcie",
                      peers=1)
    many = cycle_point("nic", msg_bytes=128, messages=60, framing="l2",
                       attachment="pcie", peers=peers)
    assert many["latency_cycles"] == one["latency_cycles"]
    assert many["completion_cycles"] == one["completion_cycles"]
