"""The signal level of the RDMA environment: the only module of :mod:`tb.rdma.uvm` that
touches the design.

:class:`RdmaBench` owns the :class:`tb.harness.Harness` (clock, reset, players,
recorders) of an :class:`rtl.tops.rdma_top.RdmaTop`. The UVM components hand it Python
values (host images, MR table, doorbells, frames) and read Python values back; no UVM
class holds a signal.

Timing of one run (:meth:`RdmaBench.run`)::

    clear what the last run left, load memories/MR table/players --> reset (2 cycles)
      --> cycle 0 ... db_writes_done & inject_done & completed_done (``expect`` CQEs)
      --> settle_cycles --> results read in bulk --> (next run, or finished.set())

Nothing is awaited per cycle: the stimulus is in the players and memories before
reset, the run is one wait on the players' and the CQE recorder's ``done`` ports plus a
fixed settle, and the results come out of recorders, counters and memories in bulk.
"""

from cocotb.triggers import ClockCycles, Event

from pymodel.packet import frame_to_beats
from pymodel.rdma.fields import pack
from spec.fabric import COUNTERS as LINK_COUNTERS
from spec.fabric import FLAGS as LINK_FLAGS
from spec.rdma import LINKS, REQUESTER_COUNTERS, RESPONDER_COUNTERS, doorbell_layout
from tb.harness import Harness, HarnessTimeout, dump_memory, load_memory

__all__ = ["RdmaBench", "RECORDERS"]

#: The top's recorders: both links, the remote-write and the CQE strobes.
RECORDERS = ("wire_ab", "wire_ba", "written", "completed")
_MEMORIES = ("mem_a", "mem_b")


def _value(handle):
    """A port as an int, or its text if it holds X/Z bits (a mismatch, not a crash)."""
    value = handle.value
    return int(value) if value.is_resolvable else str(value)


class RdmaBench:
    """Bulk access to an :class:`RdmaTop` instance.

    Parameters
    ----------
    dut : cocotb handle
        The top.
    depth : int
        Host-memory words per node.

    Attributes
    ----------
    results : list of dict
        One per :meth:`run`, in order (see :meth:`run`).
    finished : cocotb Event
        Set by :meth:`finish` once the driver has run everything; the monitor waits on it.
    """

    #: Host-memory words that may be non-zero after the last run, per memory, shared by
    #: every bench of the simulation (the memories outlive a pyuvm test): the next run
    #: clears only these instead of the whole memory.
    _dirty = {}

    def __init__(self, dut, depth):
        self.dut, self.depth = dut, depth
        self.harness = Harness(dut)
        self.results = []
        self.finished = Event()

    def capacity(self):
        """Depths of the players and recorders, read from the design's memories."""
        d = self.dut
        return {"doorbell_depth": len(d.db_writes.items), "inject_depth": len(d.inject.items),
                "wire_depth": min(len(d.wire_ab.items), len(d.wire_ba.items)),
                "event_depth": min(len(d.written.items), len(d.completed.items))}

    def _load(self, name, image):
        mem = getattr(self.dut, name).mem
        for addr in sorted(self._dirty.get(name, set()) - set(image)):
            mem[addr].value = 0
        for addr, value in sorted(image.items()):
            mem[addr].value = value

    async def run(self, *, mem_a, mem_b, mr_table, ports, doorbells, inject, stall,
                  expect_cqes, timeout_cycles, settle_cycles):
        """Load, reset, run until every doorbell and injected beat is taken and
        ``expect_cqes`` CQEs are written, then ``settle_cycles`` more; append the results.

        ``mem_a``/``mem_b``: ``{word: value}`` images (the rest reads zero);
        ``mr_table``: MR_LAYOUT integers; ``ports``: run-time ports by name
        (``qpc_base_a``, ``qpc_base_b``, ``cq_base``, ``cq_log2``, the links' fault
        settings); ``doorbells``: ``(qpn, sq_tail)``; ``inject``: frames (bytes with FCS)
        played on the A->B link instead of the requester's (selected when not empty);
        ``stall``: the ``(seed, rate)`` of both players. The QP-context caches are emptied
        (their tags are memories that reset does not clear).

        Result keys: ``kind`` (``inject`` when frames were injected, else
        ``doorbell``), ``ab``, ``ba`` (``(beats, cycles)``), ``written``, ``completed``
        (``(QPNs, cycles)``), ``doorbells`` (accept cycles), ``req``, ``resp``
        (counters), ``links`` (``{link: {counter or flag: value}}``), ``mem_a``,
        ``mem_b`` (whole memories), ``end`` (``now``), ``hang``
        (timeout message or None), ``overflows`` (recorders that overflowed).
        """
        f, d = self.harness, self.dut
        self._load("mem_a", mem_a)
        self._load("mem_b", mem_b)
        load_memory(d.responder.mr_table, list(mr_table) + [0] * (len(d.responder.mr_table)
                                                                 - len(mr_table)))
        for node in (d.requester, d.responder):
            load_memory(node.cache.tags, [0] * len(node.cache.tags))
        f.load_player("db_writes", [pack(doorbell_layout(), qpn=q, sq_tail=t)
                                    for q, t in doorbells], stall)
        f.load_player("inject", [b for fr in inject for b in frame_to_beats(fr, 64)], stall)
        f.set("inject_select", int(bool(inject)))
        for name, value in ports.items():
            f.set(name, value)
        for rec in RECORDERS:                 # no backpressure: links cannot stall
            f.arm_recorder(rec, expect_cqes if rec == "completed" else 0)
        await f.reset()
        hang = None
        try:
            await f.wait_done(["db_writes_done", "inject_done", "completed_done"],
                              timeout_cycles=timeout_cycles)
        except HarnessTimeout as exc:
            hang = str(exc)
        await ClockCycles(d.clk, settle_cycles)
        res = {"hang": hang, "end": _value(d.now),
               "kind": "inject" if inject else "doorbell"}
        # The memories first: what they hold is what the next run must clear.
        for name in _MEMORIES:
            words = dump_memory(getattr(d, name).mem, self.depth)
            res[name] = words
            self._dirty[name] = {a for a, v in enumerate(words) if v}
        for name, key in (("wire_ab", "ab"), ("wire_ba", "ba"), ("written", "written"),
                          ("completed", "completed")):
            res[key] = f.recorded(name)
        res["doorbells"] = f.played_stamps("db_writes", len(doorbells)) if doorbells else []
        res["req"] = {n: _value(getattr(d, f"req_{n}")) for n in REQUESTER_COUNTERS}
        res["resp"] = {n: _value(getattr(d, f"resp_{n}")) for n in RESPONDER_COUNTERS}
        res["links"] = {link: {n: _value(getattr(d, f"{link}_{n}"))
                               for n in LINK_COUNTERS + LINK_FLAGS} for link in LINKS}
        res["overflows"] = [r for r in RECORDERS if _value(f.port(f"{r}_overflow")) != 0]
        self.results.append(res)

    def finish(self):
        """Every run is done: the results are complete."""
        self.finished.set()
