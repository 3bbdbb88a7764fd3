"""Twin of :class:`rtl.fabric.faulty_link.FaultyLink`: per-frame faults, cycle exact.

The model is written from the contract (``docs/faults.md``), not from the RTL's
structure: faults are decided frame by frame with plain LFSR steps, and the output side
is an event model (each beat leaves at ``max(arrival, next free cycle)``) rather than a
FIFO simulated cycle by cycle.
"""

from collections import deque
from dataclasses import dataclass, fields

from pymodel.packet import pack_beat, unpack_beat
from rtl.common.stall_pattern import lfsr_next
from rtl.fabric.faulty_link import (
    CORRUPT_BEAT_SHIFT,
    COUNTERS,
    FAULT_KINDS,
    FLAGS,
    SETTINGS,
    WORD_STEPS,
    WORDS_PER_FRAME,
)
from rtl.formats.packet import check_width

__all__ = ["FaultSettings", "FaultPattern", "FaultyLinkModel", "rate_per_65535"]


def _check(name, value, low, high):
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer from {low} to {high}, not {value!r}")
    return value


def rate_per_65535(probability):
    """The ``*_rate`` setting nearest to a fault probability (0.0 to 1.0)."""
    if not 0.0 <= probability <= 1.0:
        raise ValueError(f"fault probability must be from 0 to 1, not {probability!r}")
    return round(probability * 65535)


@dataclass(frozen=True)
class FaultSettings:
    """The run-time setting ports of the link; field names are the port names."""

    seed: int = 1
    drop_rate: int = 0
    corrupt_rate: int = 0
    dup_rate: int = 0
    drop_burst: int = 1
    corrupt_burst: int = 1
    dup_burst: int = 1

    def __post_init__(self):
        if [f.name for f in fields(self)] != list(SETTINGS):
            raise AssertionError("FaultSettings fields must follow rtl SETTINGS")
        for name, bits in SETTINGS.items():
            _check(name, getattr(self, name), 0, (1 << bits) - 1)

    def ports(self):
        """``{port name: value}`` to drive the link's setting ports with."""
        return {name: getattr(self, name) for name in SETTINGS}


def _advance(state, steps):
    for _ in range(steps):
        state = lfsr_next(state)
    return state


class FaultPattern:
    """The faults of frames 0, 1, 2, ... as the link decides them at each first beat.

    ``next()`` returns ``(hits, position)``: ``hits`` maps each kind of
    :data:`FAULT_KINDS` to whether the frame is hit (before the drop precedence), and
    ``position`` is the word that places a flipped bit.
    """

    def __init__(self, settings):
        self.settings = settings
        self.state = settings.seed or 1
        self.left = dict.fromkeys(FAULT_KINDS, 0)

    def next(self):
        words = []
        for _ in range(WORDS_PER_FRAME):
            words.append(self.state)
            self.state = _advance(self.state, WORD_STEPS)
        hits = {}
        for kind, word in zip(FAULT_KINDS, words, strict=False):
            if self.left[kind]:
                hits[kind] = True
                self.left[kind] -= 1
            elif word <= getattr(self.settings, f"{kind}_rate"):
                hits[kind] = True
                self.left[kind] = max(getattr(self.settings, f"{kind}_burst"), 1) - 1
            else:
                hits[kind] = False
        return hits, words[-1]


class FaultyLinkModel:
    """Beats in -> beats out of a :class:`rtl.fabric.faulty_link.FaultyLink`.

    Parameters are those of the RTL and are checked the same way. After :meth:`run`,
    ``fifo_high_water`` holds the most beats that waited in the FIFO at once (a model
    only statistic, to size ``fifo_depth``).
    """

    def __init__(self, width, latency, max_frame_beats=64, fifo_depth=64):
        self.width = check_width(width)
        self.latency = _check("link latency (cycles)", latency, 1, 1024)
        self.max_frame_beats = _check("max_frame_beats", max_frame_beats, 1, 4096)
        self.fifo_depth = _check("fifo_depth", fifo_depth, 1, 4096)
        self.fifo_high_water = 0

    def _flip(self, beat, position):
        data, nbytes, first, last = unpack_beat(self.width, beat)
        p = position % (8 * self.width)
        lane = p // 8
        if lane >= nbytes:
            lane = (nbytes - 1) % self.width
        return pack_beat(self.width, data ^ 1 << (8 * lane + p % 8), nbytes, first, last)

    def _faults(self, sent, settings, counters):
        """The fault stage: ``[(ready cycle, beat, dup), ...]`` that enter the delay."""
        pattern = FaultPattern(settings)
        hits = dict.fromkeys(FAULT_KINDS, False)
        position, index, flipped = 0, 0, False
        staged = []
        last_cycle = None
        for cycle, beat in sent:
            if not isinstance(cycle, int) or (last_cycle is not None and cycle <= last_cycle):
                raise ValueError(f"input cycles must be increasing integers (one beat per "
                                 f"cycle); {cycle!r} follows {last_cycle!r}")
            last_cycle = cycle
            _, _, first, last = unpack_beat(self.width, beat)
            if first:
                hits, position = pattern.next()
                index, flipped = 0, False
                counters["frames_in"] += 1
                counters["dropped"] += hits["drop"]
                counters["corrupted"] += hits["corrupt"] and not hits["drop"]
            if hits["drop"]:
                index = (index + 1) % 16
                continue
            target = position >> CORRUPT_BEAT_SHIFT
            if hits["corrupt"] and not flipped and (index == target or last):
                beat = self._flip(beat, position)
                flipped = True
            index = (index + 1) % 16
            staged.append((cycle + self.latency, beat, hits["dup"]))
        return staged

    def run(self, sent, settings=None):
        """Carry ``sent`` (``[(cycle, beat), ...]``, cycles increasing) across the link.

        Returns ``(received, counters)``: ``[(cycle, beat), ...]`` as they appear on
        ``o`` (duplicate copies included, in cycle order) and a dict of the counters and
        flags (:data:`COUNTERS`, :data:`FLAGS`) once everything has left.
        """
        settings = settings or FaultSettings()
        counters = dict.fromkeys(COUNTERS, 0)
        counters.update(dict.fromkeys(FLAGS, 0))
        staged = self._faults(sent, settings, counters)
        self.fifo_high_water = 0

        received = []
        free = 0                      # first cycle the output is not yet spoken for
        waiting = deque()             # exit cycles of beats that wait in the FIFO
        buffer = [0] * self.max_frame_beats
        next_index = 0
        for ready, beat, dup in staged:
            while waiting and waiting[0] <= ready:
                waiting.popleft()
            out = max(ready, free)
            if out > ready:
                if len(waiting) >= self.fifo_depth:
                    counters["lost"] += 1
                    counters["overflow"] = 1
                    continue
                waiting.append(out)
                self.fifo_high_water = max(self.fifo_high_water, len(waiting))
            received.append((out, beat))
            free = out + 1
            _, _, first, last = unpack_beat(self.width, beat)
            index = 0 if first else next_index
            fits = index < self.max_frame_beats
            next_index = index + 1 if fits else self.max_frame_beats
            if fits:
                buffer[index] = beat
            if dup and last:
                if fits:
                    counters["duplicated"] += 1
                    for k in range(index + 1):
                        received.append((free, buffer[k]))
                        free += 1
                else:
                    counters["too_long"] = 1
        return received, counters
