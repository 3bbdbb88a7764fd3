"""The RDMA top's links for the engine model: a :class:`rtl.fabric.faulty_link.FaultyLink`
fed one frame at a time, and a :class:`rtl.fabric.reliable_link.ReliableLink` (the top's
``link_retry``), by its fault-free timing or stepped cycle by cycle.

The engine model needs each frame's fate as soon as it is sent (an ACK it causes may
change what the requester sends next), while
:class:`pymodel.fabric.faulty_link.FaultyLinkModel` takes a whole run at once. This
class applies the same contract (``docs/faults.md``) incrementally: the fault pattern is
:class:`pymodel.fabric.faulty_link.FaultPattern`, decided at each frame's first beat, and
each beat leaves in cycle ``max(arrival + latency, previous exit + 1)``. It is checked
against ``FaultyLinkModel`` on the same traffic in ``tests/test_unit_rdma.py``. A
receiver that takes each beat as it comes (node A's with READs) is fed by
:class:`LinkBeats`, ``FaultyLinkModel`` itself stepped beat by beat (checked in the same
test).

A reliable link's fate of a frame depends on what is sent after it (a rewind waits for
the frame being sent; frames sent again delay new ones), so with faults it is stepped
(:class:`ReliableSteps`, around :class:`pymodel.fabric.reliable_link.ReliableLinkModel`);
without faults its timing is closed (:class:`ReliableStream`), checked against the
stepped model in ``tests/test_rdma_link_retry.py``.
"""

from collections import deque

from pymodel.fabric.faulty_link import FaultPattern, FaultSettings, FaultyLinkModel
from pymodel.fabric.reliable_link import ReliableLinkModel
from pymodel.fcs import fcs_ok
from pymodel.packet import frame_chunks, pack_beat, unpack_beat
from spec.fabric import (
    CORRUPT_BEAT_SHIFT,
    COUNTERS,
    FLAGS,
    RETRY_LINK_COUNTERS,
    RX_COUNTERS,
    TX_COUNTERS,
)

__all__ = ["LinkStream", "LinkBeats", "LinkLimit", "ReliableStream", "ReliableSteps",
           "retry_counters", "faulty"]


class LinkLimit(RuntimeError):
    """The traffic would lose a beat in the link's FIFO: not modelled frame by frame."""


class LinkStream:
    """One direction of a link, frame by frame, in time order.

    Parameters
    ----------
    latency : int
        Cycles from a beat entering to it leaving while no copy is being sent.
    settings : FaultSettings or None
        The link's run-time settings; None (or all rates 0) is a plain link.
    max_frame_beats, fifo_depth : int
        As for the RTL link.
    width : int
        Bytes per beat.
    """

    def __init__(self, latency, settings=None, max_frame_beats=64, fifo_depth=64, width=64):
        self.latency, self.width = latency, width
        self.max_frame_beats, self.fifo_depth = max_frame_beats, fifo_depth
        self.settings = settings or FaultSettings()
        self.pattern = FaultPattern(self.settings)
        self.counters = dict.fromkeys(COUNTERS, 0)
        self.counters.update(dict.fromkeys(FLAGS, 0))
        self.free = 0                 # first output cycle not yet spoken for
        self.waiting = deque()        # exit cycles of beats waiting in the FIFO
        self.last_in = None

    def send(self, cycles, frame):
        """Carry one frame whose beats enter in ``cycles`` (increasing, after every beat
        sent before). Returns ``[(exit cycles, bytes), ...]``: nothing if dropped, the
        frame (maybe with one bit flipped), and its copy if duplicated."""
        w = self.width
        nb = -(-len(frame) // w)
        if len(cycles) != nb:
            raise ValueError(f"{len(cycles)} cycles given for a frame of {nb} beats")
        if self.last_in is not None and cycles[0] <= self.last_in:
            raise ValueError(f"frames must be sent in time order: cycle {cycles[0]} after "
                             f"{self.last_in}")
        self.last_in = cycles[-1]
        hits, position = self.pattern.next()
        c = self.counters
        c["frames_in"] += 1
        if hits["drop"]:
            c["dropped"] += 1
            return []
        data = frame
        if hits["corrupt"]:
            data = bytearray(frame)
            c["corrupted"] += 1
            beat = min(position >> CORRUPT_BEAT_SHIFT, nb - 1)
            valid = min(w, len(frame) - w * beat)
            bit = position % (8 * w)
            lane = bit // 8 if bit // 8 < valid else valid - 1
            data[w * beat + lane] ^= 1 << (bit % 8)
        out = []
        waiting, latency, free = self.waiting, self.latency, self.free
        for cycle in cycles:
            ready = cycle + latency
            while waiting and waiting[0] <= ready:
                waiting.popleft()
            leave = ready if ready >= free else free
            if leave > ready:
                if len(waiting) >= self.fifo_depth:
                    self.free = free
                    raise LinkLimit("a beat would be lost in the link FIFO")
                waiting.append(leave)
            out.append(leave)
            free = leave + 1
        self.free = free
        frames = [(out, bytes(data))]
        if hits["dup"]:
            if nb <= self.max_frame_beats:
                c["duplicated"] += 1
                frames.append((list(range(self.free, self.free + nb)), bytes(data)))
                self.free += nb
            else:
                c["too_long"] = 1
        return frames


class LinkBeats:
    """One direction of a plain link carried beat by beat, for a receiver that takes each
    beat as it comes (node A's with READs: a READ RESPONSE may be longer than the link's
    latency, so its first beats leave before its last one enters).

    :class:`pymodel.fabric.faulty_link.FaultyLinkModel` (the twin of the RTL link) fed
    one beat at a time: drops, corrupted frames (one bit flipped in the beat the pattern's
    position picks, or the last beat) and duplicates (the frame as sent, corruption
    included, again right after its last beat leaves), with the counters of
    :class:`LinkStream`. A beat the link's FIFO would lose raises :class:`LinkLimit`.
    """

    def __init__(self, latency, settings=None, max_frame_beats=64, fifo_depth=64, width=64):
        self.width = width
        self.model = FaultyLinkModel(width, latency, max_frame_beats, fifo_depth)
        self.model.start(settings or FaultSettings())
        self.frame = bytearray()      # the frame leaving, up to its last beat so far

    @property
    def counters(self):
        return self.model.counters

    def push(self, cycle, beat):
        """Beat ``beat`` (``data``, ``nbytes``, ``first``, ``last``) enters in ``cycle``
        (increasing): ``[(exit cycle, beat, frame or None), ...]`` for the beats it puts
        on the output (none if its frame is dropped; at a duplicated frame's last beat,
        the copy's beats too), each with the whole frame (bytes) at a frame's last beat."""
        flat = pack_beat(self.width, beat["data"], beat["nbytes"], beat["first"],
                         beat["last"])
        out = self.model.push(cycle, flat)
        if self.model.counters["lost"]:
            raise LinkLimit(f"a beat would be lost in the link FIFO in cycle {cycle}")
        result = []
        for leave, flat in out:
            data, nbytes, first, last = unpack_beat(self.width, flat)
            if first:
                self.frame = bytearray()
            self.frame += data.to_bytes(self.width, "little")[:nbytes]
            result.append((leave, {"data": data, "nbytes": nbytes, "first": int(first),
                                   "last": int(last)}, bytes(self.frame) if last else None))
        return result


def faulty(settings):
    """Whether link ``settings`` (a FaultSettings or None) damage anything."""
    return settings is not None and any(
        getattr(settings, name) for name in settings.__dataclass_fields__
        if name.endswith("_rate"))


def retry_counters():
    """The counters of a reliable link as the RDMA run names them (``<link>_<name>``;
    the top's ports: :func:`tb.rdma.testbench.retry_counter_port`): the wire's
    (:data:`spec.fabric.COUNTERS`, ``RETRY_LINK_COUNTERS``, ``FLAGS``), the ends'
    ``tx_*``/``rx_*``, and ``full`` (a beat offered while ``i.ready`` was low), all 0."""
    names = (COUNTERS + RETRY_LINK_COUNTERS + FLAGS + tuple(f"tx_{n}" for n in TX_COUNTERS)
             + tuple(f"rx_{n}" for n in RX_COUNTERS) + ("full",))
    return dict.fromkeys(names, 0)


def _check_fcs(frame):
    if not fcs_ok(bytes(frame)):
        raise LinkLimit("a frame with a bad FCS on a reliable link: its receiver NAKs it "
                        "and its sender sends it again forever")


class ReliableStream:
    """One direction of a fault-free reliable link, frame by frame, in time order (the
    interface of :class:`LinkStream`).

    The timing of :class:`rtl.fabric.reliable_link.ReliableLink` without faults: each
    beat taken on ``i`` is sent on the wire one cycle later and arrives ``latency``
    cycles after that (the input is at most a beat a cycle, so neither the replay buffer
    nor the wire ever queues); the receiver judges a frame in the arrival cycle of its
    last beat ``l`` (``l = last input cycle + 1 + latency``) and delivers its beats one
    a cycle from ``l + 1``, after the beats of earlier frames. Without gaps: a frame
    taken in ``c .. c+n-1`` leaves in ``c + n + latency + 1 ..``. ``i.ready`` never falls
    (the replay buffer holds the ACK round trip and a longest frame more).
    """

    def __init__(self, latency, width=64):
        self.latency, self.width = latency, width
        self.counters = retry_counters()
        self.free = 0                 # first output cycle not yet spoken for
        self.last_in = None

    def send(self, cycles, frame):
        """Carry one frame (bytes with FCS) whose beats enter in ``cycles`` (increasing,
        after every beat sent before). Returns ``[(exit cycles, bytes)]``."""
        nb = -(-len(frame) // self.width)
        if len(cycles) != nb:
            raise ValueError(f"{len(cycles)} cycles given for a frame of {nb} beats")
        if self.last_in is not None and cycles[0] <= self.last_in:
            raise ValueError(f"frames must be sent in time order: cycle {cycles[0]} after "
                             f"{self.last_in}")
        _check_fcs(frame)
        self.last_in = cycles[-1]
        start = max(cycles[-1] + self.latency + 2, self.free)
        self.free = start + nb
        c = self.counters
        for name in ("frames_in", "tx_frames", "rx_frames_ok", "rx_acks"):
            c[name] += 1
        return [(list(range(start, start + nb)), bytes(frame))]


class ReliableSteps:
    """One direction of a reliable link with faults, stepped one cycle at a time:
    :class:`pymodel.fabric.reliable_link.ReliableLinkModel` behind the interface the
    engine model needs.

    Frames are given ahead (:meth:`feed`, with the cycles their beats enter); each
    cycle, :meth:`deliver` first (the beat on ``o``: it depends only on earlier cycles),
    then the nodes run, then :meth:`take` puts the cycle's beat (fed or given) on ``i``.
    A beat offered while ``i.ready`` is low raises :class:`LinkLimit` (the RTL loses it
    and raises its sticky ``full``): the engines have no backpressure towards the links.
    """

    def __init__(self, latency, max_frame_beats, settings, width=64):
        self.width = width
        self.model = ReliableLinkModel(width, latency, max_frame_beats, settings)
        self.fed = {}                 # cycle -> flat beat to take
        self.frame = bytearray()      # the frame being delivered

    def feed(self, cycles, frame):
        _check_fcs(frame)
        chunks = frame_chunks(frame, self.width)
        if len(cycles) != len(chunks):
            raise ValueError(f"{len(cycles)} cycles given for a frame of {len(chunks)} "
                             f"beats")
        for c, chunk in zip(cycles, chunks, strict=True):
            if c in self.fed:
                raise AssertionError(f"two beats enter the link in cycle {c}")
            self.fed[c] = pack_beat(self.width, *chunk)

    def deliver(self, c):
        """``(beat, frame)`` leaving ``o`` in cycle ``c``: the beat's fields (``data``,
        ``nbytes``, ``first``, ``last``) or None, and the whole frame at its last beat."""
        flat = self.model._receive(c, self.model.arrivals.pop(c, None), True)
        if flat is None:
            return None, None
        data, nbytes, first, last = unpack_beat(self.width, flat)
        if first:
            self.frame = bytearray()
        self.frame += data.to_bytes(self.width, "little")[:nbytes]
        beat = {"data": data, "nbytes": nbytes, "first": int(first), "last": int(last)}
        return beat, (bytes(self.frame) if last else None)

    def take(self, c, beat=None):
        """The sending half of cycle ``c``: the fed beat of ``c`` or ``beat`` (fields as
        :meth:`deliver` returns) enters ``i``."""
        flat = self.fed.pop(c, None)
        if beat is not None:
            flat = pack_beat(self.width, beat["data"], beat["nbytes"], beat["first"],
                             beat["last"])
        if flat is not None and not self.model.ready():
            raise LinkLimit(f"the reliable link's replay buffer is full in cycle {c}: "
                            f"the engine, which has no backpressure, would lose a beat")
        self.model._send(c, flat)

    def busy(self):
        return self.model.busy() or bool(self.fed)

    def next_event(self, c):
        """The next cycle after ``c`` in which the link does something, or None."""
        if self.model.busy():
            return c + 1
        return min(self.fed) if self.fed else None

    @property
    def counters(self):
        out = retry_counters()
        for name, value in self.model.all_counters().items():
            out[name[5:] if name.startswith("link_") else name] = value
        return out
