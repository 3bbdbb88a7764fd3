"""Co-simulation top of the host interface: players, the interface, its host memory."""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.common.latency_memory import LatencyMemory
from rtl.common.stall_pattern import StallPattern
from rtl.host import HostInterface
from rtl.sim.harness_top import HarnessTop
from spec.checks import check_int
from spec.host import (
    HOST_COUNTERS,
    mmio_layout,
    rd_data_layout,
    rd_req_layout,
    wr_layout,
)
from spec.ports import CountersSignature, PortView

__all__ = ["HostInterfaceTop"]


class HostInterfaceTop(HarnessTop):
    """Players ``rd_req``, ``wr``, ``mmio_in`` -> :class:`HostInterface` -> recorders
    ``rd_data``, ``mmio``; the host memory is ``host_mem``, a ``LatencyMemory(64, depth, 1)``
    whose array ``host_mem.mem`` the testbench loads and dumps.

    Parameters
    ----------
    profile : spec.host.HostProfile
        The interface's profile.
    depth : int
        Host-memory words (a power of two, 2 to 2**20).
    items : int
        Items each player holds (16 to 65536).
    words : int
        Items each recorder holds (16 to 65536).

    Extra ports: ``counters`` (:data:`spec.host.HOST_COUNTERS`, out; a
    :class:`spec.ports.CountersSignature`, in Verilog ``counters__<name>``) and
    ``mmio_gap_seed`` (In(16)), ``mmio_gap_rate`` (In(8)): a stall pattern that holds
    back the first word of each host write (the host never pauses inside a write), so
    the ``mmio_in`` player itself must play without stalls (``mmio_in__stall_rate`` 0).
    ``rd_data`` has no backpressure: its recorder must not stall either.
    """

    def __init__(self, profile, depth=1024, items=1024, words=2048):
        self.items = check_int(self, "player depth (items)", items, 16, 65536)
        self.words = check_int(self, "recorder depth (items)", words, 16, 65536)
        self.hif = HostInterface(profile, depth)
        self.profile, self.depth = profile, depth
        ports = {"counters": Out(CountersSignature(HOST_COUNTERS)),
                 "mmio_gap_seed": In(16), "mmio_gap_rate": In(8)}
        super().__init__(
            players={"rd_req": (rd_req_layout(depth), items),
                     "wr": (wr_layout(depth), items),
                     "mmio_in": (mmio_layout(), items)},
            recorders={"rd_data": (rd_data_layout(), words), "mmio": (mmio_layout(), words)},
            ports=ports)

    def elaborate_design(self, m, players, recorders):
        m.submodules.hif = hif = self.hif
        m.submodules.host_mem = mem = LatencyMemory(64, self.depth, latency=1)
        m.submodules.mmio_gap = gap = StallPattern()
        wiring.connect(m, players["rd_req"].o, hif.rd_req)
        wiring.connect(m, players["wr"].o, hif.wr)
        wiring.connect(m, hif.rd_data, recorders["rd_data"].i)
        wiring.connect(m, hif.mmio, recorders["mmio"].i)
        host = players["mmio_in"].o
        offered = host.valid & (~host.payload.first | ~gap.stall)
        m.d.comb += [
            gap.seed.eq(self.mmio_gap_seed), gap.rate.eq(self.mmio_gap_rate),
            hif.mmio_in.valid.eq(offered),
            hif.mmio_in.payload.eq(host.payload),
            host.ready.eq(hif.mmio_in.ready & offered),
        ]
        wiring.connect(m, hif.mem_rd_addr, mem.rd_addr)
        wiring.connect(m, mem.rd_data, hif.mem_rd_data)
        wiring.connect(m, hif.mem_wr, mem.wr)
        wiring.connect(m, PortView(self.counters.signature, hif),
                       wiring.flipped(self.counters))
