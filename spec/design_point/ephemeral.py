"""The ephemeral-context design's point (:class:`EphemeralPoint`): the sender's context
pool and its destinations (docs/ephemeral.md)."""

import dataclasses

from spec.design_point.field import Point, check_int, knob
from spec.ephemeral import (
    ACK_COUNT_BITS,
    EPHEMERAL_DEFAULTS,
    IDLE_RANGE,
    MAX_LANES,
    RTL_POOL_ENTRIES_MAX,
    check_ephemeral,
    check_idle,
    check_pool_entries,
)
from spec.fabric_profiles import fabric_profile
from spec.load import POPULARITY

__all__ = ["EphemeralPoint"]


def _pool(value, point):
    """The pool entries, then every knob together (:func:`spec.ephemeral.check_ephemeral`:
    the lookahead within the pool)."""
    check_pool_entries(value)
    check_idle(point.idle)
    check_int("ack_every", point.ack_every, 1, (1 << ACK_COUNT_BITS) - 1)
    check_int("lookahead", point.lookahead, 0, 4096)
    check_ephemeral(value, point.idle, point.ack_every, point.lookahead)


@dataclasses.dataclass(frozen=True, kw_only=True)
class EphemeralPoint(Point):
    """A point of the ephemeral-context sender (EphemeralSenderTop) and its model."""
    peers: int = knob(
        4096, "run", range=(1, 4096),
        source="docs/ephemeral.md (a destination per node of a 4096-node pod)",
        help="ephemeral destinations, in --popularity (1..4096; default 4096)")
    fabric: str = knob(
        "board", "build", check=lambda v, p: fabric_profile(v),
        source="spec/fabric_profiles.py FABRIC_PROFILES (board)",
        help="fabric profile: board, rack or pod (spec/fabric_profiles.py; default board)")
    popularity: str = knob(
        "round_robin", "run", choices=POPULARITY,
        source="spec/load.py POPULARITY (round robin: every destination in turn)",
        help="ephemeral destinations: round_robin, uniform or zipf (0.99) over --peers "
        "(default round_robin; spec/load.py)")
    pool_entries: int = knob(
        EPHEMERAL_DEFAULTS["pool_entries"], "build", check=_pool,
        source=f"spec/ephemeral.py EPHEMERAL_DEFAULTS (at most {RTL_POOL_ENTRIES_MAX} "
        f"in RTL: RTL_POOL_ENTRIES_MAX)",
        help="ephemeral contexts in the sender's pool, a power of two 2..256 in RTL "
        "(default 256)")
    idle: int = knob(
        EPHEMERAL_DEFAULTS["idle"], "port", range=IDLE_RANGE,
        source="spec/ephemeral.py EPHEMERAL_DEFAULTS (the sender's idle port)",
        help="ephemeral cycles a context with nothing outstanding stays open, 1..61439 "
        "(default 64)")
    ack_every: int = knob(
        EPHEMERAL_DEFAULTS["ack_every"], "port", range=(1, (1 << ACK_COUNT_BITS) - 1),
        source="spec/ephemeral.py EPHEMERAL_DEFAULTS (the sender's ack_every port)",
        help="ephemeral messages of a context per ACK request at most, 1..31 (default 16)")
    lookahead: int = knob(
        EPHEMERAL_DEFAULTS["lookahead"], "run", range=(0, 4096),
        source="spec/ephemeral.py EPHEMERAL_DEFAULTS (the sender's view of the posted "
        "messages)",
        help="ephemeral posted messages the sender sees when it marks a context's last "
        "for now, 0..--pool-entries (default 16)")
    lanes: int = knob(
        1, "build", range=(1, MAX_LANES),
        source="spec/ephemeral.py MAX_LANES (one lane: one sender behind the attachment)",
        help=f"ephemeral lanes: senders behind one attachment, destination d on lane "
        f"d % lanes, rates summed and capped by the attachment; co-simulated as that many "
        f"senders in one top (EphemeralLanesTop; its build grows with them), 1..{MAX_LANES} "
        f"(default 1). The NIC and RDMA designs build one lane")
