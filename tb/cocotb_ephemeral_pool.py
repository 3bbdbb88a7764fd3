"""cocotb test of :class:`rtl.ephemeral.pool.ContextPool` against its twin.

A per-cycle coroutine presents the seeded lookups (one not taken is presented again until
it is) and completions of :func:`tb.ephemeral_pool.stimulus`; every cycle's verdict,
entry and closed key are sampled after the logic settled, and the counters at the end;
all are compared with :class:`pymodel.ephemeral.pool.ContextPoolModel` on the same
stimulus, started at the RTL's ``now`` of the first cycle.
"""

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from spec.ephemeral import POOL_COUNTERS, Verdict
from tb.cosim import cosim_params
from tb.ephemeral_pool import Holder, model_trace, pack_req, stimulus
from tb.harness import Harness
from tb.scoreboard import Scoreboard


@cocotb.test()
async def context_pool_matches_model(dut):
    p = cosim_params()
    stim = stimulus(p["seed"], p["cycles"], p["entries"], p["keys"], p["offer"], p["open"],
                    p["done"])
    dut.idle.value = p["idle"]
    dut.req__valid.value = 0
    dut.req__payload.value = 0
    dut.done__valid.value = 0
    dut.done__payload.value = 0
    dut.drop__valid.value = 0
    dut.drop__payload.value = 0
    harness = Harness(dut)
    await harness.reset()
    hold, got, start = Holder(), [], None
    for offer, done in stim:
        req = hold.present(offer)
        dut.req__valid.value = int(req is not None)
        dut.req__payload.value = pack_req(req, p["key_bits"]) if req is not None else 0
        dut.done__valid.value = int(done is not None)
        dut.done__payload.value = done or 0
        await ReadOnly()
        if start is None:
            start = int(dut.now.value)
        verdict = entry = None
        if req is not None:
            verdict = int(dut.verdict.value)
            if verdict in (Verdict.HIT, Verdict.OPENED):
                entry = int(dut.entry.value)
        closed = int(dut.closed__payload.value) if int(dut.closed__valid.value) else None
        hold.taken(req is not None and int(dut.req__ready.value))
        got.append((req, verdict, entry, closed))
        await RisingEdge(dut.clk)
    await ReadOnly()
    end = {name: int(getattr(dut, name).value)
           for name in POOL_COUNTERS + ("used", "used_max")}

    want, model = model_trace(stim, p["entries"], p["idle"], start)
    sb = Scoreboard(dut._log)
    sb.compare("lookup, verdict, entry, closed key per cycle", got, want, fmt=str)
    sb.compare("counters", [end], [dict(model.count, used=model.used,
                                        used_max=model.used_max)], fmt=str)
    sb.check()
    assert model.count["opens"] > 10 and model.count["closes"] > 10, "too little traffic"
    assert model.count["full_waits"] > 0 and model.count["stale"] > 0, "a verdict unseen"
