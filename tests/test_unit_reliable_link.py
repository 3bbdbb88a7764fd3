"""Unit tests of the link-level retry (Amaranth simulator): ReliableLink against its twin,
and every frame delivered once, whole and in order whatever the wire does."""

import random
import zlib

import pytest

from pymodel.fabric.faulty_link import FaultSettings, rate_per_65535
from pymodel.fabric.reliable_link import ReliableLinkModel
from pymodel.fcs import fcs_bytes
from pymodel.packet import beats_to_frames, frame_to_beats
from rtl.fabric.reliable_link import ReliableLink
from rtl.fabric.replay_rx import ReplayRx
from rtl.fabric.replay_tx import ReplayTx
from spec.fabric import COUNTER_PORTS
from tb.amsim import run_sim

P = rate_per_65535

CASES = {
    "clean": FaultSettings(seed=3),
    "drop": FaultSettings(seed=5, drop_rate=P(0.08)),
    "corrupt": FaultSettings(seed=7, corrupt_rate=P(0.08)),
    "dup": FaultSettings(seed=9, dup_rate=P(0.1)),
    "bursts": FaultSettings(seed=13, drop_rate=P(0.03), corrupt_rate=P(0.03),
                            dup_rate=P(0.03), drop_burst=3, corrupt_burst=2, dup_burst=2),
    "heavy": FaultSettings(seed=17, drop_rate=P(0.15), corrupt_rate=P(0.15),
                           dup_rate=P(0.15)),
    # The retry's own signalling damaged: sequence tags, then ACK/NAKs, then all of it.
    "tag": FaultSettings(seed=19, tag_rate=P(0.1)),
    "acks": FaultSettings(seed=23, ack_drop_rate=P(0.1), ack_corrupt_rate=P(0.1)),
    "signalling": FaultSettings(seed=29, drop_rate=P(0.05), corrupt_rate=P(0.05),
                                dup_rate=P(0.05), tag_rate=P(0.05), ack_drop_rate=P(0.05),
                                ack_corrupt_rate=P(0.05)),
}


def _frames(rng, count, width, max_beats):
    """Frames with a good FCS, 5 bytes to ``max_beats`` beats long."""
    out = []
    for _ in range(count):
        body = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, max_beats * width - 4)))
        out.append(body + fcs_bytes(body))
    return out


class Driver:
    """Offers each frame's beats from a cycle on, holds a beat until ``ready``; the same
    rule drives the RTL and the model."""

    def __init__(self, rng, frames, width, max_gap):
        self.queue, cycle = [], 0
        for frame in frames:
            cycle += rng.randint(0, max_gap)
            for beat in frame_to_beats(frame, width):
                self.queue.append((cycle, beat))
        self.k = 0

    def offer(self, cycle):
        if self.k < len(self.queue) and self.queue[self.k][0] <= cycle:
            return self.queue[self.k][1]
        return None

    def taken(self):
        self.k += 1


def _stalls(rng, cycles, rate):
    return [rng.random() >= rate for _ in range(cycles)]


def _model(width, latency, max_beats, settings, frames, gap, stall_rate, cycles, seed):
    """The model's run: its output beats, its counters and the cycles it ran (at most
    ``cycles``; fewer once every beat was offered and the link stayed idle, nothing
    unacknowledged, on the wire or to deliver (``ReliableLinkModel.busy()`` false), for
    a round trip of the wire and 32 cycles: no timer runs on an idle link, so nothing is
    left to happen). The RTL then runs as many cycles."""
    rng = random.Random(seed)
    drv = Driver(rng, frames, width, gap)
    ready = _stalls(rng, cycles, stall_rate)
    model = ReliableLinkModel(width, latency, max_beats, settings)
    out, idle_since = [], None
    for c in range(cycles):
        beat = drv.offer(c) if model.ready() else None
        if beat is not None:
            drv.taken()
        o = model.cycle(c, beat, ready[c])
        if o is not None and ready[c]:
            out.append((c, o))
        if drv.k < len(drv.queue) or model.busy():
            idle_since = None
        elif idle_since is None:
            idle_since = c
        elif c - idle_since >= 2 * latency + 32:
            break
    return out, model.all_counters(), c + 1


def _rtl(width, latency, max_beats, settings, frames, gap, stall_rate, cycles, seed, ran):
    """The RTL's run over the model's stimulus: ``ran`` cycles (what :func:`_model`
    ran)."""
    rng = random.Random(seed)
    drv = Driver(rng, frames, width, gap)
    ready = _stalls(rng, cycles, stall_rate)
    dut = ReliableLink(width, latency, max_beats)
    out, final = [], {}

    async def bench(ctx):
        for name, value in {**settings.ports(), **settings.retry_ports()}.items():
            ctx.set(getattr(dut.settings, name), value)
        for c in range(ran):
            beat = drv.offer(c)
            ctx.set(dut.i.valid, beat is not None)
            ctx.set(dut.i.payload.as_value(), beat or 0)
            ctx.set(dut.o.ready, ready[c])
            if beat is not None and ctx.get(dut.i.ready):
                drv.taken()
            if ctx.get(dut.o.valid) and ready[c]:
                out.append((c, ctx.get(dut.o.payload.as_value())))
            await ctx.tick()
        for name in COUNTER_PORTS:             # "tx_frames" is counters.tx.frames
            group, _, counter = name.partition("_")
            final[name] = ctx.get(getattr(getattr(dut.counters, group), counter))

    run_sim(dut, bench, deadline_cycles=ran + 2)
    return out, final


@pytest.mark.parametrize("case", ["clean", "signalling"])
def test_long_wire_matches_model(case):
    """A 40-cycle wire (its frames' and its ACKs' delay lines are memories, not register
    chains): RTL = model beat for beat and counter for counter, every frame delivered
    once, whole and in order."""
    width, latency, max_beats = 16, 40, 12
    seed = zlib.crc32(f"long{case}".encode()) & 0xFFFF
    frames = _frames(random.Random(seed), 60, width, max_beats)
    args = (width, latency, max_beats, CASES[case], frames, 6, 0.2, 5000, seed)
    want, counters, ran = _model(*args)
    got, final = _rtl(*args, ran)
    assert got == want
    assert final == counters
    assert beats_to_frames([b for _, b in got], width) == frames


@pytest.mark.slow_variants("*64-5-clean", "*64-5-drop", "*64-5-corrupt", "*64-5-dup",
                            "*64-5-acks", "*64-5-tag", reason=(
    "the same fault case runs at width 8; at width 64 'heavy', 'bursts' and 'signalling' "
    "mix these faults"))
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("width,latency", [(8, 2), (64, 5)])
def test_reliable_link_matches_model_and_delivers_everything(case, width, latency):
    max_beats = 12
    seed = zlib.crc32(f"{case}{width}".encode()) & 0xFFFF
    frames = _frames(random.Random(seed), 60, width, max_beats)
    args = (width, latency, max_beats, CASES[case], frames, 6, 0.2, 4000, seed)
    want, counters, ran = _model(*args)
    got, final = _rtl(*args, ran)
    assert got == want
    assert final == counters
    # Independent of both: every frame once, whole and in order.
    assert beats_to_frames([b for _, b in got], width) == frames
    if case != "clean":
        hit = sum(counters[f"link_{n}"] for n in ("dropped", "corrupted", "duplicated",
                                                  "tag_corrupted", "acks_dropped",
                                                  "acks_corrupted"))
        assert hit > 0, "the wire did no damage: the case tests nothing"
    if case in ("tag", "signalling"):
        # Every damaged tag was caught: the frame was discarded and sent again.
        assert counters["link_tag_corrupted"] > 0
        # (a duplicated frame's copy carries the same damaged tag)
        assert 0 < counters["rx_tag_bad"] <= (counters["link_tag_corrupted"]
                                              + counters["link_duplicated"])
        assert counters["tx_resent_frames"] > 0
    if case in ("acks", "signalling"):
        assert counters["link_acks_dropped"] > 0 and counters["link_acks_corrupted"] > 0
        assert counters["tx_acks_bad"] == counters["link_acks_corrupted"]
    if case in ("drop", "corrupt", "heavy", "bursts"):
        assert counters["tx_resent_frames"] > 0 and counters["tx_replay_cycles"] > 0


def test_timer_recovers_a_lost_last_frame():
    """When the last frame of a run is dropped nothing follows to reveal the loss (no
    NAK): only the timer can send it again. Pick a seed where that happens."""
    width, latency, max_beats = 16, 3, 8
    frames = _frames(random.Random(1), 3, width, max_beats)
    for seed in range(1, 500):
        s = FaultSettings(seed=seed, drop_rate=P(0.3))
        want, counters, ran = _model(width, latency, max_beats, s, frames, 0, 0.0, 600, 4)
        if counters["tx_timeouts"] and not counters["tx_naks"]:
            break
    else:
        pytest.fail("no seed drops only the last frame")
    got, final = _rtl(width, latency, max_beats, s, frames, 0, 0.0, 600, 4, ran)
    assert got == want and final == counters
    assert counters["link_dropped"] >= 1
    assert beats_to_frames([b for _, b in got], width) == frames


@pytest.mark.parametrize("args,match", [
    ((8, 6, 100, 2), "replay buffer depth must be a power of two"),
    ((8, 8, 1, 2), "retry timeout"),
    ((7, 8, 100, 2), "datapath width"),
    ((8, 8, 100, 5), "max_frame_beats"),
])
def test_replay_tx_parameter_errors(args, match):
    with pytest.raises(ValueError, match=match):
        ReplayTx(*args)


def test_replay_rx_parameter_errors():
    with pytest.raises(ValueError, match="delivery buffer depth must be a power of two"):
        ReplayRx(8, 12)
    with pytest.raises(ValueError, match="max_frame_beats"):
        ReliableLink(8, 2, 0)


@pytest.mark.parametrize("kind,faults", [
    ("tag", dict(seed=2, drop_rate=P(0.2), tag_rate=P(0.3))),
    ("ack", dict(seed=1, drop_rate=P(0.2), ack_corrupt_rate=P(0.4))),
])
def test_checks_are_what_saves_damaged_signalling(kind, faults, monkeypatch):
    """Heavy damage to tags (or ACKs) on top of drops: with the check bits every frame
    arrives once, whole and in order (RTL = model). The same run with the model's checks
    switched off loses or repeats frames, so the checks, not luck, carry the case."""
    import pymodel.fabric.reliable_link as rl

    settings = FaultSettings(**faults)
    frames = _frames(random.Random(faults["seed"]), 40, 8, 4)
    args = (8, 2, 4, settings, frames, 2, 0.0, 3000, faults["seed"])
    want, counters, ran = _model(*args)
    got, final = _rtl(*args, ran)
    assert got == want and final == counters
    assert beats_to_frames([b for _, b in got], 8) == frames
    assert counters["rx_tag_bad" if kind == "tag" else "tx_acks_bad"] > 0
    monkeypatch.setattr(rl, "_parity", lambda value: 0)
    try:
        broken = beats_to_frames([b for _, b in _model(*args)[0]], 8) != frames
    except (KeyError, RuntimeError, AssertionError):
        broken = True
    assert broken, "without the checks the damage went unnoticed: the case tests nothing"
