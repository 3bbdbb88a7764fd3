"""Twin of :class:`rtl.host.mmio_buffer.MmioBuffer`: host-write words, room reserved when
a write starts, each visible once it has crossed the link."""

from collections import deque

from spec.host import MMIO_NBYTES_BITS, WORD_BYTES

__all__ = ["MmioBufferModel"]


class MmioBufferModel:
    """``profile.mmio_fifo_words`` words, held or reserved.

    :meth:`reserve` is the down scheduler starting a host write of ``n`` words in cycle
    ``s`` that occupies ``down`` for ``d`` cycles: word ``j`` is taken from the host in
    ``s + j`` and visible on ``mmio`` from ``s + d - n + 2 + j``. ``step(c, side)``
    takes ``side["mmio_in"]`` when a word is due to be taken in ``c``, presents the
    oldest visible word and frees its place when ``side["mmio_ready"]``; returns
    ``{"taken": bool, "mmio": word or None}``.
    """

    __slots__ = ("words", "slots", "takes", "used")

    def __init__(self, profile):
        self.words = profile.mmio_fifo_words
        self.slots = deque()              # [visible from, word]
        self.takes = deque()              # (cycle, slot): words to take from the host
        self.used = 0                     # words held or reserved

    def room(self):
        return self.words - self.used

    def words_of(self, word):
        """Words of the host write whose first word is ``word``; ``ValueError`` when its
        byte count is outside the contract."""
        nbytes = word["nbytes"]
        n = -(-nbytes // WORD_BYTES)
        if not 1 <= nbytes < 1 << MMIO_NBYTES_BITS or n > self.words:
            raise ValueError(f"host write of {nbytes!r} bytes: must be 1 to "
                             f"{min((1 << MMIO_NBYTES_BITS) - 1, 64 * self.words)}")
        return n

    def reserve(self, s, d, n):
        for j in range(n):
            slot = [s + d - n + 2 + j, None]     # enters at s+d-n+1+j, visible after
            self.slots.append(slot)
            self.takes.append((s + j, slot))
        self.used += n

    def head(self, c):
        """The word presented on ``mmio`` in cycle ``c`` (a copy), or None."""
        if self.slots and self.slots[0][0] <= c:
            return dict(self.slots[0][1])
        return None

    def step(self, c, side):
        taken, shown = self.advance(c, side.get("mmio_in"), side.get("mmio_ready", True))
        return {"taken": taken, "mmio": shown}

    def advance(self, c, word, ready):
        """:meth:`step` without the dicts (``word``: ``mmio_in``, ``ready``:
        ``mmio_ready``): ``(taken, shown)``."""
        taken = False
        if self.takes and self.takes[0][0] == c:
            _, slot = self.takes.popleft()
            if word is None:
                raise ValueError(f"cycle {c}: the host withdrew a word of a write it "
                                 f"started")
            slot[1] = dict(word)
            taken = True
        shown = None
        if self.slots and self.slots[0][0] <= c:
            shown = dict(self.slots[0][1])
            if ready:
                self.slots.popleft()
                self.used -= 1
        return taken, shown

    def commit(self):
        """End of the cycle: nothing staged (the interface steps its parts in the order
        of the RTL's combinational paths, so each changes its state at once)."""
