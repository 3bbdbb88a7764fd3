"""The fabric's PFC-like pause: PauseGen (Amaranth simulator) against its twin, its
thresholds from first principles, and the checks that refuse a bad threshold (RTL top,
PauseGen, the model's FabricConfig), each naming it."""

import random

import pytest

from pymodel.rdma.fabric_system import FabricConfig
from pymodel.rdma.pause import PauseGenModel
from rtl.rdma.pause import PauseGen
from rtl.tops.rdma_fabric_top import RdmaFabricTop
from spec.rdma import MAX_FRAME_BEATS
from spec.rdma_fabric import pause_min_headroom, pause_thresholds
from tb.amsim import run_sim


def test_thresholds_from_the_round_trip():
    """Defaults (512 payload beats, 64 header entries, links of 2 cycles): the least
    headroom is the pause's round trip, 2 x 2 + 1 = 5 beats; the receive stage admits a
    frame while at most 512 - 64 = 448 payload beats are held (room for a largest
    frame's 64), so XOFF above 448 - 5 = 443 beats, XON at 443 - 66 = 377 (one largest
    frame of 66 beats lower); header entries: admitted while at most 63 are held, XOFF
    above 63 - 5 = 58, XON at 58 - 1 (a largest frame is one entry)."""
    assert pause_min_headroom(2) == 5
    assert pause_thresholds(512, 64, 2) == (443, 377, 58, 57)
    assert pause_thresholds(512, 64, 2, headroom=20, hysteresis=10) == (428, 418, 43, 42)


@pytest.mark.parametrize("kwargs,name", [
    (dict(pause_headroom=4), "pause_headroom"),          # below 2L + 1 = 5
    (dict(pause_headroom=64), "pause_headroom"),         # no header entry left below it
    (dict(pause_headroom=True), "pause_headroom"),
    (dict(pause_hysteresis=0), "pause_hysteresis"),
    (dict(pause_hysteresis=444), "pause_hysteresis"),    # above XOFF (443)
    (dict(rx_beats=128), "pause_hysteresis"),            # XOFF 59 < the default 66
])
def test_bad_threshold_is_refused_naming_it(kwargs, name):
    with pytest.raises(ValueError, match=name):
        RdmaFabricTop(pause=1, **kwargs)
    sizes = {k: kwargs.pop(k) for k in ("rx_beats",) if k in kwargs}
    with pytest.raises(ValueError, match=name):
        FabricConfig(pause=1, responder_sizes=sizes, **kwargs)
    with pytest.raises(ValueError, match=name):
        PauseGen(sizes.get("rx_beats", 512), 64, 2, kwargs.get("pause_headroom", 0),
                 kwargs.get("pause_hysteresis"))


def test_pause_off_ignores_the_thresholds_but_pause_is_checked():
    """With ``pause`` 0 nothing of the pause is built; ``pause`` itself must be 0 or 1."""
    RdmaFabricTop(rx_beats=128)
    with pytest.raises(ValueError, match="pause"):
        RdmaFabricTop(pause=2)
    with pytest.raises(ValueError, match="pause"):
        FabricConfig(pause=2)


@pytest.mark.parametrize("seed", [1, 2])
def test_pause_gen_matches_its_twin(seed):
    """Random walks of the two levels across both thresholds (and hysteresis of a few
    beats): ``xoff`` and ``xoffs`` equal the twin's in every cycle, and the walk did
    pause and resume."""
    rng = random.Random(seed)
    rx_beats, rx_frames, hyst = 160, 24, 5
    dut = PauseGen(rx_beats, rx_frames, 2, 0, hyst)
    model = PauseGenModel(rx_beats, rx_frames, 2, 0, hyst)
    xoff_b, _, xoff_f, _ = dut.thresholds
    seen = []

    async def bench(ctx):
        pay, hdr = xoff_b - 8, 0
        for _ in range(600):
            pay = min(rx_beats, max(0, pay + rng.choice((-2, -1, 0, 1, 2))))
            hdr = min(rx_frames, max(0, hdr + rng.choice((-1, 0, 1))))
            if rng.random() < 0.02:
                hdr = xoff_f + 1 if rng.random() < 0.5 else 0
            ctx.set(dut.pay_level, pay)
            ctx.set(dut.hdr_level, hdr)
            want_now = model.xoff
            model.step(pay, hdr)
            seen.append((ctx.get(dut.xoff), int(want_now), ctx.get(dut.xoffs)))
            await ctx.tick()
        seen.append((ctx.get(dut.xoff), int(model.xoff), ctx.get(dut.xoffs)))

    run_sim(dut, bench)
    assert [(a, x) for a, x, _ in seen] == [(x, x) for _, x, _ in seen]
    assert seen[-1][2] == model.xoffs > 1
    assert any(x for _, x, _ in seen) and not all(x for _, x, _ in seen)


def test_hysteresis_default_is_one_largest_frame():
    assert pause_thresholds(512, 64, 2)[0] - pause_thresholds(512, 64, 2)[1] \
        == MAX_FRAME_BEATS
