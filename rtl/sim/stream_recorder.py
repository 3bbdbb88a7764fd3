"""Record what a design sends on a stream, with seeded backpressure and cycle stamps."""

from amaranth import Module, ResetSignal, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.common.stall_pattern import StallPattern

__all__ = ["StreamRecorder"]


class StreamRecorder(wiring.Component):
    """Take items from ``i`` into the memory ``items`` and their cycle into ``stamps``.

    Ports
    -----
    i : In(stream.Signature(shape))
        ``ready`` unless the stall pattern says stall (never during reset).
    stall_seed, stall_rate : In(16), In(8)
        The :class:`StallPattern` that withholds ``ready``.
    now : In(32)
        The cycle counter.
    count : Out(range(depth + 1))
        Items recorded; items beyond ``depth`` are taken, not stored, and set
        ``overflow``.
    expect : In(range(depth + 1))
        Items the testbench waits for; ``done`` is ``count >= expect``.
    """

    def __init__(self, shape, depth):
        self.shape, self.depth = shape, depth
        super().__init__({
            "i": In(stream.Signature(shape)),
            "stall_seed": In(16),
            "stall_rate": In(8),
            "now": In(32),
            "count": Out(range(depth + 1)),
            "expect": In(range(depth + 1)),
            "done": Out(1),
            "overflow": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.items = items = memory.Memory(shape=self.shape, depth=self.depth, init=[])
        m.submodules.stamps = stamps = memory.Memory(shape=32, depth=self.depth, init=[])
        m.submodules.pattern = pattern = StallPattern()
        wi, ws = items.write_port(), stamps.write_port()
        take = Signal()
        room = Signal()
        m.d.comb += [
            pattern.seed.eq(self.stall_seed),
            pattern.rate.eq(self.stall_rate),
            self.i.ready.eq(~pattern.stall & ~ResetSignal()),
            take.eq(self.i.valid & self.i.ready),
            room.eq(self.count < self.depth),
            wi.addr.eq(self.count), wi.data.eq(self.i.payload), wi.en.eq(take & room),
            ws.addr.eq(self.count), ws.data.eq(self.now), ws.en.eq(take & room),
            self.done.eq(self.count >= self.expect),
        ]
        with m.If(take):
            with m.If(room):
                m.d.sync += self.count.eq(self.count + 1)
            with m.Else():
                m.d.sync += self.overflow.eq(1)
        return m
