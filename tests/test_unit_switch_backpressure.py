"""Unit test of the switch with egress backpressure (Amaranth simulator) against its twin."""

import random

import pytest

from pymodel.fabric.switch import SwitchModel
from pymodel.packet import frame_to_beats, pack_beat, unpack_beat
from rtl.fabric.switch import Switch
from spec.formats.nic import dst_byte
from tb.amsim import run_sim
from tests.switch_bench import offer_beats, take_egress


@pytest.mark.parametrize("framing", ["compact", "l2"])
@pytest.mark.parametrize("stall", [0.0, 0.4])
def test_switch_holds_beats_while_egress_not_ready(framing, stall):
    """Random frames on all ports, random egress ``ready``: the beats that leave (valid
    and ready) and the credit pulses equal the model's, cycle by cycle, and every frame
    leaves whole, once, on its port."""
    width, ports, depth, cycles = 8, 4, 64, 400
    dut = Switch(width, ports, framing, depth, backpressure=True)
    model = SwitchModel(ports, framing, depth, backpressure=True, width=width)
    rng = random.Random(11)
    off = dst_byte(framing)
    streams, frames = {}, {p: [] for p in range(ports)}
    for p in range(ports):
        beats = []
        for _ in range(5):
            frame = bytearray(rng.getrandbits(8) for _ in range(rng.randrange(8, 40)))
            frame[off] = rng.randrange(ports)
            frames[frame[off]].append(bytes(frame))
            beats += frame_to_beats(bytes(frame), width)
        streams[p] = beats
    ready = [[rng.random() >= stall for _ in range(ports)] for _ in range(cycles)]
    arrivals, got = [], []

    async def bench(ctx):
        for c in range(cycles):
            arrivals.append(offer_beats(ctx, dut, streams, c, width, ready[c]))
            got.append(take_egress(ctx, dut, ports, ready[c]))
            await ctx.tick()

    run_sim(dut, bench)
    want = []
    for c in range(cycles):
        left, pops = model.cycle(c, arrivals[c], ready=ready[c])
        want.append(([pack_beat(width, *left[p][:4]) if p in left else None
                      for p in range(ports)], [int(p in pops) for p in range(ports)]))
    assert got == want
    assert all(not s for s in streams.values())
    # Independent of the model: each port got its frames whole (in some order).
    for p in range(ports):
        beats = [out[p] for out, _ in got if out[p] is not None]
        chunks, cur = [], b""
        for b in beats:
            data, nb, first, last = unpack_beat(width, b)
            cur = (b"" if first else cur) + data.to_bytes(width, "little")[:nb]
            if last:
                chunks.append(cur)
        assert sorted(chunks) == sorted(frames[p])
