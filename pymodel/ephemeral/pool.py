"""Twin of :class:`rtl.ephemeral.pool.ContextPool`, stepped one cycle at a time.

Written from the contract in that class's docstring: a lookup per cycle (``HIT``,
``OPENED`` on the lowest free entry, ``FULL`` which is not taken, ``STALE`` which is taken
and changes nothing), a completion per cycle, a drop per cycle (an entry closed on
request) and the close scan of entry ``now % entries``. Every decision of a cycle reads
the state at its start; :meth:`ContextPoolModel.cycle` applies the changes at its end.
"""

import heapq

from spec.ephemeral import (
    POOL_COUNTERS,
    STAMP_BITS,
    Verdict,
    check_idle,
    check_pool_entries,
)

__all__ = ["ContextPoolModel"]

_MASK = (1 << STAMP_BITS) - 1


class ContextPoolModel:
    """Entries (key, outstanding, stamp), the cycle count and the counters of one pool.

    ``now`` is the value of the RTL's ``now`` port in the first cycle stepped (0 when
    stepped from the cycle after reset)."""

    def __init__(self, entries, idle, now=0):
        check_pool_entries(entries, "entries")
        self.n, self.idle = entries, check_idle(idle)
        self.now = now & _MASK
        self.valid = [False] * entries
        self.keys = [0] * entries
        self.outs = [0] * entries
        self.stamps = [0] * entries
        self.where = {}                  # key -> entry, the valid ones
        self.free = list(range(entries))    # free entries, a heap: the lowest first
        self.used = self.used_max = 0
        self.count = dict.fromkeys(POOL_COUNTERS, 0)

    def lookup(self, key, open_):
        """``(verdict, entry)`` a lookup of ``key`` sees in this cycle (entry None for
        ``FULL`` and ``STALE``)."""
        e = self.where.get(key)
        if e is not None:
            return Verdict.HIT, e
        if not open_:
            return Verdict.STALE, None
        if self.free:
            return Verdict.OPENED, self.free[0]
        return Verdict.FULL, None

    def cycle(self, req=None, done=None, drop=None):
        """One clock cycle. ``req``: ``(key, open, count)`` or None; ``done``: an entry
        or None; ``drop``: an entry to close on request (if valid; not the scan's, not
        counted) or None. Returns ``(verdict, entry, closed_key)``: the lookup's outcome
        (None without ``req``) and the key the scan closed in this cycle (or None)."""
        verdict = entry = None
        touched = set()
        if req is not None:
            key, open_, count = req
            verdict, entry = self.lookup(key, open_)
            if verdict == Verdict.FULL:
                self.count["full_waits"] += 1
            elif verdict == Verdict.STALE:
                self.count["stale"] += 1
            else:
                touched.add(entry)
        if done is not None and self.valid[done]:
            touched.add(done)
        if drop is not None:
            touched.add(drop)
            drop = drop if self.valid[drop] else None    # the entry as at the cycle's start
        p = self.now % self.n
        closed = None
        if (self.valid[p] and self.outs[p] == 0 and p not in touched
                and (self.now - self.stamps[p]) & _MASK >= self.idle):
            closed = self.keys[p]
        # Apply at the clock edge (a completion subtracts from the count at the start of
        # the cycle: it never takes back a message added in the same cycle).
        sub = (done is not None and self.valid[done] and self.outs[done] > 0)
        if verdict == Verdict.OPENED:
            self.valid[entry], self.keys[entry] = True, key
            self.outs[entry], self.stamps[entry] = count, self.now
            self.where[key] = entry
            heapq.heappop(self.free)
            self.count["opens"] += 1
            self.used += 1
        elif verdict == Verdict.HIT:
            self.outs[entry] += count
            self.stamps[entry] = self.now
        if done is not None and self.valid[done]:
            self.outs[done] -= sub
            self.stamps[done] = self.now
        if closed is not None:
            self.valid[p] = False
            del self.where[closed]
            heapq.heappush(self.free, p)
            self.count["closes"] += 1
            self.used -= 1
        if drop is not None:
            self.valid[drop] = False
            del self.where[self.keys[drop]]
            heapq.heappush(self.free, drop)
            self.used -= 1
        self.used_max = max(self.used_max, self.used)
        self.now = (self.now + 1) & _MASK
        return verdict, entry, closed
