"""Twin of :class:`rtl.host.read_splitter.ReadSplitter`: engine reads queued and cut
into chunks (read request TLPs) at ``max_read_request`` boundaries."""

from collections import deque

from spec.host import ID_BITS, MAX_READ_WORDS, WORD_BYTES

__all__ = ["ReadSplitterModel"]


class ReadSplitterModel:
    """A queue of ``profile.rd_queue`` engine reads, each ``[addr, words, id, words cut]``.

    ``step(c, side)`` takes ``side["rd_req"]`` (a dict with ``addr``, ``words``, ``id``,
    or None) when the queue had room at the start of the cycle (a read whose last chunk
    was cut in the cycle does not make room) and returns ``{"taken": bool}``; the read is
    cut from the next cycle. :meth:`cut` is the up scheduler taking the head chunk in cycle ``c``.
    Raises ``ValueError`` on a request the contract forbids.
    """

    __slots__ = ("depth", "rd_queue", "mrrs_words", "q", "_popped", "_cut_at")

    def __init__(self, profile, depth):
        self.depth, self.rd_queue = depth, profile.rd_queue
        self.mrrs_words = profile.max_read_request // WORD_BYTES
        self.q = deque()
        self._popped, self._cut_at = 0, -1   # reads left in the cycle of the last cut

    def ready(self, c):
        """``rd_req.ready`` in cycle ``c`` (from the start of the cycle)."""
        return len(self.q) + (self._popped if self._cut_at == c else 0) < self.rd_queue

    def cut(self, c):
        """The head read's next chunk, ``(addr, words, id, last)``: up to the next
        ``max_read_request`` boundary; the read leaves the queue with its last chunk."""
        head = self.q[0]
        addr, words, rid, done = head
        a = (addr + done) % self.depth
        n = min(words - done, self.mrrs_words - a % self.mrrs_words)
        head[3] = done + n
        last = head[3] == words
        if last:
            self.q.popleft()
            self._popped = (self._popped if self._cut_at == c else 0) + 1
            self._cut_at = c
        return a, n, rid, last

    def step(self, c, side):
        return {"taken": self.advance(c, side.get("rd_req"))}

    def advance(self, c, req):
        """:meth:`step` without the dicts (``req``: ``rd_req``): whether it was taken."""
        taken = req is not None and self.ready(c)
        if taken:
            addr, words, rid = req["addr"], req["words"], req["id"]
            if not 0 <= addr < self.depth or not 1 <= words <= MAX_READ_WORDS \
                    or not 0 <= rid < 1 << ID_BITS:
                raise ValueError(f"bad read request {req!r}")
            self.q.append([addr, words, rid, 0])
        return taken

    def commit(self):
        """End of the cycle: nothing staged (the interface steps its parts in the order
        of the RTL's combinational paths, so each changes its state at once)."""
