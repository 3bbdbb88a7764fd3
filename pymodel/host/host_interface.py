"""Golden-model twin of the host interface, stepped one cycle at a time.

Written from the contract (``docs/host_interface.md``), not from the RTL, and composed
like :class:`rtl.host.host_interface.HostInterface` of a twin per part:
:class:`~pymodel.host.read_splitter.ReadSplitterModel`,
:class:`~pymodel.host.due_queue.DueQueueModel`,
:class:`~pymodel.host.write_buffer.WriteBufferModel`,
:class:`~pymodel.host.mmio_buffer.MmioBufferModel`,
:class:`~pymodel.host.up_scheduler.UpSchedulerModel` and
:class:`~pymodel.host.down_scheduler.DownSchedulerModel`, each stepped with
``step(c, side)``. The two directions are "free from" cycles, a TLP's effects are
scheduled into per-cycle tables when it starts, and the queues are Python deques.
Imports only the spec layer.
"""

from dataclasses import dataclass

from pymodel.host.common import byte_mask, pick, tlp_cycles
from pymodel.host.down_scheduler import DownSchedulerModel
from pymodel.host.due_queue import DueQueueModel
from pymodel.host.mmio_buffer import MmioBufferModel
from pymodel.host.read_splitter import ReadSplitterModel
from pymodel.host.up_scheduler import UpSchedulerModel
from pymodel.host.write_buffer import WriteBufferModel
from spec.host import (
    COUNTER_BITS,
    HOST_COUNTERS,
    MMIO_NBYTES_BITS,
    PROFILES,
    WORD_BYTES,
    HostProfile,
    check_profile,
)
from spec.rdma_engine import HOST_DEPTH

__all__ = ["HostInterfaceModel", "HostInterfaceParams", "StepResult", "tlp_cycles"]

_COUNTER_MASK = (1 << COUNTER_BITS) - 1


#: The details of each trace event, in the order :meth:`HostInterfaceModel._note` takes
#: their values (``d``: the cycles the TLP occupies its direction).
_NOTE_DETAILS = {"rd_tlp": ("addr", "words", "d"), "wr_tlp": ("addr", "words", "bytes", "d"),
                 "cpl": ("addr", "words", "d"), "mmio_tlp": ("addr", "nbytes", "d")}

#: The round robin of a direction (:func:`pymodel.host.common.pick`).
_pick = pick


@dataclass(frozen=True)
class HostInterfaceParams:
    """The parameters of :class:`rtl.host.host_interface.HostInterface`, checked.

    Defaults: the ``pcie`` profile (:data:`spec.host.PROFILES`, each value with its
    source there) and :data:`spec.rdma_engine.HOST_DEPTH` words (a node's host memory in
    the co-simulation). A bad field raises ``ValueError`` naming it (a profile's own
    fields by :func:`spec.host.check_profile`).
    """

    profile: HostProfile = PROFILES["pcie"]
    depth: int = HOST_DEPTH

    def __post_init__(self):
        if not isinstance(self.profile, HostProfile):
            raise ValueError(f"HostInterfaceParams.profile must be a HostProfile, not "
                             f"{self.profile!r}")
        check_profile(self.profile)
        d = self.depth
        if not isinstance(d, int) or isinstance(d, bool) or d < 2 or d & (d - 1):
            raise ValueError(f"HostInterfaceParams.depth: host memory depth (words) must be "
                             f"a power of two, not {d!r}")


@dataclass(slots=True)
class StepResult:
    """What happened in one cycle (see :meth:`HostInterfaceModel.step`)."""

    rd_req_taken: bool = False
    wr_taken: bool = False
    mmio_in_taken: bool = False
    rd_data: dict | None = None
    mmio: dict | None = None
    marked: int | None = None


class HostInterfaceModel:
    """The host interface in Python, cycle for cycle.

    Parameters
    ----------
    profile : spec.host.HostProfile
    depth : int
        Host-memory words (a power of two).
    mem : dict, optional
        Initial host memory, ``{word address: 512-bit int}`` (absent words are 0).

    Attributes
    ----------
    counters : dict
        :data:`spec.host.HOST_COUNTERS`, exact through the last cycle stepped.
    mem : dict
        The host memory, written by posted writes.
    trace : list or None
        Set to a list to collect ``(cycle, event, details)``: ``rd_tlp``, ``wr_tlp``,
        ``cpl``, ``mmio_tlp`` at the cycle each TLP starts, with its occupancy ``d``.
    """

    def __init__(self, profile, depth, mem=None):
        self.params = HostInterfaceParams(profile, depth)
        self.p = profile
        self.depth = depth
        self.mem = dict(mem or {})
        self.counters = cnt = dict.fromkeys(HOST_COUNTERS, 0)
        self.trace = None
        self._c = -1
        p = profile
        self.reads = ReadSplitterModel(p, depth)
        self.due = DueQueueModel(p, depth, cnt)
        self.wbuf = WriteBufferModel(p, depth)
        self.mmio_buf = MmioBufferModel(p)
        self.up = UpSchedulerModel(p, self.reads, self.due, self.wbuf, cnt, self._note)
        self.down = DownSchedulerModel(p, depth, self.due, self.mmio_buf, self.mem, cnt,
                                       self._note)
        # The 32-bit wrap of the counters (see the end of :meth:`step`): no counter grows
        # by more than ``_growth`` a cycle (a busy or wait cycle, a TLP: one a direction,
        # its overhead and payload bytes, the tags in use), so the largest one is looked
        # for only from ``_wrap_check``, the first cycle it could have passed 2**32.
        self._growth = max(1, p.tags, p.req_overhead, p.cpl_overhead, p.mmio_overhead,
                           WORD_BYTES * max(self.wbuf.limit, self.due.rcb_words),
                           1 << MMIO_NBYTES_BITS)
        self._wrap_check = 0

    @classmethod
    def of(cls, params, mem=None):
        """The interface with ``params`` (a :class:`HostInterfaceParams`)."""
        if not isinstance(params, HostInterfaceParams):
            raise ValueError(f"params must be a HostInterfaceParams, not {params!r}")
        return cls(params.profile, params.depth, mem)

    # -- the cycle -----------------------------------------------------------------------
    def step(self, c, rd_req=None, wr=None, mmio_in=None, mmio_ready=True):
        """Advance to cycle ``c`` (strictly increasing; cycles skipped since the last call
        must be ones without inputs, at most up to :meth:`next_event`).

        ``rd_req``, ``wr``, ``mmio_in`` are what the device and the host present in this
        cycle (dicts of their layout's fields, or None); ``mmio_ready`` is the device's
        ``mmio.ready``. Returns a :class:`StepResult`: which inputs were taken, the word
        on ``rd_data`` and the word presented on ``mmio`` (taken if ``mmio_ready``).
        Raises ``ValueError`` on inputs the contract forbids.

        The parts are stepped in the order their combinational paths run within a
        cycle: the up scheduler (a read request or write TLP starts; the word written
        in ``c``), the down scheduler (a completion or host write starts; its memory
        read sees the memory before the write of ``c``), the host memory's write, the
        MMIO buffer (a host word taken, the ``mmio`` word), then the engine inputs the
        read splitter and the write buffer take (seen by the schedulers from ``c + 1``).
        """
        if c <= self._c:
            raise ValueError(f"cycles must increase: {c} after {self._c}")
        if c > self._c + 1:
            self._skip_to(c)
        up, down, mbuf = self.up, self.down, self.mmio_buf
        reads, tlps, chunks = self.reads.q, self.wbuf.tlps, self.due.chunks
        if (rd_req is None and wr is None and mmio_in is None and not down.reads
                and not down.out and not up.writes and not mbuf.takes
                and not mbuf.slots and not reads and not tlps and not chunks):
            return self._quiet(c)
        res = StepResult()
        # A part is stepped in a cycle in which it has something to start, take or
        # present, or a word due; in the others its step would only count a busy cycle.
        up_acts = c in up.writes or (c >= up.free and bool(reads or tlps))
        if up_acts:
            write = up.advance(c)
        else:
            write = None
            if c < up.free:
                self.counters["up_busy_cycles"] += 1
        if c in down.out or c in down.reads or (c >= down.free and (
                mmio_in is not None or (chunks and chunks[0].due <= c))):
            res.rd_data = down.advance(c, mmio_in)
        elif c < down.free:
            self.counters["dn_busy_cycles"] += 1
        if write is not None:              # the posted write of this cycle
            addr, data, be, mark, tag = write
            if mark:
                res.marked = tag
            old = self.mem.get(addr, 0)
            mask = byte_mask(be)
            self.mem[addr] = (old & ~mask) | (data & mask)
        if (mbuf.takes and mbuf.takes[0][0] == c) or (mbuf.slots and mbuf.slots[0][0] <= c):
            res.mmio_in_taken, res.mmio = mbuf.advance(c, mmio_in, mmio_ready)
        if rd_req is not None:
            res.rd_req_taken = self.reads.advance(c, rd_req)
        if wr is not None or write is not None:
            res.wr_taken = self.wbuf.advance(wr, write is not None)
        if up_acts:                        # (only a read request adds a tag in use)
            self.due.step(c, None)
        if c >= self._wrap_check:
            self._wrap(c)
        self._c = c
        return res

    def _quiet(self, c):
        """:meth:`step` of a cycle without inputs in which nothing is queued, scheduled
        or in flight (no read, write, completion, host word or TLP): nothing starts or
        arrives; only the directions still busy with a TLP count the cycle."""
        cnt = self.counters
        if c < self.up.free:
            cnt["up_busy_cycles"] += 1
        if c < self.down.free:
            cnt["dn_busy_cycles"] += 1
        if c >= self._wrap_check:
            self._wrap(c)
        self._c = c
        return StepResult()

    def _wrap(self, c):
        """Wrap the counters to 32 bits (none is negative) and set the next cycle in which
        one may pass 2**32: the largest one grows by at most ``_growth`` a cycle."""
        cnt = self.counters
        top = max(cnt.values())
        if top > _COUNTER_MASK:
            for name in cnt:
                cnt[name] &= _COUNTER_MASK
            top = max(cnt.values())
        self._wrap_check = c + 1 + (_COUNTER_MASK - top) // self._growth

    def mmio_head(self, c):
        """The word the interface presents on ``mmio`` in cycle ``c`` (before
        :meth:`step` of that cycle), or None: what a device decides ``ready`` on."""
        return self.mmio_buf.head(c)

    def next_event(self, c):
        """The earliest cycle after ``c`` in which something can happen without new
        inputs (a TLP start, a scheduled read, write, word or commit, a presented ``mmio``
        word, or the last busy cycle of a direction), or None when idle. Stepping only
        at these cycles keeps every output and counter exact."""
        up, down, mbuf, due = self.up, self.down, self.mmio_buf, self.due
        soon = []
        for cycles in (down.reads, down.out, up.writes):    # (keyed by cycle)
            if cycles:
                first = min(cycles)
                if first <= c:                  # (only the cycles after c count)
                    first = min((k for k in cycles if k > c), default=None)
                if first is not None:
                    soon.append(first)
        if mbuf.takes:
            soon.append(mbuf.takes[0][0])
        if mbuf.slots:
            soon.append(max(c + 1, mbuf.slots[0][0]))
        if (self.reads.q and due.tag_free()) or self.wbuf.tlps:
            soon.append(max(c + 1, up.free))
        if due.chunks:
            soon.append(max(c + 1, due.chunks[0].due, down.free))
        for free in (up.free, down.free):
            if free - 1 > c:
                soon.append(free - 1)
        return min(soon) if soon else None

    # -- bookkeeping ---------------------------------------------------------------------
    def _skip_to(self, c):
        """Account for the cycles ``self._c + 1 .. c - 1``, which had no inputs."""
        first = self._c + 1
        if first >= c:
            return
        nxt = self.next_event(self._c)
        if nxt is not None and nxt < c:
            raise ValueError(f"cycle {nxt} has an event; it can not be skipped to {c}")
        cnt = self.counters
        cnt["up_busy_cycles"] += max(0, min(c, self.up.free) - first)
        cnt["dn_busy_cycles"] += max(0, min(c, self.down.free) - first)
        if self.reads.q and not self.due.tag_free():
            cnt["tag_wait_cycles"] += c - max(first, self.up.free)
            cnt["tag_wait_cycles"] &= _COUNTER_MASK     # (the sum may be negative)
        self._wrap_check = 0                      # (grown by more than a cycle's worth)

    def _note(self, c, event, *values):
        """Trace ``(c, event, {detail: value})``, the details named by
        :data:`_NOTE_DETAILS` (no dict is built while there is no trace)."""
        if self.trace is not None:
            self.trace.append((c, event, dict(zip(_NOTE_DETAILS[event], values,
                                                  strict=True))))
