"""Twin of :class:`rtl.rdma.context_cache.ContextCache`, stepped one cycle at a time.

Written from the contract in that class's docstring: a set-associative cache (``ways``
ways per set, entry ``set * ways + way``, tree pseudo-LRU per set) whose static
word is filled from host memory, with groups of dynamic fields that each have one
writer and read as the filled word's fields until that writer first writes them. A
context is ``qpc_words`` host words at ``base + qpn * qpc_words`` (the ``qpc_log2``
port): a fill reads them all, keeps the static fields of word 1 and the dynamic fields of
word 0 and discards the rest; a write-back writes word 0 only.
Every read sees the contents of the start of the cycle; writes are applied by
:meth:`commit` (see :mod:`pymodel.cycle`).
"""

from collections import deque

from pymodel.cycle import note_activity
from pymodel.fields import pack, unpack
from spec.formats.roce import QPC_BYTES_CHOICES, QPC_DYNAMIC_MASK, QPC_LAYOUT
from spec.rdma_engine import CACHE_WAYS, check_cache_ways

__all__ = ["ContextCacheModel", "CACHE_WAYS", "plru_victim", "plru_touch"]



def plru_victim(bits, ways):
    """The least recently used way a tree pseudo-LRU state names (bit ``k - 1`` is tree
    node ``k``, children ``2k`` and ``2k + 1``; 0 points left)."""
    node = 1
    while node < ways:
        node = 2 * node + ((bits >> (node - 1)) & 1)
    return node - ways


def plru_touch(bits, way, ways):
    """The state after an access to ``way``: the nodes on its path point away."""
    node = ways + way
    while node > 1:
        parent, side = node >> 1, node & 1
        bits = (bits & ~(1 << (parent - 1))) | ((side ^ 1) << (parent - 1))
        node = parent
    return bits


class ContextCacheModel:
    """Contents, fill queue and counters of one engine's context cache."""

    def __init__(self, entries, groups, base=0, depth=1 << 15, used=None, ways=1,
                 qpc_words=1):
        self.n, self.base, self.depth = entries, base, depth
        if isinstance(qpc_words, bool) or 64 * qpc_words not in QPC_BYTES_CHOICES:
            raise ValueError(f"qpc_words (qpc_bytes / 64) must be one of "
                             f"{tuple(b // 64 for b in QPC_BYTES_CHOICES)}, not {qpc_words!r}")
        self.words = qpc_words
        self.fill_word = 0                    # the next word's place in its fill
        self.held = 0                         # word 0 of the fill in progress
        self.fill_discards = 0
        self.used = used or entries          # entries in use (the cache_log2 port)
        if self.used > entries or self.used & (self.used - 1):
            raise ValueError(f"cache entries in use must be a power of two up to {entries}, "
                             f"not {self.used!r}")
        self.ways = check_cache_ways(ways, self.used, "entries in use")
        self.sets = self.used // ways
        self.plru = [0] * (entries // ways)  # tree pseudo-LRU bits per set
        self.busy_skips = 0
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
    def _found(self, qpn):
        """The entry holding ``qpn`` (or None) and its set's first entry."""
        if self.ways == 1:
            e = qpn % self.used
            return (e if self.tags[e] == qpn else None), e
        first = (qpn % self.sets) * self.ways
        for e in range(first, first + self.ways):
            if self.tags[e] == qpn:
                return e, first
        return None, first

    def _candidate(self, first):
        for e in range(first, first + self.ways):
            if self.tags[e] is None:
                return e
        return first + plru_victim(self.plru[first // self.ways], self.ways)

    def entry_of(self, qpn):
        """The ``entry`` port for a lookup of ``qpn``: its entry on a hit, else the
        candidate entry a miss would fill."""
        e, first = self._found(qpn)
        if e is not None:
            return e
        return first if self.ways == 1 else self._candidate(first)

    def probe_entry(self, qpn):
        """A ``probe``'s ``entry``: the entry holding ``qpn``, else its set's first."""
        e, first = self._found(qpn)
        return first if e is None else e

    def hit(self, qpn):
        return self._found(qpn)[0] is not None

    def ready(self, e):
        return not self.filling[e]

    def victim(self, qpn):
        """The QP held in ``entry_of(qpn)`` (the ``victim`` port), or None."""
        return self.tags[self.entry_of(qpn)]

    def present(self, qpn):
        """A ``probe``: ``qpn``'s context is in the cache and filled."""
        e = self._found(qpn)[0]
        return e is not None and not self.filling[e]

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
        word = pack(QPC_LAYOUT, ctx)
        return word if self.words == 1 else word & QPC_DYNAMIC_MASK

    # ---- the cycle's actions ----
    def lookup(self, qpn, victim_busy, fill_room, wb_room):
        """A lookup presented this cycle. Returns ``(taken, fill_addr, writeback)`` where
        ``fill_addr`` (a word address) and ``writeback`` (``(addr, word)``) are what the
        cache pushes this cycle, or None."""
        e = self.entry_of(qpn)
        if self.tags[e] == qpn:
            self.count["lookups"] += 1
            self._touch(e)
            return True, None, None
        victim = self.tags[e]
        need_wb = victim is not None and any(self.dyn[g][e] is not None for g in self.groups)
        if victim_busy or self.filling[e]:
            self.busy_skips += 1
            self._touch(e)
            return False, None, None
        if not fill_room or (need_wb and not wb_room) or len(self.order) >= self.n:
            return False, None, None
        self._touch(e)
        self.count["lookups"] += 1
        self.count["misses"] += 1
        wb = None
        if need_wb:
            self.count["writebacks"] += 1
            wb = ((self.base + victim * self.words) % self.depth, self._writeback_word(e))
        self._staged.append(("miss", e, qpn))
        return True, (self.base + qpn * self.words) % self.depth, wb

    def _touch(self, e):
        if self.ways > 1:
            self._staged.append(("touch", e))

    def fill(self, word):
        """A fill word arrives this cycle (for the oldest outstanding miss): word 0 is
        held, word 1 (word 0 when a context is one word) is merged with it and kept,
        later words are discarded; the fill is done at its last word."""
        k = self.fill_word
        self.fill_word = 0 if k == self.words - 1 else k + 1
        if k == 0:
            self.held = word
        if k > 1:
            self.fill_discards += 1
        if k == min(1, self.words - 1):
            dyn = word if k == 0 else self.held
            self._staged.append(("keep", (dyn & QPC_DYNAMIC_MASK) | (word & ~QPC_DYNAMIC_MASK)))
        if k == self.words - 1:
            self._staged.append(("fill",))

    def write_group(self, name, e, values):
        self._staged.append(("group", name, e, dict(values)))

    def commit(self):
        if not self._staged:
            return                  # nothing staged: contents and counters stand
        note_activity()
        fills = 0
        for op in self._staged:
            if op[0] == "keep":
                self.static[self.order[0]] = op[1]
            elif op[0] == "fill":
                e = self.order.popleft()
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
            elif op[0] == "touch":
                s, w = divmod(op[1], self.ways)
                self.plru[s] = plru_touch(self.plru[s], w, self.ways)
        self._staged = []
        self.count["fills_max"] = max(self.count["fills_max"], len(self.order))
