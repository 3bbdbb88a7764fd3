"""The testbench of :class:`rtl.tops.rdma_top.RdmaTop`: one class for every bench of the top.

:class:`RdmaTestbench` owns the :class:`tb.harness.Harness` (clock, reset, players,
recorders) and does the four steps of a run::

    load(...)           -->  arm(...)        -->  await run(...)  -->  compare(sb, model)
    (host memories, MR       (recorder           (reset, one wait     (every beat, stamp,
     table, MMIO and          depths)             on the done          strobe, counter,
     injection players,                           ports, settle)       host-memory word)
     run-time ports)

The plain cocotb test (:mod:`tb.rdma.cocotb_rdma`, also run by the RDMA soak) and the
pyuvm bench (:mod:`tb.rdma.uvm.bench`) drive the top through it. Nothing is awaited per
cycle: the stimulus is in the players and memories before reset, and the results come
out of the recorders, counters and memories in bulk after the run.
"""

import time
from itertools import compress

from cocotb.triggers import ClockCycles, ReadOnly

from pymodel.fields import pack
from pymodel.packet import beats_to_frames, frame_to_beats
from pymodel.rdma.verbs import mr_table_in_host
from spec.fabric import COUNTERS as LINK_COUNTERS
from spec.fabric import FLAGS as LINK_FLAGS
from spec.host import HOST_COUNTERS, mmio_layout
from spec.rdma import LINKS
from spec.rdma_engine import REQUESTER_COUNTERS, RESPONDER_COUNTERS
from spec.rdma_read_req import REQUESTER_READ_COUNTERS
from spec.rdma_responder import MR_CACHE_COUNTERS, READ_COUNTERS
from tb.harness import Harness, HarnessTimeout, dump_memory, load_memory

__all__ = ["RdmaTestbench", "RECORDERS", "MEMORIES", "PORTS", "member_port", "run_ports",
           "retry_counter_port", "value_of", "wire_beats", "frames_of", "words_that_differ"]

#: The top's recorders: both links, the remote-write and the CQE marks.
RECORDERS = ("wire_ab", "wire_ba", "written", "completed")
#: The host memories of node A (requester) and node B (responder).
MEMORIES = ("mem_a", "mem_b")
#: The run-time ports of the engines (the links' fault settings come on their own).
PORTS = ("qpc_base_a", "qpc_base_b", "cq_base", "cq_log2", "ack_every", "ack_frames",
         "serial", "ack_timeout", "selective", "qpc_log2")


def member_port(port, name):
    """The Verilog name of member ``name`` of the top's signature port ``port`` (a
    :class:`spec.ports.CountersSignature` port): Amaranth joins the path with ``__``."""
    return f"{port}__{name}"


def retry_counter_port(link, name):
    """The Verilog name of a reliable link's counter ``name`` of link ``link`` of an
    RdmaTop built with ``link_retry``, ``name`` as :func:`pymodel.rdma.links.retry_counters`
    gives it: ``tx_<n>``/``rx_<n>`` are members ``tx``/``rx`` of port ``<link>_counters``,
    ``full`` is port ``<link>_full``, the rest (the wire's) member ``link``."""
    if name == "full":
        return f"{link}_full"
    end, _, rest = name.partition("_")
    if end in ("tx", "rx"):
        return member_port(f"{link}_counters__{end}", rest)
    return member_port(f"{link}_counters__link", name)


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


def frames_of(beats, stamps):
    """``[(beat cycles, frame)]`` of recorded beats (the model's ``wire_*`` shape);
    ``ValueError`` for a broken beat stream (:func:`pymodel.packet.beats_to_frames`) or
    a stamp count that is not the beat count. Each frame of ``n`` bytes came in
    ``ceil(n / 64)`` beats (every beat but its last holds 64 bytes, as the decoder
    checks): its cycles are the next that many stamps."""
    stamps = list(stamps)
    if len(stamps) != len(beats):
        raise ValueError(f"{len(beats)} beats, {len(stamps)} stamps")
    out, at = [], 0
    for frame in beats_to_frames(beats, 64):
        n = -(-len(frame) // 64)
        out.append((stamps[at:at + n], frame))
        at += n
    return out


def words_that_differ(words, image, depth):
    """The addresses below ``depth``, in order, whose word in ``words`` (a memory read
    whole) differs from ``image`` (``{address: value}``; an address it leaves out: 0).
    The two are compared as whole lists first (in C), word by word only when they
    differ: the same addresses as a word-by-word comparison, in a quarter of the time
    (``words`` and the values ints, as :func:`tb.harness.dump_memory` gives them)."""
    want = [0] * depth
    for a, value in image.items():
        if 0 <= a < depth:
            want[a] = value
    if words[:depth] == want:
        return []
    return [a for a in range(depth) if words[a] != want[a]]


class RdmaTestbench:
    """Load, arm, run and compare one RdmaTop co-simulation.

    Parameters
    ----------
    dut : cocotb handle
        The top.
    depth : int
        Host-memory words per node.
    link_retry : bool
        The top was built with ``link_retry`` (its link counters are those of reliable
        links: the wire's are member ``link`` of ``<link>_counters``).
    mr_in_host : bool
        The top's MR table is in host memory (behind an MR cache,
        :attr:`pymodel.rdma.engine_config.HostShape.mr_in_host`): it is loaded into host memory B
        (:func:`pymodel.rdma.verbs.mr_table_in_host`) and :meth:`counters`' ``resp``
        has the MR cache's counters too (port ``resp_mr``).
    read_words : int
        The top's ``read_words``: when not 0 the ``resp`` counters have the READ counters
        too (port ``resp_read``).
    reads : int
        The top's ``reads``: when not 0 the ``req`` counters have the response intake's
        and the frame sender's READ counters too (port ``req_read``, ``read_<name>``,
        :data:`spec.rdma_read_req.REQUESTER_READ_COUNTERS`).

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

    def __init__(self, dut, depth, link_retry=False, mr_in_host=False, read_words=0, reads=0):
        self.dut, self.depth, self.link_retry = dut, depth, link_retry
        self.mr_in_host = mr_in_host
        self.read_words, self.reads = read_words, reads
        self.harness = Harness(dut)
        self.end = self.hang = None
        self._wire = (None, {})         # (model, {link: wire_beats(model, link)})
        self._mmio = mmio_layout()

    # -- load, arm, run ----------------------------------------------------------------------
    def load(self, *, mem_a, mem_b, mr_table, mmio, release, inject=(), inject_stall=(1, 0),
             ports=None, links=None, clear=False):
        """Put a run's stimulus into the design (before :meth:`run`).

        ``mem_a``/``mem_b``: ``{word: value}`` images of the host memories (with
        ``clear``, the words an earlier run left non-zero are zeroed, and so are the
        QP-context caches' tags, memories that reset does not clear); ``mr_table``: the
        responder's MR_LAYOUT integers (the rest of the table is zeroed); ``mmio`` and
        ``release``: the host's MMIO words (dicts of :func:`spec.host.mmio_layout`) and
        the cycle from which each may be offered; ``inject``: frames (bytes with FCS)
        played on the A->B link instead of the requester's (selected when not empty);
        ``inject_stall``: the ``(seed, rate)`` of the injection player; ``ports``:
        run-time ports by name (:data:`PORTS`, or any other); ``links``: ``{link:
        FaultSettings}`` of :data:`spec.rdma.LINKS`.
        """
        h, d = self.harness, self.dut
        if self.mr_in_host:
            mem_b = mr_table_in_host(mem_b, mr_table, self.depth)
        for name, image in ((MEMORIES[0], mem_a), (MEMORIES[1], mem_b)):
            mem = getattr(d, name).mem
            if clear:
                for addr in sorted(self._dirty.get(name, set()) - set(image)):
                    mem[addr].value = 0
            for addr, value in sorted(image.items()):
                mem[addr].value = value
        if not self.mr_in_host:
            table = d.responder.mr_table
            load_memory(table, list(mr_table) + [0] * (len(table) - len(mr_table)))
        if clear:
            for node in (d.requester, d.responder):
                load_memory(node.cache.tags, [0] * len(node.cache.tags))
        words = [pack(self._mmio, w) for w in mmio]
        h.load_player("mmio", words, (1, 0), release=list(release))
        h.load_player("inject", [b for fr in inject for b in frame_to_beats(fr, 64)],
                      inject_stall)
        h.set("inject_select", int(bool(inject)))
        for name, value in (ports or {}).items():
            h.set(name, value)
        for link, settings in (links or {}).items():
            for name, value in settings.ports().items():
                h.set(member_port(f"{link}_settings", name), value)

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
        self.arm(wire_ab=len(self._wire_beats(model, "ab")[0]),
                 wire_ba=len(self._wire_beats(model, "ba")[0]),
                 written=len(model["written"]), completed=len(model["completed"]))

    def _wire_beats(self, model, link):
        """:func:`wire_beats` of ``model``, made once for :meth:`arm_for` and
        :meth:`compare` of the same model (the object, which the run does not change)."""
        if self._wire[0] is not model:
            self._wire = (model, {})
        held = self._wire[1]
        if link not in held:
            held[link] = wire_beats(model, link)
        return held[link]

    async def run(self, timeout_cycles, *, done=None, settle=0, read_only=True, until=None):
        """Reset, then let the simulator run until every port of ``done`` (default: both
        players' and every recorder's) reads 1, then ``settle`` cycles more; with
        ``read_only`` the results are then sampled in ``ReadOnly`` (no write may follow
        in that time step: a bench that runs again leaves it off); ``until``: an async
        callable awaited after the done ports, before the settle cycles (it may raise
        :class:`~tb.harness.HarnessTimeout`: a hang). Returns ``now``; a
        timeout is kept in :attr:`hang`, the wall time until then in :attr:`run_s`.
        Then the host memories, the MMIO stamps and the recorders are written to files
        (:meth:`tb.harness.Harness.snapshot`, half a cycle later), from which the
        results below read them."""
        done = done or (["mmio__done", "inject__done"] + [f"{r}__done" for r in RECORDERS])
        t0 = time.perf_counter()
        await self.harness.reset()
        self.hang = None
        try:
            await self.harness.wait_done(done, timeout_cycles=timeout_cycles)
            if until is not None:
                await until()
        except HarnessTimeout as exc:
            self.hang = str(exc)
        await ClockCycles(self.dut.clk, settle)
        if read_only:
            await ReadOnly()
        self.end = value_of(self.dut.now)
        self.run_s = time.perf_counter() - t0
        await self.harness.snapshot([(getattr(self.dut, m).mem, None) for m in MEMORIES],
                                    players=[("mmio", value_of(self.dut.mmio__count))],
                                    recorders=RECORDERS, read_only=read_only)
        return self.end

    # -- results, valid after the run --------------------------------------------------------
    def capacity(self):
        """Depths of the players and recorders, read from the design's memories."""
        d = self.dut
        return {"mmio_depth": len(d.mmio.items), "inject_depth": len(d.inject.items),
                "wire_depth": min(len(d.wire_ab.items), len(d.wire_ba.items)),
                "event_depth": min(len(d.written.items), len(d.completed.items))}

    def recorded(self, name):
        """``(items, cycles)`` of the recorder ``name`` (:data:`RECORDERS`)."""
        return self.harness.recorded(name)

    def mmio_stamps(self, count):
        """The cycles the first ``count`` MMIO words were taken by host interface A."""
        return self.harness.played_stamps("mmio", count) if count else []

    def counters(self):
        """Counters by block: ``req``, ``resp``, ``host_a``, ``host_b``, ``links``."""
        d = self.dut
        wire = "__link" if self.link_retry else ""
        mr = ({n: value_of(getattr(d, member_port("resp_mr", n))) for n in MR_CACHE_COUNTERS}
              if self.mr_in_host else {})
        if self.read_words:
            mr |= {n: value_of(getattr(d, member_port("resp_read", n))) for n in READ_COUNTERS}
        req_read = ({f"read_{n}": value_of(getattr(d, member_port("req_read", n)))
                     for n in REQUESTER_READ_COUNTERS} if self.reads else {})
        return {
            "req": {n: value_of(getattr(d, member_port("req", n))) for n in REQUESTER_COUNTERS}
            | req_read,
            "resp": {n: value_of(getattr(d, member_port("resp", n))) for n in RESPONDER_COUNTERS}
            | mr,
            "host_a": {n: value_of(getattr(d, member_port("hia", n))) for n in HOST_COUNTERS},
            "host_b": {n: value_of(getattr(d, member_port("hib", n))) for n in HOST_COUNTERS},
            "links": {link: {n: value_of(getattr(d, member_port(f"{link}_counters{wire}", n)))
                             for n in LINK_COUNTERS + LINK_FLAGS} for link in LINKS},
        }

    def memory(self, name):
        """The whole host memory ``name`` (:data:`MEMORIES`); remembers its non-zero words
        for the next run's ``clear``."""
        words = dump_memory(getattr(self.dut, name).mem, self.depth)
        self._dirty[name] = set(compress(range(len(words)), words))
        return words

    def overflows(self):
        """Recorders that had more items than room (their extra items are lost)."""
        return [r for r in RECORDERS if value_of(self.harness.port(f"{r}__overflow")) != 0]

    # -- compare -----------------------------------------------------------------------------
    def compare(self, sb, model, mmio_words):
        """Compare the run with the golden model's ``model`` (the dict of
        :func:`pymodel.rdma.system.simulate`) on ``sb``: every beat on both links and its
        cycle, every written and completed mark (tag, cycle), the cycle each of the
        ``mmio_words`` MMIO words was taken, every counter of both engines, both host
        interfaces and both links, both whole host memories.

        Returns the run in the model's shape (``wire_ab``, ``wire_ba``, ``written``,
        ``completed``, ``mmio_stamps``, ``req``, ``resp``, ``host_a``, ``host_b``,
        ``links``) plus ``mem_a``/``mem_b`` (word lists), for :func:`reduce_run`.
        """
        got = {}
        for link, name in (("ab", "A->B"), ("ba", "B->A")):
            beats, stamps = self._wire_beats(model, link)
            items, cycles = self.recorded(f"wire_{link}")
            sb.compare(f"{name} beats", items, beats)
            sb.compare(f"{name} beat cycles", cycles, stamps, fmt=str)
            try:
                got[f"wire_{link}"] = frames_of(items, cycles)
            except ValueError:          # a broken beat stream: the scoreboard says where
                got[f"wire_{link}"] = []
        for name in ("written", "completed"):
            tags, cycles = self.recorded(name)
            got[name] = list(zip(cycles, tags, strict=True))
            sb.compare(f"{name} (cycle, tag)", got[name], list(model[name]), fmt=str)
        got["mmio_stamps"] = self.mmio_stamps(mmio_words)
        sb.compare("MMIO accept cycles", got["mmio_stamps"], model["mmio_stamps"], fmt=str)
        counters = self.counters()
        got.update(counters)
        for block in ("req", "resp", "host_a", "host_b"):
            for n, value in counters[block].items():
                sb.equal(f"{block} counter {n}", value, model[block][n])
        for link in LINKS:
            for n in LINK_COUNTERS + LINK_FLAGS:
                sb.equal(f"link {link} {n}", counters["links"][link][n],
                         model["links"][link][n])
        for name, node in zip(MEMORIES, ("A", "B"), strict=True):
            got[name] = words = self.memory(name)
            bad = words_that_differ(words, model[name], self.depth)
            sb.equal(f"host memory {node}: words that differ (first 8)", bad[:8], [])
        return got


def run_ports(cfg):
    """The run-time ports of RdmaTop that a run sets from its model configuration ``cfg``:
    the context and CQ bases and sizes, the serial and ACK settings, selective repeat,
    the transport timeout and the cache's size."""
    ports = {port: getattr(cfg, port) for port in ("qpc_base_a", "qpc_base_b", "cq_base",
                                                   "cq_log2", "serial", "ack_every",
                                                   "ack_frames", "selective")}
    ports["ack_timeout"] = cfg.timeout
    ports["cache_log2"] = cfg.cache_entries.bit_length() - 1
    ports["qpc_log2"] = cfg.qpc_log2
    return ports
