"""Stimulus and the twin's side of the ephemeral sender's tests (the Amaranth simulator's
and the co-simulation's): seeded destinations with their "last for now" bits, and the
twin (:class:`pymodel.ephemeral.sender.SenderModel`) run on them as a posting queue that
offers each message from its release cycle until it is taken."""

import random

from analysis.ephemeral.flow import ack_requests
from pymodel.ephemeral.sender import SenderModel

__all__ = ["messages", "model_events"]


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
