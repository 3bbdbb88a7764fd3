"""Unit tests of the memory model, the credit counter and the stall pattern (Amaranth
simulator), and of the packet helpers and parameter checks."""

import random

import pytest

from pymodel.credit_counter import CreditCounterModel
from pymodel.latency_memory import LatencyMemoryModel
from pymodel.packet import beats_to_frames, frame_to_beats, pack_beat
from pymodel.stall import lfsr_step, stall_pattern
from rtl.common.credit_counter import CreditCounter
from rtl.common.latency_memory import LatencyMemory
from rtl.common.stall_pattern import StallPattern
from spec.formats.packet import packet_layout
from spec.lfsr import LFSR_PERIOD, lfsr_next
from tb.amsim import run_sim


@pytest.mark.parametrize("latency", [1, 5])
def test_memory_matches_model(latency):
    width, depth = 4, 16
    dut = LatencyMemory(width, depth, latency)
    model = LatencyMemoryModel(width, depth, latency)
    rng = random.Random(latency)
    ops = [(rng.random() < 0.7 and rng.randrange(depth),
            rng.random() < 0.6 and (rng.randrange(depth), rng.getrandbits(32),
                                    rng.getrandbits(4))) for _ in range(300)]
    got, want = [], []

    async def bench(ctx):
        for rd, wr in ops + [(False, False)] * (latency + 1):
            rd = None if rd is False else rd
            wr = None if wr is False else wr
            ctx.set(dut.rd_addr.valid, rd is not None)
            ctx.set(dut.rd_addr.payload, rd or 0)
            ctx.set(dut.wr.valid, wr is not None)
            if wr:
                ctx.set(dut.wr.payload.addr, wr[0])
                ctx.set(dut.wr.payload.data, wr[1])
                ctx.set(dut.wr.payload.be, wr[2])
            valid, data = ctx.get(dut.rd_data.valid), ctx.get(dut.rd_data.payload)
            got.append(data if valid else None)
            want.append(model.cycle(rd, wr))
            await ctx.tick()

    run_sim(dut, bench)
    assert any(w is not None for w in want)
    assert got == want


def test_credit_counter_matches_model_and_flags_errors():
    cap = 4
    dut = CreditCounter(cap)
    model = CreditCounterModel(cap)
    rng = random.Random(1)
    ops = [(rng.random() < 0.6, rng.choice([0, 0, 1, 2, cap])) for _ in range(400)]
    seen = []

    async def bench(ctx):
        for take, give in ops:
            ctx.set(dut.take, take)
            ctx.set(dut.give, give)
            seen.append((ctx.get(dut.credits), ctx.get(dut.available),
                         ctx.get(dut.underflow), ctx.get(dut.overflow)))
            model_view = (model.credits, int(model.available), int(model.underflow),
                          int(model.overflow))
            assert seen[-1] == model_view
            model.cycle(take, give)
            await ctx.tick()

    run_sim(dut, bench)
    assert model.underflow and model.overflow
    assert len(seen) == len(ops)


def test_credit_counter_holds_within_bounds_when_used_correctly():
    model = CreditCounterModel(3)
    rng = random.Random(2)
    outstanding = 0
    for _ in range(1000):
        take = model.available and rng.random() < 0.5
        give = min(outstanding, rng.randrange(2))
        model.cycle(take, give)
        outstanding += take - give
        assert 0 <= model.credits <= 3
        assert model.credits + outstanding == 3
    assert not model.underflow and not model.overflow


@pytest.mark.parametrize("seed,rate", [(1, 0), (1, 64), (0xACE1, 200), (0, 128)])
def test_stall_pattern_matches_model(seed, rate):
    dut = StallPattern()
    seen = []

    async def bench(ctx):
        ctx.set(dut.seed, seed)
        ctx.set(dut.rate, rate)
        for _ in range(500):
            seen.append(bool(ctx.get(dut.stall)))
            await ctx.tick()

    run_sim(dut, bench)
    assert seen == list(stall_pattern(seed, rate, 500))
    if rate:
        assert 0 < sum(seen) < 500


def test_lfsr_steps_agree_with_the_reference_and_are_maximal():
    """The model's own LFSR step and the reference of spec/lfsr.py agree on every state,
    and the polynomial is maximal: every non-zero state, period 65535."""
    state, seen = 1, set()
    for _ in range(LFSR_PERIOD):
        assert lfsr_step(state) == lfsr_next(state)
        seen.add(state)
        state = lfsr_next(state)
    assert state == 1 and len(seen) == LFSR_PERIOD and 0 not in seen


def test_stall_pattern_follows_the_reference_lfsr():
    """StallPattern (RTL, above) = the model; here the model against the reference: the
    low byte of the reference state below the rate."""
    state, want = 0xACE1, []
    for _ in range(300):
        want.append((state & 0xFF) < 77)
        state = lfsr_next(state)
    assert list(stall_pattern(0xACE1, 77, 300)) == want


@pytest.mark.parametrize("width", [8, 64])
def test_packet_round_trip_and_layout(width):
    rng = random.Random(width)
    frames = [bytes(rng.getrandbits(8) for _ in range(n))
              for n in (1, width - 1, width, width + 1, 3 * width)]
    beats = [b for f in frames for b in frame_to_beats(f, width)]
    assert beats_to_frames(beats, width) == frames
    layout = packet_layout(width)
    const = layout.const({"data": 0xAB, "nbytes": 1, "first": 1, "last": 1})
    assert const.as_value().value == pack_beat(width, 0xAB, 1, True, True)


def test_malformed_beats_are_rejected():
    w = 8
    with pytest.raises(ValueError, match="first"):
        beats_to_frames([pack_beat(w, 1, 1, False, True)], w)
    with pytest.raises(ValueError, match="nbytes"):
        beats_to_frames([pack_beat(w, 1, 3, True, False)], w)
    with pytest.raises(ValueError, match="nonzero bytes"):
        beats_to_frames([pack_beat(w, 0xFFFF, 1, True, True)], w)
    with pytest.raises(ValueError, match="no last beat"):
        beats_to_frames([pack_beat(w, 1, 8, True, False)], w)
    with pytest.raises(ValueError, match="at least one byte"):
        frame_to_beats(b"", w)


@pytest.mark.parametrize("args,word", [
    ((0, 16, 1), "width"), ((4, 3, 1), "power of two"), ((4, 1, 1), "depth"),
    ((4, 16, 0), "latency"), ((4, 16, 65), "latency"), ((4, 16, "2"), "latency")])
def test_memory_rejects_bad_parameters(args, word):
    with pytest.raises(ValueError, match=word):
        LatencyMemory(*args)


@pytest.mark.parametrize("bad", [0, 65536, -1, 2.0, True])
def test_credit_counter_rejects_bad_max(bad):
    with pytest.raises(ValueError, match="max_credits"):
        CreditCounter(bad)
    with pytest.raises(ValueError, match="max_credits"):
        CreditCounterModel(bad)


@pytest.mark.parametrize("seed,rate,word", [(-1, 0, "seed"), (1 << 16, 0, "seed"),
                                            (1, 256, "rate")])
def test_stall_pattern_model_rejects_bad_values(seed, rate, word):
    with pytest.raises(ValueError, match=word):
        stall_pattern(seed, rate, 10)


@pytest.mark.parametrize("latency", [1, 3])
def test_link_matches_model(latency):
    from pymodel.fabric.link import LinkModel
    from rtl.fabric.link import Link

    width = 8
    dut = Link(width, latency)
    rng = random.Random(latency)
    sent, seen = [], []

    async def bench(ctx):
        for cycle in range(60):
            valid = rng.random() < 0.6
            bits = pack_beat(width, rng.getrandbits(64), 8, True, True)
            ctx.set(dut.i.valid, valid)
            ctx.set(dut.i.payload.as_value(), bits)
            if valid:
                sent.append((cycle, bits))
            if ctx.get(dut.o.valid):
                seen.append((cycle, ctx.get(dut.o.payload.as_value())))
            await ctx.tick()

    run_sim(dut, bench)
    want = [(c, b) for c, b in LinkModel(latency).arrivals(sent) if c < 60]
    assert want and seen == want


@pytest.mark.parametrize("bad", [0, 4097, "2"])
def test_link_rejects_bad_latency(bad):
    from pymodel.fabric.link import LinkModel
    from rtl.fabric.link import Link

    with pytest.raises(ValueError, match="link latency"):
        Link(8, bad)
    with pytest.raises(ValueError, match="link latency"):
        LinkModel(bad)
