"""The pyuvm pieces both environments share (:mod:`tb.nic.uvm`, :mod:`tb.rdma.uvm`).

- Coverage: bins as ``(name, lo, hi)`` ranges (:func:`bin_of`), covergroups whose bins
  are all declared up front so that a hole shows as a 0 (:class:`Covergroups`), the
  report format and its merge over tests, seeds, simulators and framings
  (:func:`merge_reports`), and the coverage component (:class:`CoverageCollector`:
  goals checked in ``check_phase``, every group logged and merged into
  :data:`COVERAGE_FILE` in ``report_phase``).
- End-of-test checks: the scoreboard component's skeleton (:class:`ScoreboardBase`:
  the ``driven`` and ``observed`` FIFOs, the ``expected`` hook of the negative test)
  and :meth:`ScoreboardBase.finish`: the per-test summary in :data:`RESULTS_FILE`, then
  "every check passed", "checked at least one message", "nothing left over" and "no
  transaction after the check".
- Structure: the environment (:class:`EnvBase`: one agent, the scoreboard and the
  coverage collector, wired driver and monitor to both) and the agent
  (:class:`AgentBase`: sequencer and driver when active, monitor always); each design
  names its own components.

Report format (``coverage.json`` in the run folder)::

    {"tests": {<test>: <report>}, "merged": <report>}
    <report> = {..extra.., "groups": {<group>: {"bins": {<bin>: hits}, "hit": n,
                "total": n}}, "hit": n, "total": n, "percent": p}
"""

import json
from pathlib import Path

from pyuvm import (
    ConfigDB,
    uvm_agent,
    uvm_component,
    uvm_env,
    uvm_scoreboard,
    uvm_sequencer,
    uvm_tlm_analysis_fifo,
)

from tb.scoreboard import Scoreboard

__all__ = ["COVERAGE_FILE", "RESULTS_FILE", "GAP_RATE_BINS", "bin_of", "merge_reports",
           "Covergroups", "CoverageCollector", "ScoreboardBase", "record_result",
           "drain", "AgentBase", "EnvBase"]

#: Per-test coverage reports and their merge, in the run folder.
COVERAGE_FILE = "coverage.json"
#: Per-test scoreboard summaries, in the run folder.
RESULTS_FILE = "scoreboard.json"
#: Bins of a player's stall rate (its gaps).
GAP_RATE_BINS = (("0", 0, 0), ("1-63", 1, 63), ("64-127", 64, 127), ("128-255", 128, 255))


def bin_of(bins, value):
    """The name of the bin of ``bins`` (``(name, lo, hi)``, inclusive) holding ``value``."""
    for name, lo, hi in bins:
        if lo <= value <= hi:
            return name
    raise ValueError(f"{value} is in no bin of {[b[0] for b in bins]}")


def _totals(report):
    hit = sum(g["hit"] for g in report["groups"].values())
    total = sum(g["total"] for g in report["groups"].values())
    report.update(hit=hit, total=total, percent=round(100 * hit / total, 1) if total else 0)
    return report


def merge_reports(reports):
    """One report summing the bins of several (tests, seeds, simulators, framings); a
    bin present in any of them is a bin of the merge."""
    groups = {}
    for r in reports:
        for g, data in r["groups"].items():
            bins = groups.setdefault(g, {})
            for name, hits in data["bins"].items():
                bins[name] = bins.get(name, 0) + hits
    merged = {g: {"bins": b, "hit": sum(v > 0 for v in b.values()), "total": len(b)}
              for g, b in groups.items()}
    return _totals({"groups": merged})


class Covergroups:
    """Named groups of named bins and their hit counts (plain Python, no UVM).

    ``names`` maps each group to the names of all its bins.
    """

    def __init__(self, names):
        self.groups = {g: dict.fromkeys(bins, 0) for g, bins in names.items()}

    def hit(self, group, name, count=1):
        bins = self.groups[group]
        if name not in bins:
            raise KeyError(f"coverage: {name!r} is not a bin of {group} ({list(bins)})")
        bins[name] += count

    def holes(self, group):
        return [b for b, v in self.groups[group].items() if not v]

    def report(self, **extra):
        groups = {g: {"bins": dict(b), "hit": sum(v > 0 for v in b.values()),
                      "total": len(b)} for g, b in self.groups.items()}
        return _totals({**extra, "groups": groups})


class CoverageCollector(uvm_component):
    """Samples the driven items (``items``) and the observations (``observed``).

    Subclasses set :attr:`CFG_KEY` (the ConfigDB key of the environment's
    configuration), build their covergroups in :meth:`covergroups` and sample in
    ``extract_phase`` (counting the items in :attr:`sampled`); :meth:`report_extra` adds
    fields to the report. ``COVERAGE_GOALS`` (ConfigDB, a tuple of group names) lists the
    groups a test requires fully hit: ``check_phase`` fails on a hole there.
    """

    CFG_KEY = None

    def covergroups(self, cfg):
        raise NotImplementedError

    def report_extra(self):
        """Fields of the configuration written into every report (seed, framing...)."""
        return {"seed": self.cfg.seed}

    def build_phase(self):
        self.cfg = ConfigDB().get(self, "", self.CFG_KEY)
        self.test_name = ConfigDB().get(self, "", "TEST_NAME")
        self.goals = tuple(ConfigDB().get(self, "", "COVERAGE_GOALS", ()))
        self.items = uvm_tlm_analysis_fifo("items", self)
        self.observed = uvm_tlm_analysis_fifo("observed", self)
        self.cg = self.covergroups(self.cfg)
        self.sampled = 0

    def check_phase(self):
        assert self.sampled > 0, "coverage sampled no item"
        for g in self.goals:
            holes = self.cg.holes(g)
            assert not holes, f"coverage goal {g}: bins never hit: {holes}"

    def report_phase(self):
        rep = self.cg.report(**self.report_extra(), items=self.sampled)
        for g, data in rep["groups"].items():
            holes = [b for b, v in data["bins"].items() if not v]
            self.logger.info("coverage %-10s %2d/%-2d %s", g, data["hit"], data["total"],
                             f"holes: {', '.join(holes)}" if holes else "full")
        self.logger.info("coverage total %d/%d bins (%.1f %%)", rep["hit"], rep["total"],
                         rep["percent"])
        path = Path(COVERAGE_FILE)
        data = json.loads(path.read_text()) if path.exists() else {"tests": {}}
        data["tests"][self.test_name] = rep
        data["merged"] = merge_reports(list(data["tests"].values()))
        data["merged"].update(self.report_extra())
        path.write_text(json.dumps(data, indent=1))


def drain(fifo):
    """Every transaction waiting in an analysis FIFO, in order."""
    out = []
    while True:
        ok, item = fifo.try_get()
        if not ok:
            return out
        out.append(item)


def record_result(test, summary, path=RESULTS_FILE):
    """Merge one test's ``summary`` into the JSON file ``path``."""
    path = Path(path)
    data = json.loads(path.read_text()) if path.exists() else {}
    data[test] = summary
    path.write_text(json.dumps(data, indent=1))


class ScoreboardBase(uvm_scoreboard):
    """Fed by ``driven`` (the driver's ``ap``) and ``observed`` (the monitor's ``ap``).

    Subclasses set :attr:`CFG_KEY` and compare in ``check_phase``, then call
    :meth:`finish`.
    """

    CFG_KEY = None

    def build_phase(self):
        self.cfg = ConfigDB().get(self, "", self.CFG_KEY)
        self.test_name = ConfigDB().get(self, "", "TEST_NAME")
        self.driven = uvm_tlm_analysis_fifo("driven", self)
        self.observed = uvm_tlm_analysis_fifo("observed", self)

    def expected(self, want, *context):
        """The model's results as the comparisons use them (a hook for the negative
        test: a broken scoreboard corrupts one value here)."""
        return want

    def scoreboard(self):
        """A fresh :class:`tb.scoreboard.Scoreboard` logging to this component."""
        return Scoreboard(self.logger)

    def finish(self, sb, summary, *, left, musts=()):
        """The end of the test: record ``summary`` (with the scoreboard's counts and the
        first mismatches) in :data:`RESULTS_FILE` before any assertion, so that a
        failing test leaves it too; then every comparison of ``sb`` passed and it
        checked something; each ``(condition, message)`` of ``musts`` holds (e.g. "at
        least one frame was checked"); ``left`` observations were never compared (must
        be 0); nothing arrived after the check."""
        record_result(self.test_name, {
            "checked": sb.checked, "mismatch_count": len(sb.mismatches),
            "mismatches": sb.mismatches[:20], **summary, "left_over": left,
            "scoreboard": type(self).__name__})
        sb.check()
        for ok, message in musts:
            assert ok, message
        assert left == 0, f"{left} observations were left over (never compared)"
        assert not self.driven.can_get() and not self.observed.can_get(), (
            "transactions arrived after the check")


class AgentBase(uvm_agent):
    """Sequencer ``seqr`` + driver ``driver`` (active) and monitor ``monitor``.

    Subclasses set :attr:`DRIVER` and :attr:`MONITOR` (component classes, built with
    ``create`` so that a factory override applies).
    """

    DRIVER = None
    MONITOR = None

    def build_phase(self):
        super().build_phase()
        self.monitor = self.MONITOR.create("monitor", self)
        if self.active():
            self.seqr = uvm_sequencer("seqr", self)
            self.driver = self.DRIVER.create("driver", self)

    def connect_phase(self):
        if self.active():
            self.driver.seq_item_port.connect(self.seqr.seq_item_export)


class EnvBase(uvm_env):
    """One agent (``agent``), the scoreboard and the coverage collector: the driver's
    and the monitor's ``ap`` feed both (``driven``/``items`` and ``observed``).

    Subclasses set :attr:`AGENT`, :attr:`SCOREBOARD` and :attr:`COVERAGE` (component
    classes, built with ``create`` so that a factory override applies).
    """

    AGENT = None
    SCOREBOARD = None
    COVERAGE = None

    def build_phase(self):
        self.agent = self.AGENT.create("agent", self)
        self.scoreboard = self.SCOREBOARD.create("scoreboard", self)
        self.coverage = self.COVERAGE.create("coverage", self)

    def connect_phase(self):
        driver, monitor = self.agent.driver, self.agent.monitor
        driver.ap.connect(self.scoreboard.driven.analysis_export)
        driver.ap.connect(self.coverage.items.analysis_export)
        monitor.ap.connect(self.scoreboard.observed.analysis_export)
        monitor.ap.connect(self.coverage.observed.analysis_export)
