"""The receiver's window per source: which local-memory bytes each source node may write.

This is configuration per source (like the switch's route table), written at setup
through a port; nothing in it changes per message, and it holds no connection state.
"""

from amaranth import Module, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from spec.checks import check_int
from spec.formats.packet import check_width

__all__ = ["WindowTable", "window_write_layout", "window_table_bits", "SOURCES"]

#: Entries of the table: one per 8-bit source node id.
SOURCES = 256


def window_write_layout(depth):
    """One write of the table of a receiver with ``depth`` words of local memory:
    ``src`` (node id), ``base`` (first word, ``0 .. depth - 1``) and ``size`` (words,
    ``0 .. depth``; 0 forbids the source everything)."""
    return data.StructLayout({"src": 8, "base": range(depth), "size": range(depth + 1)})


def window_table_bits(depth):
    """Memory bits of the table: 256 entries of ``base`` and ``size``."""
    layout = window_write_layout(depth)
    return SOURCES * (layout["base"].width + layout["size"].width)


class WindowTable(wiring.Component):
    """Per-source receive windows of a local memory of ``depth`` words of ``width`` bytes.

    Entry ``s`` is the window of source node ``s``: the bytes
    ``[base * width, (base + size) * width)``. A store ``[addr, addr + length)`` is inside
    when ``addr >= base * width`` and ``addr + length <= (base + size) * width``, both
    computed without wrap-around (``addr + length`` has 33 bits), so a store whose end
    passes 2**32 is never inside. A window may reach past the memory; the memory's own
    bound is the receiver's separate (earlier) check.

    Parameters
    ----------
    width : int
        Datapath bytes (the window's unit is a word of ``width`` bytes).
    depth : int
        Words of local memory (2 .. 2**20).

    Ports
    -----
    wr : In(stream.Signature(window_write_layout(depth), always_ready=True))
        ``table[src] = (base, size)``, written at the clock edge ending the cycle of
        ``valid`` (effective for lookups from the next cycle). Power-up contents: every
        entry ``(0, depth)``, the whole memory. The table is a memory: a reset keeps
        what was written.
    src : In(8)
        Source node id to look up.
    lookup : In(1)
        Read ``table[src]`` at the clock edge ending this cycle (a registered read, not
        transparent: a write in the same cycle is not seen). The window read is held
        until the next lookup.
    addr : In(32), length : In(13)
        The store to check, against the window read last.
    inside : Out(1)
        Combinational: ``[addr, addr + length)`` is inside the window read last.

    Timing
    ------
    ::

        cycle      T            T+1
        lookup     1 (src=s)
        window                  table[s] as it was during T
        inside                  valid (from addr/length of T+1)

    Cost: :func:`window_table_bits` memory bits (256 x (bits(base) + bits(size))), two
    comparators of 33 bits and the read register.
    """

    def __init__(self, width, depth):
        self.width = check_width(width, self)
        self.depth = check_int(self, "memory depth (words)", depth, 2, 2**20)
        super().__init__({
            "wr": In(stream.Signature(window_write_layout(depth), always_ready=True)),
            "src": In(8),
            "lookup": In(1),
            "addr": In(32),
            "length": In(13),
            "inside": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        layout = window_write_layout(self.depth)
        entry = data.StructLayout({"base": layout["base"].shape,
                                   "size": layout["size"].shape})
        full = {"base": 0, "size": self.depth}            # the whole memory
        m.submodules.table = table = memory.Memory(shape=entry, depth=SOURCES,
                                                   init=[full] * SOURCES)
        wp = table.write_port()
        rp = table.read_port()                     # sync domain, not transparent
        m.d.comb += [
            wp.addr.eq(self.wr.payload.src),
            wp.data.base.eq(self.wr.payload.base),
            wp.data.size.eq(self.wr.payload.size),
            wp.en.eq(self.wr.valid),
            rp.addr.eq(self.src),
            rp.en.eq(self.lookup),
        ]
        shift = self.width.bit_length() - 1
        lo = Signal(range((self.depth + 1) * self.width))
        hi = Signal(range(2 * self.depth * self.width + 1))
        end = Signal(33)
        m.d.comb += [
            lo.eq(rp.data.base << shift),
            hi.eq((rp.data.base + rp.data.size) << shift),
            end.eq(self.addr + self.length),
            self.inside.eq((self.addr >= lo) & (end <= hi)),
        ]
        return m
