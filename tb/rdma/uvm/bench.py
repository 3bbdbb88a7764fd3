"""The signal level of the RDMA environment: the only module of :mod:`tb.rdma.uvm` that
touches the design.

:class:`RdmaBench` is the top's :class:`tb.rdma.testbench.RdmaTestbench` (harness,
loaders of host memories, MR table and players, readers of recorders, counters and
memories) with what the UVM components need on top: one call per planned run that keeps
its results, and an event that says they are complete. The UVM components hand it Python
values (host images, MR table, doorbells, frames) and read Python values back; no UVM
class holds a signal.

Timing of one run (:meth:`RdmaBench.play`)::

    clear what the last run left, load memories/MR table/players --> reset (2 cycles)
      --> cycle 0 ... db_writes_done & inject_done & completed_done (``expect`` CQEs)
      --> settle_cycles --> results read in bulk --> (next run, or finished.set())

Nothing is awaited per cycle: the stimulus is in the players and memories before
reset, the run is one wait on the players' and the CQE recorder's ``done`` ports plus a
fixed settle, and the results come out of recorders, counters and memories in bulk.
"""

from cocotb.triggers import Event

from tb.rdma.testbench import MEMORIES, RdmaTestbench

__all__ = ["RdmaBench"]


class RdmaBench(RdmaTestbench):
    """An :class:`RdmaTestbench` for the pyuvm environment.

    Attributes
    ----------
    results : list of dict
        One per :meth:`play`, in order (see :meth:`play`).
    finished : cocotb Event
        Set by :meth:`finish` once the driver has run everything; the monitor waits on it.
    """

    def __init__(self, dut, depth):
        super().__init__(dut, depth)
        self.results = []
        self.finished = Event()

    async def play(self, *, mem_a, mem_b, mr_table, ports, doorbells, inject, stall,
                   expect_cqes, timeout_cycles, settle_cycles):
        """Load, reset, run until every doorbell and injected beat is taken and
        ``expect_cqes`` CQEs are written, then ``settle_cycles`` more; append the results.

        ``mem_a``/``mem_b``: ``{word: value}`` images (the rest reads zero: what the last
        run left is cleared); ``mr_table``: MR_LAYOUT integers; ``ports``: run-time ports
        by name (``qpc_base_a``, ``qpc_base_b``, ``cq_base``, ``cq_log2``, the links'
        fault settings); ``doorbells``: ``(qpn, sq_tail)``; ``inject``: frames (bytes
        with FCS) played on the A->B link instead of the requester's (selected when not
        empty); ``stall``: the ``(seed, rate)`` of both players. The QP-context caches
        are emptied (their tags are memories that reset does not clear).

        Result keys: ``kind`` (``inject`` when frames were injected, else
        ``doorbell``), ``ab``, ``ba`` (``(beats, cycles)``), ``written``, ``completed``
        (``(QPNs, cycles)``), ``doorbells`` (accept cycles), ``req``, ``resp``
        (counters), ``links`` (``{link: {counter or flag: value}}``), ``mem_a``,
        ``mem_b`` (whole memories), ``end`` (``now``), ``hang``
        (timeout message or None), ``overflows`` (recorders that overflowed).
        """
        self.load(mem_a=mem_a, mem_b=mem_b, mr_table=mr_table, doorbells=doorbells,
                  inject=inject, stall=stall, ports=ports, clear=True)
        self.arm(completed=expect_cqes)
        await self.run(timeout_cycles, done=["db_writes_done", "inject_done",
                                             "completed_done"], settle=settle_cycles,
                       read_only=False)
        res = {"hang": self.hang, "end": self.end, "kind": "inject" if inject else "doorbell"}
        # The memories first: what they hold is what the next run must clear.
        for name in MEMORIES:
            res[name] = self.memory(name)
        for name, key in (("wire_ab", "ab"), ("wire_ba", "ba"), ("written", "written"),
                          ("completed", "completed")):
            res[key] = self.recorded(name)
        res["doorbells"] = self.doorbell_stamps(len(doorbells))
        res["req"], res["resp"] = self.counters()
        res["links"] = self.link_counters()
        res["overflows"] = self.overflows()
        self.results.append(res)

    def finish(self):
        """Every run is done: the results are complete."""
        self.finished.set()
