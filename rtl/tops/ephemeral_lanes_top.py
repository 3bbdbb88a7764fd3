"""Co-simulation top of several ephemeral senders side by side (lanes): each lane is
:class:`rtl.tops.ephemeral_sender_top.EphemeralSenderTop`'s sender with its own player
and recorders, all on one clock."""

import types

from amaranth import Module
from amaranth.lib.wiring import In, Out

from rtl.ephemeral.pool import COUNTER_BITS
from rtl.ephemeral.sender import EphemeralSender, msg_layout, sent_layout
from rtl.sim.harness_top import HarnessTop
from rtl.tops.ephemeral_sender_top import EphemeralSenderTop
from spec.ephemeral import (
    ACK_COUNT_BITS,
    II_BITS,
    MAX_LANES,
    NODE_BITS,
    POOL_COUNTERS,
    STAMP_BITS,
)

__all__ = ["EphemeralLanesTop", "lane_name"]

#: A lane's own ports (out), after its prefix (:func:`lane_name`).
LANE_OUTS = ("used", "used_max", "acks_pending", *POOL_COUNTERS)


def lane_name(lane, name):
    """The top's name of lane ``lane``'s player, recorder or port ``name``
    (``lane_name(2, "sent")`` is ``"lane2_sent"``; in Verilog ``lane2_sent__count`` and
    so on)."""
    return f"lane{lane}_{name}"


class EphemeralLanesTop(HarnessTop):
    """``lanes`` senders, each ``laneJ_msgs`` (player) -> :class:`EphemeralSender` ->
    ``laneJ_sent`` and ``laneJ_closed`` (recorders, never stalled), wired as
    :class:`EphemeralSenderTop` wires its one (its own ``elaborate_design``, on the lane's
    player, recorders and ports). The lanes share nothing but the clock, the reset and
    the static ports; each runs as the one-lane top would on its messages.

    Parameters: ``lanes`` (1 to :data:`spec.ephemeral.MAX_LANES`), each sender's
    ``entries`` and ``ack_slots``, and ``depth`` (messages each lane's player and
    recorders hold). Static ports, shared: ``idle``, ``ack_every``, ``ii``,
    ``completion``. Out, per lane ``J``: ``laneJ_used``, ``laneJ_used_max``,
    ``laneJ_acks_pending`` and the pool's counters (``laneJ_opens``, ...). Timing: each
    lane's as :class:`EphemeralSenderTop`'s (cycle 0 the first after reset, for all).
    ``ValueError`` names a bad ``lanes``."""

    def __init__(self, lanes, entries, ack_slots, depth):
        if isinstance(lanes, bool) or not isinstance(lanes, int) or \
                not 1 <= lanes <= MAX_LANES:
            raise ValueError(f"lanes must be an integer from 1 to {MAX_LANES}, "
                             f"not {lanes!r}")
        self.lanes, self.entries, self.ack_slots, self.depth = lanes, entries, ack_slots, depth
        self.senders = [EphemeralSender(entries, ack_slots, NODE_BITS) for _ in range(lanes)]
        ports = {"idle": In(STAMP_BITS), "ack_every": In(ACK_COUNT_BITS),
                 "ii": In(II_BITS), "completion": In(STAMP_BITS)}
        players, recorders = {}, {}
        for j in range(lanes):
            ports.update({lane_name(j, "used"): Out(range(entries + 1)),
                          lane_name(j, "used_max"): Out(range(entries + 1)),
                          lane_name(j, "acks_pending"): Out(range(ack_slots + 1))})
            ports.update({lane_name(j, n): Out(COUNTER_BITS) for n in POOL_COUNTERS})
            players[lane_name(j, "msgs")] = (msg_layout(NODE_BITS), depth)
            recorders[lane_name(j, "sent")] = (sent_layout(entries), depth)
            recorders[lane_name(j, "closed")] = (NODE_BITS, depth)
        super().__init__(players=players, recorders=recorders, ports=ports)

    def elaborate_design(self, m, players, recorders):
        for j, sender in enumerate(self.senders):
            lane = types.SimpleNamespace(
                sender=sender, **{n: getattr(self, n) for n in
                                  ("idle", "ack_every", "ii", "completion")},
                **{n: getattr(self, lane_name(j, n)) for n in LANE_OUTS})
            lm = Module()
            EphemeralSenderTop.elaborate_design(
                lane, lm, {"msgs": players[lane_name(j, "msgs")]},
                {n: recorders[lane_name(j, n)] for n in ("sent", "closed")})
            m.submodules[f"lane{j}"] = lm
