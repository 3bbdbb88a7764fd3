"""Twin of :class:`rtl.common.latency_memory.LatencyMemory`."""

__all__ = ["LatencyMemoryModel"]


class LatencyMemoryModel:
    """Word memory with the RTL's read latency and same-cycle read-before-write order.

    Drive it one cycle at a time with :meth:`cycle`; it returns the read data that
    becomes valid in that cycle (or ``None``).
    """

    def __init__(self, width, depth, latency):
        self.width, self.depth, self.latency = width, depth, latency
        self.words = [0] * depth
        self._pipe = [None] * latency

    def cycle(self, rd_addr=None, wr=None):
        """One clock cycle: a read request and/or a write ``(addr, data, be)``.

        Returns the data whose ``rd_data.valid`` is high in this cycle.
        """
        out = self._pipe.pop(0)
        self._pipe.append(None if rd_addr is None else self.words[rd_addr % self.depth])
        if wr is not None:
            addr, data, be = wr
            old = self.words[addr % self.depth]
            for lane in range(self.width):
                if (be >> lane) & 1:
                    mask = 0xFF << (8 * lane)
                    old = (old & ~mask) | (data & mask)
            self.words[addr % self.depth] = old
        return out
