"""Twin of :class:`rtl.rdma.req.miss_queue.MissQueue`."""

from pymodel.cycle import Fifo

__all__ = ["MissQueueModel"]


class MissQueueModel:
    """Items whose entry is still being filled step aside; the others pass, per entry in
    order (the RTL's docstring has the rules and the timing).

    Parameters
    ----------
    cache : pymodel.rdma.context_cache.ContextCacheModel
        Answers ``ready(entry)`` (filled) for the start of the cycle.
    inp : pymodel.cycle.Fifo
        The ``fetch`` FIFO (the ``i`` stream).
    depth : int
        Items the side queue holds (1 to 64).
    log : pymodel.cycle.StagedLog, optional
        The owner's log the side queue enters.

    The model is also the ``o`` stream as the WQE fetch stage's twin reads a FIFO:
    :meth:`can_read`, :meth:`head`, :meth:`read` (what ``o`` presents, from the state of
    the start of the cycle). :meth:`step` makes the cycle's move into the side queue; it
    and the WQE fetch stage's twin may be stepped in either order.
    """

    def __init__(self, cache, inp, depth, log=None):
        if not isinstance(depth, int) or isinstance(depth, bool) or not 1 <= depth <= 64:
            raise ValueError(f"miss queue depth must be an integer from 1 to 64, "
                             f"not {depth!r}")
        self.cache, self.inp = cache, inp
        self.side = Fifo(depth, "miss", log)
        self.count = dict(stepped_aside=0)

    # ---- the start of the cycle ----
    def _direct(self, f):
        """The head of ``i`` may go to ``o`` directly."""
        if not self.cache.ready(f["entry"]):
            return False
        for s in self.side.q:
            if s["entry"] == f["entry"] or (f["bf"] and s["bf"]):
                return False
        return True

    def _source(self):
        """The FIFO whose head ``o`` presents this cycle, or None."""
        side, inp = self.side.q, self.inp.q
        if side and self.cache.ready(side[0]["entry"]):
            return self.side
        if inp and self._direct(inp[0]):
            return self.inp
        return None

    # ---- the ``o`` stream, as a FIFO to its reader ----
    def can_read(self):
        src = self._source()
        return src is not None and src.can_read()

    def head(self):
        return self._source().head()

    def read(self):
        return self._source().read()

    def pending(self):
        """Anything in the side queue or at ``i`` (the reader or :meth:`step` has work)."""
        return bool(self.side.q or self.inp.q)

    # ---- the cycle's move ----
    def step(self, c):
        inp = self.inp.q
        if not inp or self._direct(inp[0]) or not self.side.can_write():
            return
        self.side.write(self.inp.read())
        self.count["stepped_aside"] += 1
