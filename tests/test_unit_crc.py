"""Unit tests of the CRC core and FCS blocks in the Amaranth simulator."""

import random
import zlib

import pytest
from amaranth import Module, Shape, Signal
from amaranth.sim import Simulator

from pymodel.fcs import FCS_GOOD_RESIDUE, FcsInserterModel, fcs_bytes, fcs_ok
from pymodel.packet import beats_to_frames, frame_to_beats
from rtl.common import gf2
from rtl.common.crc32 import CRC32_INIT, CRC32_RESIDUE, Crc32Core, crc32_step
from rtl.common.fcs_checker import FcsChecker
from rtl.common.fcs_inserter import FcsInserter, fcs_at
from spec.formats.packet import packet_layout
from tb.amsim import get_all, put_all, run_sim


def test_crc32_step_is_zlib():
    rng = random.Random(5)
    for n in (0, 1, 7, 64, 300):
        data = bytes(rng.getrandbits(8) for _ in range(n))
        reg = crc32_step(CRC32_INIT, int.from_bytes(data, "little"), n)
        assert reg ^ 0xFFFFFFFF == zlib.crc32(data)


def test_residue_constants_agree():
    assert CRC32_RESIDUE ^ 0xFFFFFFFF == FCS_GOOD_RESIDUE
    assert fcs_ok(b"abc" + fcs_bytes(b"abc"))
    assert not fcs_ok(b"abd" + fcs_bytes(b"abc"))


def test_gf2_inverse():
    step = gf2.matrix_of(lambda s: crc32_step(s, 0, 1), 32, 32)
    both = gf2.compose(gf2.inverse(step), step)
    assert both == gf2.identity(32)
    with pytest.raises(ValueError, match="invertible"):
        gf2.inverse([1, 1])


@pytest.mark.parametrize("width", [8, 16, 32, 64])
def test_core_matches_zlib_on_every_tail_length(width):
    dut = Crc32Core(width)
    rng = random.Random(width)
    lengths = list(range(1, 2 * width + 2)) + [rng.randrange(200, 400) for _ in range(3)]
    frames = [bytes(rng.getrandbits(8) for _ in range(n)) for n in lengths]
    seen = []

    async def bench(ctx):
        for frame in frames:
            for bits in frame_to_beats(frame, width):
                ctx.set(dut.beat.as_value(), bits)
                ctx.set(dut.en, 1)
                if bits >> (len(dut.beat.as_value()) - 1):     # the last beat
                    seen.append(ctx.get(dut.crc))
                await ctx.tick()
        ctx.set(dut.en, 0)

    run_sim(dut, bench)
    assert seen == [zlib.crc32(f) for f in frames]


@pytest.mark.parametrize("width", [8, 64])
@pytest.mark.parametrize("pattern", [(1,), (1, 1, 1, 0)], ids=["no_stall", "stall"])
def test_inserter_frames_and_no_bubble(width, pattern):
    dut = FcsInserter(width)
    rng = random.Random(7)
    frames = [bytes(rng.getrandbits(8) for _ in range(n))
              for n in (1, width - 4, width - 3, width, width + 1, 2 * width, 129)]
    want = [f + fcs_bytes(f) for f in frames]
    n_out = sum(len(frame_to_beats(f, width)) for f in want)
    got = []

    async def source(ctx):
        await put_all(ctx, dut.i, [b for f in frames for b in frame_to_beats(f, width)])

    async def sink(ctx):
        got.extend(await get_all(ctx, dut.o, n_out, pattern))

    run_sim(dut, source, sink)
    beats = [b for b, _ in got]
    assert beats_to_frames(beats, width) == want
    if pattern == (1,):
        # No bubble: output beats leave on consecutive cycles.
        cycles = [c for _, c in got]
        assert cycles == list(range(cycles[0], cycles[0] + n_out))
        model_beats, _, _ = FcsInserterModel(width).run(frames)
        assert beats == model_beats


@pytest.mark.parametrize("width", [8, 64])
def test_fcs_placement_is_the_left_shift_for_every_count(width):
    """fcs_at equals ``(crc << 8 n)`` cut to the window, for every value the ``nbytes``
    field can hold (also those above the beat, where the FCS falls outside)."""
    n_bits = Shape.cast(packet_layout(width)["nbytes"].shape).width
    crc, n = Signal(32), Signal(n_bits)
    out = Signal(8 * width + 32)
    m = Module()
    m.d.comb += out.eq(fcs_at(crc, n, width))
    rng = random.Random(width)
    cases = [(c, k) for k in range(1 << n_bits)
             for c in (0xFFFFFFFF, 0x80000001, rng.getrandbits(32))]
    got = []

    async def bench(ctx):
        for c, k in cases:
            ctx.set(crc, c)
            ctx.set(n, k)
            got.append(ctx.get(out))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert got == [(c << (8 * k)) & ((1 << (8 * width + 32)) - 1) for c, k in cases]


def test_checker_counts_good_and_bad():
    width = 8
    dut = FcsChecker(width)
    good = [b"hello" + fcs_bytes(b"hello"), bytes(60) + fcs_bytes(bytes(60))]
    bad = [b"hellp" + fcs_bytes(b"hello"), b"\x01\x02"]
    frames = good + bad
    beats = [b for f in frames for b in frame_to_beats(f, width)]
    counts = {}

    async def source(ctx):
        await put_all(ctx, dut.i, beats)

    async def sink(ctx):
        await get_all(ctx, dut.o, len(beats))
        await ctx.tick()
        counts["ok"], counts["bad"] = ctx.get(dut.frames_ok), ctx.get(dut.frames_bad)

    run_sim(dut, source, sink)
    assert counts == {"ok": 2, "bad": 2}


@pytest.mark.parametrize("bad", [0, 12, 65, "64", None])
def test_bad_width_is_named(bad):
    for cls in (Crc32Core, FcsInserter, FcsChecker):
        with pytest.raises(ValueError, match="datapath width"):
            cls(bad)


@pytest.mark.parametrize("width", [8, 16, 32, 64])
def test_data_map_is_the_beat_step(width):
    """The cached data map of the parallel CRC equals stepping the whole beat bit by bit
    (crc32_step) from a zero register: for each single byte in each lane, and for
    random whole beats."""
    import random

    from rtl.common import gf2
    from rtl.common.crc32 import crc32_step, data_rows
    rows = data_rows(width)
    assert len(rows) == 32
    for lane in range(width):
        for b in range(0, 256, 1 if width <= 16 else 37):
            data = b << (8 * lane)
            assert gf2.apply(rows, data) == crc32_step(0, data, width), (lane, b)
    rng = random.Random(width)
    for _ in range(50):
        data = rng.getrandbits(8 * width)
        assert gf2.apply(rows, data) == crc32_step(0, data, width)
