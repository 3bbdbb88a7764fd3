"""Stimulus and the twin's side of the context pool's tests (the Amaranth simulator's and
the co-simulation's): seeded per-cycle offers of lookups and completions, a lookup not
taken offered again until it is (a stream source keeps its payload), and the twin run
on them. The RTL drivers apply the same holding rule, so both sides see the same inputs
cycle for cycle."""

import random

from pymodel.ephemeral.pool import ContextPoolModel

__all__ = ["stimulus", "model_trace", "Holder", "pack_req"]


def stimulus(seed, cycles, entries, keys, offer=0.6, open_=0.8, done=0.4):
    """Per cycle ``(offer, done)``: ``offer`` a lookup ``(key, open, count)`` or None
    (``keys`` distinct keys; ``open`` with chance ``open_``; ``count`` 1 half the time),
    ``done`` an entry (any, valid or not) or None."""
    rng = random.Random(seed)
    out = []
    for _ in range(cycles):
        req = None
        if rng.random() < offer:
            req = (rng.randrange(keys), int(rng.random() < open_), rng.randrange(2))
        out.append((req, rng.randrange(entries) if rng.random() < done else None))
    return out


class Holder:
    """A stream source's rule: an offer is presented until it is taken; a new offer
    waits behind it (dropped offers are never replaced)."""

    def __init__(self):
        self.held = None

    def present(self, offer):
        """The lookup presented in this cycle (the held one, else ``offer``)."""
        if self.held is None and offer is not None:
            self.held = offer
        return self.held

    def taken(self, was_taken):
        if was_taken:
            self.held = None


def pack_req(req, key_bits):
    """A lookup ``(key, open, count)`` as the flat ``req.payload`` vector."""
    key, open_, count = req
    return key | open_ << key_bits | count << (key_bits + 1)


def model_trace(stim, entries, idle, now=0, drops=None):
    """The twin on ``stim``: per cycle ``(presented lookup, verdict, entry, closed key)``
    (verdict and entry None without a lookup; entry None unless HIT or OPENED), and the
    twin at the end. ``drops``: per cycle an entry to drop or None (default: none)."""
    from spec.ephemeral import Verdict

    model = ContextPoolModel(entries, idle, now)
    hold, out = Holder(), []
    for k, (offer, done) in enumerate(stim):
        req = hold.present(offer)
        verdict, entry, closed = model.cycle(req, done, drops[k] if drops else None)
        hold.taken(req is not None and verdict != Verdict.FULL)
        out.append((req, verdict, entry, closed))
    return out, model
