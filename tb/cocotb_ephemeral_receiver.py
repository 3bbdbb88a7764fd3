"""cocotb test of :class:`rtl.tops.ephemeral_receiver_top.EphemeralReceiverTop` against
the receiver's twin.

A seeded hostile stream (:func:`tb.ephemeral_receiver.hostile`) goes into the timed player
before reset, each packet released at its arrival cycle; the simulator runs freely until
every packet is played and then until every context has closed on idle
(:func:`tb.ephemeral_receiver.run_end`); the outcomes, deliveries, ACKs and idle closes
come out of the recorders with their cycles. Compared with
:class:`pymodel.ephemeral.receiver.ReceiverTwin` on the packets at the cycles they were
played: every outcome (cycle, outcome, entry), delivery (cycle, entry, src, psn), ACK
(cycle, src, psn), idle close (cycle, src), the counters, ``used`` and ``used_max``;
the model-free invariants are checked on the RTL's events. Writes
``ephemeral_receiver.json`` to its run folder (the RTL's counters and the mismatches).
"""

import json
from pathlib import Path

import cocotb

from analysis.scenarios.fuzz_ephemeral import hostile
from spec.ephemeral import RECV_OUTCOMES
from tb.cosim import cosim_params
from tb.ephemeral_receiver import invariant_errors, model_events, run_end
from tb.ephemeral_receiver_bench import compare_with_twin, run_stream
from tb.harness import Harness
from tb.scoreboard import Scoreboard

#: The no-hang budget beyond the last release cycle (a packet a cycle, never stalled: the
#: player ends a cycle after it); a margin chosen, not measured.
BUDGET_CYCLES = 1000


@cocotb.test()
async def ephemeral_receiver_matches_model(dut):
    p = cosim_params()
    entries, idle = p["entries"], p["idle"]
    pkts, release = hostile(p["seed"], p["packets"], p["sources"], idle)
    run = await run_stream(dut, Harness(dut), pkts, release, entries, idle,
                           run_end(release, entries, idle), BUDGET_CYCLES)
    counters, outs, delivers, closes = run.counters, run.outs, run.delivers, run.closes
    want = model_events(pkts, run.played, entries, idle, end=run.stop)
    sb = Scoreboard(dut._log)
    compare_with_twin(sb, run, release, want, want[-1])
    sb.equal("player done within the budget (no hang)", run.hang, None)
    errors = invariant_errors(pkts, outs, delivers,
                              {o: counters[o] for o in RECV_OUTCOMES})
    for e in errors:
        dut._log.error("invariant: %s", e)
    mismatches = len(sb.mismatches) + len(errors)
    Path("ephemeral_receiver.json").write_text(json.dumps(
        {"counters": counters, "closes": len(closes), "mismatches": mismatches}))
    sb.check()
    assert not errors, errors
    assert all(counters[o] > 0 for o in RECV_OUTCOMES), f"an outcome unseen: {counters}"
