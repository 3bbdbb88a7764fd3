"""Stimulus and the twin's side of the ephemeral sender's tests (the Amaranth simulator's
and the co-simulation's): seeded destinations with their "last for now" bits, the twin
(:class:`pymodel.ephemeral.sender.SenderModel`) run on them as a posting queue that
offers each message from its release cycle until it is taken, and a co-simulated
sender's player, recorders and comparison with its twin (:func:`load_sender`,
:func:`compare_sender`: one sender on EphemeralSenderTop, or each lane of
EphemeralLanesTop under its prefixed names)."""

import random

from analysis.ephemeral.flow import ack_requests
from pymodel.ephemeral.sender import SenderModel
from rtl.ephemeral.sender import msg_layout, sent_layout
from spec.ephemeral import NODE_BITS

__all__ = ["messages", "model_events", "KNOBS", "load_sender", "compare_sender"]

#: The run parameters that are the twin's knobs.
KNOBS = ("entries", "idle", "ack_every", "ii", "completion", "ack_slots")


def _same(name):
    return name


def messages(seed, n, peers, lookahead, hot=0.5):
    """``n`` messages ``(dest, last)``: destinations round robin over ``peers`` or, with
    chance ``hot``, a random one of them; ``last`` from :func:`ack_requests`."""
    rng = random.Random(seed)
    dests = [rng.randrange(peers) if rng.random() < hot else k % peers for k in range(n)]
    return list(zip(dests, ack_requests(dests, lookahead), strict=True))


def model_events(msgs, knobs, release=None, now=0, limit=1_000_000):
    """The twin on ``msgs`` (``knobs``: :class:`SenderModel`'s), message ``k`` offered
    from cycle ``release[k]`` (default 0: back to back) until taken. Returns ``(sends,
    closes, model)``: ``sends`` per message ``(cycle, entry, asked, opened)``, ``closes``
    ``(cycle, key)``; the run ends when every message is sent and the flow has ended.
    ``RuntimeError`` after ``limit`` cycles (the flow deadlocked)."""
    model = SenderModel(**knobs, now=now)
    sends, closes, k, t = [], [], 0, 0
    while k < len(msgs) or model.busy():
        if t >= limit:
            raise RuntimeError(f"the sender's flow did not end within {limit} cycles")
        offer = msgs[k] if k < len(msgs) and (release is None or t >= release[k]) else None
        sent, closed = model.cycle(offer)
        if sent is not None:
            sends.append((t, *sent))
            k += 1
        if closed is not None:
            closes.append((t, closed))
        t += 1
    return sends, closes, model


def load_sender(harness, msgs, name=_same):
    """Load ``msgs`` ``(dest, last)`` into the player ``name("msgs")`` and arm the
    recorders ``name("sent")`` and ``name("closed")`` for as many (before reset)."""
    mlay = msg_layout(NODE_BITS)
    harness.load_player(name("msgs"), [mlay.const({"dest": d, "last": last}).as_value().value
                                       for d, last in msgs])
    harness.arm_recorder(name("sent"), len(msgs))
    harness.arm_recorder(name("closed"), len(msgs))


def compare_sender(harness, sb, msgs, knobs, end, name=_same, label=""):
    """The recorded sends (cycle, entry, asked, opened) and CLOSEs (cycle, key) of the
    sender under ``name`` (after the recorders' snapshot), cycles from its first send,
    and its ports ``end`` (the pool's counters, ``used``, ``used_max``,
    ``acks_pending``) compared on scoreboard ``sb`` (items named ``label`` first) with
    the twin on ``msgs`` offered back to back from that first send's cycle. Returns
    ``{"sends", "closes", "counters", "mismatches"}`` (this sender's mismatches)."""
    slay = sent_layout(knobs["entries"])
    items, stamps = harness.recorded(name("sent"))
    start = stamps[0] if stamps else 0
    got_s = []
    for item, stamp in zip(items, stamps, strict=True):
        f = {n: (item >> fl.offset) & ((1 << fl.width) - 1) for n, fl in slay}
        got_s.append((stamp - start, f["entry"], bool(f["asked"]), bool(f["opened"])))
    keys, cstamps = harness.recorded(name("closed"))
    got_c = [(c - start, k) for k, c in zip(keys, cstamps, strict=True)]
    # The twin again, with the pool's clock as the RTL's at the first send.
    sends, closes, model = model_events(msgs, knobs, now=start)
    want_end = dict(model.pool.count, used=model.pool.used, used_max=model.pool.used_max,
                    acks_pending=len(model.acks))
    before = len(sb.mismatches)
    sb.compare(f"{label}sends (cycle, entry, asked, opened)", got_s, sends, fmt=str)
    sb.compare(f"{label}CLOSEs (cycle, key)", got_c, closes, fmt=str)
    sb.compare(f"{label}counters, used, used_max, ACKs left", [end], [want_end], fmt=str)
    return {"sends": got_s, "closes": got_c, "counters": end,
            "mismatches": len(sb.mismatches) - before}
