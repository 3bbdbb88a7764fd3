"""Twin of :class:`rtl.fabric.faulty_link.FaultyLink`: per-frame faults, cycle exact.

The model is written from the contract (``docs/faults.md``), not from the RTL's
structure: faults are decided frame by frame with plain LFSR steps, and the output side
is an event model (each beat leaves at ``max(arrival, next free cycle)``) rather than a
FIFO simulated cycle by cycle.
"""

from collections import deque
from dataclasses import dataclass, fields

from pymodel.packet import pack_beat, unpack_beat
from pymodel.stall import lfsr_step
from spec.fabric import (
    CORRUPT_BEAT_SHIFT,
    COUNTERS,
    FAULT_KINDS,
    FLAGS,
    RETRY_LINK_COUNTERS,
    RETRY_SETTINGS,
    SETTINGS,
    SIDE_SEED_XOR,
    SIDE_WORDS,
    TAG_SEED_XOR,
    TAG_WORDS,
    WORD_STEPS,
    WORDS_PER_FRAME,
)
from spec.formats.packet import check_width, packet_layout

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
    """The run-time setting ports of the link; field names are the port names. The last
    three (:data:`spec.fabric.RETRY_SETTINGS`) exist only on a link with a tag and a
    sideband (a reliable link's wire)."""

    seed: int = 1
    drop_rate: int = 0
    corrupt_rate: int = 0
    dup_rate: int = 0
    drop_burst: int = 1
    corrupt_burst: int = 1
    dup_burst: int = 1
    tag_rate: int = 0
    ack_drop_rate: int = 0
    ack_corrupt_rate: int = 0

    def __post_init__(self):
        if [f.name for f in fields(self)] != list(SETTINGS) + list(RETRY_SETTINGS):
            raise AssertionError("FaultSettings fields must follow spec SETTINGS and "
                                 "RETRY_SETTINGS")
        for name, bits in {**SETTINGS, **RETRY_SETTINGS}.items():
            _check(name, getattr(self, name), 0, (1 << bits) - 1)

    def ports(self):
        """``{port name: value}`` to drive the link's setting ports with (those of every
        link, :data:`spec.fabric.SETTINGS`)."""
        return {name: getattr(self, name) for name in SETTINGS}

    def retry_ports(self):
        """``{port name: value}`` of the tag and sideband faults (a reliable link's wire,
        :data:`spec.fabric.RETRY_SETTINGS`)."""
        return {name: getattr(self, name) for name in RETRY_SETTINGS}


def _walk(state, steps):
    for _ in range(steps):
        state = lfsr_step(state)
    return state


_JUMPS = {}


def _advance(state, steps):
    """``steps`` steps of :func:`pymodel.stall.lfsr_step` from the 16-bit ``state``.

    The step (a shift and an XOR of the taps by the bit shifted out) is linear over
    GF(2), so the state ``steps`` steps on is the XOR of those of the state's low and
    high bytes: two tables of 256 entries per ``steps``, each entry walked with
    :func:`lfsr_step` once (the fault pattern takes 16 steps a word, 4 words a frame).
    """
    low, high = _jump_tables(steps)
    return low[state & 0xFF] ^ high[state >> 8]


def _jump_tables(steps):
    """The two tables of :func:`_advance` for ``steps`` (built at the first use)."""
    tables = _JUMPS.get(steps)
    if tables is None:
        tables = _JUMPS[steps] = tuple(tuple(_walk(b << shift, steps) for b in range(256))
                                       for shift in (0, 8))
    return tables


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
        # Per kind: its rate and the frames a burst hits after the first.
        self._kinds = tuple((kind, getattr(settings, f"{kind}_rate"),
                             max(getattr(settings, f"{kind}_burst"), 1) - 1)
                            for kind in FAULT_KINDS)

    def next(self):
        low, high = _jump_tables(WORD_STEPS)      # (_advance, with the tables at hand)
        words = []
        state = self.state
        for _ in range(WORDS_PER_FRAME):
            words.append(state)
            state = low[state & 0xFF] ^ high[state >> 8]
        self.state = state
        hits = {}
        left = self.left
        for (kind, rate, burst), word in zip(self._kinds, words, strict=False):
            if left[kind]:
                hits[kind] = True
                left[kind] -= 1
            elif word <= rate:
                hits[kind] = True
                left[kind] = burst
            else:
                hits[kind] = False
        return hits, words[-1]


class _Words:
    """An LFSR of its own for the tag or sideband faults: started at ``seed ^ xor``
    (0 read as 1); :meth:`take` returns the next ``n`` words (``WORD_STEPS`` apart) and
    moves on ``n * WORD_STEPS`` steps."""

    def __init__(self, seed, xor):
        self.state = (seed ^ xor) or 1

    def take(self, n):
        out = []
        for _ in range(n):
            out.append(self.state)
            self.state = _advance(self.state, WORD_STEPS)
        return out


def _bit(word, bits):
    """The bit a position word picks in a field of ``bits`` bits."""
    return (word * bits) >> 16


class FaultyLinkModel:
    """Beats in -> beats out of a :class:`rtl.fabric.faulty_link.FaultyLink`.

    Parameters are those of the RTL and are checked the same way. Beats are flat
    integers (:func:`pymodel.packet.pack_beat`); bits above the packet fields are the
    sideband tag (``tag_bits``), carried untouched but for the tag fault. After :meth:`run`,
    ``fifo_high_water`` holds the most beats that waited in the FIFO at once (a model
    only statistic, to size ``fifo_depth``).

    :meth:`run` takes a whole input at once; :meth:`start` and :meth:`push` feed it beat
    by beat (a beat's outputs never depend on later beats), for models with feedback.
    """

    def __init__(self, width, latency, max_frame_beats=64, fifo_depth=64, tag_bits=0,
                 side_bits=0):
        self.width = check_width(width)
        self._beat_bits = packet_layout(width).size     # the tag sits above the beat
        self.side_bits = _check("side_bits", side_bits, 0, 32)
        self.latency = _check("link latency (cycles)", latency, 1, 1024)
        self.max_frame_beats = _check("max_frame_beats", max_frame_beats, 1, 4096)
        self.fifo_depth = _check("fifo_depth", fifo_depth, 1, 4096)
        self.tag_bits = _check("tag_bits", tag_bits, 0, 32)
        self.fifo_high_water = 0
        self.start()

    def _flip(self, beat, position):
        data, nbytes, first, last = unpack_beat(self.width, beat)
        tag = beat >> self._beat_bits
        p = position % (8 * self.width)
        lane = p // 8
        if lane >= nbytes:
            lane = (nbytes - 1) % self.width
        flat = pack_beat(self.width, data ^ 1 << (8 * lane + p % 8), nbytes, first, last)
        return flat | tag << self._beat_bits

    def start(self, settings=None):
        """Reset the link with ``settings`` (a :class:`FaultSettings`; default no faults)."""
        settings = settings or FaultSettings()
        self.settings = settings
        self.pattern = FaultPattern(settings)
        self.tag_words = _Words(settings.seed, TAG_SEED_XOR)
        self.side_words = _Words(settings.seed, SIDE_SEED_XOR)
        self._tag_flip = 0
        self.counters = dict.fromkeys(COUNTERS, 0)
        if self.tag_bits:
            self.counters[RETRY_LINK_COUNTERS[0]] = 0
        if self.side_bits:
            self.counters.update(dict.fromkeys(RETRY_LINK_COUNTERS[1:], 0))
        self.counters.update(dict.fromkeys(FLAGS, 0))
        self.fifo_high_water = 0
        self._hits = dict.fromkeys(FAULT_KINDS, False)
        self._position = self._index = 0
        self._flipped = False
        self._last_cycle = None
        self._free = 0                 # first cycle the output is not yet spoken for
        self._waiting = deque()        # exit cycles of beats that wait in the FIFO
        self._buffer = [0] * self.max_frame_beats
        self._next_index = 0

    def push(self, cycle, beat):
        """Beat ``beat`` enters in ``cycle`` (increasing); returns the ``[(cycle, beat)]``
        it puts on ``o`` (none if dropped or lost, two runs of beats for a duplicated
        frame's last beat), all at least ``latency`` cycles later."""
        if not isinstance(cycle, int) or (self._last_cycle is not None
                                          and cycle <= self._last_cycle):
            raise ValueError(f"input cycles must be increasing integers (one beat per "
                             f"cycle); {cycle!r} follows {self._last_cycle!r}")
        self._last_cycle = cycle
        counters = self.counters
        _, _, first, last = unpack_beat(self.width, beat)
        if first:
            self._hits, self._position = self.pattern.next()
            self._index, self._flipped = 0, False
            counters["frames_in"] += 1
            counters["dropped"] += self._hits["drop"]
            counters["corrupted"] += self._hits["corrupt"] and not self._hits["drop"]
            if self.tag_bits:
                draw, where = self.tag_words.take(TAG_WORDS)
                hit = draw <= self.settings.tag_rate and not self._hits["drop"]
                self._tag_flip = 1 << _bit(where, self.tag_bits) if hit else 0
                counters["tag_corrupted"] += hit
        hits = self._hits
        if hits["drop"]:
            self._index = (self._index + 1) % 16
            return []
        beat ^= self._tag_flip << self._beat_bits
        target = self._position >> CORRUPT_BEAT_SHIFT
        if hits["corrupt"] and not self._flipped and (self._index == target or last):
            beat = self._flip(beat, self._position)
            self._flipped = True
        self._index = (self._index + 1) % 16
        return self._output(cycle + self.latency, beat, hits["dup"])

    def side(self, value):
        """One item of the reverse sideband (``side_bits`` wide) enters: returns it as
        it leaves (combinationally), with a bit flipped, or None when dropped."""
        drop_w, corrupt_w, where = self.side_words.take(SIDE_WORDS)
        if drop_w <= self.settings.ack_drop_rate:
            self.counters["acks_dropped"] += 1
            return None
        if corrupt_w <= self.settings.ack_corrupt_rate:
            self.counters["acks_corrupted"] += 1
            return value ^ 1 << _bit(where, self.side_bits)
        return value

    def _output(self, ready, beat, dup):
        """The output stage: each beat leaves at ``max(ready, next free cycle)``."""
        counters, waiting = self.counters, self._waiting
        while waiting and waiting[0] <= ready:
            waiting.popleft()
        out = max(ready, self._free)
        if out > ready:
            if len(waiting) >= self.fifo_depth:
                counters["lost"] += 1
                counters["overflow"] = 1
                return []
            waiting.append(out)
            self.fifo_high_water = max(self.fifo_high_water, len(waiting))
        received = [(out, beat)]
        self._free = out + 1
        _, _, first, last = unpack_beat(self.width, beat)
        index = 0 if first else self._next_index
        fits = index < self.max_frame_beats
        self._next_index = index + 1 if fits else self.max_frame_beats
        if fits:
            self._buffer[index] = beat
        if dup and last:
            if fits:
                counters["duplicated"] += 1
                for k in range(index + 1):
                    received.append((self._free, self._buffer[k]))
                    self._free += 1
            else:
                counters["too_long"] = 1
        return received

    def run(self, sent, settings=None):
        """Carry ``sent`` (``[(cycle, beat), ...]``, cycles increasing) across the link.

        Returns ``(received, counters)``: ``[(cycle, beat), ...]`` as they appear on
        ``o`` (duplicate copies included, in cycle order) and a dict of the counters and
        flags (:data:`COUNTERS`, :data:`FLAGS`) once everything has left.
        """
        self.start(settings)
        received = []
        for cycle, beat in sent:
            received += self.push(cycle, beat)
        return received, dict(self.counters)
