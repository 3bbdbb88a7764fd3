"""The receiver's rules for the packets of ephemeral contexts (docs/ephemeral.md, "Late,
duplicate and forged packets"): which packet is delivered to memory, which is a
duplicate, which is refused. :func:`outcome` states them once; :class:`ReceiverModel`
applies them to a dictionary of contexts, :class:`ReceiverTwin` (the twin of
:class:`rtl.ephemeral.receiver.EphemeralReceiver`) to the pool twin, one cycle at a time.

A packet carries its source, its PSN (24 bits, serial arithmetic), the open flag (set
on a context's packets until its first ACK), with it the packet's offset from its
context's first PSN (``off``, :data:`spec.ephemeral.OPEN_OFFSET_BITS`; 0 on the first
packet), and its kind (data or CLOSE). The receiver holds at most ``entries`` contexts
(source -> next expected PSN) and opens one only at its first PSN, on the context's
*first* packet (the open flag with offset 0, :func:`first`): an open packet with a nonzero
offset says its context's first packet is missing. A CLOSE frame from the source frees
its context.

==============================  =============================================================
packet                          outcome (a counter of the same name)
==============================  =============================================================
no context, no open flag        ``stale``: refused (a late copy of a closed context's packet)
no context, first, room         ``opened``: a context at ``psn + 1``, delivered
no context, first, no room      ``full``: refused, not acknowledged (the sender resends)
no context, open, offset > 0    ``gap``: refused (the context's first packet, ``psn - off``,
                                is missing; go-back-N resends from it)
context, ``psn == expected``    ``delivered``
context, PSN older              ``duplicate``: not delivered, acknowledged again
context, PSN newer, first       ``reopened``: the sender opened a new context (its first PSN
                                comes from its count of packets sent): restart at ``psn + 1``
context, PSN newer, otherwise   ``gap``: refused (go-back-N: a packet before it was lost)
CLOSE, context                  ``closed``: the context is freed
CLOSE, no context               ``stale``: nothing changes (a late or repeated CLOSE)
==============================  =============================================================
"""

from pymodel.ephemeral.pool import ContextPoolModel
from spec.ephemeral import (
    RECV_DELIVERS,
    RECV_OUTCOMES,
    Verdict,
    check_receiver,
)
from spec.formats.roce import PSN_BITS

__all__ = ["ReceiverModel", "ReceiverTwin", "OUTCOMES", "newer", "first", "outcome"]

OUTCOMES = RECV_OUTCOMES
_MOD = 1 << PSN_BITS


def newer(a, b):
    """Whether PSN ``a`` comes after ``b`` (serial arithmetic over :data:`PSN_BITS`)."""
    return 0 < (a - b) % _MOD < _MOD // 2


def first(open_, close, off):
    """Whether a packet is its context's first (the open flag, offset 0, not a CLOSE): the
    only packet that opens or reopens a context (the pool's lookup asks ``open`` for it
    alone)."""
    return bool(open_) and not close and off == 0


def outcome(expected, psn, open_, close, room, off=0):
    """The outcome (a name of :data:`OUTCOMES`) of a packet: ``expected`` the next PSN of
    its source's context (None: no context), ``close`` a CLOSE frame, ``room`` whether a
    context could be opened, ``off`` an open packet's offset from its context's first
    PSN."""
    if close:
        return "stale" if expected is None else "closed"
    if expected is None:
        if not open_:
            return "stale"
        if off:
            return "gap"
        return "opened" if room else "full"
    if psn == expected:
        return "delivered"
    if newer(expected, psn):
        return "duplicate"
    return "reopened" if first(open_, close, off) else "gap"


class ReceiverModel:
    """The contexts of one receiver and its counters (:data:`OUTCOMES`)."""

    def __init__(self, entries):
        if isinstance(entries, bool) or not isinstance(entries, int) or entries < 1:
            raise ValueError(f"entries must be a positive integer, not {entries!r}")
        self.entries = entries
        self.expected = {}
        self.count = dict.fromkeys(OUTCOMES, 0)

    def arrive(self, src, psn, open_, close=False, off=0):
        """A packet arrives (``off``: an open packet's offset from its context's first
        PSN); returns its outcome (written to memory only for ``opened``, ``delivered``
        and ``reopened``)."""
        exp = self.expected.get(src)
        out = outcome(exp, psn, open_, close, len(self.expected) < self.entries, off)
        if out in RECV_DELIVERS:
            self.expected[src] = (psn + 1) % _MOD
        elif out == "closed":
            del self.expected[src]
        self.count[out] += 1
        return out

    def close(self, src):
        """A CLOSE frame from ``src`` frees its context: ``closed``, or ``stale`` when it
        has none (nothing happens)."""
        return self.arrive(src, 0, False, close=True)


class ReceiverTwin:
    """Twin of :class:`rtl.ephemeral.receiver.EphemeralReceiver`, one :meth:`cycle` per
    clock: the rules of :func:`outcome` on the contexts of a
    :class:`pymodel.ephemeral.pool.ContextPoolModel` (keyed by source, nothing
    outstanding: a context closes after ``idle`` cycles without arrivals, the fallback for
    a lost CLOSE) and a next expected PSN per entry. ``now``: the pool's ``now`` in the
    first cycle stepped."""

    def __init__(self, entries, idle, now=0):
        check_receiver(entries, idle)
        self.pool = ContextPoolModel(entries, idle, now)
        self.expected = [0] * entries
        self.count = dict.fromkeys(OUTCOMES, 0)

    def cycle(self, pkt=None):
        """One clock cycle with ``pkt`` arriving: ``(src, psn, open, close, off)`` or None.
        Returns ``(out, entry, closed)``: the packet's outcome (None without one), its
        context's entry (None for ``stale`` and ``full``) and the key the pool's scan
        closed in this cycle (or None). A packet is delivered (written) when ``out`` is in
        :data:`spec.ephemeral.RECV_DELIVERS` and acknowledged when in
        :data:`spec.ephemeral.RECV_ACKS`."""
        out = entry = req = drop = None
        if pkt is not None:
            src, psn, open_, close, off = pkt
            req = (src, int(first(open_, close, off)), 0)
            verdict, entry = self.pool.lookup(src, req[1])
            exp = self.expected[entry] if verdict == Verdict.HIT else None
            out = outcome(exp, psn, open_, close, verdict != Verdict.FULL, off)
            if out in RECV_DELIVERS:
                self.expected[entry] = (psn + 1) % _MOD
            elif out == "closed":
                drop = entry
            self.count[out] += 1
        _, _, closed = self.pool.cycle(req, None, drop)
        return out, entry, closed
