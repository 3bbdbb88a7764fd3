"""The NIC fabric's switch (:class:`rtl.fabric.switch.Switch`, Amaranth simulator) against
its twin (:class:`pymodel.fabric.switch.SwitchModel`) and against the intent, one section
per feature of the block:

- **Backpressure**: egress ``ready`` stalled at random; the switch holds its beats.
- **Hop latency**: random frames to random ports on every ingress, with gaps: every
  egress beat and credit pulse of the RTL equals the model's, cycle by cycle, at hop
  latencies 0, 1 and 250; and, independently of the model, a switch of hop latency ``h``
  shows on its egress ports what the switch of hop latency 0 shows ``h`` cycles earlier,
  and returns the same credits in the same cycles (the definition of the parameter).
- **Frame drops** (``faults``): chosen frames dropped whole and counted, as the twin does.
- **Source check**: frames carry random source ids; the source table says which ingress
  port each id may use. Every egress beat, credit pulse and the ``drop_spoofed`` counter
  equal the model's, cycle by cycle; and, independently of the model, each egress port
  delivers exactly the allowed frames routed to it, whole, and ``drop_spoofed`` counts
  exactly the others.

The benches share one cycle's stimulus and sampling (:func:`offer_beats`,
:func:`take_egress`); each test steps the twin on what they return.
"""

import random

import pytest

from pymodel.fabric.switch import SwitchModel
from pymodel.nic.system import NicSystemModel
from pymodel.packet import frame_to_beats, pack_beat, unpack_beat
from rtl.fabric.switch import Switch
from spec.fabric import SWITCH_DROPS, check_source_write, check_switch_drops, switch_counters
from spec.formats.nic import dst_byte, src_byte
from tb.amsim import run_sim

# One cycle of the benches ------------------------------------------------------------


def offer_beats(ctx, dut, streams, c, width, ready=None, start=0):
    """Cycle ``c``'s inputs: ingress ``p`` offers the next beat of ``streams[p]`` (taken
    from the list) in cycles where ``c >= start`` and ``(c + p) % 3 != 0``; egress ``p``'s
    ``ready`` is ``ready[p]`` when ``ready`` is given. Returns ``{port: the unpacked beat
    offered}`` (the switch never holds its ingress)."""
    now = {}
    for p in range(len(streams)):
        link = dut.i[p]
        send = c >= start and bool(streams[p]) and (c + p) % 3 != 0
        ctx.set(link.valid, send)
        if send:
            beat = streams[p].pop(0)
            ctx.set(link.payload.as_value(), beat)
            now[p] = unpack_beat(width, beat)
        if ready is not None:
            ctx.set(dut.o[p].ready, ready[p])
    return now


def take_egress(ctx, dut, ports, ready=None):
    """Cycle ``c``'s outputs: ``(beats, credits)``, each egress's beat that leaves (valid,
    and ``ready[p]`` when ``ready`` is given) or None, and each ingress's credit pulse."""
    out = []
    for p in range(ports):
        o = dut.o[p]
        leaves = ctx.get(o.valid) and (ready is None or ready[p])
        out.append(ctx.get(o.payload.as_value()) if leaves else None)
    return out, [ctx.get(dut.credit[p]) for p in range(ports)]


def _delivered(width, got, port):
    """The frames egress ``port`` delivered, whole, from ``got`` (per cycle a tuple whose
    first item is the egress beats, :func:`take_egress`'s)."""
    chunks, cur = [], b""
    for out, *_ in got:
        if out[port] is None:
            continue
        data, nb, first, last = unpack_beat(width, out[port])
        cur = (b"" if first else cur) + data.to_bytes(width, "little")[:nb]
        if last:
            chunks.append(cur)
    return chunks


# Backpressure -------------------------------------------------------------------------


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
        assert sorted(_delivered(width, got, p)) == sorted(frames[p])


# Hop latency --------------------------------------------------------------------------


HOP_PORTS, HOP_WIDTH, HOP_DEPTH = 4, 8, 32


def _hop_frames(rng, count=6):
    """``count`` frames of 1..40 bytes per ingress port, to random egress ports."""
    frames = {}
    for p in range(HOP_PORTS):
        frames[p] = []
        for _ in range(count):
            f = bytearray(rng.getrandbits(8) for _ in range(rng.randrange(1, 41)))
            f[dst_byte("compact")] = rng.randrange(HOP_PORTS)
            frames[p].append(bytes(f))
    return frames


def _hop_run(hop, frames, cycles):
    """Play the frames (a beat on ingress ``p`` in cycles where ``(c + p) % 3 != 0``);
    return the RTL's and the model's per-cycle ``(egress beats, credit pulses)``."""
    dut = Switch(HOP_WIDTH, HOP_PORTS, "compact", HOP_DEPTH, hop_latency=hop)
    model = SwitchModel(HOP_PORTS, "compact", HOP_DEPTH, width=HOP_WIDTH, hop_latency=hop)
    streams = {p: [b for f in frames[p] for b in frame_to_beats(f, HOP_WIDTH)]
               for p in range(HOP_PORTS)}
    arrivals, got = [], []

    async def bench(ctx):
        for c in range(cycles):
            arrivals.append(offer_beats(ctx, dut, streams, c, HOP_WIDTH))
            got.append(take_egress(ctx, dut, HOP_PORTS))
            await ctx.tick()

    run_sim(dut, bench)
    assert all(not s for s in streams.values()), "stimulus left over"
    want, pending = [], [None] * HOP_PORTS
    for c in range(cycles):
        out, pops = model.cycle(c, arrivals[c])
        now, pending = pending, [pack_beat(HOP_WIDTH, *out[p][:4]) if p in out else None
                                 for p in range(HOP_PORTS)]
        want.append((now, [int(p in pops) for p in range(HOP_PORTS)]))
    assert model.idle() and not model.overflow
    return got, want


def test_hop_latency_delays_egress_only():
    frames = _hop_frames(random.Random(11))
    beats = sum(len(frame_to_beats(f, HOP_WIDTH)) for fs in frames.values() for f in fs)
    cycles = 300
    runs = {}
    for hop in (0, 1, 250):
        got, want = _hop_run(hop, frames, cycles + hop)
        assert got == want, f"hop_latency {hop}: RTL and model differ"
        runs[hop] = got
    base = runs[0]
    assert sum(sum(c) for _, c in base) == beats          # every beat left its buffer
    assert sum(o is not None for out, _ in base for o in out) == beats
    assert all(o is None for out, _ in base[-20:] for o in out)    # drained in time
    for hop in (1, 250):
        run = runs[hop]
        # Egress: the hop-0 switch's, ``hop`` cycles later; nothing before.
        assert [out for out, _ in run[:hop]] == [[None] * HOP_PORTS] * hop
        assert [out for out, _ in run[hop:]] == [out for out, _ in base]
        # Credits: the same cycles as with hop 0.
        assert [c for _, c in run[:cycles]] == [c for _, c in base]


@pytest.mark.parametrize("bad", [-1, 4097, "1", True])
def test_bad_hop_latency_is_named(bad):
    with pytest.raises(ValueError, match="hop_latency"):
        Switch(HOP_WIDTH, HOP_PORTS, "compact", HOP_DEPTH, hop_latency=bad)
    with pytest.raises(ValueError, match="hop_latency"):
        SwitchModel(HOP_PORTS, "compact", HOP_DEPTH, width=HOP_WIDTH, hop_latency=bad)


def _hop_run_bp(hop, frames, cycles, ready):
    """The switch with ``backpressure`` and ``hop_latency`` ``hop``, egress ``ready[c][o]``
    (each sender keeps to its credits, ``HOP_DEPTH`` at first): the RTL's and the model's
    per-cycle ``(beats that leave, credit pulses)``."""
    dut = Switch(HOP_WIDTH, HOP_PORTS, "compact", HOP_DEPTH, backpressure=True, hop_latency=hop)
    model = SwitchModel(HOP_PORTS, "compact", HOP_DEPTH, True, width=HOP_WIDTH, hop_latency=hop)
    streams = {p: [b for f in frames[p] for b in frame_to_beats(f, HOP_WIDTH)]
               for p in range(HOP_PORTS)}
    arrivals, got = [], []
    credits = [HOP_DEPTH] * HOP_PORTS

    async def bench(ctx):
        for c in range(cycles):
            now = {}
            for p in range(HOP_PORTS):
                link = dut.i[p]
                send = bool(streams[p]) and (c + p) % 3 != 0 and credits[p] > 0
                ctx.set(link.valid, send)
                if send:
                    credits[p] -= 1
                    beat = streams[p].pop(0)
                    ctx.set(link.payload.as_value(), beat)
                    now[p] = unpack_beat(HOP_WIDTH, beat)
                ctx.set(dut.o[p].ready, ready[c][p])
            arrivals.append(now)
            out = []
            for p in range(HOP_PORTS):
                o = dut.o[p]
                leaves = ctx.get(o.valid) and ready[c][p]
                out.append(ctx.get(o.payload.as_value()) if leaves else None)
            pulses = [ctx.get(dut.credit[p]) for p in range(HOP_PORTS)]
            got.append((out, pulses))
            credits[:] = [k + v for k, v in zip(credits, pulses, strict=True)]
            await ctx.tick()

    run_sim(dut, bench)
    assert all(not s for s in streams.values()), "stimulus left over"
    want = []
    for c in range(cycles):
        left, pops = model.cycle(c, arrivals[c], ready=ready[c])
        want.append(([pack_beat(HOP_WIDTH, *left[p][:4]) if p in left else None
                      for p in range(HOP_PORTS)], [int(p in pops) for p in range(HOP_PORTS)]))
    assert model.idle() and not model.overflow
    return got, want


@pytest.mark.parametrize("hop", [1, 3, 40])
def test_hop_with_backpressure_holds_beats(hop):
    """Egress ``ready`` low about three quarters of the time on every port, in runs (of
    about 30 cycles, against an elastic hop of ``hop`` + 2 beats): the beats that
    leave and the credit pulses equal the model's, cycle by cycle; every frame leaves
    whole, once, on its port; the stalls reach back to the ingress (later credits than
    with every egress ready)."""
    frames = _hop_frames(random.Random(5 + hop), 24)
    rng = random.Random(hop)
    cycles = 2500 + hop
    ready, level = [], [True] * HOP_PORTS
    for _ in range(cycles):
        level = [not v if rng.random() < (0.1 if v else 0.03) else v for v in level]
        ready.append(list(level))
    got, want = _hop_run_bp(hop, frames, cycles, ready)
    assert got == want
    free, _ = _hop_run_bp(hop, frames, cycles, [[True] * HOP_PORTS] * cycles)
    late = sum(c for c, (_, cr) in enumerate(got) for _ in range(sum(cr)))
    early = sum(c for c, (_, cr) in enumerate(free) for _ in range(sum(cr)))
    assert late > early, "the egress stalls never reached the ingress buffers"
    for p in range(HOP_PORTS):
        chunks = _delivered(HOP_WIDTH, got, p)
        sent = [f for fs in frames.values() for f in fs if f[dst_byte("compact")] == p]
        assert sorted(chunks) == sorted(sent)


@pytest.mark.parametrize("hop", [1, 40])
def test_hop_with_backpressure_always_ready_equals_without(hop):
    """Every egress always ready: the switch with ``backpressure`` shows the egress
    beats and credits of the switch without it (the delay line), cycle for cycle."""
    frames = _hop_frames(random.Random(11))
    cycles = 300 + hop
    got, _ = _hop_run_bp(hop, frames, cycles, [[True] * HOP_PORTS] * cycles)
    plain, _ = _hop_run(hop, frames, cycles)
    assert got == plain


# Frame drops (faults) -----------------------------------------------------------------


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
        chunks = _delivered(width, got, p)
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


# Source check -------------------------------------------------------------------------


SRC_PORTS = 4
#: owner[node] written before the traffic: node 3 may use any port (the written value
#: SRC_PORTS), node 4 only port 1, node 5 is never written (power-up: any port).
OWNERS = {0: 0, 1: 1, 2: 2, 3: SRC_PORTS, 4: 1}


def _allowed(src, port):
    return OWNERS.get(src, SRC_PORTS) in (port, SRC_PORTS)


def _src_run(width, framing, backpressure, frames, writes, race=(), cycles=420, stall=0.3):
    """Play ``frames[p]`` (byte strings) on ingress ``p`` with gaps inside frames, after
    the source-table ``writes`` (one a cycle from cycle 0; ``race`` more writes from
    cycle 30, while frames flow). Returns the RTL's and the model's per-cycle (egress,
    credits) and their ``drop_spoofed``."""
    depth = 64
    dut = Switch(width, SRC_PORTS, framing, depth, backpressure=backpressure)
    model = SwitchModel(SRC_PORTS, framing, depth, backpressure=backpressure, width=width)
    rng = random.Random(5)
    streams = {p: [b for f in frames[p] for b in frame_to_beats(f, width)]
               for p in range(SRC_PORTS)}
    start = len(writes)
    plan = dict(enumerate(writes))
    plan.update({30 + k: x for k, x in enumerate(race)})
    ready = [[not backpressure or rng.random() >= stall for _ in range(SRC_PORTS)]
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
            got.append(take_egress(ctx, dut, SRC_PORTS, ready[c]))
            await ctx.tick()
        counter.append(ctx.get(dut.counters.drop_spoofed))

    run_sim(dut, bench)
    assert all(not s for s in streams.values()), "stimulus left over"
    want, pending = [], [None] * SRC_PORTS
    for c in range(cycles):
        out, pops = model.cycle(c, arrivals[c], ready=ready[c], src_write=plan.get(c))
        if backpressure:
            now = [pack_beat(width, *out[p][:4]) if p in out else None for p in range(SRC_PORTS)]
        else:                              # without backpressure: on the port next cycle
            now, pending = pending, [pack_beat(width, *out[p][:4]) if p in out else None
                                     for p in range(SRC_PORTS)]
        want.append((now, [int(p in pops) for p in range(SRC_PORTS)]))
    return got, want, counter[0], model.drop_spoofed


def _src_frames(width, framing, rng, lo):
    """Five frames per port of ``lo``..40 bytes, random destination and source ids."""
    frames = {}
    for p in range(SRC_PORTS):
        frames[p] = []
        for _ in range(5):
            f = bytearray(rng.getrandbits(8) for _ in range(rng.randrange(lo, 41)))
            if len(f) > dst_byte(framing):
                f[dst_byte(framing)] = rng.randrange(SRC_PORTS)
            if len(f) > src_byte(framing):
                f[src_byte(framing)] = rng.randrange(6)
            frames[p].append(bytes(f))
    return frames


@pytest.mark.parametrize("framing", ["compact", "l2"])
@pytest.mark.parametrize("width,backpressure", [(8, False), (16, True)])
def test_spoofed_frames_dropped_whole_and_counted(framing, width, backpressure):
    """At W = 8 the L2 source byte is in the second beat (judged as it arrives), at W = 16
    in the first; with backpressure the egress ports stall at random."""
    frames = _src_frames(width, framing, random.Random(3), src_byte(framing) + 1)
    got, want, rtl_count, model_count = _src_run(width, framing, backpressure, frames,
                                             list(OWNERS.items()))
    assert got == want
    assert rtl_count == model_count
    # Independent of the model: allowed frames arrive whole at their ports, others never.
    sb, db = src_byte(framing), dst_byte(framing)
    spoofed = sum(not _allowed(f[sb], p) for p in range(SRC_PORTS) for f in frames[p])
    assert 0 < spoofed < 20
    assert rtl_count == spoofed
    for o in range(SRC_PORTS):
        expect = sorted(f for p in range(SRC_PORTS) for f in frames[p]
                        if f[db] == o and _allowed(f[sb], p))
        assert sorted(_delivered(width, got, o)) == expect
    # Every beat that entered left its buffer: one credit each, dropped or forwarded.
    sent = sum(len(frame_to_beats(f, width)) for p in range(SRC_PORTS) for f in frames[p])
    assert sum(sum(c) for _, c in got) == sent


@pytest.mark.parametrize("framing", ["compact", "l2"])
def test_short_frames_and_a_racing_write_match_the_model(framing):
    """Frames of 1..40 bytes at W = 8 (some end before their source byte) and source
    writes while frames flow: RTL = model, beat for beat and credit for credit."""
    frames = _src_frames(8, framing, random.Random(9), 1)
    race = [(1, 3), (4, SRC_PORTS), (0, 2), (1, SRC_PORTS)]
    got, want, rtl_count, model_count = _src_run(8, framing, False, frames,
                                             list(OWNERS.items()), race=race)
    assert got == want
    assert rtl_count == model_count > 0
    sent = sum(len(frame_to_beats(f, 8)) for p in range(SRC_PORTS) for f in frames[p])
    assert sum(sum(c) for _, c in got) == sent


@pytest.mark.parametrize("node,port,word", [(256, 0, "node"), (-1, 0, "node"),
                                            (0, SRC_PORTS + 1, "port"), (0, -1, "port"),
                                            ("1", 0, "node")])
def test_bad_source_writes_name_the_field(node, port, word):
    with pytest.raises(ValueError, match=word):
        check_source_write(SRC_PORTS, node, port)
    model = SwitchModel(SRC_PORTS, "compact", 8, width=16)
    with pytest.raises(ValueError, match=word):
        model.cycle(0, {}, src_write=(node, port))
    nic = NicSystemModel(16, "compact", SRC_PORTS, 2, 64, 64, 16)
    with pytest.raises(ValueError, match=word):
        nic.run({}, list(range(SRC_PORTS)), source_writes=[(node, port)])
