"""Play a preloaded list of stream payloads into a design, with seeded gaps."""

from amaranth import Module, ResetSignal, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.common.stall_pattern import StallPattern

__all__ = ["StreamPlayer"]


class StreamPlayer(wiring.Component):
    """Drive ``o`` from the memory ``items``, one item per transfer, Python-free.

    Parameters
    ----------
    shape : shape-like
        Payload shape of the driven stream.
    depth : int
        Items the player can hold.
    timed : bool
        With a memory ``release_at`` of a 32-bit cycle per item: item ``k`` is offered only
        from cycle ``release[k]`` on (open-loop arrivals, issuer costs, spaced requests).

    Ports
    -----
    o : Out(stream.Signature(shape))
        ``valid`` while items remain, the stall pattern says go, the item's release cycle
        has come (``timed``) and reset is released (nothing is offered during reset);
        ``payload`` is ``items[index]``. On a transfer the index advances.
    count : In(range(depth + 1))
        Items to play; hold constant from reset.
    stall_seed, stall_rate : In(16), In(8)
        The :class:`StallPattern` that withholds ``valid``.
    now : In(32)
        The cycle counter; the cycle of each transfer is written to ``stamps``.
    done : Out(1)
        All ``count`` items have been transferred.

    The testbench writes ``items`` and ``release_at`` (and reads ``stamps``) through VPI in
    bulk, before reset is released.

    Timing: ``payload`` (and the release cycle) come from a registered read of the memory
    addressed by the index of the next cycle, so the output is ``items[index]`` exactly
    as a combinational read would give, one clock edge after the memory was written (the
    read repeats every cycle, reset included, so items loaded before reset is released
    are seen). The read is registered for simulation speed, not behaviour: the memories
    are writable through VPI, so Verilator treats them like inputs and re-evaluates all
    logic combinationally downstream of a read of them at every input change (the clock's
    twice a cycle); a registered read ends that path at the clock edge.
    """

    def __init__(self, shape, depth, timed=False):
        self.shape, self.depth, self.timed = shape, depth, bool(timed)
        super().__init__({
            "o": Out(stream.Signature(shape)),
            "count": In(range(depth + 1)),
            "stall_seed": In(16),
            "stall_rate": In(8),
            "now": In(32),
            "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.items = items = memory.Memory(shape=self.shape, depth=self.depth, init=[])
        m.submodules.stamps = stamps = memory.Memory(shape=32, depth=self.depth, init=[])
        m.submodules.pattern = pattern = StallPattern()
        rp = items.read_port(domain="sync", transparent_for=())
        wp = stamps.write_port()
        index = Signal(range(self.depth + 1))
        nxt = Signal(range(self.depth + 1))
        due = Signal(init=1)
        if self.timed:
            m.submodules.release_at = release = memory.Memory(shape=32, depth=self.depth,
                                                           init=[])
            rel = release.read_port(domain="sync", transparent_for=())
            m.d.comb += [rel.addr.eq(nxt), due.eq(self.now >= rel.data)]
        m.d.comb += [
            nxt.eq(index + (self.o.valid & self.o.ready)),
            pattern.seed.eq(self.stall_seed),
            pattern.rate.eq(self.stall_rate),
            rp.addr.eq(nxt),
            self.o.payload.eq(rp.data),
            self.o.valid.eq((index < self.count) & due & ~pattern.stall & ~ResetSignal()),
            self.done.eq(index >= self.count),
            wp.addr.eq(index),
            wp.data.eq(self.now),
            wp.en.eq(self.o.valid & self.o.ready),
        ]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += index.eq(index + 1)
        return m
