"""Twin of :class:`rtl.host.write_buffer.WriteBuffer`: posted-write words held and
gathered into whole TLPs."""

from collections import deque

from spec.host import WORD_BYTES

__all__ = ["WriteBufferModel", "tlp_word_limit"]


def tlp_word_limit(profile):
    """Words at which a posted write TLP closes without ``last``: ``max_payload / 64``,
    or the write buffer's size if that is smaller (a TLP is sent only once it is whole,
    so a larger one could never leave)."""
    return min(profile.max_payload // WORD_BYTES, profile.wr_fifo_words)


class WriteBufferModel:
    """``profile.wr_fifo_words`` words; a TLP is whole at a word with ``last`` or at
    :func:`tlp_word_limit` words.

    ``step(c, side)``: ``side["left"]`` says a held word was written to host memory in
    ``c`` (its place is free from ``c + 1``); ``side["wr"]`` (a dict with ``addr``,
    ``data``, ``be``, ``last``, optional ``mark`` and ``tag``, or None) is taken when the
    buffer had room at the start of the cycle; returns ``{"taken": bool}``.
    :meth:`pop_tlp` is the up scheduler starting the oldest whole TLP.
    """

    __slots__ = ("depth", "words", "limit", "held", "gather", "tlps")

    def __init__(self, profile, depth):
        self.depth, self.words = depth, profile.wr_fifo_words
        self.limit = tlp_word_limit(profile)
        self.held = 0
        self.gather = []
        self.tlps = deque()

    def ready(self):
        """``wr.ready`` of the start of the cycle."""
        return self.held < self.words

    def pop_tlp(self):
        """The oldest whole TLP: a list of ``(addr, data, be, mark, tag)``."""
        return self.tlps.popleft()

    def step(self, c, side):
        return {"taken": self.advance(side.get("wr"), side.get("left"))}

    def advance(self, wr, left):
        """:meth:`step` without the dicts (``wr``, ``left``: the side inputs): whether
        ``wr`` was taken."""
        taken = wr is not None and self.held < self.words
        if left:
            self.held -= 1
        if taken:
            if not 0 <= wr["addr"] < self.depth:
                raise ValueError(f"bad write address {wr['addr']!r}")
            self.held += 1
            self.gather.append((wr["addr"], wr["data"], wr["be"], wr.get("mark", 0),
                                wr.get("tag", 0)))
            if wr["last"] or len(self.gather) == self.limit:
                self.tlps.append(self.gather)
                self.gather = []
        return taken

    def commit(self):
        """End of the cycle: nothing staged (the interface steps its parts in the order
        of the RTL's combinational paths, so each changes its state at once)."""
