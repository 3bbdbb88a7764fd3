"""The signal level of the RDMA environment: the only module of :mod:`tb.rdma.uvm` that
touches the design.

:class:`RdmaBench` is the top's :class:`tb.rdma.testbench.RdmaTestbench` (harness,
loaders of host memories, MR table and players, readers of recorders, counters and
memories) with what the UVM components need on top: one call per planned run that keeps
its results, and an event that says they are complete. The UVM components hand it Python
values (host images, MR table, MMIO words, frames, port values) and read Python values
back; no UVM class holds a signal.

Timing of one run (:meth:`RdmaBench.play`)::

    clear what the last run left, load memories/MR table/players/ports --> reset
      --> cycle 0 ... mmio__done & inject__done & completed__done & written__done
      --> settle cycles --> results read in bulk --> (next run, or finished.set())

Nothing is awaited per cycle: the stimulus is in the players and memories before
reset, the run is one wait on the players' and two recorders' ``done`` ports plus a
fixed settle, and the results come out of recorders, counters and memories in bulk.
"""

import time

from cocotb.triggers import Event

from tb.rdma.testbench import MEMORIES, RECORDERS, RdmaTestbench

__all__ = ["RdmaBench"]


class RdmaBench(RdmaTestbench):
    """An :class:`RdmaTestbench` for the pyuvm environment.

    Attributes
    ----------
    results : list of dict
        One per :meth:`play`, in order (see :meth:`play`).
    finished : cocotb Event
        Set by :meth:`finish` once the driver has run everything; the monitor waits on it.
    seconds : dict
        Wall-clock seconds spent loading, simulating and reading back, over every run.
    """

    def __init__(self, dut, depth):
        super().__init__(dut, depth)
        self.results = []
        self.finished = Event()
        self.seconds = dict.fromkeys(("load", "run", "read"), 0.0)

    async def play(self, *, mem_a, mem_b, mr_table, mmio, release, inject, inject_stall,
                   ports, links, expect, timeout_cycles, settle_cycles):
        """Load, reset, run until every MMIO word and injected beat is taken and the
        ``completed`` and ``written`` recorders hold ``expect[name]`` marks, then
        ``settle_cycles`` more; append the results.

        ``mem_a``/``mem_b``: ``{word: value}`` images (the rest reads zero: what the last
        run left is cleared, and so are the QP-context caches' tags); ``mr_table``:
        MR_LAYOUT integers; ``mmio``/``release``: the MMIO player's words (dicts) and
        release cycles; ``inject``: frames (bytes with FCS) played on the A->B link
        instead of the requester's (selected when not empty), with the ``(seed, rate)``
        stalls ``inject_stall``; ``ports``: run-time ports by name; ``links``: ``{link:
        FaultSettings}``.

        Result keys: ``kind`` (``inject`` when frames were injected, else ``posted``),
        ``ab``, ``ba`` (``(beats, cycles)``), ``written``, ``completed`` (``(tags,
        cycles)``), ``mmio`` (accept cycles), ``counters`` (``req``, ``resp``,
        ``host_a``, ``host_b``, ``links``), ``mem_a``, ``mem_b`` (whole memories),
        ``end`` (``now``), ``hang`` (timeout message or None), ``overflows``.
        """
        t0 = time.perf_counter()
        self.load(mem_a=mem_a, mem_b=mem_b, mr_table=mr_table, mmio=mmio, release=release,
                  inject=inject, inject_stall=inject_stall, ports=ports, links=links,
                  clear=True)
        self.arm(**expect)
        t1 = time.perf_counter()
        await self.run(timeout_cycles, done=["mmio__done", "inject__done", "completed__done",
                                             "written__done"],
                       settle=settle_cycles, read_only=False)
        t2 = time.perf_counter()
        res = {"hang": self.hang, "end": self.end, "kind": "inject" if inject else "posted"}
        # The memories first: what they hold is what the next run must clear.
        for name in MEMORIES:
            res[name] = self.memory(name)
        for name, key in zip(RECORDERS, ("ab", "ba", "written", "completed"), strict=True):
            res[key] = self.recorded(name)
        res["mmio"] = self.mmio_stamps(len(mmio))
        res["counters"] = self.counters()
        res["overflows"] = self.overflows()
        self.results.append(res)
        t3 = time.perf_counter()
        for key, dt in (("load", t1 - t0), ("run", t2 - t1), ("read", t3 - t2)):
            self.seconds[key] += dt

    def finish(self):
        """Every run is done: the results are complete."""
        self.finished.set()
