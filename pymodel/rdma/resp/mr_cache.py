"""Twin of :class:`rtl.rdma.resp.mr_cache.MrCache` (from its docstring)."""

from pymodel.cycle import note_activity
from pymodel.fields import unpack
from spec.formats.roce import MR_LAYOUT
from spec.rdma_responder import MR_CACHE_COUNTERS, MR_CACHE_RANGE

__all__ = ["MrCacheModel"]

_MR_MASK = (1 << MR_LAYOUT.size) - 1


class MrCacheModel:
    """``entries`` lines of the ``mr_entries``-entry MR table, direct mapped.

    Per cycle, in any order: :meth:`look` (``look`` high with ``key``; returns the MR dict
    on a hit, else None), :meth:`take` (``take`` high), :meth:`taken` (``rd_req`` was
    taken), :meth:`fill` (a word on ``fill``); :meth:`present` is ``rd_req`` (the table
    index, or None) from the state at the start of the cycle; :meth:`commit` ends the
    cycle. ``count``: :data:`MR_CACHE_COUNTERS`.
    """

    def __init__(self, entries, mr_entries):
        for name, value, (lo, hi) in (("mr_cache", entries, MR_CACHE_RANGE),
                                      ("MR table entries", mr_entries, (2, 256))):
            if (not isinstance(value, int) or isinstance(value, bool)
                    or not lo <= value <= hi or value & (value - 1)):
                raise ValueError(f"{name} must be a power of two from {lo} to {hi}, "
                                 f"not {value!r}")
        self.entries, self.mr_entries = entries, mr_entries
        self.lines = [None] * entries       # (tag, MR dict) or None (valid bit clear)
        self.req = None                     # rd_req's index while valid
        self.index = 0                      # rd_req's payload register
        self.busy = False
        self.count = dict.fromkeys(MR_CACHE_COUNTERS, 0)
        self._next = None

    def _stage(self):
        if self._next is None:
            self._next = {}
        return self._next

    def look(self, key):
        x = key % self.mr_entries
        line = self.lines[x % self.entries]
        if line is not None and line[0] == x:
            return line[1]
        if not self.busy:
            self._stage().update(busy=True, req=x, index=x)
            self.count["mr_misses"] += 1
        return None

    def take(self):
        self.count["mr_lookups"] += 1

    def present(self):
        return self.req

    def taken(self):
        self._stage().setdefault("req", None)

    def fill(self, word):
        x = self.index
        self._stage().update(busy=False, line=(x % self.entries,
                                               (x, unpack(MR_LAYOUT, word & _MR_MASK))))

    def commit(self):
        n, self._next = self._next, None
        if not n:
            return
        note_activity()
        if "line" in n:
            at, value = n.pop("line")
            self.lines[at] = value
        for k, v in n.items():
            setattr(self, k, v)
