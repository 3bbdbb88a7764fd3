"""Co-simulation top of the NIC's receiver alone: raw frames in, local-memory writes out."""

from amaranth import ResetSignal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.common.latency_memory import LatencyMemory
from rtl.nic.nic_rx import NicRx
from rtl.nic.window_table import SOURCES, window_write_layout
from rtl.sim.harness_top import HarnessTop
from rtl.tops.nic_top import write_event_layout
from spec.checks import check_int
from spec.formats.packet import packet_layout
from spec.nic import COUNTERS
from spec.ports import CountersSignature, PortView

__all__ = ["NicRxTop"]


class NicRxTop(HarnessTop):
    """Player ``raw`` (packet beats, any bytes: the fuzz) -> :class:`NicRx` ->
    :class:`LatencyMemory` ``local`` (its words: ``local.mem``).

    Parameters
    ----------
    width, framing, max_payload, mem_words
        Those of :class:`NicRx` (``mem_words`` its local memory).
    beats : int
        Depth of the ``raw`` player and of the ``wr`` recorder (1 .. 2**17).

    Players: ``raw`` (timed: beat ``k`` is offered from its release cycle on; NicRx is
    always ready, so with stall rate 0 beat ``k`` enters in cycle
    ``max(release[k], cycle of beat k-1 + 1)``), ``win`` (the receiver's window-table
    writes ``(src, base, size)``, one per cycle from cycle 0, always taken; 256 deep:
    one per source). Recorder ``wr``: every local-memory write (word address, byte
    enables) in its cycle, without backpressure. Run-time input ``node_id`` (set before
    reset); output ``counters``: the receiver's counters :data:`spec.nic.COUNTERS`
    (:class:`spec.ports.CountersSignature`; in Verilog ``counters__<name>``).
    """

    def __init__(self, width=16, framing="compact", max_payload=512, mem_words=256,
                 beats=1 << 14):
        self.width, self.framing, self.max_payload = width, framing, max_payload
        self.mem_words = mem_words
        self.beats = check_int(self, "beats (player/recorder depth)", beats, 1, 1 << 17)
        self.rx = NicRx(width, framing, max_payload, mem_words)
        self.mem = LatencyMemory(width, mem_words, 1)
        ports = {"node_id": In(8), "counters": Out(CountersSignature(COUNTERS))}
        super().__init__(
            players={"raw": (packet_layout(width), beats, True),
                     "win": (window_write_layout(mem_words), SOURCES)},
            recorders={"wr": (write_event_layout(mem_words), beats)},
            ports=ports)

    def elaborate_design(self, m, players, recorders):
        m.submodules.nic_rx = rx = self.rx
        m.submodules.local = mem = self.mem
        raw, win, wr = players["raw"].o, players["win"].o, recorders["wr"].i
        m.d.comb += [
            rx.node_id.eq(self.node_id),
            rx.i.valid.eq(raw.valid), rx.i.payload.eq(raw.payload), raw.ready.eq(rx.i.ready),
            rx.win_wr.valid.eq(win.valid), rx.win_wr.payload.eq(win.payload),
            win.ready.eq(~ResetSignal()),
            mem.wr.valid.eq(rx.wr.valid), mem.wr.payload.eq(rx.wr.payload),
            mem.rd_addr.valid.eq(0),
            wr.valid.eq(rx.wr.valid),
            wr.payload.addr.eq(rx.wr.payload.addr),
            wr.payload.be.eq(rx.wr.payload.be),
        ]
        wiring.connect(m, PortView(self.counters.signature, rx), wiring.flipped(self.counters))
