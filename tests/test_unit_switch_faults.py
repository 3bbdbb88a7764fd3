"""Unit test of the switch's frame drops (``faults``, Amaranth simulator) against its twin."""

import random

import pytest

from pymodel.fabric.switch import SwitchModel
from pymodel.packet import frame_to_beats, pack_beat, unpack_beat
from rtl.fabric.switch import Switch
from spec.fabric import SWITCH_DROPS, check_switch_drops, switch_counters
from spec.formats.nic import dst_byte
from tb.amsim import run_sim
from tests.switch_bench import offer_beats, take_egress

#: Egress frame numbers to drop (port 3 drops none).
DROPS = {0: [0, 3], 1: [2], 2: [1, 2, 4]}


@pytest.mark.parametrize("backpressure, hop, stall", [(False, 0, 0.0), (True, 0, 0.4),
                                                      (True, 3, 0.3), (False, 3, 0.0)])
def test_switch_drops_chosen_frames(backpressure, hop, stall):
    """Random frames (1 to 5 beats) on all ports, random egress ``ready`` with
    ``backpressure``: the egress beats, the credit pulses and ``drop_fault`` equal the
    model's, cycle by cycle; each port's fault stream is consumed; and, from the frames
    alone, each egress got whole frames of its own, as many as were sent to it less the
    drops, and every ingress beat returned its credit."""
    width, ports, depth, cycles = 8, 4, 64, 500
    dut = Switch(width, ports, "compact", depth, backpressure=backpressure,
                 hop_latency=hop, faults=True)
    model = SwitchModel(ports, "compact", depth, backpressure=backpressure, width=width,
                        hop_latency=hop, faults=DROPS)
    rng = random.Random(5)
    off = dst_byte("compact")
    streams, frames = {}, {p: [] for p in range(ports)}
    for p in range(ports):
        beats = []
        for k in range(6):             # 6 frames to each port, 1 to 5 beats
            frame = bytearray(rng.getrandbits(8) for _ in range(rng.randrange(4, 40)))
            frame[off] = (p + k) % ports
            frames[frame[off]].append(bytes(frame))
            beats += frame_to_beats(bytes(frame), width)
        streams[p] = beats
    sent = sum(len(b) for b in streams.values())
    ready = [[not backpressure or rng.random() >= stall for _ in range(ports)]
             for _ in range(cycles)]
    pending = {o: list(DROPS.get(o, [])) for o in range(ports)}
    arrivals, got = [], []

    async def bench(ctx):
        for c in range(cycles):
            arrivals.append(offer_beats(ctx, dut, streams, c, width, ready[c]))
            for p in range(ports):
                ctx.set(dut.faults[p].valid, bool(pending[p]))
                ctx.set(dut.faults[p].payload, pending[p][0] if pending[p] else 0)
            got.append((*take_egress(ctx, dut, ports, ready[c]),
                        ctx.get(dut.counters.drop_fault)))
            for p in range(ports):
                if ctx.get(dut.faults[p].ready):
                    pending[p].pop(0)
            await ctx.tick()

    run_sim(dut, bench)
    want = []
    for c in range(cycles):
        count = model.drop_fault
        if backpressure:
            left, pops = model.cycle(c, arrivals[c], ready=ready[c])
        else:
            left, pops = model.cycle(c, arrivals[c])
        # The counter port shows the drops of the cycles before.
        want.append(([pack_beat(width, *left[p][:4]) if p in left else None
                      for p in range(ports)], [int(p in pops) for p in range(ports)], count))
    if not backpressure:      # the model's egress of cycle c is on the port in c + 1
        want = [([None] * ports if c < 1 else want[c - 1][0], w[1], w[2])
                for c, w in enumerate(want)]
    assert got == want
    assert all(not s for s in streams.values())
    assert not any(pending.values()), "every drop consumed"
    assert model.drop_fault == got[-1][2] == sum(len(d) for d in DROPS.values())
    assert sum(sum(credits) for _, credits, _ in got) == sent
    for p in range(ports):
        beats = [out[p] for out, _, _ in got if out[p] is not None]
        chunks, cur = [], b""
        for b in beats:
            data, nb, first, last = unpack_beat(width, b)
            cur = (b"" if first else cur) + data.to_bytes(width, "little")[:nb]
            if last:
                chunks.append(cur)
        assert len(chunks) == len(frames[p]) - len(DROPS.get(p, []))
        assert set(chunks) <= set(frames[p])


def test_switch_faults_options():
    """Without ``faults`` the switch has no fault ports and no ``drop_fault``; bad values
    stop with an error naming the option."""
    plain = Switch(8, 4, "compact", 16)
    assert plain.drops is False
    assert "faults" not in plain.signature.members
    assert "drop_fault" not in plain.signature.members["counters"].signature.members
    assert switch_counters(True)[-1] == "drop_fault"
    with pytest.raises(ValueError, match="faults must be True or False"):
        Switch(8, 4, "compact", 16, faults=1)
    for drops, message in [([1], "must be a dict"), ({4: [1]}, "port must be 0 to 3"),
                           ({0: [2, 2]}, r"switch_drops\[0\]"), ({1: [-1]}, "switch_drops"),
                           ({0: range(SWITCH_DROPS + 1)}, "at most")]:
        with pytest.raises(ValueError, match=message):
            check_switch_drops(drops, 4)
        with pytest.raises(ValueError, match=message):
            SwitchModel(4, "compact", 16, width=8, faults=drops)
