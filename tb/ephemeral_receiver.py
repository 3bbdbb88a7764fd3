"""Stimulus, the twin's side and the model-free checks of the ephemeral receiver's tests
(the Amaranth simulator's, the co-simulation's and the fuzz's): seeded hostile packet
streams, the twin (:class:`pymodel.ephemeral.receiver.ReceiverTwin`) run on them cycle by
cycle, and the invariants that hold whatever the rules say."""

import random

from pymodel.ephemeral.receiver import ReceiverTwin
from spec.ephemeral import RECV_ACKS, RECV_DELIVERS, RECV_OUTCOMES
from spec.formats.roce import PSN_BITS

__all__ = ["hostile", "model_events", "invariant_errors", "run_end", "ACTIONS"]

_MOD = 1 << PSN_BITS

#: What :func:`hostile` draws for each packet, with its weight: a genuine sender's next
#: packet (the open flag on its first ``open_len``), its CLOSE, a CLOSE lost (the sender
#: closes, the receiver is not told: the sender's next packet reopens), a replay of any
#: earlier packet (late, duplicate or stale), a gap (a genuine sender's packet past one
#: lost), a forged open (a random source and PSN) and a flood (forged opens from many
#: sources back to back: one sender exhausting the pool).
ACTIONS = {"send": 10, "close": 2, "lost_close": 1, "replay": 3, "gap": 1, "forge": 1,
           "flood": 0.2}


def hostile(seed, n, sources, idle, key_bits=12, open_len=2, weights=None):
    """``n`` packets ``(src, psn, open, close)`` and their release cycles (non-decreasing,
    one packet a cycle at most; sometimes a pause of more than ``idle`` cycles, so that
    contexts close on idle). Genuine senders are sources ``0 .. sources - 1``; the first
    PSN of each new context is the count of packets sent by all of them (as one sender
    numbers its contexts), starting near the wrap of the 24-bit PSN for odd seeds."""
    rng = random.Random(seed)
    weights = dict(ACTIONS, **(weights or {}))
    names = list(weights)
    counter = (_MOD - 40) if seed % 2 else rng.randrange(_MOD)
    ctx = {}                       # src -> [next psn, packets sent in this context]
    sent, pkts, release, t = [], [], [], 0

    def genuine(src, skip=0):
        nonlocal counter
        if src not in ctx:
            ctx[src] = [counter, 0]
        c = ctx[src]
        psn = (c[0] + skip) % _MOD
        c[0], c[1] = (psn + 1) % _MOD, c[1] + 1
        counter = (counter + 1 + skip) % _MOD
        return (src, psn, int(c[1] <= open_len), 0)

    while len(pkts) < n:
        action = rng.choices(names, [weights[a] for a in names])[0]
        src = rng.randrange(sources)
        batch = []
        if action == "send":
            batch = [genuine(src)]
        elif action == "gap":
            batch = [genuine(src, skip=rng.randrange(1, 4))]
        elif action in ("close", "lost_close") and src in ctx:
            del ctx[src]
            if action == "close":
                batch = [(src, rng.randrange(_MOD), rng.randrange(2), 1)]
        elif action == "replay" and sent:
            batch = [rng.choice(sent)]
        elif action == "forge":
            batch = [(rng.randrange(1 << key_bits), rng.randrange(_MOD), 1, 0)]
        elif action == "flood":
            first = rng.randrange(1 << key_bits)
            batch = [((first + k) % (1 << key_bits), rng.randrange(_MOD), 1, 0)
                     for k in range(rng.randrange(4, 40))]
        for p in batch:
            if len(pkts) == n:
                break
            t += rng.choice([1, 1, 1, 2, 3]) if rng.random() > 0.02 else idle + rng.randrange(
                1, 3 * idle)
            pkts.append(p)
            release.append(t)
            sent.append(p)
    return pkts, release


def run_end(cycles, entries, idle):
    """The cycle a run stops at: ``idle + 2 * entries + 2`` after the last packet, so that
    every context has closed on idle (no arrival for ``idle``, then the scan's visit)."""
    return (cycles[-1] if cycles else 0) + idle + 2 * entries + 2


def model_events(pkts, cycles, entries, idle, now=0, end=None):
    """The twin, packet ``k`` arriving in cycle ``cycles[k]`` (strictly increasing), from
    cycle 0 up to ``end`` (default :func:`run_end`). Returns ``(outcomes, delivers, acks,
    closes, twin)``: per packet ``(cycle, outcome, entry)`` (entry 0 when it has none),
    per delivered packet ``(cycle, entry, src, psn)``, per ACK ``(cycle, src, psn)``, per
    idle close ``(cycle, src)``. ``now``: the pool's ``now`` in cycle 0."""
    twin = ReceiverTwin(entries, idle, now)
    at = dict(zip(cycles, pkts, strict=True))
    outs, delivers, acks, closes = [], [], [], []
    end = run_end(cycles, entries, idle) if end is None else end
    for t in range(end):
        pkt = at.get(t)
        out, entry, closed = twin.cycle(pkt)
        if out is not None:
            src, psn = pkt[0], pkt[1]
            outs.append((t, out, entry or 0))
            if out in RECV_DELIVERS:
                delivers.append((t, entry, src, psn))
            if out in RECV_ACKS:
                acks.append((t, src, psn))
        if closed is not None:
            closes.append((t, closed))
    return outs, delivers, acks, closes, twin


def invariant_errors(pkts, outs, delivers, counters):
    """Model-free checks of one run (RTL or twin): every packet has one outcome and the
    counters sum to the packets in, each per outcome; a context incarnation (a source from
    an ``opened`` or ``reopened`` to the next) has each PSN delivered at most once; only
    packets that arrived are delivered, as they arrived. Returns the failures' texts."""
    errors = []
    if len(outs) != len(pkts):
        errors.append(f"{len(outs)} outcomes for {len(pkts)} packets")
    tally = {name: 0 for name in RECV_OUTCOMES}
    for _, out, _ in outs:
        tally[out] += 1
    if sum(counters.values()) != len(pkts) or counters != tally:
        errors.append(f"counters {counters} are not the outcomes' tally {tally} of "
                      f"{len(pkts)} packets")
    incarnation, seen = {}, set()
    by_cycle = {d[0]: d for d in delivers}
    for (t, out, _), pkt in zip(outs, pkts, strict=False):
        src, psn = pkt[0], pkt[1]
        if out in ("opened", "reopened"):
            incarnation[src] = incarnation.get(src, 0) + 1
        if out in RECV_DELIVERS:
            d = by_cycle.get(t)
            if d is None or d[2:] != (src, psn):
                errors.append(f"cycle {t}: {out} {pkt} but delivered {d}")
            key = (src, incarnation.get(src, 0), psn)
            if key in seen:
                errors.append(f"cycle {t}: PSN {psn} of source {src} delivered twice in one "
                              f"context")
            seen.add(key)
    if len(delivers) != sum(tally[o] for o in RECV_DELIVERS):
        errors.append(f"{len(delivers)} deliveries for "
                      f"{sum(tally[o] for o in RECV_DELIVERS)} delivering outcomes")
    return errors
