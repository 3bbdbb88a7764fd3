"""The NIC's design point (:class:`NicPoint`): the scale-up NIC's own knobs on top of
:class:`spec.design_point.FabricPoint`."""

import dataclasses

from spec.design_point.field import check_int, knob
from spec.design_point.shared import FabricPoint
from spec.formats.nic import MAX_LENGTH
from spec.nic import (
    HEADLINE_TOP,
    PEER_RETRY_DEFAULTS,
    check_attachment,
    check_completion,
    check_peer_retry,
)
from spec.nic_mem import MAX_TARGET_LATENCY, MAX_TARGET_READS, MEM_OPS, TARGET_LEVEL_READS

__all__ = ["NicPoint", "NIC_FRAMINGS", "NIC_RTL_PEERS"]

#: The NIC's framings (spec/formats/nic.py: the compact header, or an Ethernet L2 one).
NIC_FRAMINGS = ("compact", "l2")
#: Most destinations of the NIC's RTL top (16 nodes: the sender and 15 others).
NIC_RTL_PEERS = 15


def _framing(value, point):
    if value not in NIC_FRAMINGS:
        raise ValueError(f"framing must be 'compact' or 'l2' (required for the NIC), "
                         f"not {value!r}")


def _peers(value, point):
    if isinstance(value, int) and not isinstance(value, bool) and value > NIC_RTL_PEERS:
        raise ValueError(f"peers must be 1 to {NIC_RTL_PEERS} for the RTL top (16 nodes), "
                         f"not {value}")
    check_int("peers", value, 1, 254)


def _max_payload(value, point):
    width = HEADLINE_TOP["width"]
    check_int("max_payload", value, width, MAX_LENGTH)
    if value % width:
        raise ValueError(f"max_payload must be a multiple of the width ({width}), "
                         f"not {value}")


def _peer_retry(value, point):
    if value == 0 and not isinstance(value, bool):
        return
    check_int("peer_retry", value, 2, 1 << 15, power_of_two=True)
    check_peer_retry(True, point.completion, value)


@dataclasses.dataclass(frozen=True, kw_only=True)
class NicPoint(FabricPoint):
    """A point of the scale-up NIC (NicTop, or NicMemTop for ``op`` load and atomic)."""
    target_latency: int = knob(
        0, "build", range=(0, MAX_TARGET_LATENCY),
        source="spec/nic_mem.py TARGET_LEVEL_LATENCY (0: an SRAM read in the beat's cycle)",
        help="NIC --op load|atomic only: cycles of a read of the target's memory, 0..4096 "
        "(default 0: an SRAM read in the beat's cycle; 300: the engine's on_die host read, "
        "the level field; spec.nic_mem.TARGET_LEVEL_LATENCY)")
    target_reads: int = knob(
        TARGET_LEVEL_READS, "build", range=(1, MAX_TARGET_READS),
        source="spec/nic_mem.py TARGET_LEVEL_READS (the engine's responder's host reads)",
        help="NIC --op load|atomic with --target-latency: reads of the target's memory in "
        "flight, 1..16 (default 2, what the engine's responder keeps in flight at its "
        "host; an atomic fences them)")
    framing: str = knob(
        "compact", "build", check=_framing,
        source="spec/formats/nic.py (the compact header of the headline)",
        help="NIC framing: compact or l2 (default compact)")
    peers: int = knob(
        1, "run", check=_peers,
        source="SPEC.md headline (one destination); the RTL top's 16 nodes bound it",
        help="destination nodes: NIC round robin (1..15; default 1); ephemeral, in "
        "--popularity (1..4096; default 4096)")
    attachment: str = knob(
        "integrated", "build", check=lambda v, p: check_attachment(v),
        source="spec/nic.py ATTACHMENTS (integrated: the accelerator's store port)",
        help="NIC attachment: integrated (the accelerator's store port) or pcie (default "
        "integrated)")
    completion: str = knob(
        "credit", "build", check=lambda v, p: check_completion(v),
        source="spec/nic.py COMPLETIONS (credit: the link credit, one hop)",
        help="NIC completion: credit (the link credit, one hop) or e2e (the receiver's "
        "cumulative completion per source, end to end; docs/nic.md); default credit. "
        "RDMA's is always end to end (the ACK and the CQE)")
    peer_retry: int = knob(
        0, "build", check=_peer_retry,
        source="spec/nic.py PEER_RETRY_DEFAULTS (off; its window "
        f"{PEER_RETRY_DEFAULTS['window']} when on: one sender's frames over a pod round "
        "trip at line rate)",
        help="NIC per-peer end-to-end retry (a PSN per destination, go-back-N) with a "
        "replay window of N frames, a power of two 2..32768 (default 0: off; "
        f"{PEER_RETRY_DEFAULTS['window']} covers a pod round trip at line rate); needs "
        "--completion e2e; docs/nic.md, Per-peer retry")
    max_payload: int = knob(
        HEADLINE_TOP["max_payload"], "build", check=_max_payload,
        source="spec/nic.py HEADLINE_TOP (1024 bytes)",
        help="NIC largest frame payload, a multiple of 64 bytes (default 1024)")

    OPS = MEM_OPS
    CHECK_ORDER = ("completion", "fabric", "framing", "peers", "link_latency", "max_payload",
                   "attachment", "peer_retry")
