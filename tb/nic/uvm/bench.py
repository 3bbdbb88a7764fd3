"""The signal level of the NIC environment: the only module of :mod:`tb.nic.uvm` that
touches the design.

:class:`NicBench` is the top's :class:`tb.nic.testbench.NicTestbench` (harness, one
:class:`StoreSource` per node on ``cmd<p>``, one :class:`FrameMonitor` per uplink on
``tx<p>``, the readers of recorders, counters and memories) with what the UVM components
need on top: one call that runs the queued stores and an event that says the results are
readable. The UVM components hand it Python values and read Python values back; no UVM
class holds a signal.

Timing of one run (:meth:`NicBench.play`)::

    load players/recorders --> reset (2 cycles) --> cycle 0 ... every cmd<p>__done
                                                 --> drain_cycles --> finished.set()

Nothing is awaited per cycle: the stimulus is in the players before reset, the run is
one wait on the players' ``done`` ports plus one fixed drain, and the results come out
of the recorders in bulk afterwards.
"""

from cocotb.triggers import Event

from tb.nic.testbench import NicTestbench

__all__ = ["NicBench"]


class NicBench(NicTestbench):
    """A :class:`NicTestbench` for the pyuvm environment.

    Attributes
    ----------
    finished : cocotb Event
        Set when the run has drained; the results are readable from then on.
    """

    def __init__(self, dut, nodes, width, mem_words):
        super().__init__(dut, nodes, width, mem_words)
        self.finished = Event()

    async def play(self, stalls, faults, node_ids, timeout_cycles, drain_cycles,
                   windows=None):
        """Load, reset, and run until every command player is done, then ``drain_cycles``.

        The stores are those queued on :attr:`sources` before. ``stalls[p]`` is the
        ``(seed, rate)`` of node ``p``'s command player (its gaps), ``faults[p]`` the
        increasing downlink beat numbers of port ``p`` to corrupt, ``node_ids[p]`` the id
        of node ``p``, ``windows[p]`` the ``(src, base, size)`` window-table writes
        (words) of node ``p``'s receiver, played from cycle 0 (the table is kept across
        resets: a run that relies on a window writes it). The switch table keeps its
        reset contents (no table writes) and the local memories are cleared first, so
        that several tests can run in one simulation. The recorders take whatever comes
        (no backpressure: the top ignores ``ready``).
        """
        self.load({}, node_ids, stalls=stalls, faults=faults, windows=windows,
                  clear_memories=True)
        self.arm()
        await self.run(timeout_cycles, done=self.done_ports(("cmd",)), drain=drain_cycles)
        self.finished.set()
