"""The part of a design point both designs share (:class:`FabricPoint`): the operation,
the fabric profile, the link's latency and its retry."""

import dataclasses

from spec.design_point.field import Point, check_int, knob
from spec.fabric_profiles import fabric_profile

__all__ = ["FabricPoint"]


def _link_latency(value, point):
    if value is not None:
        check_int("link_latency", value, 1, 1024)


def _fabric(value, point):
    fabric_profile(value)


def _op(value, point):
    point.check_op(value)


def _link_retry(value, point):
    if not isinstance(value, bool):
        raise ValueError(f"link_retry must be True or False, not {value!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class FabricPoint(Point):
    """What a point of either design sets alike; each design's point adds its own
    (:class:`spec.design_point.NicPoint`, :class:`~spec.design_point.RdmaPoint`)."""
    op: str = knob(
        "write", "run", check=_op,
        source="the headline's operation (SPEC.md: remote stores, RDMA WRITEs)",
        help="operation: write (default). NIC: load (remote loads of --msg-bytes, at most "
        "--max-payload, default 256) or atomic (8-byte fetch-and-adds), on NicMemTop "
        "(docs/nic.md, Loads and atomics): integrated attachment, credit completion, the "
        "fabric's link latency, with or without --link-retry. RDMA: read (RDMA READs of "
        "--msg-bytes) or atomic (FETCH & ADDs), one QP, two nodes of RdmaFabricTop with "
        "reads on the NIC's fabric, no link retry, host on_die (the NIC's load rows' "
        "attachment; docs/rdma.md): the other options are --fabric and --host")
    link_latency: int | None = knob(
        None, "build", check=_link_latency,
        source="spec/nic.py HEADLINE_TOP (NIC 2), spec/rdma_engine.py TOP_DEFAULTS "
        "(RDMA 6), spec/fabric_profiles.py FABRIC_PROFILES (with a profile)",
        help="link latency in cycles, 1..1024 (default: NIC 2, RDMA 6; with --fabric: "
        "the profile's)")
    fabric: str = knob(
        "board", "build", check=_fabric,
        source="spec/fabric_profiles.py FABRIC_PROFILES (board: one board, no switch)",
        help="fabric profile: board, rack or pod (spec/fabric_profiles.py; default "
        "board): links, switch hop and the state sized from them")
    link_retry: bool = knob(
        False, "build", check=_link_retry, option=False,
        source="docs/recovery.md (link-level retry is a choice of the fabric)",
        help="every link with link-level retry (ReliableLink; docs/recovery.md)")

    #: The operations of the design (:meth:`check_op`).
    OPS = ("write",)

    def check_op(self, op):
        """``ValueError`` naming ``op`` unless the design has it."""
        if op not in self.OPS:
            raise ValueError(f"op must be one of {', '.join(self.OPS)}, not {op!r}")
