"""cocotb tests of FcsTop: the inserter and checker against their twins, cycle exact."""

import random
import time
import zlib

import cocotb

from pymodel.fcs import FcsCheckerModel, FcsInserterModel, fcs_bytes
from pymodel.packet import beats_to_frames, frame_to_beats
from tb.cosim import cosim_params
from tb.harness import Harness
from tb.scoreboard import Scoreboard


def _frames(rng, lengths):
    return [bytes(rng.getrandbits(8) for _ in range(n)) for n in lengths]


def _damage(rng, frames):
    """Frames with FCS; every third one gets one flipped bit somewhere."""
    out = []
    for k, f in enumerate(frames):
        framed = bytearray(f + fcs_bytes(f))
        if k % 3 == 1:
            bit = rng.randrange(8 * len(framed))
            framed[bit // 8] ^= 1 << (bit % 8)
        out.append(bytes(framed))
    return out


async def _run(dut, stalls):
    p = cosim_params()
    width = p["width"]
    rng = random.Random(p["seed"])
    lengths = list(range(1, p["max_len"] + 1)) + [rng.randrange(301, 1501)
                                                  for _ in range(p["long_frames"])]
    rng.shuffle(lengths)
    frames = _frames(rng, lengths)
    checked = _damage(rng, frames)
    src, sink = ((11, stalls), (29, stalls))

    ins = FcsInserterModel(width)
    m_beats, m_stamps, m_in = ins.run(frames, src, sink)
    chk = FcsCheckerModel(width)
    c_beats, c_stamps, c_ok, c_bad = chk.run(checked, src, sink)

    harness = Harness(dut)
    harness.load_player("gen_src", [b for f in frames for b in frame_to_beats(f, width)], src)
    harness.arm_recorder("gen_sink", len(m_beats), sink)
    harness.load_player("chk_src", c_beats, src)
    harness.arm_recorder("chk_sink", len(c_beats), sink)
    await harness.reset()
    t0 = time.perf_counter()
    end = await harness.wait_done(["gen_sink__done", "chk_sink__done"],
                              timeout_cycles=4 * max(m_stamps[-1], c_stamps[-1]) + 1000)
    dut._log.info("simulated %d cycles in %.2f s", end, time.perf_counter() - t0)
    r_beats, r_stamps = harness.recorded("gen_sink")
    r_cbeats, r_cstamps = harness.recorded("chk_sink")
    r_in = harness.played_stamps("gen_src", len(m_in))

    sb = Scoreboard(dut._log)
    sb.compare("inserter beats", r_beats, m_beats)
    sb.compare("inserter out cycles", r_stamps, m_stamps, fmt=str)
    sb.compare("inserter in cycles", r_in, m_in, fmt=str)
    sb.compare("checker beats", r_cbeats, c_beats)
    sb.compare("checker cycles", r_cstamps, c_stamps, fmt=str)
    sb.equal("frames_ok", int(dut.frames_ok.value), c_ok)
    sb.equal("frames_bad", int(dut.frames_bad.value), c_bad)
    sb.equal("gen_sink overflow", int(dut.gen_sink__overflow.value), 0)
    # Independent reference: every frame the RTL framed ends in zlib's CRC of its body.
    for k, f in enumerate(beats_to_frames(r_beats, width)):
        sb.equal(f"frame {k} FCS vs zlib", f[-4:], zlib.crc32(f[:-4]).to_bytes(4, "little"))
    sb.check()
    assert c_bad > 0 and c_ok > 0, "the checker scenario needs good and bad frames"
    dut._log.info("width %d, stall rate %d: %d frames framed and %d checked in %d cycles",
                  width, stalls, len(frames), len(checked), end)

    # A broken expectation must be caught: flip one bit of one model beat.
    broken = list(m_beats)
    broken[len(broken) // 2] ^= 1 << 3
    probe = Scoreboard().compare("probe", r_beats, broken)
    assert probe.mismatches, "the scoreboard missed a flipped model bit"


@cocotb.test()
async def fcs_back_to_back(dut):
    """Every length 1..max_len and long random frames, no stalls, no backpressure."""
    await _run(dut, 0)


@cocotb.test()
async def fcs_with_stalls_and_backpressure(dut):
    """The same frames with about 25% source stalls and 25% sink backpressure."""
    await _run(dut, 64)
