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

PORTS, WIDTH, DEPTH = 4, 8, 32


def _frames(rng):
    """Six frames of 1..40 bytes per ingress port, to random egress ports."""
    frames = {}
    for p in range(PORTS):
        frames[p] = []
        for _ in range(6):
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
            now = {}
            for p in range(PORTS):
                link = dut.i[p]
                send = bool(streams[p]) and (c + p) % 3 != 0
                ctx.set(link.valid, send)
                if send:
                    beat = streams[p].pop(0)
                    ctx.set(link.payload.as_value(), beat)
                    now[p] = unpack_beat(WIDTH, beat)
            arrivals.append(now)
            out = []
            for p in range(PORTS):
                o = dut.o[p]
                out.append(ctx.get(o.payload.as_value()) if ctx.get(o.valid) else None)
            got.append((out, [ctx.get(dut.credit[p]) for p in range(PORTS)]))
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


def test_hop_latency_with_backpressure_is_refused():
    with pytest.raises(ValueError, match="hop_latency 3 needs backpressure off"):
        Switch(WIDTH, PORTS, "compact", DEPTH, backpressure=True, hop_latency=3)
    with pytest.raises(ValueError, match="hop_latency 3 needs backpressure off"):
        SwitchModel(PORTS, "compact", DEPTH, True, width=WIDTH, hop_latency=3)
