"""The receiver's rules for the packets of ephemeral contexts (docs/ephemeral.md, "Late,
duplicate and forged packets"): which packet is delivered to memory, which is a
duplicate, which is refused. A model of the rules (the RTL builds the pool that holds
the contexts, :class:`rtl.ephemeral.pool.ContextPool`, not these rules).

A packet carries its source, its PSN (24 bits, serial arithmetic) and the open flag (set
on a context's packets until its first ACK). The receiver holds at most ``entries``
contexts (source -> next expected PSN); a CLOSE frame from the source frees its context.

==============================  =============================================================
packet                          outcome (a counter of the same name)
==============================  =============================================================
no context, no open flag        ``stale``: refused (a late copy of a closed context's packet)
no context, open flag, room     ``opened``: a context at ``psn + 1``, delivered
no context, open flag, no room  ``full``: refused, not acknowledged (the sender resends)
context, ``psn == expected``    ``delivered``
context, PSN older              ``duplicate``: not delivered, acknowledged again
context, PSN newer, open flag   ``reopened``: the sender opened a new context (its first PSN
                                comes from its count of packets sent): restart at ``psn + 1``
context, PSN newer, no flag     ``gap``: refused (go-back-N: a packet before it was lost)
==============================  =============================================================
"""

from spec.formats.roce import PSN_BITS

__all__ = ["ReceiverModel", "OUTCOMES", "newer"]

OUTCOMES = ("stale", "opened", "full", "delivered", "duplicate", "reopened", "gap")
_MOD = 1 << PSN_BITS


def newer(a, b):
    """Whether PSN ``a`` comes after ``b`` (serial arithmetic over :data:`PSN_BITS`)."""
    return 0 < (a - b) % _MOD < _MOD // 2


class ReceiverModel:
    """The contexts of one receiver and its counters (:data:`OUTCOMES`)."""

    def __init__(self, entries):
        if isinstance(entries, bool) or not isinstance(entries, int) or entries < 1:
            raise ValueError(f"entries must be a positive integer, not {entries!r}")
        self.entries = entries
        self.expected = {}
        self.count = dict.fromkeys(OUTCOMES, 0)

    def arrive(self, src, psn, open_):
        """A packet arrives; returns its outcome (written to memory only for ``opened``,
        ``delivered`` and ``reopened``)."""
        exp = self.expected.get(src)
        if exp is None:
            if not open_:
                out = "stale"
            elif len(self.expected) >= self.entries:
                out = "full"
            else:
                out = "opened"
        elif psn == exp:
            out = "delivered"
        elif newer(exp, psn):
            out = "duplicate"
        else:
            out = "reopened" if open_ else "gap"
        if out in ("opened", "delivered", "reopened"):
            self.expected[src] = (psn + 1) % _MOD
        self.count[out] += 1
        return out

    def close(self, src):
        """A CLOSE frame from ``src`` frees its context (none: nothing happens)."""
        self.expected.pop(src, None)
