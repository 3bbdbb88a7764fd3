"""The elastic delay (the switch hop under backpressure) against its twin, against the
delay line it replaces when nothing stalls, and against the definition of its contract;
in the Amaranth simulator and co-simulated on Icarus and Verilator."""

import random

import pytest

from pymodel.fabric.elastic_delay import ElasticDelayModel
from rtl.fabric.elastic_delay import ElasticDelay
from rtl.fabric.link import CHAIN_MAX, MAX_DELAY
from spec.fabric import ELASTIC_MARGIN
from tb.amsim import run_sim
from tb.cosim import run_cosim

BITS = 12


def _stimulus(seed, cycles, offer, ready):
    """Per cycle: ``(valid, payload, o.ready)``; ``offer`` and ``ready`` the chances of
    a valid beat offered and of the output being ready."""
    rng = random.Random(seed)
    return [(rng.random() < offer, rng.getrandbits(BITS), rng.random() < ready)
            for _ in range(cycles)]


def _run_rtl(latency, stim):
    """Drive ``stim``; a beat offered and not taken is offered again (the payload of
    the next offer replaces it only after it was taken, as a stream source must).
    Returns per cycle ``(taken payload or None, left payload or None, i.ready)``."""
    dut = ElasticDelay(BITS, latency)
    seen = []

    async def bench(ctx):
        held = None
        for valid, payload, ready in stim:
            if held is None and valid:
                held = payload
            ctx.set(dut.i.valid, held is not None)
            ctx.set(dut.i.payload, held or 0)
            ctx.set(dut.o.ready, ready)
            i_ready = ctx.get(dut.i.ready)
            taken = held if held is not None and i_ready else None
            left = ctx.get(dut.o.payload) if ctx.get(dut.o.valid) and ready else None
            seen.append((taken, left, i_ready))
            if taken is not None:
                held = None
            await ctx.tick()

    run_sim(dut, bench, deadline_cycles=len(stim) + 10)
    return seen


def _run_model(latency, stim):
    model = ElasticDelayModel(latency)
    seen, held = [], None
    for c, (valid, payload, ready) in enumerate(stim):
        if held is None and valid:
            held = payload
        i_ready = model.ready()
        taken = held if held is not None and i_ready else None
        left = model.cycle(c, held, ready)
        seen.append((taken, left, int(i_ready)))
        if taken is not None:
            held = None
    return seen


def _check_contract(latency, seen, ready):
    """Independent of the twin: every beat leaves once, in order, no earlier than
    ``latency`` cycles after it was taken; a beat leaves at the first cycle it can
    (ready, ripe, the beats before it gone); ``i.ready`` falls only when ``latency +
    ELASTIC_MARGIN`` beats are held."""
    taken = [(c, t) for c, (t, _, _) in enumerate(seen) if t is not None]
    left = [(c, x) for c, (_, x, _) in enumerate(seen) if x is not None]
    assert [x for _, x in left] == [t for _, t in taken[:len(left)]]
    prev = -1
    for ct, _ in taken:
        # Ripe at ``ct + latency``, at the head once the beat before it left: it leaves
        # in the first cycle from then on where ``o.ready`` is high.
        start = max(ct + latency, prev + 1)
        first = next((c for c in range(start, len(seen)) if ready[c]), None)
        if first is None:
            break
        assert left.pop(0)[0] == first
        prev = first
    assert not left
    held = 0
    for t, x, i_ready in seen:
        assert i_ready == (held < latency + ELASTIC_MARGIN)
        held += (t is not None) - (x is not None)


@pytest.mark.parametrize("latency", [1, 2, 5, CHAIN_MAX + 1, 40])
@pytest.mark.parametrize("ready", [1.0, 0.7, 0.3])
def test_elastic_delay_matches_twin(latency, ready):
    """Random offers (90 %) and random output ``ready``: what is taken and what leaves,
    cycle by cycle, and ``i.ready`` equal the twin's; the contract holds."""
    stim = _stimulus(latency * 31 + int(ready * 10), 4 * latency + 300, 0.9, ready)
    got = _run_rtl(latency, stim)
    assert got == _run_model(latency, stim)
    assert sum(x is not None for _, x, _ in got) > 50
    if ready < 1:
        assert not all(r for _, _, r in got), "the input never stalled: tests nothing"
    _check_contract(latency, got, [r for _, _, r in stim])


@pytest.mark.parametrize("latency", [1, 3, CHAIN_MAX + 1, 64])
def test_always_ready_is_a_delay_line(latency):
    """With ``o.ready`` always high, every offered beat is taken at once and leaves
    exactly ``latency`` cycles later: the timing of a DelayLine of ``latency``."""
    stim = _stimulus(latency, 2 * latency + 200, 0.8, 1.0)
    got = _run_rtl(latency, stim)
    offered = [(c, p) for c, (v, p, _) in enumerate(stim) if v]
    assert [(c, t) for c, (t, _, _) in enumerate(got) if t is not None] == offered
    want = [(c + latency, p) for c, p in offered if c + latency < len(stim)]
    assert [(c, x) for c, (_, x, _) in enumerate(got) if x is not None] == want


@pytest.mark.parametrize("bad", [0, MAX_DELAY + 1, "3", True])
def test_bad_latency_is_named(bad):
    with pytest.raises(ValueError, match="elastic delay"):
        ElasticDelay(BITS, bad)
    with pytest.raises(ValueError, match="elastic delay"):
        ElasticDelayModel(bad)


@pytest.mark.slow_variants("verilator-*", reason=(
    "Icarus runs both latencies on the same tops (each a Verilator build of its own); the "
    "delay's twin comparisons run in the Amaranth simulator"))
@pytest.mark.parametrize("latency,ready", [(3, 60), (40, 30)])
def test_elastic_delay_cosim(sim, latency, ready, test_id):
    """The exported Verilog on Icarus and Verilator: random offers and output stalls,
    every taken and leaving beat and ``i.ready`` equal the twin's, cycle by cycle."""
    run_cosim(ElasticDelay(BITS, latency), name=f"elastic_delay_{latency}",
              test_module="tb.cocotb_elastic_delay", sim=sim, test_id=test_id,
              params=dict(latency=latency, bits=BITS, seed=latency + ready, cycles=1500,
                          offer=70, ready=ready))
