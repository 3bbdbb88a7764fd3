"""cocotb test of :class:`rtl.fabric.elastic_delay.ElasticDelay` against its twin.

A per-cycle coroutine offers random beats (a beat not taken is offered again until it
is) and drives a random ``o.ready``; every cycle's taken beat, leaving beat and
``i.ready`` are sampled after the logic settled and compared with
:class:`pymodel.fabric.elastic_delay.ElasticDelayModel` fed the same stimulus.
"""

import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from pymodel.fabric.elastic_delay import ElasticDelayModel
from tb.cosim import cosim_params
from tb.harness import Harness
from tb.scoreboard import Scoreboard


@cocotb.test()
async def elastic_delay_matches_model(dut):
    p = cosim_params()
    rng = random.Random(p["seed"])
    stim = [(rng.randrange(100) < p["offer"], rng.getrandbits(p["bits"]),
             rng.randrange(100) < p["ready"]) for _ in range(p["cycles"])]
    dut.i__valid.value = 0
    dut.i__payload.value = 0
    dut.o__ready.value = 0
    harness = Harness(dut)
    await harness.reset()
    got, held = [], None
    for valid, payload, ready in stim:
        if held is None and valid:
            held = payload
        dut.i__valid.value = int(held is not None)
        dut.i__payload.value = held or 0
        dut.o__ready.value = int(ready)
        await ReadOnly()
        i_ready = int(dut.i__ready.value)
        taken = held if held is not None and i_ready else None
        left = int(dut.o__payload.value) if int(dut.o__valid.value) and ready else None
        got.append((taken, left, i_ready))
        if taken is not None:
            held = None
        await RisingEdge(dut.clk)

    model = ElasticDelayModel(p["latency"])
    want, held = [], None
    for c, (valid, payload, ready) in enumerate(stim):
        if held is None and valid:
            held = payload
        i_ready = int(model.ready())
        taken = held if held is not None and i_ready else None
        want.append((taken, model.cycle(c, held, ready), i_ready))
        if taken is not None:
            held = None
    sb = Scoreboard(dut._log)
    sb.compare("taken, left, i.ready per cycle", got, want)
    sb.check()
    assert sum(x is not None for _, x, _ in got) > 100, "too few beats left"
    assert not all(r for _, _, r in got), "the input never stalled: tests nothing"
