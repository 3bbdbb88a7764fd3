"""The testbench of :class:`rtl.tops.rdma_top.RdmaTop`: one class for every bench of the top.

:class:`RdmaTestbench` owns the :class:`tb.harness.Harness` (clock, reset, players,
recorders) and does the four steps of a run::

    load(...)           -->  arm(...)        -->  await run(...)  -->  compare(sb, model)
    (host memories, MR       (recorder           (reset, one wait     (every beat, stamp,
     table, doorbell and      depths)             on the done          strobe, counter,
     injection players,                           ports, settle)       host-memory word)
     run-time ports)

The plain cocotb test (:mod:`tb.rdma.cocotb_rdma`, also run by the RDMA soak) and the
pyuvm bench (:mod:`tb.rdma.uvm.bench`) drive the top through it. Nothing is awaited per
cycle: the stimulus is in the players and memories before reset, and the results come
out of the recorders, counters and memories in bulk after the run.

It is written for today's RdmaTop (one requester node A, one responder node B, the
``ab``/``ba`` faulty links); a new engine top gets its own class of the same shape.
"""

from cocotb.triggers import ClockCycles, ReadOnly

from pymodel.packet import frame_to_beats
from pymodel.rdma.fields import pack
from spec.fabric import COUNTERS as LINK_COUNTERS
from spec.fabric import FLAGS as LINK_FLAGS
from spec.rdma import LINKS, REQUESTER_COUNTERS, RESPONDER_COUNTERS, doorbell_layout
from tb.harness import Harness, HarnessTimeout, dump_memory, load_memory

__all__ = ["RdmaTestbench", "RECORDERS", "MEMORIES", "PORTS", "value_of", "wire_beats"]

#: The top's recorders: both links, the remote-write and the CQE strobes.
RECORDERS = ("wire_ab", "wire_ba", "written", "completed")
#: The host memories of node A (requester) and node B (responder).
MEMORIES = ("mem_a", "mem_b")
#: The run-time ports of the engines (the links' fault settings come on their own).
PORTS = ("qpc_base_a", "qpc_base_b", "cq_base", "cq_log2")


def value_of(handle):
    """A port as an int, or its text if it holds X/Z bits (a mismatch, not a crash)."""
    value = handle.value
    return int(value) if value.is_resolvable else str(value)


def wire_beats(model, link):
    """``(beats, cycles)`` the golden model's ``model`` puts on ``link`` (``"ab"`` or
    ``"ba"``): the items and stamps its ``wire_<link>`` recorder must hold."""
    beats, stamps = [], []
    for cycles, frame in model[f"wire_{link}"]:
        beats += frame_to_beats(frame, 64)
        stamps += list(cycles)
    return beats, stamps


class RdmaTestbench:
    """Load, arm, run and compare one RdmaTop co-simulation.

    Parameters
    ----------
    dut : cocotb handle
        The top.
    depth : int
        Host-memory words per node.

    Attributes
    ----------
    harness : Harness
        Clock, reset and bulk access to players and recorders.
    end, hang : int, str or None
        ``now`` when :meth:`run` returned; the timeout message if the done ports did not
        all rise in time (the results are still read: they show the cause).
    """

    #: Host-memory words that may be non-zero after the last run, per memory, shared by
    #: every testbench of the simulation (the memories outlive a pyuvm test): a run that
    #: asks for it clears only these instead of the whole memory.
    _dirty = {}

    def __init__(self, dut, depth):
        self.dut, self.depth = dut, depth
        self.harness = Harness(dut)
        self.end = self.hang = None

    # -- load, arm, run ----------------------------------------------------------------------
    def load(self, *, mem_a, mem_b, mr_table, doorbells, inject=(), stall=(1, 0),
             inject_stall=None, ports=None, links=None, ack_timeout=None, clear=False):
        """Put a run's stimulus into the design (before :meth:`run`).

        ``mem_a``/``mem_b``: ``{word: value}`` images of the host memories (with
        ``clear``, the words an earlier run left non-zero are zeroed, and so are the
        QP-context caches' tags, memories that reset does not clear); ``mr_table``: the
        responder's MR_LAYOUT integers (the rest of the table is zeroed); ``doorbells``:
        ``(qpn, sq_tail)`` MMIO writes; ``inject``: frames (bytes with FCS) played on the
        A->B link instead of the requester's (selected when not empty); ``stall`` and
        ``inject_stall`` (default ``stall``): the ``(seed, rate)`` of the doorbell and
        injection players; ``ports``: run-time ports by name (:data:`PORTS`, or any
        other); ``links``: ``{link: FaultSettings}`` of :data:`spec.rdma.LINKS`;
        ``ack_timeout``: the requester's run-time transport timeout (0: the top's).
        """
        h, d = self.harness, self.dut
        for name, image in ((MEMORIES[0], mem_a), (MEMORIES[1], mem_b)):
            mem = getattr(d, name).mem
            if clear:
                for addr in sorted(self._dirty.get(name, set()) - set(image)):
                    mem[addr].value = 0
            for addr, value in sorted(image.items()):
                mem[addr].value = value
        table = d.responder.mr_table
        load_memory(table, list(mr_table) + [0] * (len(table) - len(mr_table)))
        if clear:
            for node in (d.requester, d.responder):
                load_memory(node.cache.tags, [0] * len(node.cache.tags))
        h.load_player("db_writes", [pack(doorbell_layout(), qpn=q, sq_tail=t)
                                    for q, t in doorbells], stall)
        h.load_player("inject", [b for fr in inject for b in frame_to_beats(fr, 64)],
                      stall if inject_stall is None else inject_stall)
        h.set("inject_select", int(bool(inject)))
        for name, value in (ports or {}).items():
            h.set(name, value)
        if ack_timeout is not None:
            h.set("ack_timeout", ack_timeout)
        for link, settings in (links or {}).items():
            for name, value in settings.ports().items():
                h.set(f"{link}_{name}", value)

    def arm(self, **counts):
        """Tell each recorder of :data:`RECORDERS` how many items to wait for (0, the
        default: none; it records whatever comes). No backpressure: links cannot stall."""
        unknown = set(counts) - set(RECORDERS)
        if unknown:
            raise ValueError(f"unknown recorder(s) {sorted(unknown)}; known: {RECORDERS}")
        for rec in RECORDERS:
            self.harness.arm_recorder(rec, counts.get(rec, 0))

    def arm_for(self, model):
        """:meth:`arm` every recorder with what the golden model's ``model`` predicts."""
        self.arm(wire_ab=len(wire_beats(model, "ab")[0]), wire_ba=len(wire_beats(model, "ba")[0]),
                 written=len(model["written"]), completed=len(model["completed"]))

    async def run(self, timeout_cycles, *, done=None, settle=0, read_only=True):
        """Reset, then let the simulator run until every port of ``done`` (default: both
        players' and every recorder's) reads 1, then ``settle`` cycles more; with
        ``read_only`` the results are then sampled in ``ReadOnly`` (no write may follow
        in that time step: a bench that runs again leaves it off). Returns ``now``; a
        timeout is kept in :attr:`hang`."""
        done = done or (["db_writes_done", "inject_done"]
                        + [f"{r}_done" for r in RECORDERS])
        await self.harness.reset()
        self.hang = None
        try:
            await self.harness.wait_done(done, timeout_cycles=timeout_cycles)
        except HarnessTimeout as exc:
            self.hang = str(exc)
        await ClockCycles(self.dut.clk, settle)
        if read_only:
            await ReadOnly()
        self.end = value_of(self.dut.now)
        return self.end

    # -- results, valid after the run --------------------------------------------------------
    def capacity(self):
        """Depths of the players and recorders, read from the design's memories."""
        d = self.dut
        return {"doorbell_depth": len(d.db_writes.items), "inject_depth": len(d.inject.items),
                "wire_depth": min(len(d.wire_ab.items), len(d.wire_ba.items)),
                "event_depth": min(len(d.written.items), len(d.completed.items))}

    def recorded(self, name):
        """``(items, cycles)`` of the recorder ``name`` (:data:`RECORDERS`)."""
        return self.harness.recorded(name)

    def doorbell_stamps(self, count):
        """The accept cycles of the first ``count`` doorbell writes."""
        return self.harness.played_stamps("db_writes", count) if count else []

    def counters(self):
        """``(requester, responder)`` counters by name."""
        d = self.dut
        return ({n: value_of(getattr(d, f"req_{n}")) for n in REQUESTER_COUNTERS},
                {n: value_of(getattr(d, f"resp_{n}")) for n in RESPONDER_COUNTERS})

    def link_counters(self):
        """``{link: {counter or flag: value}}`` of both links."""
        return {link: {n: value_of(getattr(self.dut, f"{link}_{n}"))
                       for n in LINK_COUNTERS + LINK_FLAGS} for link in LINKS}

    def memory(self, name):
        """The whole host memory ``name`` (:data:`MEMORIES`); remembers its non-zero words
        for the next run's ``clear``."""
        words = dump_memory(getattr(self.dut, name).mem, self.depth)
        self._dirty[name] = {a for a, v in enumerate(words) if v}
        return words

    def overflows(self):
        """Recorders that had more items than room (their extra items are lost)."""
        return [r for r in RECORDERS if value_of(self.harness.port(f"{r}_overflow")) != 0]

    # -- compare -----------------------------------------------------------------------------
    def compare(self, sb, model, doorbells):
        """Compare the run with the golden model's ``model`` (the dict of
        :func:`pymodel.rdma.engine.simulate`) on ``sb``: every beat on both links and its
        cycle, every remote-write and CQE strobe (QPN, cycle), every doorbell accept cycle
        (``doorbells`` were played), every counter of both engines and both links, both
        whole host memories.

        Returns what it read: ``ab``, ``ba``, ``written``, ``completed`` (``(items,
        cycles)``), ``doorbells`` (accept cycles), ``req``, ``resp``, ``links``
        (counters), ``mem_a``, ``mem_b`` (words).
        """
        got = {}
        for link, name in (("ab", "A->B"), ("ba", "B->A")):
            beats, stamps = wire_beats(model, link)
            got[link] = self.recorded(f"wire_{link}")
            sb.compare(f"{name} beats", got[link][0], beats)
            sb.compare(f"{name} beat cycles", got[link][1], stamps, fmt=str)
        for name in ("written", "completed"):
            got[name] = self.recorded(name)
            sb.compare(f"{name} (qpn, cycle)", list(zip(*got[name], strict=True)),
                       [(q, c) for c, q in model[name]], fmt=str)
        got["doorbells"] = self.doorbell_stamps(len(doorbells))
        sb.compare("doorbell accept cycles", got["doorbells"], model["doorbell_stamps"],
                   fmt=str)
        got["req"], got["resp"] = self.counters()
        for n in REQUESTER_COUNTERS:
            sb.equal(f"requester counter {n}", got["req"][n], model["req"][n])
        for n in RESPONDER_COUNTERS:
            sb.equal(f"responder counter {n}", got["resp"][n], model["resp"][n])
        got["links"] = self.link_counters()
        for link in LINKS:
            for n in LINK_COUNTERS + LINK_FLAGS:
                sb.equal(f"link {link} {n}", got["links"][link][n], model["links"][link][n])
        for name, node in zip(MEMORIES, ("A", "B"), strict=True):
            got[name] = words = self.memory(name)
            want = model[name]
            bad = [a for a in range(self.depth) if words[a] != want.get(a, 0)]
            sb.equal(f"host memory {node}: words that differ (first 8)", bad[:8], [])
        return got
