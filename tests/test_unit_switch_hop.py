"""The switch's hop latency (Amaranth simulator) against its twin and against the intent.

Random frames to random ports on every ingress, with gaps: every egress beat and credit
pulse of the RTL equals the model's, cycle by cycle, at hop latencies 0, 1 and 250; and,
independently of the model, a switch of hop latency ``h`` shows on its egress ports what
the switch of hop latency 0 shows ``h`` cycles earlier, and returns the same credits in
the same cycles (the definition of the parameter).
"""

import random

import pytest

from pymodel.fabric.switch import SwitchModel
from pymodel.packet import frame_to_beats, pack_beat, unpack_beat
from rtl.fabric.switch import Switch
from spec.formats.nic import dst_byte
from tb.amsim import run_sim
from tests.switch_bench import offer_beats, take_egress

PORTS, WIDTH, DEPTH = 4, 8, 32


def _frames(rng, count=6):
    """``count`` frames of 1..40 bytes per ingress port, to random egress ports."""
    frames = {}
    for p in range(PORTS):
        frames[p] = []
        for _ in range(count):
            f = bytearray(rng.getrandbits(8) for _ in range(rng.randrange(1, 41)))
            f[dst_byte("compact")] = rng.randrange(PORTS)
            frames[p].append(bytes(f))
    return frames


def _run(hop, frames, cycles):
    """Play the frames (a beat on ingress ``p`` in cycles where ``(c + p) % 3 != 0``);
    return the RTL's and the model's per-cycle ``(egress beats, credit pulses)``."""
    dut = Switch(WIDTH, PORTS, "compact", DEPTH, hop_latency=hop)
    model = SwitchModel(PORTS, "compact", DEPTH, width=WIDTH, hop_latency=hop)
    streams = {p: [b for f in frames[p] for b in frame_to_beats(f, WIDTH)]
               for p in range(PORTS)}
    arrivals, got = [], []

    async def bench(ctx):
        for c in range(cycles):
            arrivals.append(offer_beats(ctx, dut, streams, c, WIDTH))
            got.append(take_egress(ctx, dut, PORTS))
            await ctx.tick()

    run_sim(dut, bench)
    assert all(not s for s in streams.values()), "stimulus left over"
    want, pending = [], [None] * PORTS
    for c in range(cycles):
        out, pops = model.cycle(c, arrivals[c])
        now, pending = pending, [pack_beat(WIDTH, *out[p][:4]) if p in out else None
                                 for p in range(PORTS)]
        want.append((now, [int(p in pops) for p in range(PORTS)]))
    assert model.idle() and not model.overflow
    return got, want


def test_hop_latency_delays_egress_only():
    frames = _frames(random.Random(11))
    beats = sum(len(frame_to_beats(f, WIDTH)) for fs in frames.values() for f in fs)
    cycles = 300
    runs = {}
    for hop in (0, 1, 250):
        got, want = _run(hop, frames, cycles + hop)
        assert got == want, f"hop_latency {hop}: RTL and model differ"
        runs[hop] = got
    base = runs[0]
    assert sum(sum(c) for _, c in base) == beats          # every beat left its buffer
    assert sum(o is not None for out, _ in base for o in out) == beats
    assert all(o is None for out, _ in base[-20:] for o in out)    # drained in time
    for hop in (1, 250):
        run = runs[hop]
        # Egress: the hop-0 switch's, ``hop`` cycles later; nothing before.
        assert [out for out, _ in run[:hop]] == [[None] * PORTS] * hop
        assert [out for out, _ in run[hop:]] == [out for out, _ in base]
        # Credits: the same cycles as with hop 0.
        assert [c for _, c in run[:cycles]] == [c for _, c in base]


@pytest.mark.parametrize("bad", [-1, 4097, "1", True])
def test_bad_hop_latency_is_named(bad):
    with pytest.raises(ValueError, match="hop_latency"):
        Switch(WIDTH, PORTS, "compact", DEPTH, hop_latency=bad)
    with pytest.raises(ValueError, match="hop_latency"):
        SwitchModel(PORTS, "compact", DEPTH, width=WIDTH, hop_latency=bad)


def _run_bp(hop, frames, cycles, ready):
    """The switch with ``backpressure`` and ``hop_latency`` ``hop``, egress ``ready[c][o]``
    (each sender keeps to its credits, ``DEPTH`` at first): the RTL's and the model's
    per-cycle ``(beats that leave, credit pulses)``."""
    dut = Switch(WIDTH, PORTS, "compact", DEPTH, backpressure=True, hop_latency=hop)
    model = SwitchModel(PORTS, "compact", DEPTH, True, width=WIDTH, hop_latency=hop)
    streams = {p: [b for f in frames[p] for b in frame_to_beats(f, WIDTH)]
               for p in range(PORTS)}
    arrivals, got = [], []
    credits = [DEPTH] * PORTS

    async def bench(ctx):
        for c in range(cycles):
            now = {}
            for p in range(PORTS):
                link = dut.i[p]
                send = bool(streams[p]) and (c + p) % 3 != 0 and credits[p] > 0
                ctx.set(link.valid, send)
                if send:
                    credits[p] -= 1
                    beat = streams[p].pop(0)
                    ctx.set(link.payload.as_value(), beat)
                    now[p] = unpack_beat(WIDTH, beat)
                ctx.set(dut.o[p].ready, ready[c][p])
            arrivals.append(now)
            out = []
            for p in range(PORTS):
                o = dut.o[p]
                leaves = ctx.get(o.valid) and ready[c][p]
                out.append(ctx.get(o.payload.as_value()) if leaves else None)
            pulses = [ctx.get(dut.credit[p]) for p in range(PORTS)]
            got.append((out, pulses))
            credits[:] = [k + v for k, v in zip(credits, pulses, strict=True)]
            await ctx.tick()

    run_sim(dut, bench)
    assert all(not s for s in streams.values()), "stimulus left over"
    want = []
    for c in range(cycles):
        left, pops = model.cycle(c, arrivals[c], ready=ready[c])
        want.append(([pack_beat(WIDTH, *left[p][:4]) if p in left else None
                      for p in range(PORTS)], [int(p in pops) for p in range(PORTS)]))
    assert model.idle() and not model.overflow
    return got, want


@pytest.mark.parametrize("hop", [1, 3, 40])
def test_hop_with_backpressure_holds_beats(hop):
    """Egress ``ready`` low about three quarters of the time on every port, in runs (of
    about 30 cycles, against an elastic hop of ``hop`` + 2 beats): the beats that
    leave and the credit pulses equal the model's, cycle by cycle; every frame leaves
    whole, once, on its port; the stalls reach back to the ingress (later credits than
    with every egress ready)."""
    frames = _frames(random.Random(5 + hop), 24)
    rng = random.Random(hop)
    cycles = 2500 + hop
    ready, level = [], [True] * PORTS
    for _ in range(cycles):
        level = [not v if rng.random() < (0.1 if v else 0.03) else v for v in level]
        ready.append(list(level))
    got, want = _run_bp(hop, frames, cycles, ready)
    assert got == want
    free, _ = _run_bp(hop, frames, cycles, [[True] * PORTS] * cycles)
    late = sum(c for c, (_, cr) in enumerate(got) for _ in range(sum(cr)))
    early = sum(c for c, (_, cr) in enumerate(free) for _ in range(sum(cr)))
    assert late > early, "the egress stalls never reached the ingress buffers"
    for p in range(PORTS):
        chunks, cur = [], b""
        for out, _ in got:
            if out[p] is None:
                continue
            data, nb, first, last = unpack_beat(WIDTH, out[p])
            cur = (b"" if first else cur) + data.to_bytes(WIDTH, "little")[:nb]
            if last:
                chunks.append(cur)
        sent = [f for fs in frames.values() for f in fs if f[dst_byte("compact")] == p]
        assert sorted(chunks) == sorted(sent)


@pytest.mark.parametrize("hop", [1, 40])
def test_hop_with_backpressure_always_ready_equals_without(hop):
    """Every egress always ready: the switch with ``backpressure`` shows the egress
    beats and credits of the switch without it (the delay line), cycle for cycle."""
    frames = _frames(random.Random(11))
    cycles = 300 + hop
    got, _ = _run_bp(hop, frames, cycles, [[True] * PORTS] * cycles)
    plain, _ = _run(hop, frames, cycles)
    assert got == plain
