"""cocotb soak of the ephemeral receiver on EphemeralReceiverTop: chunks of genuine traffic
(go-back-N senders through a lossy path, closed loop on the receiver's twin,
:func:`analysis.scenarios.soak_ephemeral.soak_chunk`) played in at the cycles the twin saw
them arrive.

Each chunk is a fresh load of the player and a reset of the same simulation, run until
every sender has closed and the receiver's contexts have closed on idle. Checked:

* RTL = twin: every outcome, delivery, ACK and idle close with its cycle, the counters,
  ``used`` and ``used_max`` (the senders reacted to the twin's ACKs, so the RTL must
  reproduce the twin's outcomes exactly for the traffic to be the one it would have seen);
* without the model: the RTL's counters equal its outcomes' tally and sum to the packets
  in, no (source, context incarnation, PSN) delivered twice, each delivery the packet of
  its cycle (:func:`tb.ephemeral_receiver.invariant_errors`); every message delivered by
  the RTL exactly once, none lost, every sender acknowledged and closed, no hang
  (:func:`analysis.scenarios.soak_ephemeral.soak_errors` on the RTL's deliveries).

Parameters (``COSIM_PARAMS``): ``seed``, ``chunks`` (``[[index, messages], ...]``),
``knobs`` (:data:`analysis.scenarios.soak_ephemeral.SOAK_DEFAULTS`' keys, ``entries`` the
top's), ``depth`` (the top's player and recorders), ``out`` (one JSON line per chunk),
``token`` (written in each line), ``break_chunk`` (a test hook: that chunk's RTL gets a
32nd of the twin's idle time, so that chunk must show mismatches). The test fails if any
chunk fails.
"""

import json
import time

import cocotb
from cocotb.triggers import ClockCycles

from analysis.scenarios.soak_ephemeral import soak_chunk, soak_errors
from spec.ephemeral import RECV_OUTCOMES
from tb.cosim import cosim_params
from tb.ephemeral_receiver import invariant_errors
from tb.ephemeral_receiver_bench import compare_with_twin, run_stream
from tb.harness import Harness
from tb.scoreboard import Scoreboard

#: The no-hang budget beyond the last packet's release cycle: the player ends a cycle
#: after it (one packet a cycle, never stalled); a margin chosen, not measured.
BUDGET_CYCLES = 1000


@cocotb.test()
async def ephemeral_soak(dut):
    p = cosim_params()
    knobs, depth = p["knobs"], p["depth"]
    entries = knobs["entries"]
    h = Harness(dut)
    failures = 0
    for index, messages in p["chunks"]:
        t0 = time.perf_counter()
        c = soak_chunk(p["seed"], index, messages, **knobs)
        pkts, release, fig = c["pkts"], c["release"], c["figures"]
        record = dict(fig, chunk=index, messages=messages, sent=fig["messages"],
                      token=p.get("token"), by_outcome=dict(c["twin"].count),
                      compared=False, mismatches=0, violations=[])
        if len(pkts) > depth:
            record["violations"] = [f"{len(pkts)} packets, more than the top's {depth}"]
            failures += 1
            _write(p, record)
            continue
        # The test hook: the RTL of chunk ``break_chunk`` closes on a 32 times shorter idle.
        idle = max(knobs["idle"] // (32 if index == p.get("break_chunk") else 1), 1)
        run = await run_stream(dut, h, pkts, release, entries, idle, c["end"], BUDGET_CYCLES)
        hang, counters, stop = run.hang, run.counters, run.stop
        outs, delivers, acks, closes = run.outs, run.delivers, run.acks, run.closes
        sb = Scoreboard(dut._log)
        compare_with_twin(sb, run, release, c["events"], c["twin"])
        by_outcome = {o: counters[o] for o in RECV_OUTCOMES}
        rtl = dict(c, events=(outs, delivers, acks, closes))
        violations = (invariant_errors(pkts, outs, delivers, by_outcome)
                      + soak_errors(rtl))
        if hang:
            violations.append(f"hang: {hang}")
        lost = len({(s.src, m) for s in c["senders"] for m in s.messages}
                   - {(d[2], d[3]) for d in delivers})
        record.update(compared=True, mismatches=len(sb.mismatches), violations=violations,
                      first_mismatches=sb.mismatches[:8], by_outcome=by_outcome,
                      lost=lost + messages - fig["messages"], idle_closes=len(closes),
                      duplicates_delivered=len(delivers) - len({(d[2], d[3])
                                                                for d in delivers}),
                      hang=int(bool(hang) or bool(fig["hang"])), cycles=stop,
                      seconds=round(time.perf_counter() - t0, 2))
        for line in violations + sb.mismatches[:8]:
            dut._log.error("chunk %d: %s", index, line)
        failures += int(bool(violations or sb.mismatches))
        _write(p, record)
        await ClockCycles(dut.clk, 1)          # out of the snapshot's read-only phase
    assert p["chunks"], "no chunk to run"
    assert failures == 0, f"{failures} of {len(p['chunks'])} chunks failed (see the log)"


def _write(p, record):
    if p.get("out"):
        with open(p["out"], "a") as f:
            f.write(json.dumps(record) + "\n")
