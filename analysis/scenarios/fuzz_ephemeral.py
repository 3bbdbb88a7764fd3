"""Seeded hostile packet streams for the ephemeral receiver
(:class:`rtl.ephemeral.receiver.EphemeralReceiver` and its twin
:class:`pymodel.ephemeral.receiver.ReceiverTwin`): its unit tests, its co-simulation and
the ``ephemeral`` target of ``make fuzz``. Pure functions of their seed.

A stream is packet headers ``(src, psn, open, close, off)`` with their arrival cycles (one
a cycle at most; ``off`` an open packet's offset from its context's first PSN, 0 without
the open flag). Genuine senders (sources ``0 .. sources - 1``) send in PSN order; the
first PSN of each new context is the count of packets they all sent (as one sender
numbers its contexts, docs/ephemeral.md), starting near the 24-bit wrap for odd seeds.
Around them, drawn by :data:`ACTIONS`: CLOSEs, lost CLOSEs, replays of any earlier packet,
gaps, forged opens, floods of forged opens, and mutants of a genuine packet (one field
of :data:`FIELDS` rewritten by one of :data:`EDITS`, then the packet itself). Pauses of
more than ``idle`` cycles let contexts close on idle.

A **sentinel** source (optional) sends its own packets every ``idle // 2`` cycles from the
first cycle, never mutated, replayed or forged (a mutant or forged open that would carry
its source is drawn again): its context opens on an empty pool and never idles, so each
of its packets must be delivered once, in order, whatever the rest of the stream does
(:func:`tb.ephemeral_receiver.sentinel_errors`).
"""

import random
from collections import Counter

from spec.ephemeral import OPEN_OFFSET_BITS
from spec.formats.roce import PSN_BITS

__all__ = ["ACTIONS", "FIELDS", "EDITS", "hostile", "fuzz_chunk", "FUZZ_IDLES",
           "SENTINEL"]

_MOD = 1 << PSN_BITS

#: What is drawn for each step, with its weight: a genuine sender's next packet (the open
#: flag on its first ``open_len``), its CLOSE, a CLOSE lost (the sender closes, the
#: receiver is not told: its next packet reopens), a replay of an earlier packet (late,
#: duplicate or stale), a gap (a genuine packet past one to three lost), a forged open (a
#: random source and PSN, offset 0), a flood (4 to 39 forged opens from consecutive sources: one
#: sender exhausting the pool) and a mutant (then the genuine packet it was made from).
ACTIONS = {"send": 10, "close": 2, "lost_close": 1, "replay": 3, "gap": 1, "forge": 1,
           "flood": 0.2, "mutate": 0}
#: The header fields a mutant rewrites, and how (as the other receivers' fuzz,
#: :mod:`analysis.scenarios.mutator`): 0, all ones, +1, -1, one bit flipped, random.
FIELDS = ("src", "psn", "open", "close", "off")
EDITS = ("zero", "ones", "plus", "minus", "bitflip", "random")
#: Idle times a fuzz chunk draws from (cycles; a run-time port of the receiver, so every
#: chunk runs on one build): the design's default, 64 (spec.ephemeral.EPHEMERAL_DEFAULTS),
#: and two shorter ones, chosen so that contexts also close on idle between bursts.
FUZZ_IDLES = (8, 16, 64)
#: The sentinel source of the fuzz: the highest 12-bit node id (spec.ephemeral.NODE_BITS).
SENTINEL = (1 << 12) - 1


def _edit(rng, value, bits, how):
    mask = (1 << bits) - 1
    if how == "zero":
        return 0
    if how == "ones":
        return mask
    if how == "plus":
        return (value + 1) & mask
    if how == "minus":
        return (value - 1) & mask
    if how == "bitflip":
        return value ^ (1 << rng.randrange(bits))
    return rng.randrange(1 << bits)


def hostile(seed, n, sources, idle, key_bits=12, open_len=2, weights=None, sentinel=None,
            stats=None):
    """``n`` packets ``(src, psn, open, close, off)`` and their arrival cycles (strictly
    increasing from 1; sometimes a pause of more than ``idle`` cycles). ``weights``
    override :data:`ACTIONS`; ``sentinel``: a source that sends every ``idle // 2``
    cycles (``idle`` at least 2; its packets count in ``n``). ``stats``: a dict that gets
    ``by_mutation`` (kind -> packets: an action of :data:`ACTIONS`, ``mutant`` or
    ``sentinel``; and ``lost_close``, CLOSEs not sent) and ``by_field`` (field -> mutants
    that rewrote it)."""
    rng = random.Random(seed)
    weights = dict(ACTIONS, **(weights or {}))
    names = list(weights)
    counter = (_MOD - 40) if seed % 2 else rng.randrange(_MOD)
    ctx = {}                       # src -> [next psn, packets sent in this context, first]
    sent, pkts, release, kinds, fields = [], [], [], [], []
    lost_closes = 0
    keys = 1 << key_bits
    spacing = max(idle // 2, 1)
    s_state = [rng.randrange(_MOD), 0]        # the sentinel's next PSN and packets sent
    last = [0, -(1 << 30)]                    # the last cycle used, the sentinel's last

    def emit(p, c, kind, field=None):
        pkts.append(p)
        release.append(c)
        kinds.append(kind)
        fields.append(field)
        last[0] = c

    def sentinel_pkt():
        psn, off = s_state[0], s_state[1]
        s_state[0], s_state[1] = (psn + 1) % _MOD, s_state[1] + 1
        opens = s_state[1] <= open_len
        return (sentinel, psn, int(opens), 0, off if opens else 0)

    def place(p, c, kind, field=None):
        while sentinel is not None and c - last[1] >= spacing:
            s = max(last[1] + spacing, last[0] + 1)
            if s >= c:
                s, c = c, c + 1
            emit(sentinel_pkt(), s, "sentinel")
            last[1] = s
        emit(p, c, kind, field)
        if kind != "sentinel":
            sent.append(p)

    def genuine(src, skip=0):
        nonlocal counter
        if src not in ctx:
            ctx[src] = [counter, 0, counter]
        c = ctx[src]
        psn = (c[0] + skip) % _MOD
        c[0], c[1] = (psn + 1) % _MOD, c[1] + 1 + skip
        counter = (counter + 1 + skip) % _MOD
        opens = c[1] <= open_len
        return (src, psn, int(opens), 0, (psn - c[2]) % _MOD if opens else 0)

    def forged_src():
        while True:
            s = rng.randrange(keys)
            if s != sentinel:
                return s

    if sentinel is not None:
        emit(sentinel_pkt(), 1, "sentinel")
        last[1] = 1
    while len(pkts) < n:
        action = rng.choices(names, [weights[a] for a in names])[0]
        src = rng.randrange(sources)
        batch, field = [], None
        if action == "send":
            batch = [genuine(src)]
        elif action == "gap":
            batch = [genuine(src, skip=rng.randrange(1, 4))]
        elif action in ("close", "lost_close") and src in ctx:
            del ctx[src]
            if action == "close":
                batch = [(src, rng.randrange(_MOD), rng.randrange(2), 1, 0)]
            else:
                lost_closes += 1
        elif action == "replay" and sent:
            batch = [rng.choice(sent)]
        elif action == "forge":
            batch = [(forged_src(), rng.randrange(_MOD), 1, 0, 0)]
        elif action == "flood":
            first = rng.randrange(keys)
            batch = [((first + k) % keys, rng.randrange(_MOD), 1, 0, 0)
                     for k in range(rng.randrange(4, 40)) if (first + k) % keys != sentinel]
        elif action == "mutate":
            p = genuine(src)
            while True:
                field, how = rng.choice(FIELDS), rng.choice(EDITS)
                bits = {"src": key_bits, "psn": PSN_BITS,
                        "off": OPEN_OFFSET_BITS}.get(field, 1)
                i = FIELDS.index(field)
                m = list(p)
                m[i] = _edit(rng, p[i], bits, how)
                if m[0] != sentinel:
                    break
            batch = [tuple(m), p]
        labels = ["mutant", "send"] if action == "mutate" else [action] * len(batch)
        for p, kind in zip(batch, labels, strict=True):
            if len(pkts) >= n:
                break
            step = rng.choice([1, 1, 1, 2, 3])
            if rng.random() < 0.02:
                step = idle + rng.randrange(1, 3 * idle)
            place(p, last[0] + step, kind, field if kind == "mutant" else None)
    if stats is not None:
        stats["by_mutation"] = dict(Counter(kinds[:n]), lost_close=lost_closes)
        stats["by_field"] = dict(Counter(f for f in fields[:n] if f is not None))
    return pkts[:n], release[:n]


def fuzz_chunk(seed, chunk, packets):
    """Chunk ``chunk`` of the fuzz of seed ``seed``: ``packets`` packets (the sentinel's
    included) with mutants, a random idle time from :data:`FUZZ_IDLES` and 2 to 24 genuine
    sources. Returns ``dict(pkts, release, idle, sources, by_mutation, by_field)``."""
    rng = random.Random(f"ephemeral-fuzz {seed} {chunk}")
    idle, sources = rng.choice(FUZZ_IDLES), rng.randrange(2, 25)
    stats = {}
    pkts, release = hostile(rng.randrange(1 << 30), packets, sources, idle,
                            weights={"mutate": 4}, sentinel=SENTINEL, stats=stats)
    return dict(pkts=pkts, release=release, idle=idle, sources=sources, **stats)
