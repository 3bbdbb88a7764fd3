"""Twin of :class:`rtl.rdma.context_cache.ContextCache`, stepped one cycle at a time.

Written from the contract in that class's docstring: a direct-mapped cache whose static
word is filled from host memory, with groups of dynamic fields that each have one
writer and read as the filled word's fields until that writer first writes them.
Every read sees the contents of the start of the cycle; writes are applied by
:meth:`commit` (see :mod:`pymodel.cycle`).
"""

from collections import deque

from pymodel.cycle import note_activity
from pymodel.fields import pack, unpack
from spec.formats.roce import QPC_LAYOUT

__all__ = ["ContextCacheModel"]


class ContextCacheModel:
    """Contents, fill queue and counters of one engine's context cache."""

    def __init__(self, entries, groups, base=0, depth=1 << 15, used=None):
        self.n, self.base, self.depth = entries, base, depth
        self.used = used or entries          # entries in use (the cache_log2 port)
        if self.used > entries or self.used & (self.used - 1):
            raise ValueError(f"cache entries in use must be a power of two up to {entries}, "
                             f"not {self.used!r}")
        self.groups = {name: tuple(fields) for name, fields in groups.items()}
        self.tags = [None] * entries          # qpn, or None
        self.static = [0] * entries           # the filled words (ints)
        self._fields = [(None, None)] * entries   # (word, its fields): unpacked once
        self.dyn = {g: [None] * entries for g in self.groups}   # dicts once written
        self.filling = [False] * entries
        self.order = deque()                  # entries waiting for their fill data
        self.count = dict(lookups=0, misses=0, writebacks=0, fills_max=0)
        self._staged = []

    # ---- reads (start of the cycle) ----
    def entry_of(self, qpn):
        return qpn % self.used

    def hit(self, qpn):
        return self.tags[qpn % self.used] == qpn

    def ready(self, e):
        return not self.filling[e]

    def victim(self, qpn):
        """The QP held in ``qpn``'s entry (the ``victim`` port), or None."""
        return self.tags[qpn % self.used]

    def present(self, qpn):
        """A ``probe``: ``qpn``'s context is in its entry and filled."""
        e = qpn % self.used
        return self.tags[e] == qpn and not self.filling[e]

    def static_of(self, e):
        """The fields of entry ``e``'s filled word, a dict to read, not to change (it is
        unpacked once per word and shared by every reader)."""
        word = self.static[e]
        seen, fields = self._fields[e]
        if seen != word:
            fields = unpack(QPC_LAYOUT, word)
            self._fields[e] = (word, fields)
        return fields

    def group(self, name, e):
        cur = self.dyn[name][e]
        if cur is not None:
            return dict(cur)
        ctx = self.static_of(e)
        return {f: ctx[f] for f in self.groups[name]}

    def group_view(self, name, e):
        """``group(name, e)`` to read, not to change: once the group is written, its
        dict itself rather than a copy."""
        cur = self.dyn[name][e]
        if cur is not None:
            return cur
        ctx = self.static_of(e)
        return {f: ctx[f] for f in self.groups[name]}

    def group_field(self, name, e, field):
        """``group(name, e)[field]``, without building the group's dict."""
        cur = self.dyn[name][e]
        return (cur if cur is not None else self.static_of(e))[field]

    def _writeback_word(self, e):
        ctx = dict(self.static_of(e))
        for name in self.groups:
            if self.dyn[name][e] is not None:
                ctx.update(self.dyn[name][e])
        return pack(QPC_LAYOUT, ctx)

    # ---- the cycle's actions ----
    def lookup(self, qpn, victim_busy, fill_room, wb_room):
        """A lookup presented this cycle. Returns ``(taken, fill_addr, writeback)`` where
        ``fill_addr`` (a word address) and ``writeback`` (``(addr, word)``) are what the
        cache pushes this cycle, or None."""
        e = qpn % self.used
        if self.tags[e] == qpn:
            self.count["lookups"] += 1
            return True, None, None
        victim = self.tags[e]
        need_wb = victim is not None and any(self.dyn[g][e] is not None for g in self.groups)
        if (victim_busy or self.filling[e] or not fill_room or (need_wb and not wb_room)
                or len(self.order) >= self.n):
            return False, None, None
        self.count["lookups"] += 1
        self.count["misses"] += 1
        wb = None
        if need_wb:
            self.count["writebacks"] += 1
            wb = ((self.base + victim) % self.depth, self._writeback_word(e))
        self._staged.append(("miss", e, qpn))
        return True, (self.base + qpn) % self.depth, wb

    def fill(self, word):
        """A fill word arrives this cycle (for the oldest outstanding miss)."""
        self._staged.append(("fill", word))

    def write_group(self, name, e, values):
        self._staged.append(("group", name, e, dict(values)))

    def commit(self):
        if not self._staged:
            return                  # nothing staged: contents and counters stand
        note_activity()
        fills = 0
        for op in self._staged:
            if op[0] == "fill":
                e = self.order.popleft()
                self.static[e] = op[1]
                self.filling[e] = False
                for g in self.groups:
                    self.dyn[g][e] = None
                fills -= 1
        for op in self._staged:
            if op[0] == "miss":
                _, e, qpn = op
                self.tags[e] = qpn
                self.filling[e] = True
                self.order.append(e)
            elif op[0] == "group":
                _, name, e, values = op
                self.dyn[name][e] = values
        self._staged = []
        self.count["fills_max"] = max(self.count["fills_max"], len(self.order))
