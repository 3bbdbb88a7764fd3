"""What the pyuvm co-simulations of tests/test_uvm_nic.py and tests/test_uvm_rdma.py share:
the checks of the files a run leaves in its folder (every scoreboard's summary, cocotb's
verdicts, the log) and the record each run writes for ``scripts/regress.py``.
"""

import json
import os
import time
import xml.etree.ElementTree as ET
from contextlib import contextmanager
from pathlib import Path

from tb.uvm_common import RESULTS_FILE

__all__ = ["check_scoreboards", "regress_record"]


def check_scoreboards(run_dir, good, negative, negative_mismatch):
    """The scoreboards' summaries (``scoreboard.json``) of a run folder, checked: each
    test of ``good`` checked something, at least one frame, found no mismatch and left
    nothing over; the ``negative`` test's broken scoreboard found exactly one mismatch,
    which ``negative_mismatch`` (a function of its text) accepts, and cocotb scored that
    failure as expected (a pass in ``results.xml``, "failed as expected" in the log); no
    test case failed or errored. Returns the summaries."""
    sb = json.loads((run_dir / RESULTS_FILE).read_text())
    for name in good:
        s = sb[name]
        assert s["mismatch_count"] == 0, f"{name}: {s['mismatches']}"
        assert s["checked"] > 0 and s["frames"] > 0 and s["left_over"] == 0, s
    neg = sb[negative]
    assert neg["scoreboard"] == "BrokenScoreboard"
    assert neg["mismatch_count"] == 1, neg
    assert negative_mismatch(neg["mismatches"][0]), neg
    cases = {c.get("name"): c for c in ET.parse(run_dir / "results.xml").iter("testcase")}
    assert set(good) | {negative} <= set(cases)
    assert not any(cases[n].find(t) is not None for n in cases for t in ("failure", "error"))
    log = (run_dir / "sim.log").read_text()
    assert negative in log and "failed as expected" in log
    return sb


class _Record:
    def __init__(self, rec):
        self.rec = rec
        self.t0 = time.perf_counter()

    def seconds(self):
        return round(time.perf_counter() - self.t0, 1)

    def ran(self, run_dir):
        """The simulation is over: its folder and its time (the checks not counted)."""
        self.rec.update(run_dir=str(run_dir), seconds=self.seconds())

    def passed(self, cov):
        """Every check passed: the merged coverage of ``cov`` (``coverage.json``)."""
        merged = cov["merged"]
        self.rec.update(status="pass", coverage=merged["percent"],
                        errors_hit=merged["groups"]["error"]["hit"],
                        coverage_groups={g: [d["hit"], d["total"]]
                                         for g, d in merged["groups"].items()})


@contextmanager
def regress_record(rec, *keys):
    """Records one co-simulation in ``rec`` (``status`` "fail" until ``passed``, the
    first line of the error that ended it, its seconds) and, when ``scripts/regress.py``
    asked for records (``REGRESS_DIR``), writes it there as
    ``<regression>-<rec[key]...>.json``, also when the run fails."""
    rec.setdefault("status", "fail")
    r = _Record(rec)
    try:
        yield r
    except BaseException as exc:
        rec["error"] = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        raise
    finally:
        rec.setdefault("seconds", r.seconds())
        folder = os.environ.get("REGRESS_DIR")
        if folder:
            name = "-".join(str(rec[k]) for k in ("regression", *keys))
            (Path(folder) / f"{name}.json").write_text(json.dumps(rec))
