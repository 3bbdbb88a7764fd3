"""Twin of :class:`rtl.nic.tag_table.TagTable`."""

__all__ = ["TagTableModel"]


class TagTableModel:
    """Busy and pending tags and their entries ``(laddr, length, op, dst)``.

    Reads (:meth:`free_tag`, :meth:`pending`, :attr:`entries`) see the state of the start
    of the cycle; ``step(c, side)`` is the clock edge: ``side["take"]`` an entry issued
    with :meth:`free_tag`, ``side["answer"]`` a tag whose response was accepted,
    ``side["release"]`` a tag whose response landed. Returns ``{}``.
    """

    def __init__(self, tags):
        self.tags = tags
        self.busy = [False] * tags
        self.pend = [False] * tags
        self.entries = [None] * tags
        self.outstanding = 0
        self.peak = 0

    def free_tag(self):
        """The lowest tag that is not busy, or None."""
        for t in range(self.tags):
            if not self.busy[t]:
                return t
        return None

    def pending(self, tag):
        return tag < self.tags and self.pend[tag]

    def step(self, c, side):
        take = side.get("take")
        if take is not None:
            t = self.free_tag()
            self.busy[t] = self.pend[t] = True
            self.entries[t] = take
            self.outstanding += 1
        if side.get("answer") is not None:
            self.pend[side["answer"]] = False
        if side.get("release") is not None:
            self.busy[side["release"]] = False
            self.outstanding -= 1
        self.peak = max(self.peak, self.outstanding)
        return {}

    def commit(self):
        pass
