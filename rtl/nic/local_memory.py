"""A node's local memory for the memory operations: two combinational reads, one write."""

from amaranth import Module, Mux
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.common.latency_memory import write_layout
from spec.checks import check_int, reject
from spec.formats.nic_mem import MEM_WIDTH

__all__ = ["LocalMemory"]


class LocalMemory(wiring.Component):
    """``depth`` words of 64 bytes (an accelerator's SRAM as the NIC sees it).

    Ports
    -----
    rd0_addr, rd1_addr : In(range(depth))
    rd0_data, rd1_data : Out(512)
        Combinational reads: the word as it is at the start of the cycle (a write in the
        same cycle is not seen).
    wr : In(stream.Signature(write_layout(64, depth), always_ready=True))
        Byte-masked writes, applied at the clock edge.

    The array is the Verilog memory ``mem`` of this instance (loaded and dumped in bulk
    by the testbench). The reads take no cycle: the model of a memory read whose latency
    is part of the responder's own pipeline; the responder's timing states it.
    """

    def __init__(self, depth):
        check_int(self, "memory depth (words)", depth, 2, 2**20)
        if depth & (depth - 1):
            reject(self, f"memory depth (words) must be a power of two, not {depth!r}")
        self.depth = depth
        super().__init__({
            "rd0_addr": In(range(depth)), "rd1_addr": In(range(depth)),
            "rd0_data": Out(8 * MEM_WIDTH), "rd1_data": Out(8 * MEM_WIDTH),
            "wr": In(stream.Signature(write_layout(MEM_WIDTH, depth), always_ready=True)),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = memory.Memory(shape=8 * MEM_WIDTH, depth=self.depth, init=[])
        r0 = mem.read_port(domain="comb")
        r1 = mem.read_port(domain="comb")
        wp = mem.write_port(granularity=8)
        m.d.comb += [
            r0.addr.eq(self.rd0_addr), self.rd0_data.eq(r0.data),
            r1.addr.eq(self.rd1_addr), self.rd1_data.eq(r1.data),
            wp.addr.eq(self.wr.payload.addr), wp.data.eq(self.wr.payload.data),
            wp.en.eq(Mux(self.wr.valid, self.wr.payload.be, 0)),
        ]
        return m
