"""Twin of :class:`rtl.fabric.elastic_delay.ElasticDelay`."""

from collections import deque

from spec.checks import check_int
from spec.fabric import elastic_depth

__all__ = ["ElasticDelayModel"]

class ElasticDelayModel:
    """A stream delayed by at least ``latency`` cycles that holds its beats while the
    output is not ready.

    Per cycle ``c``: call :meth:`ready` (``i.ready`` of the cycle, before anything moves),
    then :meth:`cycle` with the beat offered on ``i`` (taken only if :meth:`ready` said
    so) and ``o.ready``; it returns the beat that leaves ``o`` in cycle ``c`` (or None).
    A beat taken in cycle ``t`` is on ``o`` from ``t + latency``, once the beats before
    it have left. Beats are any Python values, carried untouched.
    """

    def __init__(self, latency):
        self.latency = check_int(self, "elastic delay (cycles)", latency, 1, 4096)
        self.depth = elastic_depth(latency)
        self.q = deque()                   # (cycle it may leave, beat)

    def ready(self):
        """``i.ready`` in the coming cycle: room for one more beat."""
        return len(self.q) < self.depth

    def head(self, c):
        """The beat valid on ``o`` in cycle ``c`` (or None)."""
        return self.q[0][1] if self.q and self.q[0][0] <= c else None

    def cycle(self, c, beat=None, out_ready=True):
        """Cycle ``c``: ``beat`` (or None) offered on ``i``, ``out_ready`` the output's
        ``ready``; returns the beat that leaves ``o`` in this cycle, or None."""
        room = self.ready()
        left = self.head(c)
        if left is not None and out_ready:
            self.q.popleft()
        else:
            left = None
        if beat is not None and room:
            self.q.append((c + self.latency, beat))
        return left

    def idle(self):
        return not self.q
