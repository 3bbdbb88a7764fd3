"""Unit tests of the simulation fabric's delay lines (Amaranth simulator): the register
chain and the memory (circular buffer) implementations of :class:`rtl.fabric.link.DelayLine`
and :class:`rtl.fabric.link.Link`, against the definition of a delay and each other."""

import random

import pytest
from amaranth import Module, Signal
from amaranth.hdl import ResetInserter
from amaranth.lib import data

from pymodel.packet import pack_beat
from rtl.fabric.link import CHAIN_MAX, MAX_DELAY, DelayLine, Link
from rtl.nic.credit_return import CreditReturn
from spec.checks import silence
from tb.amsim import run_sim

LATENCIES = [1, 2, 3, 7, 64, 500]


def _run_delay(shape_bits, latency, impl, inputs, resets=()):
    """Drive ``inputs[t]`` in cycle ``t`` (and reset in the cycles of ``resets``);
    return what ``o`` showed in each cycle."""
    dut = DelayLine(shape_bits, latency, impl)
    rst = Signal()
    top = Module()
    top.submodules.dut = ResetInserter({"sync": rst})(dut)
    seen = []

    async def bench(ctx):
        for t, value in enumerate(inputs):
            ctx.set(dut.i, value)
            ctx.set(rst, t in resets)
            seen.append(ctx.get(dut.o))
            await ctx.tick()

    run_sim(top, bench, deadline_cycles=len(inputs) + 10)
    return seen


def _delayed(inputs, latency, resets=()):
    """The definition: ``o`` in cycle ``t`` is ``i`` of cycle ``t - latency``, or 0 when
    that cycle is before the start or not after the last reset before ``t``."""
    out = []
    for t in range(len(inputs)):
        last_reset = max([r for r in resets if r < t], default=-1)
        src = t - latency
        out.append(inputs[src] if src > last_reset and src >= 0 else 0)
    return out


@pytest.mark.parametrize("impl", ["chain", "memory"])
@pytest.mark.parametrize("latency", LATENCIES)
def test_delay_line_is_an_exact_delay(latency, impl):
    """Random 12-bit values (bit 0 a valid bit that is off in about 40 % of the cycles,
    so beats come with gaps) come out exactly ``latency`` cycles later."""
    rng = random.Random(latency)
    n = 2 * latency + 200
    inputs = [(rng.getrandbits(11) << 1) | (rng.random() < 0.6) for _ in range(n)]
    got = _run_delay(12, latency, impl, inputs)
    want = _delayed(inputs, latency)
    assert any(v & 1 for v in want[latency:])
    assert got == want


@pytest.mark.parametrize("latency", [1, 3, 64])
def test_delay_line_memory_equals_chain_through_a_reset(latency):
    """A reset in the middle of the run: the memory keeps its words, the chain does not;
    both show 0 until ``latency`` cycles after the reset, then the values driven after
    it (the definition, computed by hand in ``_delayed``)."""
    rng = random.Random(100 + latency)
    n = 3 * latency + 80
    inputs = [rng.getrandbits(8) | 1 for _ in range(n)]
    resets = {latency + 20}
    chain = _run_delay(8, latency, "chain", inputs, resets)
    mem = _run_delay(8, latency, "memory", inputs, resets)
    assert chain == mem == _delayed(inputs, latency, resets)


@pytest.mark.parametrize("latency", LATENCIES)
def test_link_memory_equals_chain(latency):
    """Links of both implementations see the same random beats (about 40 % gaps) and
    show the same valid bit and payload in every cycle: the beats accepted in cycle
    ``t`` on ``o`` in ``t + latency``, nothing else."""
    width = 8
    rng = random.Random(7 * latency)
    n = latency + 150
    beats = [(rng.random() < 0.6, pack_beat(width, rng.getrandbits(64), rng.randint(1, 8),
                                            rng.random() < 0.5, rng.random() < 0.5))
             for _ in range(n)]
    runs = {}
    for impl in ("chain", "memory"):
        dut = Link(width, latency, impl)
        assert dut.impl == impl
        seen = []

        async def bench(ctx, dut=dut, seen=seen):
            for valid, bits in beats:
                ctx.set(dut.i.valid, valid)
                ctx.set(dut.i.payload.as_value(), bits)
                assert ctx.get(dut.i.ready)
                seen.append((ctx.get(dut.o.valid), ctx.get(dut.o.payload.as_value())))
                await ctx.tick()
            assert ctx.get(dut.beats) == sum(v for v, _ in beats)

        run_sim(dut, bench, deadline_cycles=n + 10)
        runs[impl] = seen
    assert runs["chain"] == runs["memory"]
    want = [(1, b) for t, (v, b) in enumerate(beats) if t >= latency
            and beats[t - latency][0] for b in [beats[t - latency][1]]]
    got = [(v, b) for v, b in runs["memory"][latency:] if v]
    assert want and got == want


@pytest.mark.parametrize("latency", [3, 40])
def test_credit_return_is_an_exact_delay(latency):
    """CreditReturn (a register chain at 3 cycles, a memory at 40): random credit pulses
    come back exactly ``latency`` cycles later."""
    dut = CreditReturn(latency)
    rng = random.Random(latency)
    pulses = [int(rng.random() < 0.5) for _ in range(latency + 100)]
    seen = []

    async def bench(ctx):
        for p in pulses:
            ctx.set(dut.i, p)
            seen.append(ctx.get(dut.o))
            await ctx.tick()

    run_sim(dut, bench, deadline_cycles=len(pulses) + 10)
    assert any(seen) and seen == _delayed(pulses, latency)


def test_auto_implementation_threshold():
    """``auto`` keeps the register chain up to CHAIN_MAX cycles, a memory above."""
    links = [Link(8, CHAIN_MAX), Link(8, CHAIN_MAX + 1), Link(8, MAX_DELAY)]
    silence(links)
    assert [link.impl for link in links] == ["chain", "memory", "memory"]


@pytest.mark.parametrize("bad", [0, MAX_DELAY + 1, "2", True])
def test_delay_line_rejects_bad_latency(bad):
    with pytest.raises(ValueError, match="delay"):
        DelayLine(1, bad)


def test_delay_line_rejects_bad_impl():
    with pytest.raises(ValueError, match="impl"):
        DelayLine(data.StructLayout({"a": 1}), 4, "shift")
    with pytest.raises(ValueError, match="link impl"):
        Link(8, 4, "shift")
