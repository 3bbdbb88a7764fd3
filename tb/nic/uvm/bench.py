"""The signal level of the NIC environment: the only module of :mod:`tb.nic.uvm` that
touches the design.

:class:`NicBench` owns the :class:`tb.harness.Harness` (clock, reset, players, recorders)
and the bus models of :mod:`tb.nic.store_driver`: one :class:`StoreSource` per node
(``cmd<p>``) and one :class:`FrameMonitor` per uplink (``tx<p>``). The UVM components
hand it Python values and read Python values back; no UVM class holds a signal.

Timing of one run (:meth:`NicBench.run`)::

    load players/recorders --> reset (2 cycles) --> cycle 0 ... every cmd<p>_done
                                                 --> drain_cycles --> finished.set()

Nothing is awaited per cycle: the stimulus is in the players before reset, the run is
one wait on the players' ``done`` ports plus one fixed drain, and the results come out
of the recorders in bulk afterwards.
"""

from cocotb.triggers import ClockCycles, Event

from rtl.nic.window_table import window_write_layout
from rtl.tops.nic_top import write_event_layout
from spec.nic import COUNTERS
from tb.harness import Harness, HarnessTimeout, dump_memory, load_memory
from tb.nic.store_driver import FrameMonitor, StoreSource

__all__ = ["NicBench"]


class NicBench:
    """Bus models and bulk access of a :class:`rtl.tops.nic_top.NicTop` instance.

    Parameters
    ----------
    dut : cocotb handle
        The top.
    nodes, width, mem_words : int
        The top's parameters.

    Attributes
    ----------
    sources : list of StoreSource
        Command players; queue stores with ``send_nowait`` before :meth:`run`.
    links : list of FrameMonitor
        Uplink recorders; read frames after :meth:`run`.
    finished : cocotb Event
        Set when the run has drained; the results are readable from then on.
    end, hang : int, str or None
        Cycle (``now``) at the end of the run; the timeout message if the players did not
        finish in time (the results are still read: they show the cause).
    """

    def __init__(self, dut, nodes, width, mem_words):
        self.dut, self.nodes, self.width, self.mem_words = dut, nodes, width, mem_words
        self.harness = Harness(dut)
        self.sources = [StoreSource(self.harness, f"cmd{p}", width) for p in range(nodes)]
        self.links = [FrameMonitor(self.harness, f"tx{p}", width) for p in range(nodes)]
        self.finished = Event()
        self.end = self.hang = None
        self._wr = write_event_layout(mem_words)
        self._win = window_write_layout(mem_words)

    def capacity(self):
        """Depths of the command players, recorders and fault players (the smallest over
        the nodes), read from the design's memories."""
        d = self.dut
        return {
            "cmd_depth": min(len(getattr(d, f"cmd{p}").items) for p in range(self.nodes)),
            "event_depth": min(len(getattr(d, f"{k}{p}").items) for p in range(self.nodes)
                               for k in ("tx", "wr", "cr")),
            "fault_depth": min(len(getattr(d, f"flt{p}").items) for p in range(self.nodes)),
        }

    async def run(self, stalls, faults, node_ids, timeout_cycles, drain_cycles,
                  windows=None):
        """Load, reset, and run until every command player is done, then ``drain_cycles``.

        ``stalls[p]`` is the ``(seed, rate)`` of node ``p``'s command player (its gaps),
        ``faults[p]`` the increasing downlink beat numbers of port ``p`` to corrupt,
        ``node_ids[p]`` the id of node ``p``, ``windows[p]`` the ``(src, base, size)``
        window-table writes (words) of node ``p``'s receiver, played from cycle 0 (the
        table is kept across resets: a run that relies on a window writes it). The
        switch table keeps its reset contents (no table writes) and the local memories
        are cleared first, so that several tests can run in one simulation.
        """
        f = self.harness
        for p in range(self.nodes):
            src = self.sources[p]
            src.stall = tuple(stalls.get(p, (1, 0)))
            src.load()
            f.load_player(f"flt{p}", list(faults.get(p, ())))
            f.load_player(f"win{p}", [self._win.const({"src": s, "base": b, "size": z})
                                      .as_bits() for s, b, z in (windows or {}).get(p, ())])
            f.set(f"node_id{p}", node_ids[p])
            for rec in ("tx", "wr", "cr"):    # no backpressure: the top ignores ready
                f.arm_recorder(f"{rec}{p}", 0)
            load_memory(getattr(self.dut, f"mem{p}").mem, [0] * self.mem_words)
        f.load_player("tbl", [])
        await f.reset()
        try:
            await f.wait_done([f"cmd{p}_done" for p in range(self.nodes)],
                              timeout_cycles=timeout_cycles)
        except HarnessTimeout as exc:
            self.hang = str(exc)
        await ClockCycles(self.dut.clk, drain_cycles)
        self.end = int(self.dut.now.value)
        self.finished.set()

    # -- results, valid once ``finished`` is set ------------------------------------------
    def command_stamps(self, p):
        """The accept cycle of every command beat of each store node ``p`` issued (one
        list per store, in order; ``StoreSource.stamps`` gives the first and last)."""
        src = self.sources[p]
        beats, out, k = src.beat_stamps(), [], 0
        for s in src.stores:
            n = len(s.beats(self.width))
            out.append(beats[k:k + n])
            k += n
        return out

    def uplink_beats(self, p):
        """``(raw beats, cycles)`` the uplink recorder of node ``p`` saw."""
        return self.links[p].beats()

    def writes(self, p):
        """``(word address, byte enables, cycle)`` of every local-memory write of node p."""
        items, stamps = self.harness.recorded(f"wr{p}")
        out = []
        for raw, cyc in zip(items, stamps, strict=True):
            ev = self._wr.from_bits(raw)
            out.append((int(ev.addr), int(ev.be), cyc))
        return out

    def credit_stamps(self, p):
        """Cycles in which a credit reached sender ``p``."""
        return self.harness.recorded(f"cr{p}")[1]

    def counters(self, p):
        return {c: int(getattr(self.dut, f"{c}{p}").value) for c in COUNTERS}

    def memory(self, p):
        return dump_memory(getattr(self.dut, f"mem{p}").mem, self.mem_words)

    def credit_errors(self):
        return int(self.dut.credit_errors.value)

    def overflows(self):
        """Recorders that had more items than room (their extra items are lost)."""
        return [f"{k}{p}" for p in range(self.nodes) for k in ("tx", "wr", "cr")
                if int(self.harness.port(f"{k}{p}_overflow").value)]
