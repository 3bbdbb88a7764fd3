"""The report's "Under load" section on a reduced grid (no simulator): rows, knees,
tables and plots are produced from the model and agree with the runner they call."""

import pytest

from scripts.executor import make_executor
from scripts.reporting import load as section


def test_knee_is_the_first_doubling():
    rows = [{"load": 0.1, "latency_p99_cycles": 100}, {"load": 0.5, "latency_p99_cycles": 150},
            {"load": 0.7, "latency_p99_cycles": 200}, {"load": 0.9, "latency_p99_cycles": 900}]
    assert section.knee(rows[::-1]) == 0.7
    assert section.knee(rows[:2]) is None


def test_section_on_a_reduced_grid(tmp_path, monkeypatch):
    monkeypatch.setattr(section, "LOADS", (0.2, 0.9))
    monkeypatch.setattr(section, "RDMA_CURVES", (
        ("RDMA 1 QP / 16 entries", dict(qps=1)),
        ("RDMA 64 QPs uniform / 16 entries", dict(qps=64, popularity="uniform"))))
    monkeypatch.setattr(section, "ISSUER_NAMES", ("none", "cpu"))
    monkeypatch.setattr(section, "INCASTS", (("incast 3->1", 4),))
    monkeypatch.setattr(section, "INCAST_LOADS", (0.9,))
    monkeypatch.setattr(section, "SATURATION_POINTS", ())
    monkeypatch.setattr(section, "SATURATION_RUN", dict(start=30, cap=60))
    with make_executor(1) as ex:
        md = section.load_section(tmp_path, ex, messages=30)
    assert (tmp_path / "load_p99.png").stat().st_size > 0
    assert (tmp_path / "load_cdf.png").stat().st_size > 0
    assert (tmp_path / "load_percentiles.png").stat().st_size > 0
    doc = __import__("json").loads((tmp_path / "load.json").read_text())
    rows = doc["model"]
    # 2 RDMA curves and the NIC's, 2 loads each; incast 3->1 of both designs.
    assert len([r for r in rows if r["group"] == "curve"]) == 6
    assert sorted(r["curve"] for r in rows if r["group"] == "incast") == [
        "NIC incast 3->1", "RDMA incast 3->1"]
    assert len([r for r in rows if r["group"] == "issuer"]) == 4
    # Each row is the runner's own result for that point.
    from analysis.load.rdma import rdma_load_run
    r = next(r for r in rows if r["curve"].startswith("RDMA 64") and r["load"] == 0.9)
    again, _ = rdma_load_run(128, 30, 0.9, service_cycles=r["service_cycles"],
                             **r["knobs"])
    assert again["latency_p99_cycles"] == r["latency_p99_cycles"]
    for r in rows:
        assert (r["latency_p50_cycles"] <= r["latency_p90_cycles"] <= r["latency_p99_cycles"]
                <= r["latency_p999_cycles"] <= r["latency_max_cycles"])
    assert "## Under load" in md and "RDMA 1 QP, issuer cpu" in md
    assert "NIC L2 pair" in md and "RDMA incast 3->1" in md
    # results.json carries the section's rows in the SPEC.md format (model rows here).
    res = __import__("json").loads((tmp_path / "results.json").read_text())
    load_rows = [r for r in res if "load" in r]
    assert len(load_rows) == len(rows) and all(r["simulator"] == "model" for r in load_rows)
    assert all("latency_p999_cycles_model" in r and "latency_p99_cycles_rtl" not in r
               for r in load_rows)
    # Saturation rows: one per curve of the engine alone, never above their bound.
    sat = [r for r in res if r.get("kind") == "saturation"]
    assert sorted((r["qps"], r["popularity"]) for r in sat) == [(1, "round_robin"),
                                                                (64, "uniform")]
    assert all(r["msgs_per_s"] <= r["bound_msgs_per_s"] and r["cache_ways"] == 1
               and r["bound"] for r in sat)
    assert "### Saturation" in md


def test_fabric_rtl_point_row_names_its_nodes():
    """The RTL subset's multi-node RDMA point (RdmaFabricTop) carries ``nodes`` in its
    results row, as the model's multi-node rows do."""
    from scripts.reporting.load_rows import results_rows
    from scripts.reporting.load_rtl import RTL_POINTS

    kind, name, knobs, load = next(p for p in RTL_POINTS if p[0] == "fabric")
    rtl = {"point": name, "simulator": "verilator", "load": load, "knobs": knobs,
           "messages": 24, "latency_p99_cycles_rtl": 5, "latency_p99_cycles_model": 5,
           "mismatches": 0}
    row = results_rows([], [rtl])[0]
    assert row["design"] == "rdma" and row["nodes"] > 2
    assert row["latency_p99_cycles_rtl"] == row["latency_p99_cycles_model"]


def test_saturation_rows_carry_the_points_design_fields():
    """A saturation row holds every design field of its load point: the point's value
    where it sets one, the load point's default where it does not."""
    from analysis.load.rdma_knobs import LOAD_POINT_FIELDS, RDMA_LOAD_DEFAULTS
    from scripts.reporting.load_rows import saturation_rows
    ways = next(k for _, k in section.SATURATION_POINTS if len(k) == 4)
    sat = {"p": {"cycles": 10.0, "ctx": None, "rung": "r", "messages": 8, "stable": True}}
    (row,) = saturation_rows(sat, {"p": ways})
    for f in LOAD_POINT_FIELDS + ("popularity",):
        assert row[f] == ways.get(f, RDMA_LOAD_DEFAULTS[f]), f
    assert set(ways) < set(row) and row["msgs_per_s"] == 1e8


def test_saturation_points_file_is_checked_before_any_run(tmp_path):
    """The saturation points' file: every point's knobs checked as a load point's when
    read; a bad point is refused naming the file, the point and the knob."""
    assert section.SATURATION_POINTS, "the report measures saturation points"
    bad = tmp_path / "points.toml"
    bad.write_text('[[point]]\nlabel = "a"\nknobs = { qps = 4 }\n'
                   '[[point]]\nlabel = "b"\nknobs = { qps = 64, cache_entries = 24 }\n')
    with pytest.raises(ValueError, match=r"points.toml, point 2 \(b\): "
                                     r"cache_entries"):
        section._points(bad)
    bad.write_text('[[point]]\nlabel = "a"\nqps = 4\n')
    with pytest.raises(ValueError, match="point 1: a point is a label"):
        section._points(bad)
