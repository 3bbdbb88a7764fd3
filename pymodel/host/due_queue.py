"""Twin of :class:`rtl.host.due_queue.DueQueue`: the chunks whose read request was sent,
in issue order, one per tag, each cut into completions at ``rcb`` boundaries."""

from collections import deque

from spec.host import WORD_BYTES

__all__ = ["DueQueueModel"]


class _Chunk:
    """A read request TLP in flight: holds a tag until its last completion starts."""

    __slots__ = ("due", "pieces")

    def __init__(self, due, pieces):
        self.due, self.pieces = due, pieces


class DueQueueModel:
    """``profile.tags`` chunks at most; a chunk pushed in cycle ``c`` is due at
    ``c + read_latency``.

    :meth:`push` is the up scheduler issuing a chunk, :meth:`take` the down scheduler
    starting the head chunk's next completion (its piece: up to the next ``rcb``
    boundary); the tag is free from the cycle after the last piece is taken.
    ``step(c, side)`` (end of the cycle) raises the ``tags_max`` counter to the level.
    """

    __slots__ = ("depth", "tags", "latency", "rcb_words", "chunks", "counters")

    def __init__(self, profile, depth, counters):
        self.depth, self.tags, self.latency = depth, profile.tags, profile.read_latency
        self.rcb_words = profile.rcb // WORD_BYTES
        self.chunks = deque()             # oldest first; len() = tags in use
        self.counters = counters

    def tag_free(self):
        return len(self.chunks) < self.tags

    def push(self, c, addr, words, rid, last):
        """Issue chunk ``(addr, words, id, last)`` in cycle ``c``."""
        pieces, off = deque(), 0
        while off < words:
            b = (addr + off) % self.depth
            k = min(words - off, self.rcb_words - b % self.rcb_words)
            off += k
            pieces.append((b, k, rid, last and off == words))
        self.chunks.append(_Chunk(c + self.latency, pieces))

    def due(self, c):
        """A completion can start in cycle ``c`` (the head chunk is due)."""
        return bool(self.chunks) and self.chunks[0].due <= c

    def take(self):
        """The head chunk's next piece ``(addr, words, id, last)``."""
        chunk = self.chunks[0]
        piece = chunk.pieces.popleft()
        if not chunk.pieces:
            self.chunks.popleft()           # the tag is free from the next cycle
        return piece

    def step(self, c, side):
        if len(self.chunks) > self.counters["tags_max"]:
            self.counters["tags_max"] = len(self.chunks)
        return {}

    def commit(self):
        """End of the cycle: nothing staged (the interface steps its parts in the order
        of the RTL's combinational paths, so each changes its state at once)."""
