"""Each stage of the pipelined responder against its twin (Amaranth simulator).

Every test pushes random items into the stage's input FIFOs, pops its output FIFOs with
random backpressure and compares every item written and taken, with its cycle
(:func:`tb.stage_harness.compare_stage`).
"""

import random

import pytest

from pymodel.packet import frame_to_beats, unpack_beat
from pymodel.rdma.resp.rx import ReceiveModel
from rtl.rdma.resp.rx import Receive
from rtl.rdma.resp.sizes import MAX_FRAME_BEATS, REST_MAX
from tb.resp_frames import random_frames
from tb.stage_harness import compare_stage


def _beat_schedule(frames, rng, gap_rate):
    """``{cycle: beat dict}``: the frames' beats, with random gaps between beats."""
    sched, c = {}, 0
    for frame in frames:
        for bits in frame_to_beats(frame, 64):
            while rng.random() < gap_rate:
                c += 1
            data, nbytes, first, last = unpack_beat(64, bits)
            sched[c] = dict(data=data, nbytes=nbytes, first=first, last=last)
            c += 1
    return sched, c


@pytest.mark.parametrize("seed,gap_rate,pop_rate,rx_beats,rx_frames", [
    (1, 0.0, 1.0, 512, 64),       # back to back, no backpressure
    (2, 0.3, 0.5, 512, 64),       # gaps and backpressure
    (3, 0.0, 0.2, REST_MAX + 8, 3),   # small FIFOs: overflow drops
])
def test_receive_matches_twin(seed, gap_rate, pop_rate, rx_beats, rx_frames):
    rng = random.Random(seed)
    frames = random_frames(rng, 60, long_frames=True)
    sched, end = _beat_schedule(frames, rng, gap_rate)
    dut = Receive(rx_beats, rx_frames)
    twin_box = {}

    def make(fifos):
        twin_box["t"] = ReceiveModel(fifos["hdr"], fifos["pay"])
        return twin_box["t"]

    out = compare_stage(
        dut, make, inputs={}, outputs={"hdr": rx_frames, "pay": rx_beats}, stimulus={},
        cycles=end + 300, seed=seed, pop_rate=pop_rate,
        levels={"hdr_level": "hdr", "pay_level": "pay"},
        side_in=lambda c, peek: {"i": sched.get(c)},
        side_out=("overflow", "rx_beats_max", "rx_frames_max"))
    twin = twin_box["t"]
    stored = len(out["hdr"])
    assert stored + twin.count["overflow"] == len(frames)
    assert stored > 10
    if rx_frames == 3:
        assert twin.count["overflow"] > 5 and twin.count["rx_frames_max"] == 3
    else:
        assert twin.count["overflow"] == 0
    assert any(len(f) > 64 * MAX_FRAME_BEATS for f in frames)
