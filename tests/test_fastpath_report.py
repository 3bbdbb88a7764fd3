"""The report's fast-path check on the points it co-simulates, without a simulator.

`make report` runs every point of :data:`scripts.reporting.rtl_subset.RTL_POINTS` on the
RTL against the cycle-level model and compares the fast path's figures for the same
point with the model's (:func:`scripts.reporting.rtl_subset.fast_path_differs`); a
difference beyond the fast path's tolerance fails the report. The RTL equals the
cycle-level model (the co-simulation tests check that), so the comparison needs the
model only: here it runs on exactly those points, with the message counts the report
uses for them (the report's default ``--rtl-messages``), each point's cycle-level run
once. The second part checks that report.md's summary counts the failed RTL points as
`make report`'s exit status does.
"""

import argparse

import pytest

from analysis.points import cycle_point
from scripts import report
from scripts.reporting import rtl_subset, tables
from scripts.reporting.grid import model_knobs
from scripts.reporting.rtl_subset import RTL_POINTS, fast_path_differs, rtl_messages
from spec.metrics import row_metrics


@pytest.fixture(scope="module")
def rtl_default_messages(tmp_path_factory):
    """The report's ``--rtl-messages`` default, from its own parser: ``main`` runs up to
    the RTL subset (the model grid replaced by nothing), which records the count."""
    captured = {}

    def stop(sim, jobs, messages, *rest):
        captured["messages"] = messages
        raise SystemExit(0)

    mp = pytest.MonkeyPatch()
    mp.setattr(report, "run_model_grid", lambda *a, **k: [])
    mp.setattr(report, "run_rtl_subset", stop)
    try:
        with pytest.raises(SystemExit):
            report.main(["--no-area", "--no-load", "--no-inference", "--no-gap",
                         "--no-spectrum", "--no-mem-ops",
                         "--out", str(tmp_path_factory.mktemp("report"))])
    finally:
        mp.undo()
    return captured["messages"]


@pytest.mark.slow_variants("rdma-128-256-16", reason=(
    "every lookup a miss: test_fastpath.py's 64 QPs over 16 entries checks the fast path in "
    "that regime in make test, and make report compares this point with the RTL itself"))
@pytest.mark.parametrize("design,point", RTL_POINTS,
                         ids=["-".join(f"{v}" for v in [d, *p.values()])
                              for d, p in RTL_POINTS])
def test_fast_path_agrees_on_the_report_rtl_points(design, point, rtl_default_messages):
    """The report's comparison, on one of its co-simulated points, with the cycle-level
    model in the RTL's place: no metric may differ beyond the fast path's tolerance.
    A point the fast path does not cover is allowed (the report then shows the cycle
    model's figures); it must say so with a reason."""
    n = rtl_messages(design, point, rtl_default_messages)
    model = cycle_point(design, msg_bytes=point["msg_bytes"], messages=n,
                        **model_knobs(design, point))
    got = fast_path_differs(design, point, n, model)
    if isinstance(got, str):
        assert got.startswith("not covered: ") and len(got) > len("not covered: ")
    else:
        assert got == [], f"fast path differs in {got} at {point}, {n} messages"


def test_rtl_messages_rule():
    """The message counts of the RTL subset, by hand from the rule: two passes over 256
    to 4095 QPs plus 88, a quarter (at least 40) for NIC stores of 4096 B, and for the
    RDMA engine at most what the top's host memories hold (2**16 words of 64 B, a
    quarter of it per end's buffers: 2**16 * 64 / 4 / 4096 = 256 messages of 4096 B)."""
    assert rtl_messages("rdma", dict(msg_bytes=128, qps=1), 200) == 200
    assert rtl_messages("rdma", dict(msg_bytes=128, qps=256), 200) == 2 * 256 + 88
    assert rtl_messages("rdma", dict(msg_bytes=128, qps=256), 1000) == 1000
    assert rtl_messages("rdma", dict(msg_bytes=128, qps=4096), 200) == 200
    assert rtl_messages("rdma", dict(msg_bytes=4096, qps=1), 200) == 200
    assert rtl_messages("rdma", dict(msg_bytes=4096, qps=1), 1000) == 256
    assert rtl_messages("nic", dict(msg_bytes=4096, peers=1), 200) == 50
    assert rtl_messages("nic", dict(msg_bytes=4096, peers=1), 100) == 40
    assert rtl_messages("nic", dict(msg_bytes=1024, peers=1), 200) == 200


def test_fast_path_differs_flags_a_drift():
    """A model figure moved beyond the tolerance is reported by name; one within it is
    not (the fast path's own figures, one of them scaled by hand)."""
    from analysis.fastpath import fast_point
    from analysis.rdma.fastpath import TOLERANCES
    point = dict(msg_bytes=128, qps=1, cache_entries=16)
    fast = fast_point("rdma", msg_bytes=128, messages=40, **model_knobs("rdma", point))
    keys = row_metrics("rdma")
    model = {k: fast[k] for k in keys}
    assert fast_path_differs("rdma", point, 40, model) == []
    tol = TOLERANCES["ii_cycles"]
    model["ii_cycles"] = fast["ii_cycles"] / (1 + tol / 2)
    assert fast_path_differs("rdma", point, 40, model) == []
    model["ii_cycles"] = fast["ii_cycles"] / (1 + 2 * tol)
    assert fast_path_differs("rdma", point, 40, model) == ["ii_cycles"]
    model["wire_bytes"] = fast["wire_bytes"] + 1      # a count: exact
    assert fast_path_differs("rdma", point, 40, model) == ["ii_cycles", "wire_bytes"]


# -- report.md's summary and the exit status ------------------------------------------

def _row(design="rdma", mismatches=0, fast=(), error=None, msg_bytes=128):
    row = {"design": design, "framing": "rocev2", "msg_bytes": msg_bytes, "qps": 1,
           "cache_entries": 16, "messages": 200, "mismatches": mismatches,
           "fast_path_differs": list(fast) if not isinstance(fast, str) else fast}
    if error:
        row["error"] = error
        row.pop("fast_path_differs")
    return row


#: Six RTL rows: clean, clean with a point the fast path does not cover, a mismatch,
#: an error, a fast-path difference, and a mismatch with a fast-path difference. By
#: hand: the last four fail, the first two do not.
FAKE_RTL = [_row(), _row(fast="not covered: 2 messages", msg_bytes=8),
            _row(mismatches=3, msg_bytes=64), _row(mismatches=None, error="boom",
                                                  msg_bytes=256),
            _row(fast=["ii_cycles"], msg_bytes=512),
            _row(mismatches=1, fast=["ii_cycles"], msg_bytes=1024)]


def test_row_fails_by_hand():
    assert [rtl_subset.row_fails(r) for r in FAKE_RTL] == [False, False, True, True, True,
                                                           True]


def test_report_summary_agrees_with_exit_status(tmp_path, monkeypatch):
    """`make report` on fake RTL rows (no simulation, no model grid): report.md's
    summary says 4 of 6 failed (by hand, :data:`FAKE_RTL`), names the fast-path
    difference, and the exit status is 1; with the clean rows only, 0 of 2 and 0."""
    for rows, failed, status in ((FAKE_RTL, 4, 1), (FAKE_RTL[:2], 0, 0)):
        out = tmp_path / str(len(rows))
        monkeypatch.setattr(report, "run_model_grid", lambda *a, **k: [])
        monkeypatch.setattr(report, "run_rtl_subset", lambda *a, _r=rows, **k: _r)
        monkeypatch.setattr(report, "plots", lambda *a, **k: [])
        code = report.main(["--no-area", "--no-load", "--no-inference", "--no-gap",
                            "--no-spectrum", "--no-mem-ops",
                            "--out", str(out)])
        md = (out / "report.md").read_text()
        assert code == status
        assert f": {failed} of {len(rows)}." in md
        if failed:
            assert "- rdma 512 B: fast path differs from the cycle model: ii_cycles" in md
            assert "- rdma 256 B: boom" in md


def test_write_report_summary_counts_row_fails(tmp_path):
    """tables.write_report's summary line on its own: the count is the rows for which
    :func:`scripts.reporting.rtl_subset.row_fails` holds (4 of 6, by hand)."""
    args = argparse.Namespace(sim="verilator")
    tables.write_report([], FAKE_RTL, None, [], tmp_path, args, 0.0)
    md = (tmp_path / "report.md").read_text()
    line = next(x for x in md.splitlines() if x.startswith("RTL points with"))
    assert line.endswith(": 4 of 6.")
