"""The switch's source check (Amaranth simulator) against its twin and against the intent.

Frames carry random source ids; the source table says which ingress port each id may use.
Every egress beat, credit pulse and the ``drop_spoofed`` counter equal the model's, cycle
by cycle; and, independently of the model, each egress port delivers exactly the allowed
frames routed to it, whole, and ``drop_spoofed`` counts exactly the others.
"""

import random

import pytest

from pymodel.fabric.switch import SwitchModel
from pymodel.nic.system import NicSystemModel
from pymodel.packet import frame_to_beats, pack_beat, unpack_beat
from rtl.fabric.switch import Switch
from spec.fabric import check_source_write
from spec.formats.nic import dst_byte, src_byte
from tb.amsim import run_sim
from tests.switch_bench import offer_beats, take_egress

PORTS = 4
#: owner[node] written before the traffic: node 3 may use any port (the written value
#: PORTS), node 4 only port 1, node 5 is never written (power-up: any port).
OWNERS = {0: 0, 1: 1, 2: 2, 3: PORTS, 4: 1}


def _allowed(src, port):
    return OWNERS.get(src, PORTS) in (port, PORTS)


def _run(width, framing, backpressure, frames, writes, race=(), cycles=420, stall=0.3):
    """Play ``frames[p]`` (byte strings) on ingress ``p`` with gaps inside frames, after
    the source-table ``writes`` (one a cycle from cycle 0; ``race`` more writes from
    cycle 30, while frames flow). Returns the RTL's and the model's per-cycle (egress,
    credits) and their ``drop_spoofed``."""
    depth = 64
    dut = Switch(width, PORTS, framing, depth, backpressure=backpressure)
    model = SwitchModel(PORTS, framing, depth, backpressure=backpressure, width=width)
    rng = random.Random(5)
    streams = {p: [b for f in frames[p] for b in frame_to_beats(f, width)]
               for p in range(PORTS)}
    start = len(writes)
    plan = dict(enumerate(writes))
    plan.update({30 + k: x for k, x in enumerate(race)})
    ready = [[not backpressure or rng.random() >= stall for _ in range(PORTS)]
             for _ in range(cycles)]
    arrivals, got = [], []
    counter = []

    async def bench(ctx):
        for c in range(cycles):
            x = plan.get(c)
            ctx.set(dut.src_wr.valid, x is not None)
            if x is not None:
                ctx.set(dut.src_wr.payload.node, x[0])
                ctx.set(dut.src_wr.payload.port, x[1])
            arrivals.append(offer_beats(ctx, dut, streams, c, width, ready[c], start))
            got.append(take_egress(ctx, dut, PORTS, ready[c]))
            await ctx.tick()
        counter.append(ctx.get(dut.counters.drop_spoofed))

    run_sim(dut, bench)
    assert all(not s for s in streams.values()), "stimulus left over"
    want, pending = [], [None] * PORTS
    for c in range(cycles):
        out, pops = model.cycle(c, arrivals[c], ready=ready[c], src_write=plan.get(c))
        if backpressure:
            now = [pack_beat(width, *out[p][:4]) if p in out else None for p in range(PORTS)]
        else:                              # without backpressure: on the port next cycle
            now, pending = pending, [pack_beat(width, *out[p][:4]) if p in out else None
                                     for p in range(PORTS)]
        want.append((now, [int(p in pops) for p in range(PORTS)]))
    return got, want, counter[0], model.drop_spoofed


def _frames(width, framing, rng, lo):
    """Five frames per port of ``lo``..40 bytes, random destination and source ids."""
    frames = {}
    for p in range(PORTS):
        frames[p] = []
        for _ in range(5):
            f = bytearray(rng.getrandbits(8) for _ in range(rng.randrange(lo, 41)))
            if len(f) > dst_byte(framing):
                f[dst_byte(framing)] = rng.randrange(PORTS)
            if len(f) > src_byte(framing):
                f[src_byte(framing)] = rng.randrange(6)
            frames[p].append(bytes(f))
    return frames


def _delivered(width, got, port):
    chunks, cur = [], b""
    for out, _ in got:
        if out[port] is None:
            continue
        data, nb, first, _last = unpack_beat(width, out[port])
        cur = (b"" if first else cur) + data.to_bytes(width, "little")[:nb]
        if _last:
            chunks.append(cur)
    return chunks


@pytest.mark.parametrize("framing", ["compact", "l2"])
@pytest.mark.parametrize("width,backpressure", [(8, False), (16, True)])
def test_spoofed_frames_dropped_whole_and_counted(framing, width, backpressure):
    """At W = 8 the L2 source byte is in the second beat (judged as it arrives), at W = 16
    in the first; with backpressure the egress ports stall at random."""
    frames = _frames(width, framing, random.Random(3), src_byte(framing) + 1)
    got, want, rtl_count, model_count = _run(width, framing, backpressure, frames,
                                             list(OWNERS.items()))
    assert got == want
    assert rtl_count == model_count
    # Independent of the model: allowed frames arrive whole at their ports, others never.
    sb, db = src_byte(framing), dst_byte(framing)
    spoofed = sum(not _allowed(f[sb], p) for p in range(PORTS) for f in frames[p])
    assert 0 < spoofed < 20
    assert rtl_count == spoofed
    for o in range(PORTS):
        expect = sorted(f for p in range(PORTS) for f in frames[p]
                        if f[db] == o and _allowed(f[sb], p))
        assert sorted(_delivered(width, got, o)) == expect
    # Every beat that entered left its buffer: one credit each, dropped or forwarded.
    sent = sum(len(frame_to_beats(f, width)) for p in range(PORTS) for f in frames[p])
    assert sum(sum(c) for _, c in got) == sent


@pytest.mark.parametrize("framing", ["compact", "l2"])
def test_short_frames_and_a_racing_write_match_the_model(framing):
    """Frames of 1..40 bytes at W = 8 (some end before their source byte) and source
    writes while frames flow: RTL = model, beat for beat and credit for credit."""
    frames = _frames(8, framing, random.Random(9), 1)
    race = [(1, 3), (4, PORTS), (0, 2), (1, PORTS)]
    got, want, rtl_count, model_count = _run(8, framing, False, frames,
                                             list(OWNERS.items()), race=race)
    assert got == want
    assert rtl_count == model_count > 0
    sent = sum(len(frame_to_beats(f, 8)) for p in range(PORTS) for f in frames[p])
    assert sum(sum(c) for _, c in got) == sent


@pytest.mark.parametrize("node,port,word", [(256, 0, "node"), (-1, 0, "node"),
                                            (0, PORTS + 1, "port"), (0, -1, "port"),
                                            ("1", 0, "node")])
def test_bad_source_writes_name_the_field(node, port, word):
    with pytest.raises(ValueError, match=word):
        check_source_write(PORTS, node, port)
    model = SwitchModel(PORTS, "compact", 8, width=16)
    with pytest.raises(ValueError, match=word):
        model.cycle(0, {}, src_write=(node, port))
    nic = NicSystemModel(16, "compact", PORTS, 2, 64, 64, 16)
    with pytest.raises(ValueError, match=word):
        nic.run({}, list(range(PORTS)), source_writes=[(node, port)])
