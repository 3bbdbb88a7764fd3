"""Building blocks of the golden models that are stepped one cycle at a time.

The pipelined RTL blocks talk to each other only through synchronous FIFOs and through
registers or memories that are written at the clock edge. A twin of such a block reads,
in cycle ``c``, only what the RTL sees in ``c``: the FIFO levels and heads and the
register contents as they were at the start of the cycle. Writes and pops made during
the cycle are staged and applied together by :func:`commit` at its end, so the order in
which the twins of one system are stepped inside a cycle does not matter.

:class:`Fifo` is the twin of ``amaranth.lib.fifo.SyncFIFO`` (first-word fall-through):
``can_read`` is ``level != 0`` and ``can_write`` is ``level != depth``, both from the
level at the start of the cycle; an entry written in cycle ``c`` can be read from cycle
``c + 1``; a pop in the same cycle does not make room for a write.
"""

from collections import deque

__all__ = ["Fifo", "Staged", "StagedLog", "StagedNonzero", "commit_all", "note_activity",
           "take_activity"]

#: Set when a commit changes anything (a FIFO push or pop, a register write): a system
#: model that saw a cycle without any change may skip to its next external event.
_ACTIVITY = [False]


def note_activity():
    """Record that state changed in this cycle (for twins with state of their own)."""
    _ACTIVITY[0] = True


def take_activity():
    """Whether any state changed since the last call (and clear the flag)."""
    seen, _ACTIVITY[0] = _ACTIVITY[0], False
    return seen


#: What a FIFO's ``_pushed`` holds when nothing is written in the cycle.
_NONE = object()


class Fifo:
    """A SyncFIFO of ``depth`` entries (any Python values), with a high-water mark."""

    __slots__ = ("depth", "name", "q", "_pushed", "_popped", "high", "_log")

    _NONE = _NONE                   # _pushed when nothing is written in the cycle

    def __init__(self, depth, name="fifo", log=None):
        if depth < 1:
            raise ValueError(f"{name}: FIFO depth must be at least 1, not {depth!r}")
        self.depth, self.name = depth, name
        self.q = deque()
        self._pushed = _NONE        # the value written in this cycle
        self._popped = 0
        self.high = 0
        self._log = log             # a StagedLog to enter at the first change of a cycle

    # ---- views of the start of the cycle ----
    def __len__(self):
        return len(self.q)

    def can_read(self):
        return len(self.q) > self._popped

    def head(self, k=0):
        """Entry ``k`` after the ones already popped in this cycle."""
        return self.q[self._popped + k]

    def can_write(self):
        """``w_rdy``: the FIFO is not full at the start of the cycle (one write a cycle;
        a pop in the same cycle does not make room)."""
        return len(self.q) < self.depth

    # ---- staged changes ----
    def read(self):
        """Pop the head (applied at the end of the cycle); returns it."""
        popped = self._popped
        q = self.q
        if len(q) <= popped:
            raise AssertionError(f"{self.name}: read from an empty FIFO")
        if not popped and self._pushed is _NONE and self._log is not None:
            self._log.items.append(self)
        self._popped = popped + 1
        return q[popped]

    def write(self, value):
        if self._pushed is not _NONE:
            raise AssertionError(f"{self.name}: two writes in one cycle")
        if len(self.q) >= self.depth:
            raise AssertionError(f"{self.name}: write into a full FIFO")
        if not self._popped and self._log is not None:
            self._log.items.append(self)
        self._pushed = value

    def commit(self):
        popped, pushed = self._popped, self._pushed
        if not popped and pushed is _NONE:
            return                  # nothing staged: the contents and the mark stand
        _ACTIVITY[0] = True
        q = self.q
        if popped:
            for _ in range(popped):
                q.popleft()
            self._popped = 0
        if pushed is not _NONE:     # (only a write can raise the mark)
            q.append(pushed)
            self._pushed = _NONE
            if len(q) > self.high:
                self.high = len(q)

    def idle(self):
        return not self.q and self._pushed is _NONE


class Staged:
    """A register or a small register file whose writes take effect at the clock edge.

    ``value`` (or ``[k]``) reads the contents of the start of the cycle; ``set``
    stages a write, applied by :meth:`commit`. Several writes to one register in a
    cycle are an error (in the RTL only one can win), unless they write the same value.
    """

    __slots__ = ("name", "array", "value", "_w", "_log")

    def __init__(self, value=None, *, size=None, name="reg", log=None):
        self.name = name
        self.array = size is not None
        #: The contents of the start of the cycle (a list for a register file); read
        #: only, written by :meth:`commit`.
        self.value = [value] * size if self.array else value
        #: Staged in this cycle, or None: ``{index: value}`` for a register file,
        #: ``(value,)`` for a register.
        self._w = None
        self._log = log             # a StagedLog to enter at the first write of a cycle

    def __getitem__(self, k):
        return self.value[k]

    def set(self, *args):
        w = self._w
        if not self.array:
            (value,) = args
            if w is None:
                if self._log is not None:
                    self._log.items.append(self)
            elif w[0] != value:
                raise AssertionError(f"{self.name}[None]: two different writes in one cycle")
            self._w = (value,)      # (an equal later write stands, as in the file)
            return
        k, value = args
        if w is None:               # the first write of the cycle
            if self._log is not None:
                self._log.items.append(self)
            self._w = {k: value}
            return
        if k in w and w[k] != value:
            raise AssertionError(f"{self.name}[{k}]: two different writes in one cycle")
        w[k] = value

    def commit(self):
        w = self._w
        if w is None:
            return
        _ACTIVITY[0] = True
        if self.array:
            v = self.value
            for k, value in w.items():
                v[k] = value
        else:
            self.value = w[0]
        self._w = None



class StagedNonzero(Staged):
    """A :class:`Staged` register file of counts that also keeps ``nonzero``, the set of
    its indexes whose value is not 0 (updated by :meth:`commit`), for a model that must
    visit the few entries in use of a large file (the completion unit's 4,096 windows)."""

    __slots__ = ("nonzero",)

    def __init__(self, value=0, *, size, name="reg", log=None):
        super().__init__(value, size=size, name=name, log=log)
        self.nonzero = set(range(size)) if value else set()

    def commit(self):
        w = self._w
        if w is None:
            return
        super().commit()
        nonzero = self.nonzero
        for k, value in w.items():
            if value:
                nonzero.add(k)
            else:
                nonzero.discard(k)

class StagedLog:
    """The FIFOs and registers of one model that staged a change in this cycle, for a
    model with many of which few change in a cycle: a :class:`Fifo` or :class:`Staged`
    made with ``log=`` enters itself at its first staged change of a cycle, and
    :meth:`commit` commits those (the others have nothing to apply)."""

    __slots__ = ("items",)

    def __init__(self):
        self.items = []

    def commit(self):
        items = self.items
        if not items:
            return
        for item in items:
            item.commit()
        items.clear()


def commit_all(items):
    """Commit every :class:`Fifo` and :class:`Staged` in ``items`` (end of a cycle); the
    ones with nothing staged are passed over without a call (most, in most cycles)."""
    for item in items:
        kind = type(item)
        if kind is Fifo:
            if item._popped or item._pushed is not _NONE:
                item.commit()
        elif kind is not Staged or item._w is not None:
            item.commit()
