"""A word-addressed memory with a fixed read latency: the host- and local-memory model."""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from spec.checks import check_int, reject

__all__ = ["write_layout", "LatencyMemory"]


def write_layout(width, depth):
    """One write: word address, data, and a byte enable per byte lane."""
    return data.StructLayout({"addr": range(depth), "data": 8 * width, "be": width})


class LatencyMemory(wiring.Component):
    """``depth`` words of ``width`` bytes, one read and one write port.

    Parameters
    ----------
    width : int
        Bytes per word (1 or more).
    depth : int
        Words, a power of two from 2 to 2**20.
    latency : int
        Cycles from an accepted read request to its data, 1 to 64.

    Ports
    -----
    rd_addr : In(stream.Signature(range(depth), always_ready=True))
        Read requests; one accepted every cycle that ``valid`` is high.
    rd_data : Out(stream.Signature(8 * width))
        ``valid`` exactly ``latency`` cycles after its request, for one cycle; there is
        no backpressure (``ready`` is ignored): the requester must take it.
    wr : In(stream.Signature(write_layout(width, depth), always_ready=True))
        Writes, applied at the clock edge that accepts them, byte lane ``i`` when
        ``be[i]`` is set. A read accepted in the same cycle as a write to the same word
        returns the old contents.

    The array is exported as the Verilog memory ``mem`` of this instance, so a testbench
    can load and dump it in bulk through VPI without touching the clock.
    """

    def __init__(self, width, depth, latency):
        check_int(self, "memory width (bytes)", width, 1, 256)
        check_int(self, "memory depth (words)", depth, 2, 2**20)
        if depth & (depth - 1):
            reject(self, f"memory depth (words) must be a power of two, not {depth!r}")
        check_int(self, "memory read latency (cycles)", latency, 1, 64)
        self.width, self.depth, self.latency = width, depth, latency
        super().__init__({
            "rd_addr": In(stream.Signature(range(depth), always_ready=True)),
            "rd_data": Out(stream.Signature(8 * width)),
            "wr": In(stream.Signature(write_layout(width, depth), always_ready=True)),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = memory.Memory(
            shape=8 * self.width, depth=self.depth, init=[])
        rp = mem.read_port()
        wp = mem.write_port(granularity=8)
        m.d.comb += [
            rp.addr.eq(self.rd_addr.payload),
            rp.en.eq(1),
            wp.addr.eq(self.wr.payload.addr),
            wp.data.eq(self.wr.payload.data),
            wp.en.eq(Mux(self.wr.valid, self.wr.payload.be, 0)),
        ]
        # The synchronous read port gives one cycle; the rest is a valid/data pipeline.
        valid = Signal()
        m.d.sync += valid.eq(self.rd_addr.valid)
        stage_valid, stage_data = valid, rp.data
        for k in range(self.latency - 1):
            v, d = Signal(name=f"pipe{k}_valid"), Signal(8 * self.width, name=f"pipe{k}_data")
            m.d.sync += [v.eq(stage_valid), d.eq(stage_data)]
            stage_valid, stage_data = v, d
        m.d.comb += [self.rd_data.valid.eq(stage_valid), self.rd_data.payload.eq(stage_data)]
        return m
