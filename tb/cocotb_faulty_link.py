"""cocotb test of FaultyLinkTop: every beat, cycle, counter and flag against the twin."""

import random
import time

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly

from pymodel.fabric.faulty_link import FaultSettings, FaultyLinkModel
from pymodel.fcs import fcs_bytes, fcs_ok
from pymodel.packet import beats_to_frames, frame_to_beats
from pymodel.stall import stall_pattern
from spec.fabric import COUNTERS, FLAGS
from tb.cosim import cosim_params
from tb.harness import Harness
from tb.scoreboard import Scoreboard

#: Cycles the recorder keeps watching after the last expected beat: nothing may come.
QUIET_CYCLES = 64


def _issue_cycles(n, seed, rate):
    """The cycles in which the player (never pushed back) issues its ``n`` beats."""
    size = 4 * n + 64
    while True:
        go = [c for c, stall in enumerate(stall_pattern(seed, rate, size)) if not stall]
        if len(go) >= n:
            return go[:n]
        size *= 2


@cocotb.test()
async def faults_match_model(dut):
    """Frames of 1..300 bytes (FCS included) with seeded source gaps through the link at
    the rates and bursts of the parameters: the recorder's beats and cycles, the player's
    cycles, every counter and flag equal the model; corrupted frames fail their FCS."""
    p = cosim_params()
    width = p["width"]
    rng = random.Random(p["seed"])
    bodies = [bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 296)))
              for _ in range(p["frames"])]
    frames = [b + fcs_bytes(b) for b in bodies]
    beats = [b for f in frames for b in frame_to_beats(f, width)]
    src = (p["src_stall_seed"], p["src_stall_rate"])
    settings = FaultSettings(**p["settings"])

    model = FaultyLinkModel(width, p["latency"], p["max_frame_beats"], p["fifo_depth"])
    issue = _issue_cycles(len(beats), *src)
    want, counters = model.run(list(zip(issue, beats, strict=True)), settings)

    harness = Harness(dut)
    for name, value in settings.ports().items():
        harness.set(f"settings__{name}", value)     # the top's port ``settings``
    harness.load_player("src", beats, src)
    harness.arm_recorder("sink", len(want))
    await harness.reset()
    t0 = time.perf_counter()
    end = await harness.wait_done(["src__done", "sink__done"],
                              timeout_cycles=2 * (issue[-1] + len(want)) + 1000)
    await ClockCycles(dut.clk, QUIET_CYCLES)
    await ReadOnly()
    dut._log.info("simulated %d cycles in %.2f s", end + QUIET_CYCLES,
                  time.perf_counter() - t0)
    got, got_at = harness.recorded("sink")

    sb = Scoreboard(dut._log)
    sb.compare("output beats", got, [b for _, b in want])
    sb.compare("output cycles", got_at, [c for c, _ in want], fmt=str)
    sb.compare("input cycles", harness.played_stamps("src", len(beats)), issue, fmt=str)
    for name in COUNTERS + FLAGS:
        sb.equal(name, int(getattr(dut, f"counters__{name}").value), counters[name])
    sb.equal("sink overflow", int(dut.sink__overflow.value), 0)
    # Independent of the model: a frame leaves whole; exactly the flipped ones fail.
    out = beats_to_frames(got, width)
    sent = set(frames)
    bad = [f for f in out if not fcs_ok(f)]
    sb.equal("good frames that were sent", all(f in sent for f in out if fcs_ok(f)), True)
    sb.equal("bad frames one bit off a sent one", all(
        any(len(s) == len(f) and (int.from_bytes(s, "little")
                                  ^ int.from_bytes(f, "little")).bit_count() == 1
            for s in frames) for f in bad), True)
    sb.check()
    assert all(counters[k] > 0 for k in ("dropped", "corrupted", "duplicated")), \
        "the scenario must drop, corrupt and duplicate"
    assert counters["corrupted"] <= len(bad) <= 2 * counters["corrupted"]
    assert model.fifo_high_water > 0, "the scenario must make beats wait behind a copy"
    dut._log.info("%d frames in, %d out (%d dropped, %d corrupted, %d duplicated, FIFO "
                  "high water %d beats) in %d cycles", len(frames), len(out),
                  counters["dropped"], counters["corrupted"], counters["duplicated"],
                  model.fifo_high_water, end)

    # A broken expectation must be caught: flip one bit of one model beat.
    broken = [b for _, b in want]
    broken[len(broken) // 2] ^= 1 << 3
    probe = Scoreboard().compare("probe", got, broken)
    assert probe.mismatches, "the scoreboard missed a flipped model bit"
