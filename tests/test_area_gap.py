"""The area of the "Where the gap comes from" rows: each row's parts (one endpoint) are
catalogue components built as the co-simulated tops build them, consecutive rows differ
by the hardware of their one factor, and the report section sums them from area.json.
No Yosys here."""

import pytest

from rtl.fabric.reliable_link import ReliableLink
from scripts.area_proxies import catalogue
from scripts.area_proxies.gap import gap_parts, parts_figures, row_parts
from spec.checks import silence
from spec.fabric_profiles import FABRIC_PROFILES
from spec.formats.nic import frame_beats
from spec.rdma import LINK_FRAME_BEATS
from spec.rdma_engine import TOP_DEFAULTS
from tb import gap_table

PROFILES = catalogue.GAP_PROFILES


def _diff(a, b):
    """``b - a`` as {component: change}, zero changes left out."""
    return {n: b.get(n, 0) - a.get(n, 0) for n in set(a) | set(b)
            if b.get(n, 0) != a.get(n, 0)}


def _params(name):
    return catalogue.COMPONENTS[name].params


def _changed_keys(old, new):
    """The parameter keys in which two entries differ."""
    a, b = _params(old), _params(new)
    return {k for k in set(a) | set(b) if a.get(k) != b.get(k)}


def _one(diff, sign, prefix):
    """The one component of ``diff`` with change ``sign`` whose name starts ``prefix``."""
    names = [n for n, c in diff.items() if c == sign and n.startswith(prefix)]
    assert len(names) == 1, (diff, sign, prefix)
    return names[0]


@pytest.mark.parametrize("profile", PROFILES)
def test_every_part_is_a_catalogue_entry(profile):
    rows = gap_parts(profile)
    assert len(rows) == len(gap_table.GAP_FACTORS)
    for (_, design, settings), (_, design2, parts) in zip(gap_table.gap_settings(profile),
                                                          rows, strict=True):
        assert design == design2
        assert parts and set(parts) <= set(catalogue.COMPONENTS)
        assert all(count == 1 for count in parts.values())       # one endpoint
        # A name the headline entries already had is the same entry.
        for name, (entry, _) in catalogue.gap_row_entries(design, settings).items():
            assert catalogue.COMPONENTS[name] == entry


@pytest.mark.parametrize("profile", PROFILES)
def test_rows_differ_by_their_factor(profile):
    rows = [p for _, _, p in gap_parts(profile)]
    board = profile == "board"
    # 0: the endpoint alone (integrated, credit completion, no retry).
    assert list(rows[0]) == ["nic_endpoint_w64_compact"]
    # 1 (same attachment): the NIC's host interface, nothing else.
    assert _diff(rows[0], rows[1]) == {"host_interface_pcie_nic": 1}
    # 2 (end-to-end completion): the completion blocks (generator, tracker and the
    # recorder of the completion records), and the endpoint with e2e.
    d = _diff(rows[1], rows[2])
    assert d == {"nic_endpoint_w64_compact": -1, "nic_endpoint_w64_compact_e2e": 1,
                 "completion_gen_w64_compact": 1, "outstanding_tracker": 1,
                 "completion_recorder": 1}
    assert _changed_keys("nic_endpoint_w64_compact", "nic_endpoint_w64_compact_e2e") \
        == {"completion"}
    # 3 (link-level reliability): one ReplayTx and one ReplayRx, nothing else.
    d = _diff(rows[2], rows[3])
    assert sorted(d.values()) == [1, 1]
    assert {catalogue.COMPONENTS[n].factory for n in d} == {"ReplayTx", "ReplayRx"}
    # 4 (fabric profile): nothing at board; else the endpoint (its credits) and the
    # retry ends (their buffers) for the fabric.
    d = _diff(rows[3], rows[4])
    if board:
        assert d == {}
    else:
        assert sorted(d.values()) == [-1, -1, -1, 1, 1, 1]
        old, new = _one(d, -1, "nic_endpoint"), _one(d, 1, "nic_endpoint")
        assert _changed_keys(old, new) == {"fabric", "link_latency"}
        for prefix in ("replay_tx", "replay_rx"):
            assert _changed_keys(_one(d, -1, prefix), _one(d, 1, prefix)) <= {"depth",
                                                                             "timeout"}
    # 5 (Ethernet header): the endpoint and completion generator for L2 frames; the
    # retry ends change only if the longest L2 frame has more beats.
    d = _diff(rows[4], rows[5])
    old, new = _one(d, -1, "nic_endpoint"), _one(d, 1, "nic_endpoint")
    assert _changed_keys(old, new) == {"framing"}
    assert _changed_keys(_one(d, -1, "completion_gen"), _one(d, 1, "completion_gen")) \
        == {"framing"}
    same_beats = (frame_beats(64, "l2", catalogue.NIC["max_payload"])
                  == frame_beats(64, "compact", catalogue.NIC["max_payload"]))
    assert len(d) == (4 if same_beats else 8)
    # 6 (QP engine): another design: the engine (RoCEv2, the header class of row 5), the
    # host interface, the retry ends.
    factories = {catalogue.COMPONENTS[n].factory for n in rows[6]}
    assert factories == {"RdmaEngine", "host_interface", "ReplayTx", "ReplayRx"}
    assert "header" not in _params(next(n for n in rows[6] if n.startswith("rdma_engine")))
    # 7 (4096 QPs): the QPs live in host memory; the same 16 cache entries.
    assert rows[7] == rows[6]


def test_nic_retry_ends_are_the_tops():
    """The NIC's retry ends are those NicTop(retry=True) builds on each fabric."""
    from rtl.tops.nic_top import NicTop

    for profile in PROFILES:
        s = gap_table.gap_settings(profile)[4][2]                 # link retry, profile
        tx, rx = (n for n in row_parts("nic", s) if n.startswith("replay_"))
        params = dict(catalogue.NIC, link_latency=FABRIC_PROFILES[profile].link)
        top = NicTop(items=1, events=1, retry=True, fabric=profile, **params)
        silence(top)
        up, down = top.links[0]
        assert (up.tx.depth, up.tx.timeout, up.tx.max_frame_beats) == (
            _params(tx)["depth"], _params(tx)["timeout"], _params(tx)["max_frame_beats"])
        assert down.rx.depth == _params(rx)["depth"]


def test_rdma_retry_ends_and_engine_are_the_tops():
    """The RDMA rows' retry ends are a ReliableLink of one link of the profile (the NIC's
    link latency) for RDMA frames, and the engine has the header, window records and
    timeout that tb.rdma.headline_switch gives the rows' RdmaFabricTop on the row's
    fabric (the records sized to the row's rung)."""
    from analysis.rdma.point import knobs_of
    from tb.rdma.headline_switch import fabric_top, reads_host

    for profile in PROFILES:
        for _, design, s in gap_table.gap_settings(profile)[6:]:
            parts = row_parts(design, s)
            link = ReliableLink(64, FABRIC_PROFILES[profile].link, LINK_FRAME_BEATS)
            tx = next(n for n in parts if n.startswith("replay_tx"))
            rx = next(n for n in parts if n.startswith("replay_rx"))
            assert (_params(tx)["depth"], _params(tx)["timeout"]) == (link.tx.depth,
                                                                      link.tx.timeout)
            assert _params(tx)["max_frame_beats"] == LINK_FRAME_BEATS
            assert _params(rx)["depth"] == link.rx.depth
            engine = _params(next(n for n in parts if n.startswith("rdma_engine")))
            top = fabric_top(s["attachment"], profile, True, s["header"], s["cache_entries"],
                             reads_host(knobs_of(s["rung"], None)))
            for key in ("header", "records", "timeout"):       # the top's defaults
                assert engine.get(key, TOP_DEFAULTS.get(key)) == top.get(
                    key, TOP_DEFAULTS.get(key)), key
            assert engine["cache_entries"] == s["cache_entries"]
            silence(link)


def test_pod_endpoint_has_the_pod_credits():
    from rtl.tops.area_wrappers import nic_part
    from spec.fabric_profiles import nic_top_credits

    node = nic_part(**_params("nic_endpoint_w64_compact_e2e_pod"))
    silence(node)
    assert node.tx.max_credits == nic_top_credits("pod", 64, catalogue.NIC["max_payload"])
    assert node.cret is None                                  # the credit return is fabric


@pytest.mark.parametrize("design,change,named", [
    ("nic", dict(attachment="on_die"), "attachment"),
    ("nic", dict(completion="bogus"), "completion"),
    ("nic", dict(reliability="bogus"), "reliability"),
    ("rdma", dict(attachment="integrated"), "attachment"),
    ("switch", {}, "design"),
])
def test_bad_settings_named(design, change, named):
    row = 3 if design == "nic" else 7
    settings = dict(gap_table.gap_settings("board")[row][2], **change)
    with pytest.raises(ValueError, match=named):
        row_parts(design, settings)


def test_nic_part_without_the_block_named():
    from rtl.tops.area_wrappers import nic_part

    with pytest.raises(ValueError, match="completion_gen"):
        nic_part("completion_gen", **dict(catalogue.NIC, framing="compact"))


def test_parts_figures_sum_counts():
    figures = {"a": {k: 1 for k in catalogue.FIGURES},
               "b": {k: 10 for k in catalogue.FIGURES}}
    assert parts_figures({"a": 2, "b": 1}, figures)["lut4"] == 12
    assert parts_figures({"a": 1, "c": 1}, figures) is None


def _fake_area(names, lut4=1):
    """An area.json with every component of ``names``: ``lut4`` LUT4 each, 2 FF bits,
    and memory bits only in the NIC's host interface (1000)."""
    return {"components": [
        {"component": n, "lut4": lut4, "ff_bits": 2, "rom_bits": 0, "cells": 3,
         "mem_bits": 1000 if n == "host_interface_pcie_nic" else 0} for n in names]}


def _section_rows(area):
    from scripts.reporting.gap import gap_section

    jobs = gap_table.gap_jobs("icarus", PROFILES, messages=10, msg_bytes=128)
    results = [{"design": "nic", "latency_cycles_rtl": 11, "mismatches": 0} for _ in jobs]
    rows = gap_table.finish_gap(results, PROFILES, 10, 128)
    md = gap_section(rows, PROFILES, 10, 128, "icarus", area).splitlines()
    header = next(line for line in md if line.startswith("| # |"))
    titles = [c.strip() for c in header.strip("|").split("|")]
    table = [[c.strip() for c in line.strip("|").split("|")] for line in md
             if line.startswith("| ") and line != header]
    return titles, table, md


def test_report_section_area_columns():
    names = {n for p in PROFILES for _, _, parts in gap_parts(p) for n in parts}
    titles, table, md = _section_rows(_fake_area(names))
    assert titles[-3:] == ["LUT4", "FF bits", "mem bits"]
    board = table[:len(gap_table.GAP_FACTORS)]
    # One LUT4 per part: row 0 the endpoint; 1 + host interface; 2 + generator and
    # tracker and recorder; 3 + two retry ends; 4 and 5 swap parts; 6 engine,
    # interface, two ends.
    assert [r[-3] for r in board] == ["1", "2", "5", "7", "7", "7", "4", "4"]
    assert [r[-2] for r in board] == ["2", "4", "10", "14", "14", "14", "8", "8"]
    assert [r[-1] for r in board] == ["0"] + ["1,000"] * 5 + ["0"] * 2
    assert any(line.startswith("Parts per row") and "+host_interface_pcie_nic" in line
               for line in md)


def test_report_section_area_missing_parts_dash():
    # An old area.json without the gap rows' parts: only the headline's RDMA engine, host
    # interface and NIC retry ends are there, so every row lacks a part.
    old = _fake_area(["rdma_engine_c16", "host_interface_pcie", "replay_tx_w64",
                      "replay_rx_w64"], lut4=5000)
    _, table, _ = _section_rows(old)
    assert all(r[-3:] == ["-", "-", "-"] for r in table)
    _, table, _ = _section_rows(None)
    assert all(r[-3:] == ["-", "-", "-"] for r in table)
    # Only the board RDMA rows' parts present: those rows get figures, the rest "-".
    some = _fake_area(["rdma_engine_c16", "host_interface_pcie", "replay_tx_w64_rdma",
                       "replay_rx_w64_rdma"], lut4=5000)
    _, table, _ = _section_rows(some)
    assert [r[-3] for r in table[:8]] == ["-"] * 6 + ["20,000"] * 2
    assert all(r[-3] == "-" for r in table[8:])
