"""The RDMA engine's design point (:class:`RdmaPoint`): the engine's own knobs on top of
:class:`spec.design_point.FabricPoint`, and the short names of its ladder's rungs
(:data:`RUNG_ALIASES`), and the named points the experiments set (:data:`BEST_CACHE`)."""

import dataclasses

from spec.design_point.field import knob
from spec.design_point.shared import FabricPoint
from spec.formats.roce import QPC_BYTES_DEFAULT, qpc_words
from spec.formats.scaleup import check_header
from spec.host import check_host
from spec.rdma_engine import CACHE_WAYS, LADDER, MISS_QUEUE_RANGE, TOP_DEFAULTS
from spec.rdma_responder import check_mr_cache

__all__ = ["RdmaPoint", "RUNG_ALIASES", "rung_name", "RDMA_OPS", "TOPOLOGIES", "BEST_WAYS",
           "BEST_CACHE"]

#: Short names of the RDMA ladder's rungs (spec/rdma_engine.py LADDER) for ``--rung``,
#: which also takes the rungs' own names.
RUNG_ALIASES = {
    "seq": "sequential",
    "pipelined": "pipelined",
    "db-batch": "+doorbell batching 16",
    "bf-inline": "+WQE by MMIO, inline",
    "unsignalled": "+unsignalled 1/64",
    "ack-coalesce": "+ACK coalescing",
    "best": "+ACK coalescing",
}
#: The engine's operations: WRITEs (the headline), READs and FETCH & ADDs.
RDMA_OPS = ("write", "read", "atomic")
#: How two engines are joined: one direct link (RdmaTop) or the NIC's switch
#: (RdmaFabricTop).
TOPOLOGIES = ("direct-link", "switch")


def rung_name(text):
    """The ladder rung named by ``text``: a rung's own name or one of
    :data:`RUNG_ALIASES` (other text is returned unchanged, for the rung's check)."""
    return RUNG_ALIASES.get(text, text)


def _rung(value, point):
    if value not in dict(LADDER):
        raise ValueError(f"rung must be one of {', '.join(RUNG_ALIASES)} (or a rung's "
                         f"own name: {', '.join(repr(n) for n, _ in LADDER)}), "
                         f"not {value!r}")


def _cache_ways(value, point):
    if isinstance(value, bool) or value not in CACHE_WAYS:
        raise ValueError(f"cache_ways must be 1, 2, 4 or 8, not {value!r}")


def _selective(value, point):
    if value not in (0, 1) or isinstance(value, bool):
        raise ValueError(f"selective must be 0 or 1, not {value!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class RdmaPoint(FabricPoint):
    """A point of the RDMA engine (RdmaTop, or RdmaFabricTop for the switch topology and
    for READs and atomics)."""
    header: str = knob(
        TOP_DEFAULTS["header"], "build", check=lambda v, p: check_header(v),
        source="spec/rdma_engine.py TOP_DEFAULTS (RoCEv2, IBTA Annex A17)",
        help="RDMA framing: roce (Ethernet + IPv4 + UDP + BTH) or scaleup (a 10-byte "
        "scale-up header + BTH; spec/formats/scaleup.py); default roce")
    qps: int = knob(
        1, "run", range=(1, 4096),
        source="SPEC.md headline (one QP)",
        help="RDMA QPs used round robin (1..4096; default 1)")
    cache_entries: int = knob(
        16, "port", range=(16, 256), power_of_two=True,
        source="spec/rdma_engine.py TOP_DEFAULTS (256 built; 16 in use, the cache_log2 "
        "port)",
        help="RDMA QP-context cache entries in use, a power of two 16..256 (default 16)")
    cache_ways: int = knob(
        TOP_DEFAULTS["cache_ways"], "build", check=_cache_ways, tag="w",
        source="spec/rdma_engine.py ContextCacheShape (direct mapped)",
        help="RDMA QP-context cache ways per set: 1, 2, 4 or 8 (default 1, direct mapped)")
    qpc_bytes: int = knob(
        QPC_BYTES_DEFAULT, "port", check=lambda v, p: qpc_words(v, "RDMA point"),
        source="spec/formats/roce.py QPC_BYTES_DEFAULT (the room of mlx5's 232-byte "
        "context)",
        help="RDMA QP-context size in host memory, bytes: 64, 128, 256, 512 or 1024 "
        "(default 256, the room of mlx5's 232-byte context; a fill reads it all)")
    mr_cache: int = knob(
        TOP_DEFAULTS["mr_cache"], "build", check=lambda v, p: check_mr_cache(v),
        source="spec/rdma_responder.py MrTableShape (0: the MR table on chip)",
        help="RDMA responder's MR table in host memory behind an MR cache of this many "
        "entries, a power of two 2..256 (default 0: the MR table on chip; docs/rdma.md)")
    mrs: int = knob(
        1, "run", range=(1, TOP_DEFAULTS["mr_entries"]),
        source="spec/rdma_engine.py TOP_DEFAULTS (mr_entries 16 bounds it; one MR as "
        "the headline)",
        help="RDMA MRs the messages use in turn, 1..16 (default 1; at table indices 3 + "
        "5k)")
    host: str = knob(
        TOP_DEFAULTS["host"], "run", check=lambda v, p: check_host(v),
        source="spec/host.py PROFILES (pcie: a PCIe Gen5 x16 host interface)",
        help="RDMA host-interface profile: pcie, on_die or ideal64 (default pcie)")
    miss_queue: int = knob(
        TOP_DEFAULTS["miss_queue"], "build", range=MISS_QUEUE_RANGE,
        source="spec/rdma_engine.py REQUESTER_DEFAULTS (0: none)",
        help="RDMA requester's miss queue: work items whose context fill is on its way "
        "that may step aside for items of present contexts, 0..64 (default 0: none; "
        "docs/rdma.md)")
    topology: str = knob(
        "direct-link", "run", choices=TOPOLOGIES,
        source="spec/rdma_engine.py TOP_DEFAULTS (RdmaTop: one link for the whole path)",
        help="RDMA topology: direct-link (RdmaTop, one link for the whole path; default) "
        "or switch (two nodes of RdmaFabricTop on the NIC's fabric: link, switch, link, "
        "credits; the gap table's rows; RoCEv2 and the engine's defaults only)")
    rung: str = knob(
        LADDER[-1][0], "port", check=_rung, parse=rung_name,
        source="spec/rdma_engine.py LADDER (its last rung, every optimisation)",
        help="RDMA optimisation rung: "
        + ", ".join(f"{a} ('{n}')" for a, n in RUNG_ALIASES.items())
        + "; or a rung's own name (spec/rdma_engine.py LADDER); default best")
    selective: int = knob(
        0, "port", check=_selective, option=False,
        source="docs/recovery.md (go-back-N, IBTA's recovery)",
        help="selective repeat at both ends instead of go-back-N (the engines' run-time "
        "port; docs/recovery.md, 'Selective repeat')")

    OPS = RDMA_OPS
    CHECK_ORDER = ("fabric", "rung", "qps", "cache_entries", "link_latency", "cache_ways",
                   "miss_queue", "qpc_bytes", "mr_cache", "mrs", "host", "header")

    def check_op(self, op):
        """``ValueError`` naming ``op`` unless the engine has it."""
        if op not in self.OPS:
            raise ValueError(f"op must be write or one of {', '.join(self.OPS[1:])} for "
                             f"the RDMA design, not {op!r}")


#: Ways per set of the engine's best context cache (:data:`BEST_CACHE`).
BEST_WAYS = 4
#: The engine's best context cache: the most entries a build takes (the run-time port
#: ``cache_log2`` goes to 256, and :class:`rtl.tops.rdma_fabric_top.RdmaFabricTop` takes
#: ``cache_entries`` 16 to 256) and :data:`BEST_WAYS` ways; the gap table's side row
#: (:data:`tb.gap_table.SIDE_ROWS`) and the state spectrum's Zipf rows
#: (:mod:`tb.ephemeral.spectrum`) set it. Ref: docs/findings.md (section 9, "The RDMA
#: engine at scale"): round robin over more QPs than entries misses on every message
#: whatever the ways (within 3 % at 1, 4 or 8), so at 4096 QPs round robin the entries
#: set the rate; with Zipf 0.99 at 4096 QPs over 256 entries 4 ways run within 1.22x of
#: the host bound and 8 ways 1.20x, for twice the tag comparators per lookup and probe
#: (docs/rdma.md, "Associative context cache"): 8 ways buy 2 % where 4 buy 3.8x over
#: direct mapping.
BEST_CACHE = RdmaPoint(cache_entries=256, cache_ways=BEST_WAYS)
