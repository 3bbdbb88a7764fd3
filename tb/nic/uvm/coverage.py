"""Functional coverage of the NIC environment, reported at the end of each test.

Bins (a group's bins are all declared up front, so a hole shows as a 0):

============  ========================================================================
group         bins
============  ========================================================================
opcode        ``STORE`` (the NIC's only opcode, :class:`spec.formats.nic.NicOp`)
size          each edge size (1, 63..65, 127..129, max_payload - 1 .. + 1,
              2 * max_payload, 4096) and each range between two edges
segments      frames per store: ``1``, ``2``, ``3+`` (cut every max_payload bytes)
error         every kind of :data:`ERROR_KINDS` driven
outcome       every receiver counter the RTL raised (frames_ok and the five drops)
dst_port      the switch port each store left by
route         ``src->port`` for every pair (loopback included)
framing       the run's framing; for L2 also ``l2 padded`` (frames under 60 bytes)
gap_rate      the stall rate of the store's player: ``0``, ``1-63``, ``64-127``,
              ``128-255``
gap_cycles    idle cycles seen before a store's first command beat, after the previous
              store of the same player: ``0``, ``1``, ``2-3``, ``4-15``, ``16+`` (bins
              below the header's whole beats are left out: unreachable)
============  ========================================================================

``COVERAGE_GOALS`` (ConfigDB, a tuple of group names) lists the groups a test requires
fully hit: ``check_phase`` fails on a hole there. ``report_phase`` logs every group
and merges the test's bins into ``coverage.json`` in the run folder::

    {"tests": {<test>: <report>}, "merged": <report>}
    <report> = {"framing": .., "seed": .., "groups": {<group>: {"bins": {<bin>: hits},
                "hit": n, "total": n}}, "hit": n, "total": n, "percent": p}
"""

import json
from pathlib import Path

from pyuvm import ConfigDB, uvm_component, uvm_tlm_analysis_fifo

from spec.formats.nic import NicOp, header_bytes, padded_bytes
from spec.nic import COUNTERS

from .items import ERROR_KINDS, MAX_SIZE, CommandObs, NodeObs, StoreItem, edge_sizes

__all__ = ["NicCoverage", "Covergroups", "merge_reports", "COVERAGE_FILE", "size_bins",
           "size_bin"]

COVERAGE_FILE = "coverage.json"
GAP_RATE_BINS = (("0", 0, 0), ("1-63", 1, 63), ("64-127", 64, 127), ("128-255", 128, 255))
GAP_CYCLE_BINS = (("0", 0, 0), ("1", 1, 1), ("2-3", 2, 3), ("4-15", 4, 15),
                  ("16+", 16, 1 << 32))


def size_bins(max_payload, limit=MAX_SIZE):
    """``(name, lo, hi)``: each edge size alone, and the range between two edges."""
    edges = edge_sizes(max_payload, limit)
    out = []
    for a, b in zip(edges, edges[1:] + [None], strict=True):
        out.append((str(a), a, a))
        if b is not None and b - a > 1:
            out.append((f"{a + 1}-{b - 1}", a + 1, b - 1))
    return out


def _bin(bins, value):
    for name, lo, hi in bins:
        if lo <= value <= hi:
            return name
    raise ValueError(f"{value} is in no bin of {[b[0] for b in bins]}")


def size_bin(size, max_payload, limit=MAX_SIZE):
    return _bin(size_bins(max_payload, limit), size)


class Covergroups:
    """The bins of one configuration and their hit counts (plain Python, no UVM)."""

    def __init__(self, cfg):
        self.cfg = cfg
        n = cfg.nodes
        self.limit = min(MAX_SIZE, cfg.window)
        self.sizes = size_bins(cfg.max_payload, self.limit)
        framing = [cfg.framing] + (["l2 padded"] if cfg.framing == "l2" else [])
        # Whole header beats go out before a store's first command beat is taken, so
        # gaps shorter than them cannot happen (L2 at 16 bytes: no "0" bin).
        least = header_bytes(cfg.framing) // cfg.width
        self.gap_bins = [b for b in GAP_CYCLE_BINS if b[2] >= least]
        names = {
            "opcode": [op.name for op in NicOp],
            "size": [b[0] for b in self.sizes],
            "segments": ["1", "2", "3+"],
            "error": list(ERROR_KINDS),
            "outcome": list(COUNTERS),
            "dst_port": [str(p) for p in range(n)],
            "route": [f"{s}->{d}" for s in range(n) for d in range(n)],
            "framing": framing,
            "gap_rate": [b[0] for b in GAP_RATE_BINS],
            "gap_cycles": [b[0] for b in self.gap_bins],
        }
        self.groups = {g: dict.fromkeys(bins, 0) for g, bins in names.items()}

    def hit(self, group, name, count=1):
        bins = self.groups[group]
        if name not in bins:
            raise KeyError(f"coverage: {name!r} is not a bin of {group} ({list(bins)})")
        bins[name] += count

    def sample_item(self, it):
        cfg = self.cfg
        port = cfg.port_of(it.dst)
        segs = it.segments(cfg)
        self.hit("opcode", NicOp.STORE.name)
        self.hit("size", _bin(self.sizes, it.size))
        self.hit("segments", str(len(segs)) if len(segs) < 3 else "3+")
        self.hit("error", it.error)
        self.hit("dst_port", str(port))
        self.hit("route", f"{it.src}->{port}")
        self.hit("gap_rate", _bin(GAP_RATE_BINS, it.gap))
        self.hit("framing", cfg.framing)
        h = header_bytes(cfg.framing)
        if any(padded_bytes(cfg.framing, len(s.payload)) > h + len(s.payload) for s in segs):
            self.hit("framing", "l2 padded")

    def sample_commands(self, cmds):
        """Idle cycles before each store, from the accept cycles of its command beats."""
        by_src = {}
        for o in sorted(cmds, key=lambda o: (o.src, o.index)):
            by_src.setdefault(o.src, []).append(o.stamps)
        for stores in by_src.values():
            for prev, cur in zip(stores, stores[1:], strict=False):
                if prev and cur:
                    self.hit("gap_cycles", _bin(self.gap_bins, cur[0] - prev[-1] - 1))

    def sample_node(self, node):
        for c in COUNTERS:
            if node.counters[c]:
                self.hit("outcome", c, node.counters[c])

    def report(self, **extra):
        groups = {g: {"bins": dict(b), "hit": sum(v > 0 for v in b.values()),
                      "total": len(b)} for g, b in self.groups.items()}
        return _totals({**extra, "groups": groups})


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


class NicCoverage(uvm_component):
    """Samples the driven items (``items``) and the observations (``observed``)."""

    def build_phase(self):
        self.cfg = ConfigDB().get(self, "", "NIC_CFG")
        self.test_name = ConfigDB().get(self, "", "TEST_NAME")
        self.goals = tuple(ConfigDB().get(self, "", "COVERAGE_GOALS", ()))
        self.items = uvm_tlm_analysis_fifo("items", self)
        self.observed = uvm_tlm_analysis_fifo("observed", self)
        self.cg = Covergroups(self.cfg)
        self.sampled = 0

    def extract_phase(self):
        cmds = []
        for fifo in (self.items, self.observed):
            while True:
                ok, t = fifo.try_get()
                if not ok:
                    break
                if isinstance(t, StoreItem):
                    self.cg.sample_item(t)
                    self.sampled += 1
                elif isinstance(t, CommandObs):
                    cmds.append(t)
                elif isinstance(t, NodeObs):
                    self.cg.sample_node(t)
        self.cg.sample_commands(cmds)

    def check_phase(self):
        assert self.sampled > 0, "coverage sampled no item"
        for g in self.goals:
            holes = [b for b, v in self.cg.groups[g].items() if not v]
            assert not holes, f"coverage goal {g}: bins never hit: {holes}"

    def report_phase(self):
        rep = self.cg.report(framing=self.cfg.framing, seed=self.cfg.seed,
                             items=self.sampled)
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
        data["merged"].update(framing=self.cfg.framing, seed=self.cfg.seed)
        path.write_text(json.dumps(data, indent=1))
