"""Functional coverage of the RDMA environment, reported at the end of each test.

Bins (a group's bins are all declared up front, so a hole shows as a 0):

============  ========================================================================
group         bins
============  ========================================================================
opcode        frames seen on the links: ``WRITE_FIRST``, ``WRITE_MIDDLE``,
              ``WRITE_LAST``, ``WRITE_ONLY`` (A->B, the requester's and injected),
              ``ACK``, ``NAK_PSN_SEQUENCE``, ``NAK_REMOTE_ACCESS`` (B->A)
size          relative to the item's path MTU: 1, 63, 64, 65, mtu-1, mtu, mtu+1,
              2mtu-1, 2mtu, 2mtu+1, 4mtu (the largest) and each range between two
pmtu          the item's path MTU: 256 .. 4096
segments      frames per message: 1, 2, 3+
error         every kind of :data:`ERROR_KINDS` driven
variant       every ``kind/variant`` of :data:`VARIANTS` driven (how the error is made)
outcome       every responder counter the RTL raised: ``frames_ok`` and the drop
              reasons (``overflow`` is left out: see docs/uvm.md, limits)
cqe_status    CQE statuses written: ``SUCCESS``, ``REM_ACCESS_ERR``
qp_count      QPs (contexts) of the doorbell run against the cache entries: ``1``,
              ``<cache``, ``=cache``, ``>cache``
cache         ``req hit``, ``req miss``, ``req writeback``, ``resp hit``, ``resp miss``,
              ``resp writeback`` (from the engines' counters)
gap_rate      the doorbell player's stall rate: 0, 1-63, 64-127, 128-255
batch         WQEs one doorbell covers: ``1``, ``2``, ``3+``
psn_wrap      a message whose PSNs wrap from 0xFFFFFF to 0: ``wrap``
============  ========================================================================

``COVERAGE_GOALS`` (ConfigDB, a tuple of group names) lists the groups a test requires
fully hit: ``check_phase`` fails on a hole there. ``report_phase`` logs every group and
merges the test's bins into ``coverage.json`` in the run folder (the format and the
collector are :mod:`tb.uvm_common`'s, shared with the NIC environment).
"""

from spec.formats.roce import ACK_HEADER, CqeStatus, OpCode, Syndrome
from spec.rdma import DROP_REASONS
from tb.uvm_common import COVERAGE_FILE, GAP_RATE_BINS, CoverageCollector, bin_of
from tb.uvm_common import Covergroups as _Covergroups

from .items import ERROR_KINDS, VARIANTS, RunObs, WriteItem, edge_sizes
from .plan import RunPlan, read_cqes, whole_frames

__all__ = ["RdmaCoverage", "Covergroups", "size_bins", "size_bin", "OUTCOME_BINS",
           "COVERAGE_FILE"]

#: Responder counters binned (``overflow`` is kept out of the random runs: a frame dropped
#: for room would hide the error it carries; test_rdma_receive_overflow covers it).
OUTCOME_BINS = ("frames_ok",) + tuple(r for r in DROP_REASONS if r != "overflow")
_OPCODES = {OpCode.RC_RDMA_WRITE_FIRST.value: "WRITE_FIRST",
            OpCode.RC_RDMA_WRITE_MIDDLE.value: "WRITE_MIDDLE",
            OpCode.RC_RDMA_WRITE_LAST.value: "WRITE_LAST",
            OpCode.RC_RDMA_WRITE_ONLY.value: "WRITE_ONLY"}
_SYNDROMES = {Syndrome.ACK.value: "ACK", Syndrome.NAK_PSN_SEQUENCE.value: "NAK_PSN_SEQUENCE",
              Syndrome.NAK_REMOTE_ACCESS.value: "NAK_REMOTE_ACCESS"}
_EDGE_NAMES = ("1", "63", "64", "65", "mtu-1", "mtu", "mtu+1", "2mtu-1", "2mtu", "2mtu+1",
               "4mtu")
_OPCODE_AT = ACK_HEADER["bth"].offset // 8 + ACK_HEADER["bth"].shape["opcode"].offset // 8
_SYNDROME_AT = ACK_HEADER["aeth"].offset // 8


def size_bins(pmtu_log2):
    """``(name, lo, hi)`` for a QP of MTU ``2**pmtu_log2``: each edge size alone (named
    relative to the MTU) and the range between two edges (``a..b``)."""
    edges = edge_sizes(pmtu_log2)
    assert len(edges) == len(_EDGE_NAMES), edges
    out = []
    for k, (a, name) in enumerate(zip(edges, _EDGE_NAMES, strict=True)):
        out.append((name, a, a))
        if k + 1 < len(edges) and edges[k + 1] - a > 1:
            out.append((f"{name}..{_EDGE_NAMES[k + 1]}", a + 1, edges[k + 1] - 1))
    return out


def size_bin(size, pmtu_log2):
    return bin_of(size_bins(pmtu_log2), size)


class Covergroups(_Covergroups):
    """The bins of one configuration and their hit counts (plain Python, no UVM)."""

    def __init__(self, cfg):
        self.cfg = cfg
        names = {
            "opcode": list(_OPCODES.values()) + list(_SYNDROMES.values()),
            "size": [b[0] for b in size_bins(8)],
            "pmtu": [str(1 << p) for p in range(8, 13)],
            "segments": ["1", "2", "3+"],
            "error": list(ERROR_KINDS),
            "variant": [f"{k}/{v}" for k in ERROR_KINDS for v in VARIANTS[k]],
            "outcome": list(OUTCOME_BINS),
            "cqe_status": [CqeStatus.SUCCESS.name, CqeStatus.REM_ACCESS_ERR.name],
            "qp_count": ["1", "<cache", "=cache", ">cache"],
            "cache": [f"{n} {e}" for n in ("req", "resp") for e in ("hit", "miss",
                                                                    "writeback")],
            "gap_rate": [b[0] for b in GAP_RATE_BINS],
            "batch": ["1", "2", "3+"],
            "psn_wrap": ["wrap"],
        }
        super().__init__(names)

    def sample_item(self, it):
        n = len(it.frames())
        self.hit("size", size_bin(it.size, it.qp.pmtu_log2))
        self.hit("pmtu", str(it.qp.mtu))
        self.hit("segments", str(n) if n < 3 else "3+")
        self.hit("error", it.error)
        self.hit("variant", f"{it.error}/{it.variant}")
        self.hit("gap_rate", bin_of(GAP_RATE_BINS, it.gap))
        if it.qp.psn + n > 1 << 24:
            self.hit("psn_wrap", "wrap")

    def sample_plan(self, plan):
        if plan.kind == "doorbell":
            q, c = len(plan.qps), self.cfg.cache_entries
            self.hit("qp_count", "1" if q == 1 else "<cache" if q < c else
                     "=cache" if q == c else ">cache")
        for b in plan.batches:
            self.hit("batch", str(b) if b < 3 else "3+")

    def sample_run(self, obs, plan):
        for fr in whole_frames(obs.ab[0]):
            if len(fr) > _OPCODE_AT and fr[_OPCODE_AT] in _OPCODES:
                self.hit("opcode", _OPCODES[fr[_OPCODE_AT]])
        for fr in whole_frames(obs.ba[0]):
            if (len(fr) > _SYNDROME_AT and fr[_OPCODE_AT] == OpCode.RC_ACKNOWLEDGE.value
                    and fr[_SYNDROME_AT] in _SYNDROMES):
                self.hit("opcode", _SYNDROMES[fr[_SYNDROME_AT]])
        for r in OUTCOME_BINS:
            if obs.resp[r]:
                self.hit("outcome", r, obs.resp[r])
        for side, counters in (("req", obs.req), ("resp", obs.resp)):
            hits = counters["lookups"] - counters["misses"]
            for name, v in (("hit", hits), ("miss", counters["misses"]),
                            ("writeback", counters["writebacks"])):
                if v:
                    self.hit("cache", f"{side} {name}", v)
        if plan is not None and plan.kind == "doorbell":
            for c in read_cqes(obs.mem_a, plan, len(plan.items)):
                name = CqeStatus(c["status"]).name
                if name in self.groups["cqe_status"]:
                    self.hit("cqe_status", name)


class RdmaCoverage(CoverageCollector):
    """Samples the driven items and plans (``items``) and the observations
    (``observed``)."""

    CFG_KEY = "RDMA_CFG"

    def covergroups(self, cfg):
        return Covergroups(cfg)

    def extract_phase(self):
        plans, runs = [], []
        for fifo in (self.items, self.observed):
            while True:
                ok, t = fifo.try_get()
                if not ok:
                    break
                if isinstance(t, WriteItem):
                    self.cg.sample_item(t)
                    self.sampled += 1
                elif isinstance(t, RunPlan):
                    plans.append(t)
                    self.cg.sample_plan(t)
                elif isinstance(t, RunObs):
                    runs.append(t)
        for k, obs in enumerate(runs):
            self.cg.sample_run(obs, plans[k] if k < len(plans) else None)
