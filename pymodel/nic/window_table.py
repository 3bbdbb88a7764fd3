"""Twin of :class:`rtl.nic.window_table.WindowTable`: the receive window of each source."""

from pymodel.cycle import Staged

__all__ = ["WindowTableModel"]

#: Entries of the table: one per 8-bit source node id.
SOURCES = 256


class WindowTableModel:
    """``table[src] = (base, size)`` in words; power-up: every entry ``(0, depth)``.

    ``step(c, side)``: ``side["w"]`` is a write ``(src, base, size)`` of cycle ``c`` (or
    None), effective from ``c + 1`` (at :meth:`commit`). :meth:`entry` is a lookup of
    the table as it is at the start of the cycle; :meth:`inside` the receiver's test of
    a store against a window.
    """

    def __init__(self, depth):
        self.depth = depth
        self.table = Staged((0, depth), size=SOURCES, name="window table")

    def entry(self, src):
        return self.table[src]

    @staticmethod
    def inside(window, addr, length, width):
        """``[addr, addr + length)`` lies in ``window`` (``(base, size)`` in words)."""
        return addr >= window[0] * width and addr + length <= (window[0] + window[1]) * width

    def step(self, c, side):
        write = side.get("w")
        if write is not None:
            src, base, size = write
            self.table.set(src, (base, size))
        return {}

    def commit(self):
        self.table.commit()
