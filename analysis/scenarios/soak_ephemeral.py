"""Genuine traffic for the ephemeral receiver's soak: go-back-N senders through a lossy
path, closed loop on the receiver's twin. Pure functions of their seed.

Each of ``sources`` senders (:class:`GbnSender`) posts its messages in bursts and sends
them to one receiver (:class:`pymodel.ephemeral.receiver.ReceiverTwin`) by go-back-N:

- a context opens with a new message when the sender has none; its first PSN is the
  sender's count of packets sent (docs/ephemeral.md, "Late, duplicate and forged
  packets"), so two contexts' PSNs never overlap;
- the open flag is on every packet of a context until its first ACK arrives, with the
  packet's offset from the context's first PSN (:data:`spec.ephemeral.OPEN_OFFSET_BITS`):
  the receiver opens the context only at its first PSN, so with the first packet lost
  the open packets behind it are refused (``gap``) and the first's resend opens it; up
  to ``window`` packets are in flight from the context's first;
- an ACK (cumulative: go-back-N's receiver delivers in order) moves the oldest
  unacknowledged PSN; a refusal (``full``, ``gap``, ``stale``) sends nothing back, so
  ``timeout`` cycles without progress send everything from the oldest unacknowledged
  packet again;
- a context with everything acknowledged and idle for ``sender_idle`` cycles closes: a
  CLOSE frame, then the next message opens a new context.

The path (:func:`soak_chunk`): one packet a cycle on the wire (the senders take turns),
each arriving ``one_way`` cycles after it was sent, in order; a packet is dropped with
``drop_rate`` (a packet, one PSN of one context, at most ``max_drops`` times: its
``max_drops + 1``-th copy arrives), followed by a duplicate with ``dup_rate``, or by a late
copy up to ``late`` cycles after it with ``late_rate``; every copy of a source's packets
arrives before that source's next CLOSE (a sender waits for its copies in flight before it
closes). An ACK comes back ``one_way`` cycles after the packet's arrival, lost with
``ack_drop_rate``.

The design's assumptions (docs/ephemeral.md) and what they ask of the knobs, checked by
:func:`check_soak` (``ValueError`` naming the knob):

- in-order delivery (a CLOSE after every copy of its context's packets): the path above;
- a lost CLOSE is recovered by the receiver's idle close, and a receiver's context must
  outlive every gap between a live context's arrivals, or a packet of the open context
  would find none (``stale``) and its sender would resend it for good: ``idle`` at least
  ``sender_idle + 2 * one_way + (max_drops + 1) * (timeout + 1) + late + SLACK``;
- a late copy never outlives its context at the receiver: ``late`` below ``idle``;
- ``timeout`` above the round trip (``2 * one_way``), or every packet would be sent twice;
- ``window`` at most ``2**OPEN_OFFSET_BITS``: an open packet's offset (below the window)
  fits its field.
"""

import random

from pymodel.ephemeral.receiver import ReceiverTwin, newer
from spec.ephemeral import OPEN_OFFSET_BITS, RECV_ACKS, RECV_DELIVERS, check_receiver
from spec.formats.roce import PSN_BITS

__all__ = ["SOAK_DEFAULTS", "SLACK", "GbnSender", "check_soak", "soak_chunk",
           "soak_errors"]

_MOD = 1 << PSN_BITS
#: The soak's knobs (cycles, rates per packet): chosen, not measured. A pool of 8 for 12
#: sources, so that opens are refused ``full``; the rates, well above the links' so that
#: every chunk recovers from many losses; ``one_way`` a short path (the co-simulation's
#: cycles are the wall time); ``idle`` the smallest power of two the assumptions allow.
SOAK_DEFAULTS = dict(entries=8, sources=12, window=16, one_way=8, timeout=48,
                     sender_idle=16, idle=256, drop_rate=0.01, max_drops=2, dup_rate=0.005,
                     late_rate=0.005, late=32, ack_drop_rate=0.01)
#: Cycles without a delivery, after the last message was posted and before every sender
#: has closed, after which a chunk counts as hung: many times the slowest recovery the
#: assumptions allow (``idle``, :func:`check_soak`); chosen.
HANG_CYCLES = 20_000
#: Cycles of margin in the idle rule: a send may wait for a wire slot a late copy holds.
SLACK = 16


def _rate(name, v):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1:
        raise ValueError(f"{name} must be a probability from 0 to below 1, not {v!r}")


def _cycles(name, v, least=1):
    if isinstance(v, bool) or not isinstance(v, int) or v < least:
        raise ValueError(f"{name} must be a whole number of at least {least}, not {v!r}")


def check_soak(k):
    """The soak's knobs (``k``: :data:`SOAK_DEFAULTS`' keys); ``ValueError`` names the
    first bad one, or the assumption a combination breaks."""
    unknown = sorted(set(k) - set(SOAK_DEFAULTS))
    if unknown:
        raise ValueError(f"unknown soak knob {unknown[0]!r}")
    check_receiver(k["entries"], k["idle"])
    for name in ("sources", "window", "one_way", "timeout", "sender_idle"):
        _cycles(name, k[name])
    for name in ("max_drops", "late"):
        _cycles(name, k[name], 0)
    for name in ("drop_rate", "dup_rate", "late_rate", "ack_drop_rate"):
        _rate(name, k[name])
    if k["sources"] >= 1 << 12:
        raise ValueError(f"sources must be below 4096 (12-bit node ids), not {k['sources']}")
    if k["window"] > 1 << OPEN_OFFSET_BITS:
        raise ValueError(f"window must be at most 2**{OPEN_OFFSET_BITS} (an open packet's "
                         f"offset from its context's first PSN, below the window, fits "
                         f"OPEN_OFFSET_BITS), not {k['window']}")
    if k["timeout"] <= 2 * k["one_way"]:
        raise ValueError(f"timeout ({k['timeout']}) must exceed the round trip "
                         f"(2 * one_way = {2 * k['one_way']})")
    if k["late"] >= k["idle"]:
        raise ValueError(f"late ({k['late']}) must be below idle ({k['idle']}): a late copy "
                         "of an open packet would reopen a context closed on idle")
    need = (k["sender_idle"] + 2 * k["one_way"] + (k["max_drops"] + 1) * (k["timeout"] + 1)
            + k["late"] + SLACK)
    if k["idle"] < need:
        raise ValueError(f"idle ({k['idle']}) must be at least sender_idle + 2 * one_way + "
                         f"(max_drops + 1) * (timeout + 1) + late + {SLACK} = {need}: the "
                         "receiver would close a context its sender still uses")
    return k


class GbnSender:
    """One sender's go-back-N toward the receiver (see the module docstring)."""

    def __init__(self, src, psn0, window, timeout, sender_idle):
        self.src, self.count = src, psn0          # count: packets sent (mod 2**24)
        self.window, self.timeout, self.sender_idle = window, timeout, sender_idle
        self.posted = 0                            # messages waiting for a PSN
        self.ctx = False
        self.next = self.acked = self.send = self.first = 0
        self.established = False
        self.timer = self.last = 0
        self.copies_until = -1                     # the last arrival of a copy in flight
        self.messages = []                         # PSNs given to messages
        self.closes = self.resent = 0

    def inflight(self):
        return (self.next - self.acked) % _MOD

    def done(self):
        return not self.posted and not self.ctx

    def on_ack(self, psn, t):
        """An ACK of ``psn`` arrives in cycle ``t``."""
        if not self.ctx or not (psn - self.acked) % _MOD < self.inflight():
            return
        self.acked = (psn + 1) % _MOD
        self.established = True
        self.timer = self.last = t
        if newer(self.acked, self.send):
            self.send = self.acked

    def tick(self, t):
        """The go-back-N timer in cycle ``t``."""
        if self.ctx and self.inflight() and t - self.timer >= self.timeout:
            self.send, self.timer = self.acked, t

    def offer(self, t, arrive):
        """The packet ``(src, psn, open, close, off)`` this sender would send in cycle ``t``
        (arriving in ``arrive``), or None; :meth:`sent` takes it."""
        if self.ctx and newer(self.next, self.send):
            return self._data(self.send)
        if self.posted and (not self.ctx or self.inflight() < self.window):
            return self._data(self.next) if self.ctx else (self.src, self.count, 1, 0, 0)
        if (self.ctx and not self.inflight() and t - self.last >= self.sender_idle
                and arrive > self.copies_until):
            return (self.src, self.next, 0, 1, 0)
        return None

    def _data(self, psn):
        """A data packet of the open context: the open flag and the offset from the
        context's first PSN until its first ACK."""
        if self.established:
            return (self.src, psn, 0, 0, 0)
        return (self.src, psn, 1, 0, (psn - self.first) % _MOD)

    def sent(self, pkt, t):
        """``pkt`` (from :meth:`offer`) goes on the wire in cycle ``t``."""
        _, psn, _, close, _ = pkt
        self.count = (self.count + 1) % _MOD
        self.last = t
        if close:
            self.ctx, self.closes = False, self.closes + 1
            return
        if not self.ctx:
            self.ctx, self.established = True, False
            self.next = self.acked = self.send = self.first = psn
        if psn == self.next:                       # a new message
            self.posted -= 1
            self.messages.append(psn)
            self.next = self.send = (psn + 1) % _MOD
            if self.inflight() == 1:
                self.timer = t
        else:                                      # go-back-N: sent again
            self.resent += 1
            self.send = (psn + 1) % _MOD


def soak_chunk(seed, chunk, messages, lose=(), **knobs):
    """Chunk ``chunk`` of the soak of seed ``seed``: ``messages`` messages of the senders
    through the path into the twin, until every sender has closed and the receiver's
    contexts have closed on idle (or a hang: no delivery for :data:`HANG_CYCLES`).
    ``lose``: ``(source, n)`` pairs, the ``n``-th packet (from 0) that source puts on the
    wire is dropped (besides the random drops; the tests' hand-made losses).

    Returns ``dict(pkts, release, events, twin, senders, figures)``: the packets as they
    arrive and their cycles (strictly increasing, from 1), the twin's events as
    :func:`tb.ephemeral_receiver.model_events` gives them (outcomes, deliveries, ACKs,
    idle closes; up to ``end``), the twin, the senders and the chunk's figures."""
    k = check_soak(dict(SOAK_DEFAULTS, **knobs))
    rng = random.Random(f"ephemeral-soak {seed} {chunk}")
    n_src, ow = k["sources"], k["one_way"]
    senders = [GbnSender(s, rng.randrange(_MOD), k["window"], k["timeout"],
                         k["sender_idle"]) for s in range(n_src)]
    # Each sender's messages, posted in bursts of 1 to 32, the next burst as the wire's
    # share of the sender has sent this one (``sources`` cycles a message) plus a pause:
    # none, or long enough that its context closes (and, at ``2 * idle``, that a context
    # left open by a lost CLOSE closes on idle).
    share = [messages // n_src + (s < messages % n_src) for s in range(n_src)]
    posts = {}
    for s in range(n_src):
        t, left = rng.randrange(64), share[s]
        while left:
            burst = min(left, rng.randrange(1, 33))
            posts.setdefault(t, []).append((s, burst))
            left -= burst
            t += n_src * burst + rng.choice([0, 0, 4 * k["timeout"], 2 * k["idle"]])
    twin = ReceiverTwin(k["entries"], k["idle"])
    wire = {}                   # arrival cycle -> packet
    acks = {}                   # cycle -> [(src, psn)]
    drops = {}                  # (src, psn) -> times dropped
    outs, delivers, ack_ev, closes, pkts, release = [], [], [], [], [], []
    fig = dict(dropped=0, duplicated=0, late_copies=0, acks_dropped=0)
    turn, t, progress = 0, 0, 0
    lose, put = set(lose), [0] * n_src
    last_post = max(posts)
    end = None
    while True:
        for s, burst in posts.get(t, ()):
            senders[s].posted += burst
        for src, psn in acks.pop(t, ()):
            senders[src].on_ack(psn, t)
        # One sender's packet on the wire, the senders in turn.
        for snd in senders:
            snd.tick(t)
        arrive = t + ow
        if arrive not in wire:
            for j in range(n_src):
                snd = senders[(turn + j) % n_src]
                pkt = snd.offer(t, arrive)
                if pkt is None:
                    continue
                turn = (turn + j + 1) % n_src
                key = (pkt[0], pkt[1])      # a source reuses no PSN within 2**24 packets
                snd.sent(pkt, t)
                put[pkt[0]] += 1
                if (pkt[0], put[pkt[0]] - 1) in lose or (
                        drops.get(key, 0) < k["max_drops"] and rng.random() < k["drop_rate"]):
                    drops[key] = drops.get(key, 0) + 1
                    fig["dropped"] += 1
                    break
                wire[arrive] = pkt
                extra = None
                if pkt[3]:                  # a CLOSE is never copied
                    pass
                elif rng.random() < k["dup_rate"]:
                    extra, fig["duplicated"] = arrive + 1, fig["duplicated"] + 1
                elif k["late"] and rng.random() < k["late_rate"]:
                    extra = arrive + 1 + rng.randrange(k["late"])
                    fig["late_copies"] += 1
                if extra is not None:
                    while extra in wire:
                        extra += 1
                    wire[extra] = pkt
                    snd.copies_until = max(snd.copies_until, extra)
                break
        pkt = wire.pop(t, None)
        out, entry, closed = twin.cycle(pkt)
        if out is not None:
            pkts.append(pkt)
            release.append(t)
            outs.append((t, out, entry or 0))
            if out in RECV_DELIVERS:
                delivers.append((t, entry, pkt[0], pkt[1]))
                progress = t
            if out in RECV_ACKS:
                ack_ev.append((t, pkt[0], pkt[1]))
                if rng.random() < k["ack_drop_rate"]:
                    fig["acks_dropped"] += 1
                else:
                    acks.setdefault(t + ow, []).append((pkt[0], pkt[1]))
        if closed is not None:
            closes.append((t, closed))
        t += 1
        if end is None:
            if t > last_post and not wire and all(s.done() for s in senders):
                end = t + k["idle"] + 2 * k["entries"] + 2
            elif t > last_post and t - progress > HANG_CYCLES:
                end = t
                break
        elif t >= end:
            break
    fig.update(cycles=t, hang=int(not all(s.done() for s in senders)),
               resent=sum(s.resent for s in senders), closes=sum(s.closes for s in senders),
               messages=sum(len(s.messages) for s in senders), packets=len(pkts))
    return dict(pkts=pkts, release=release, events=(outs, delivers, ack_ev, closes),
                twin=twin, senders=senders, figures=fig, end=t, posted=messages)


def soak_errors(chunk):
    """Model-free checks of a chunk (:func:`soak_chunk`'s result; the deliveries the RTL
    made, when they equal the twin's): every message posted was given a PSN and delivered
    exactly once, nothing delivered that is not a message, every sender acknowledged and
    closed, no hang. Returns the failures' texts."""
    errors = []
    _, delivers, _, _ = chunk["events"]
    got = {}
    for _, _, src, psn in delivers:
        got[(src, psn)] = got.get((src, psn), 0) + 1
    want = {(s.src, p) for s in chunk["senders"] for p in s.messages}
    if len(want) != chunk["posted"]:
        errors.append(f"{chunk['posted'] - len(want)} messages never sent")
    lost = [m for m in want if m not in got]
    if lost:
        errors.append(f"{len(lost)} messages lost, first {sorted(lost)[:3]}")
    twice = [m for m, n in got.items() if n > 1]
    if twice:
        errors.append(f"{len(twice)} messages delivered more than once, first "
                      f"{sorted(twice)[:3]}")
    extra = [m for m in got if m not in want]
    if extra:
        errors.append(f"{len(extra)} deliveries of no message, first {sorted(extra)[:3]}")
    open_ = [s.src for s in chunk["senders"] if not s.done()]
    if open_ or chunk["figures"]["hang"]:
        errors.append(f"hang: senders {open_[:5]} not done")
    return errors
