"""Twin of :class:`rtl.nic.local_memory.LocalMemory`."""

__all__ = ["LocalMemoryModel"]

_WORD = (1 << 512) - 1


class LocalMemoryModel:
    """``depth`` words of 64 bytes: reads see the start of the cycle; ``step(c, side)``
    applies ``side["wr"]`` (``(addr, data, be)``) at the clock edge."""

    def __init__(self, depth, words=None):
        self.depth = depth
        self.words = list(words) if words is not None else [0] * depth
        if len(self.words) != depth:
            raise ValueError(f"memory image of {len(self.words)} words, not {depth}")

    def read(self, addr):
        return self.words[addr % self.depth]

    def step(self, c, side):
        wr = side.get("wr")
        if wr is not None:
            addr, data, be = wr
            mask = 0
            for i in range(64):
                if be >> i & 1:
                    mask |= 0xFF << (8 * i)
            self.words[addr] = (self.words[addr] & ~mask & _WORD) | (data & mask)
        return {}

    def commit(self):
        pass
