"""How a top attaches an engine and a host memory to a :class:`HostInterface` (RTL only).

Every top with a host interface wires it the same way: the engine's DMA ports to the
interface's engine side, and the interface's memory side to a
:class:`~rtl.common.latency_memory.LatencyMemory`. These functions return those connections as
statements for ``m.d.comb``; they add no logic (a top's Verilog is the same as with the
statements written out).
"""

__all__ = ["engine_to_host", "host_to_memory"]


def engine_to_host(engine, hi):
    """Connections of ``engine``'s ``rd_req``, ``rd_data`` and ``wr`` streams to the
    interface ``hi`` (the engine reads and writes host memory through it)."""
    return [
        hi.rd_req.valid.eq(engine.rd_req.valid),
        hi.rd_req.payload.eq(engine.rd_req.payload),
        engine.rd_req.ready.eq(hi.rd_req.ready),
        engine.rd_data.valid.eq(hi.rd_data.valid),
        engine.rd_data.payload.eq(hi.rd_data.payload),
        hi.wr.valid.eq(engine.wr.valid), hi.wr.payload.eq(engine.wr.payload),
        engine.wr.ready.eq(hi.wr.ready),
    ]


def host_to_memory(hi, mem):
    """Connections of the interface ``hi``'s memory side (``mem_rd_addr``,
    ``mem_rd_data``, ``mem_wr``) to the host memory ``mem`` (a ``LatencyMemory``: it takes
    every read and write in the cycle it is offered, always ready)."""
    return [
        mem.rd_addr.valid.eq(hi.mem_rd_addr.valid),
        mem.rd_addr.payload.eq(hi.mem_rd_addr.payload),
        hi.mem_rd_data.valid.eq(mem.rd_data.valid),
        hi.mem_rd_data.payload.eq(mem.rd_data.payload),
        mem.wr.valid.eq(hi.mem_wr.valid), mem.wr.payload.eq(hi.mem_wr.payload),
    ]
