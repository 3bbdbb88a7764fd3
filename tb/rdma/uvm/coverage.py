"""Functional coverage of the RDMA environment, reported at the end of each test.

Bins (a group's bins are all declared up front, so a hole shows as a 0):

============  ========================================================================
group         bins
============  ========================================================================
opcode        frames seen on the links (decoded by scapy): ``WRITE_FIRST``,
              ``WRITE_MIDDLE``, ``WRITE_LAST``, ``WRITE_ONLY`` (A->B, the requester's
              and injected), ``ACK``, ``NAK_PSN_SEQUENCE``, ``NAK_REMOTE_ACCESS`` (B->A)
size          relative to the item's path MTU: 1, 63, 64, 65, mtu-1, mtu, mtu+1,
              2mtu-1, 2mtu, 2mtu+1, 4mtu (the largest) and each range between two
pmtu          the item's path MTU: 256 .. 4096
segments      frames per message: 1, 2, 3+
error         every kind of :data:`ERROR_KINDS` driven
variant       every ``kind/variant`` of :data:`VARIANTS` driven (how the error is made)
outcome       every responder counter the RTL raised: ``frames_ok`` and the drop
              reasons (``overflow`` is left out: see docs/uvm.md, limits; so is
              ``qp_err``: the environment's QPs are never in ERR at the responder)
cqe_status    CQE statuses written: ``SUCCESS``, ``REM_ACCESS_ERR``
qp_count      QPs (contexts) of the posted run against the cache entries in use: ``1``,
              ``<cache``, ``=cache``, ``>cache``
cache         ``req hit``, ``req miss``, ``req writeback``, ``resp hit``, ``resp miss``,
              ``resp writeback`` (from the engines' counters)
cache_size    context-cache entries in use (the ``cache_log2`` port): 16 .. 256
wqe_path      how a posted WQE reached the engine: ``doorbell/memory`` (read from the
              send queue, payload read), ``doorbell/inline``, ``blueflame/memory`` (WQE
              by MMIO), ``blueflame/inline``
slot          send-queue slot of a posted WQE: ``64 B``, ``128 B``, ``256 B``
batch         WQEs one MMIO write announces: ``1``, ``2``, ``3-16``, ``17+`` (more
              than one WQE read of the prefetch depth, 16)
signalled     ``signalled``, ``unsignalled`` (no CQE: a later one of its QP covers it),
              ``unsignalled error`` (a CQE all the same)
ack_req       AckReq on the last frame of a message the requester sent: ``set``,
              ``clear`` (ACK coalescing)
ack_every     the run's ``ack_every``: ``1`` (every message), ``2-7``, ``8+``
ack_frames    the run's ``ack_frames``: ``off``, ``1-15``, ``16+``
serial        the posted run's mode: ``pipelined``, ``serial`` (one work item at a time)
gap           cycles between an announcement's release and the previous one's:
              :data:`GAP_BINS`
mmio_wait     cycles an MMIO write waited after its release until the host interface
              took its first word: ``0``, ``1-15``, ``16+`` (the engine or the link
              busy)
psn_wrap      a message whose PSNs wrap from 0xFFFFFF to 0 (``within a message``), or
              that starts after its QP's PSNs wrapped (``before the message``)
============  ========================================================================

``COVERAGE_GOALS`` (ConfigDB, a tuple of group names) lists the groups a test requires
fully hit: ``check_phase`` fails on a hole there. ``report_phase`` logs every group and
merges the test's bins into ``coverage.json`` in the run folder (the format and the
collector are :mod:`tb.uvm_common`'s, shared with the NIC environment).
"""

from spec.formats.roce import CqeStatus
from spec.rdma import DROP_REASONS
from tb.uvm_common import COVERAGE_FILE, CoverageCollector, bin_of
from tb.uvm_common import Covergroups as _Covergroups

from .config import CACHE_SIZES
from .frames import OPCODES, SYNDROMES, decode, whole_frames
from .items import ACCESS_KINDS, ERROR_KINDS, GAP_BINS, VARIANTS, RunObs, WriteItem, edge_sizes
from .plan import RunPlan, read_cqes

__all__ = ["RdmaCoverage", "Covergroups", "size_bins", "size_bin", "OUTCOME_BINS",
           "COVERAGE_FILE"]

#: Responder counters binned (``overflow`` is kept out of the random runs: a frame dropped
#: for room would hide the error it carries; test_rdma_receive_overflow covers it; and
#: ``qp_err``: the environment sets up no responder QP in ERR; test_rdma_bad_frames and
#: test_unit_resp_stages cover it).
OUTCOME_BINS = ("frames_ok",) + tuple(r for r in DROP_REASONS
                                      if r not in ("overflow", "qp_err"))
_EDGE_NAMES = ("1", "63", "64", "65", "mtu-1", "mtu", "mtu+1", "2mtu-1", "2mtu", "2mtu+1",
               "4mtu")
_WRITES = [n for n in OPCODES.values() if n.startswith("WRITE")]
_BATCH_BINS = (("1", 1, 1), ("2", 2, 2), ("3-16", 3, 16), ("17+", 17, 1 << 16))
_ACK_EVERY_BINS = (("1", 0, 1), ("2-7", 2, 7), ("8+", 8, 255))
_ACK_FRAMES_BINS = (("off", 0, 0), ("1-15", 1, 15), ("16+", 16, 1 << 16))
_WAIT_BINS = (("0", 0, 0), ("1-15", 1, 15), ("16+", 16, 1 << 62))


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
            "opcode": _WRITES + list(SYNDROMES.values()),
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
            "cache_size": [str(c) for c in CACHE_SIZES if c <= cfg.cache_capacity],
            "wqe_path": [f"{a}/{p}" for a in ("doorbell", "blueflame")
                         for p in ("memory", "inline")],
            "slot": ["64 B", "128 B", "256 B"],
            "batch": [b[0] for b in _BATCH_BINS],
            "signalled": ["signalled", "unsignalled", "unsignalled error"],
            "ack_req": ["set", "clear"],
            "ack_every": [b[0] for b in _ACK_EVERY_BINS],
            "ack_frames": [b[0] for b in _ACK_FRAMES_BINS],
            "serial": ["pipelined", "serial"],
            "gap": [b[0] for b in GAP_BINS],
            "mmio_wait": [b[0] for b in _WAIT_BINS],
            "psn_wrap": ["within a message", "before the message"],
        }
        super().__init__(names)
        self.items = []

    def sample_item(self, it):
        n = len(it.frames())
        self.hit("size", size_bin(it.size, it.qp.pmtu_log2))
        self.hit("pmtu", str(it.qp.mtu))
        self.hit("segments", str(n) if n < 3 else "3+")
        self.hit("error", it.error)
        self.hit("variant", f"{it.error}/{it.variant}")
        self.items.append(it)
        if it.path == "host":
            self.hit("wqe_path", it.wqe_path)
            self.hit("slot", f"{64 << it.qp.stride_log2} B")
            self.hit("signalled", "signalled" if it.signalled else
                     "unsignalled error" if it.error in ACCESS_KINDS else "unsignalled")

    def sample_plan(self, plan):
        """A run's knobs and announcements (after every item of the test)."""
        k = plan.knobs
        self.hit("cache_size", str(k.cache_entries))
        for j in plan.items:
            it, psn = self.items[j], plan.psns[j]
            if psn + len(it.frames()) > 1 << 24:
                self.hit("psn_wrap", "within a message")
            elif psn < it.qp.psn:
                self.hit("psn_wrap", "before the message")
        if plan.kind != "posted":
            return
        q, c = len(plan.qps), k.cache_entries
        self.hit("qp_count", "1" if q == 1 else "<cache" if q < c else
                 "=cache" if q == c else ">cache")
        self.hit("ack_every", bin_of(_ACK_EVERY_BINS, k.ack_every))
        self.hit("ack_frames", bin_of(_ACK_FRAMES_BINS, k.ack_frames))
        self.hit("serial", "serial" if k.serial else "pipelined")
        last = 0
        for release, ks, _ in plan.announcements:
            self.hit("batch", bin_of(_BATCH_BINS, len(ks)))
            self.hit("gap", bin_of(GAP_BINS, release - last))
            last = release

    def sample_run(self, obs, plan):
        for fr in whole_frames(obs.ab[0]):
            d = decode(fr)
            if d.opcode in _WRITES:
                self.hit("opcode", d.opcode)
                if d.last and obs.kind == "posted":
                    self.hit("ack_req", "set" if d.ack_req else "clear")
        for fr in whole_frames(obs.ba[0]):
            d = decode(fr)
            if d.syndrome in SYNDROMES.values():
                self.hit("opcode", d.syndrome)
        for r in OUTCOME_BINS:
            if obs.resp[r]:
                self.hit("outcome", r, obs.resp[r])
        for side, counters in (("req", obs.req), ("resp", obs.resp)):
            hits = counters["lookups"] - counters["misses"]
            for name, v in (("hit", hits), ("miss", counters["misses"]),
                            ("writeback", counters["writebacks"])):
                if v:
                    self.hit("cache", f"{side} {name}", v)
        if plan is None or plan.kind != "posted":
            return
        for c in read_cqes(obs.mem_a, plan, len(plan.items)):
            name = CqeStatus(c["status"]).name
            if name in self.groups["cqe_status"]:
                self.hit("cqe_status", name)
        firsts = [j for j, w in enumerate(plan.mmio) if w["first"]]
        for j in firsts:
            if j < len(obs.mmio):
                self.hit("mmio_wait", bin_of(_WAIT_BINS, max(0, obs.mmio[j]
                                                             - plan.release[j])))


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
