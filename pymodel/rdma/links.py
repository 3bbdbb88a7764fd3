"""A :class:`rtl.fabric.faulty_link.FaultyLink` fed one frame at a time.

The engine model needs each frame's fate as soon as it is sent (an ACK it causes may
change what the requester sends next), while
:class:`pymodel.fabric.faulty_link.FaultyLinkModel` takes a whole run at once. This
class applies the same contract (``docs/faults.md``) incrementally: the fault pattern is
:class:`pymodel.fabric.faulty_link.FaultPattern`, decided at each frame's first beat, and
each beat leaves in cycle ``max(arrival + latency, previous exit + 1)``. It is checked
against ``FaultyLinkModel`` on the same traffic in ``tests/test_unit_rdma.py``.
"""

from collections import deque

from pymodel.fabric.faulty_link import FaultPattern, FaultSettings
from spec.fabric import CORRUPT_BEAT_SHIFT, COUNTERS, FLAGS

__all__ = ["LinkStream", "LinkLimit"]


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
