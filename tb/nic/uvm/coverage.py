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
and merges the test's bins into ``coverage.json`` in the run folder (the format and the
collector are :mod:`tb.uvm_common`'s; the reports carry ``framing`` and ``seed``).
"""

from spec.formats.nic import NicOp, header_bytes, padded_bytes
from spec.nic import COUNTERS
from tb.uvm_common import COVERAGE_FILE, GAP_RATE_BINS, CoverageCollector, bin_of, merge_reports
from tb.uvm_common import Covergroups as _Covergroups

from .items import ERROR_KINDS, MAX_SIZE, CommandObs, NodeObs, StoreItem, edge_sizes

__all__ = ["NicCoverage", "Covergroups", "merge_reports", "COVERAGE_FILE", "size_bins",
           "size_bin"]

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


def size_bin(size, max_payload, limit=MAX_SIZE):
    return bin_of(size_bins(max_payload, limit), size)


class Covergroups(_Covergroups):
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
        super().__init__(names)

    def sample_item(self, it):
        cfg = self.cfg
        port = cfg.port_of(it.dst)
        segs = it.segments(cfg)
        self.hit("opcode", NicOp.STORE.name)
        self.hit("size", bin_of(self.sizes, it.size))
        self.hit("segments", str(len(segs)) if len(segs) < 3 else "3+")
        self.hit("error", it.error)
        self.hit("dst_port", str(port))
        self.hit("route", f"{it.src}->{port}")
        self.hit("gap_rate", bin_of(GAP_RATE_BINS, it.gap))
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
                    self.hit("gap_cycles", bin_of(self.gap_bins, cur[0] - prev[-1] - 1))

    def sample_node(self, node):
        for c in COUNTERS:
            if node.counters[c]:
                self.hit("outcome", c, node.counters[c])


class NicCoverage(CoverageCollector):
    """Samples the driven items (``items``) and the observations (``observed``)."""

    CFG_KEY = "NIC_CFG"

    def covergroups(self, cfg):
        return Covergroups(cfg)

    def report_extra(self):
        return {"framing": self.cfg.framing, "seed": self.cfg.seed}

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
