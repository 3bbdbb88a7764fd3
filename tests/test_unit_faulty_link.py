"""Unit tests of the faulty link (Amaranth simulator) against its twin, and of the twin's
fault pattern on its own."""

import random
from dataclasses import replace

import pytest

from pymodel.fabric.faulty_link import (
    FaultPattern,
    FaultSettings,
    FaultyLinkModel,
    rate_per_65535,
)
from pymodel.fabric.link import LinkModel
from pymodel.fcs import fcs_bytes, fcs_ok
from pymodel.packet import beats_to_frames, frame_to_beats, unpack_beat
from rtl.fabric.faulty_link import FaultyLink
from spec.fabric import COUNTERS, FLAGS
from tb.amsim import run_sim

ALWAYS = 65535


def _frames(rng, count, lengths=(1, 300)):
    return [bytes(rng.getrandbits(8) for _ in range(rng.randint(*lengths)))
            for _ in range(count)]


def _schedule(rng, frames, width, max_gap, start=0, hiccups=0.1):
    """``[(cycle, beat), ...]``: random gaps of 0..max_gap cycles between frames and,
    with probability ``hiccups`` per beat, a one-cycle gap inside a frame."""
    sent, cycle = [], start
    for frame in frames:
        cycle += rng.randint(0, max_gap)
        for k, beat in enumerate(frame_to_beats(frame, width)):
            if k and rng.random() < hiccups:
                cycle += 1
            sent.append((cycle, beat))
            cycle += 1
    return sent


def _simulate(dut, settings, sent, cycles):
    """Drive ``sent`` into the link for ``cycles`` cycles; return what left on ``o``
    (with cycles) and the counters and flags at the end."""
    at = dict(sent)
    seen, final = [], {}

    async def bench(ctx):
        for name, value in settings.ports().items():
            ctx.set(getattr(dut.settings, name), value)
        for cycle in range(cycles):
            beat = at.get(cycle)
            ctx.set(dut.i.valid, beat is not None)
            ctx.set(dut.i.payload.as_value(), beat or 0)
            if ctx.get(dut.o.valid):
                seen.append((cycle, ctx.get(dut.o.payload.as_value())))
            await ctx.tick()
        for name in COUNTERS + FLAGS:
            final[name] = ctx.get(getattr(dut.counters, name))

    run_sim(dut, bench, deadline_cycles=cycles + 2)
    return seen, final


def _check_against_model(width, latency, settings, sent, **sizes):
    """Run RTL and model on the same input; assert equality; return the model's output,
    its counters and the deepest the FIFO got."""
    model = FaultyLinkModel(width, latency, **sizes)
    want, counters = model.run(sent, settings)
    last = max([c for c, _ in want] + [sent[-1][0] + latency])
    got, final = _simulate(FaultyLink(width, latency, **sizes), settings, sent, last + 8)
    assert got == want
    assert final == counters
    assert counters["frames_in"] == sum(1 for _, b in sent if unpack_beat(width, b)[2])
    return want, counters, model.fifo_high_water


SCENARIOS = {
    "drop": FaultSettings(seed=11, drop_rate=rate_per_65535(0.25)),
    "corrupt": FaultSettings(seed=0, corrupt_rate=rate_per_65535(0.3)),
    "dup": FaultSettings(seed=13, dup_rate=rate_per_65535(0.25)),
    "all_bursts": FaultSettings(seed=14, drop_rate=rate_per_65535(0.1),
                                corrupt_rate=rate_per_65535(0.1),
                                dup_rate=rate_per_65535(0.1),
                                drop_burst=3, corrupt_burst=2, dup_burst=4),
    "all_always": FaultSettings(seed=15, drop_rate=ALWAYS, corrupt_rate=ALWAYS,
                                dup_rate=ALWAYS),
    "corrupt_always": FaultSettings(seed=16, corrupt_rate=ALWAYS, corrupt_burst=5),
    "dup_always": FaultSettings(seed=17, dup_rate=ALWAYS, dup_burst=0),
}


@pytest.mark.parametrize("width", [8, 64])
def test_zero_rates_are_a_plain_link(width):
    """Rates 0: every beat leaves ``latency`` cycles later, as from ``Link``."""
    rng = random.Random(width)
    sent = _schedule(rng, _frames(rng, 24), width, max_gap=6)
    want, counters, _ = _check_against_model(width, 3, FaultSettings(seed=5), sent)
    assert want == LinkModel(3).arrivals(sent)
    assert counters == dict.fromkeys(COUNTERS + FLAGS, 0) | {"frames_in": 24}


@pytest.mark.parametrize("width", [8, 64])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_faults_match_model(width, scenario):
    """Random frames of 1..300 bytes with random gaps: every beat, its cycle and every
    counter equal the model's, and the scenario provokes the faults it names."""
    settings = SCENARIOS[scenario]
    rng = random.Random(f"{scenario}-{width}")
    n = 30
    frames = _frames(rng, n)
    # Gaps long enough that copies rarely fill the FIFO; the overflow test fills it.
    sent = _schedule(rng, frames, width, max_gap=3 * 300 // width + 4)
    latency = rng.choice([1, 2, 5])
    _, c, queued = _check_against_model(width, latency, settings, sent, max_frame_beats=40)
    assert c["lost"] == 0 and c["too_long"] == 0
    assert (queued > 0) == (c["duplicated"] > 0)    # beats waited behind copies
    if scenario == "drop":
        assert 0 < c["dropped"] < n and c["corrupted"] == c["duplicated"] == 0
    elif scenario == "corrupt":
        assert 0 < c["corrupted"] < n and c["dropped"] == c["duplicated"] == 0
    elif scenario == "dup":
        assert 0 < c["duplicated"] < n and c["dropped"] == c["corrupted"] == 0
    elif scenario == "all_bursts":
        assert all(c[k] > 0 for k in ("dropped", "corrupted", "duplicated"))
    elif scenario == "all_always":
        assert c["dropped"] == n and c["corrupted"] == c["duplicated"] == 0
    elif scenario == "corrupt_always":
        assert c["corrupted"] == n
    else:
        assert c["duplicated"] == n


@pytest.mark.parametrize("latency", [18, 40])
def test_long_wire_matches_model(latency):
    """A wire of 18 and 40 cycles (its delay line of 17 and 39 a memory, not registers), with
    every kind of fault in bursts: RTL = model, beat for beat and counter for counter."""
    rng = random.Random(f"long-{latency}")
    sent = _schedule(rng, _frames(rng, 30), 16, max_gap=3 * 300 // 16 + 4)
    _, c, _ = _check_against_model(16, latency, SCENARIOS["all_bursts"], sent,
                                   max_frame_beats=40)
    assert all(c[k] > 0 for k in ("dropped", "corrupted", "duplicated"))


@pytest.mark.parametrize("width", [8, 64])
def test_corruption_flips_one_bit_and_fails_the_fcs(width):
    """Frames with FCS, corruption only: each frame leaves with its length, and either
    unchanged with a good FCS or one bit off with a bad FCS; ``corrupted`` counts the
    latter. Checked on the RTL output without the model."""
    rng = random.Random(100 + width)
    bodies = _frames(rng, 40, lengths=(1, 296))
    frames = [b + fcs_bytes(b) for b in bodies]
    sent = _schedule(rng, frames, width, max_gap=2)
    settings = FaultSettings(seed=21, corrupt_rate=rate_per_65535(0.4), corrupt_burst=2)
    got, final = _simulate(FaultyLink(width, 2), settings, sent, sent[-1][0] + 4)
    out = beats_to_frames([b for _, b in got], width)
    assert len(out) == len(frames)
    flips = []
    for before, after in zip(frames, out, strict=True):
        assert len(after) == len(before)
        diff = int.from_bytes(before, "little") ^ int.from_bytes(after, "little")
        assert diff.bit_count() in (0, 1)
        assert fcs_ok(after) == (diff == 0)
        flips.append(diff.bit_count())
    assert 0 < sum(flips) == final["corrupted"] < len(frames)


@pytest.mark.parametrize("width", [8, 64])
def test_copy_follows_the_original(width):
    """Duplication only, every frame, wide gaps: the output is each frame twice, and the
    copy's first beat leaves in the cycle after the original's last. No model."""
    rng = random.Random(200 + width)
    frames = _frames(rng, 12)
    spread, cycle = [], 0                   # each frame's beats, then as many idle cycles
    for frame in frames:
        beats = frame_to_beats(frame, width)
        spread += [(cycle + k, b) for k, b in enumerate(beats)]
        cycle += 2 * len(beats) + 1
    got, final = _simulate(FaultyLink(width, 4, max_frame_beats=40),
                           FaultSettings(dup_rate=ALWAYS), spread, cycle + 8)
    out = beats_to_frames([b for _, b in got], width)
    assert out == [f for f in frames for _ in range(2)]
    assert final["duplicated"] == len(frames) and final["lost"] == 0
    k = 0
    for frame in frames:
        n = len(frame_to_beats(frame, width))
        cycles = [c for c, _ in got[k:k + 2 * n]]
        assert cycles == list(range(cycles[0], cycles[0] + 2 * n))
        k += 2 * n


@pytest.mark.parametrize("width", [8, 64])
def test_fifo_overflow_is_counted_and_sticky(width):
    """Back-to-back frames, every one duplicated, a 4-beat FIFO: beats are lost exactly
    as the model says, and ``overflow`` sticks."""
    rng = random.Random(300 + width)
    sent = _schedule(rng, _frames(rng, 10, lengths=(1, 4 * width)), width, max_gap=0,
                     hiccups=0)
    _, c, _ = _check_against_model(width, 2, FaultSettings(dup_rate=ALWAYS), sent,
                                max_frame_beats=8, fifo_depth=4)
    assert c["lost"] > 0 and c["overflow"] == 1


@pytest.mark.parametrize("width", [8, 64])
def test_too_long_frame_is_sent_once(width):
    """A frame picked for duplication that exceeds the frame buffer is sent once and
    sets ``too_long``; shorter ones are still copied."""
    rng = random.Random(400 + width)
    frames = [bytes(k % 255 + 1 for k in range(width * n)) for n in (1, 2, 3, 2, 5, 1)]
    sent = _schedule(rng, frames, width, max_gap=12)
    want, c, _ = _check_against_model(width, 1, FaultSettings(dup_rate=ALWAYS), sent,
                                   max_frame_beats=2)
    assert c["too_long"] == 1 and c["duplicated"] == 4
    assert len(beats_to_frames([b for _, b in want], width)) == 10


def test_pattern_rates_and_bursts():
    """The fault pattern alone: 0 never, 65535 always, about ``rate / 65535`` of the
    frames start a fault, and every burst is at least ``burst`` frames long."""
    n = 30000
    never = FaultPattern(FaultSettings(seed=3))
    assert not any(any(never.next()[0].values()) for _ in range(200))
    always = FaultPattern(FaultSettings(seed=3, drop_rate=ALWAYS, corrupt_rate=ALWAYS,
                                        dup_rate=ALWAYS))
    assert all(all(always.next()[0].values()) for _ in range(200))
    rare = FaultPattern(FaultSettings(seed=7, drop_rate=66, corrupt_rate=66, dup_rate=66))
    counts = [0, 0, 0]
    for _ in range(n):
        hits, _ = rare.next()
        counts = [c + hits[k] for c, k in zip(counts, ("drop", "corrupt", "dup"),
                                               strict=True)]
    assert all(10 <= c <= 60 for c in counts), counts   # about 30 each at 1.0e-3
    bursty = FaultPattern(FaultSettings(seed=9, dup_rate=rate_per_65535(0.05),
                                        dup_burst=3))
    runs, run = [], 0
    for _ in range(n):
        if bursty.next()[0]["dup"]:
            run += 1
        elif run:
            runs.append(run)
            run = 0
    assert runs and min(runs) >= 3
    assert 0.10 < sum(runs) / n < 0.20                  # about 3 * 5% of the frames


def test_pattern_depends_on_seed_not_on_timing():
    """The same frames with different gaps meet the same faults; another seed differs."""
    width = 8
    rng = random.Random(5)
    frames = _frames(rng, 60, lengths=(1, 40))
    settings = FaultSettings(seed=77, drop_rate=rate_per_65535(0.2),
                             corrupt_rate=rate_per_65535(0.2))

    def frames_out(sent, s):
        return beats_to_frames([b for _, b in FaultyLinkModel(width, 2).run(sent, s)[0]],
                               width)

    a = frames_out(_schedule(rng, frames, width, 0), settings)
    b = frames_out(_schedule(rng, frames, width, 9), settings)
    c = frames_out(_schedule(rng, frames, width, 0), replace(settings, seed=78))
    assert a == b and a != c


@pytest.mark.parametrize("kwargs,word", [
    (dict(width=12), "width"), (dict(latency=0), "link latency"),
    (dict(latency=1025), "link latency"), (dict(max_frame_beats=0), "max_frame_beats"),
    (dict(max_frame_beats=4097), "max_frame_beats"), (dict(fifo_depth=0), "fifo_depth"),
    (dict(fifo_depth="8"), "fifo_depth"), (dict(fifo_depth=True), "fifo_depth")])
def test_bad_parameters_are_named(kwargs, word):
    args = dict(width=8, latency=2) | kwargs
    with pytest.raises(ValueError, match=word):
        FaultyLink(**args)
    with pytest.raises(ValueError, match=word):
        FaultyLinkModel(**args)


@pytest.mark.parametrize("kwargs,word", [
    (dict(seed=-1), "seed"), (dict(drop_rate=65536), "drop_rate"),
    (dict(corrupt_burst=256), "corrupt_burst"), (dict(dup_rate=0.5), "dup_rate")])
def test_bad_settings_are_named(kwargs, word):
    with pytest.raises(ValueError, match=word):
        FaultSettings(**kwargs)


def test_model_rejects_unordered_input():
    beat = frame_to_beats(b"x", 8)[0]
    with pytest.raises(ValueError, match="increasing"):
        FaultyLinkModel(8, 1).run([(3, beat), (3, beat)])
    with pytest.raises(ValueError, match="fault probability"):
        rate_per_65535(1.5)


@pytest.mark.parametrize("width", [8, 64])
def test_tag_and_sideband_faults(width):
    """A link with a 17-bit tag and an 18-bit sideband, the frame faults and the retry's
    signalling faults all on: every beat (tag included), cycle, sideband item and counter
    equal the model's; independently of it, a frame with a damaged tag has exactly one
    tag bit flipped, the same on all its beats, and its data untouched; each damaged
    sideband item differs by one bit; and the frame faults are those of the same seed
    without the signalling faults (their own LFSRs)."""
    from pymodel.packet import pack_beat
    from spec.formats.packet import packet_layout

    tag_bits, side_bits, latency = 17, 18, 2
    size = packet_layout(width).size
    rng = random.Random(40 + width)
    frames = _frames(rng, 31, (1, 3 * width))          # tags fit 17 bits
    sent, k = [], -1
    for c, b in _schedule(rng, frames, width, max_gap=4):
        k += unpack_beat(width, b)[2]
        sent.append((c, b | (k | k << 6 | k << 12) << size))   # tags 3 bits apart
    side = {c: rng.getrandbits(side_bits) for c in range(0, sent[-1][0], 3)}
    base = FaultSettings(seed=21, drop_rate=rate_per_65535(0.1),
                         dup_rate=rate_per_65535(0.1))
    settings = replace(base, tag_rate=rate_per_65535(0.3), ack_drop_rate=rate_per_65535(0.2),
                       ack_corrupt_rate=rate_per_65535(0.3))
    model = FaultyLinkModel(width, latency, tag_bits=tag_bits, side_bits=side_bits)
    model.start(settings)
    want = [x for c, b in sent for x in model.push(c, b)]
    want_side = {c: model.side(v) for c, v in sorted(side.items())}
    counters = dict(model.counters)
    cycles = max(c for c, _ in want) + 4
    dut = FaultyLink(width, latency, tag_bits=tag_bits, side_bits=side_bits)
    at = dict(sent)
    got, got_side, final = [], {}, {}

    async def bench(ctx):
        for name, value in {**settings.ports(), **settings.retry_ports()}.items():
            ctx.set(getattr(dut.settings, name), value)
        for c in range(cycles):
            beat = at.get(c)
            ctx.set(dut.i.valid, beat is not None)
            ctx.set(dut.i.payload.as_value(), beat or 0)
            ctx.set(dut.side_i.valid, c in side)
            ctx.set(dut.side_i.payload, side.get(c, 0))
            if c in side:
                got_side[c] = (ctx.get(dut.side_o.payload) if ctx.get(dut.side_o.valid)
                               else None)
            if ctx.get(dut.o.valid):
                got.append((c, ctx.get(dut.o.payload.as_value())))
            await ctx.tick()
        for name in counters:
            final[name] = ctx.get(getattr(dut.counters, name))

    run_sim(dut, bench, deadline_cycles=cycles + 2)
    assert got == want and got_side == want_side and final == counters
    assert counters["tag_corrupted"] > 0 and counters["acks_dropped"] > 0
    assert counters["acks_corrupted"] > 0 and counters["duplicated"] > 0
    # Independent of the model: each damaged sideband item is one bit off.
    flipped = [bin(v ^ side[c]).count("1") for c, v in got_side.items() if v is not None]
    assert sorted(set(flipped)) == [0, 1]
    assert flipped.count(1) == counters["acks_corrupted"]
    assert sum(v is None for v in got_side.values()) == counters["acks_dropped"]
    # Tags: a frame's tag is one value on all its beats, a sent tag or one bit off one.
    mask = (1 << size) - 1
    sent_tags = [k | k << 6 | k << 12 for k in range(len(frames))]
    frame_tags = []
    for _, b in want:
        if unpack_beat(width, b & mask)[2]:
            frame_tags.append(set())
        frame_tags[-1].add(b >> size)
    assert all(len(t) == 1 for t in frame_tags)
    dist = [min(bin(t ^ s).count("1") for s in sent_tags) for (t,) in frame_tags]
    assert set(dist) == {0, 1}
    # The frame faults ignore the signalling faults (LFSRs of their own).
    plain = FaultyLinkModel(width, latency, tag_bits=tag_bits)
    plain.start(base)
    strip = [(c, b & mask) for c, b in want]
    assert strip == [(c, b & mask) for s, x in sent for c, b in plain.push(s, x)]
    assert pack_beat(width, 0, 1, 1, 1) & ~mask == 0
