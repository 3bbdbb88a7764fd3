"""cocotb fuzz of the ephemeral receiver on EphemeralReceiverTop: chunks of hostile
packet streams with mutants.

Each chunk (:func:`analysis.scenarios.fuzz_ephemeral.fuzz_chunk`: genuine senders,
CLOSEs and lost ones, replays, gaps, forged opens, floods, mutants of ``src``, ``psn``,
``open``, ``close`` and ``off``, a sentinel source, an idle time of its own) is a fresh load of the
player and a reset of the same simulation; the run goes on until every context has
closed on idle. Checked twice:

* RTL = twin (:class:`pymodel.ephemeral.receiver.ReceiverTwin` on the packets at the
  cycles they were played): every outcome, delivery, ACK and idle close with its cycle,
  the counters, ``used`` and ``used_max``;
* without the model (:mod:`tb.ephemeral_receiver`): the counters equal the outcomes'
  tally and sum to the packets in; no (source, context incarnation, PSN) delivered twice;
  every delivery is the packet that arrived in its cycle; the sentinel's packets all
  delivered and acknowledged once, in order; the player done within a budget from the
  packets' release cycles (no hang).

Parameters (``COSIM_PARAMS``): ``seed``, ``chunks``, ``packets`` (per chunk, the sentinel's
included), ``top`` (EphemeralReceiverTop's ``entries`` and ``depth``), ``out`` (one JSON
line per chunk, the keys of :func:`tb.fuzz_checks.chunk_record`). The test fails if any
chunk has a mismatch, a violation or a hang.
"""

import time

import cocotb
from cocotb.triggers import ClockCycles

from analysis.scenarios.fuzz_ephemeral import SENTINEL, fuzz_chunk
from spec.ephemeral import RECV_OUTCOMES
from tb.cosim import cosim_params
from tb.ephemeral_receiver import invariant_errors, model_events, run_end, sentinel_errors
from tb.ephemeral_receiver_bench import compare_with_twin, run_stream
from tb.fuzz_checks import report_chunk
from tb.harness import Harness
from tb.scoreboard import Scoreboard

#: The no-hang budget beyond the last release cycle: the receiver takes a packet a cycle,
#: so the player ends a few cycles after it; a margin chosen, not measured.
BUDGET_CYCLES = 1000


def packet_kind(p):
    """A packet's kind for ``by_frame``: ``close``, ``open`` (data with the open flag) or
    ``data``."""
    return "close" if p[3] else "open" if p[2] else "data"


@cocotb.test()
async def ephemeral_fuzz(dut):
    p = cosim_params()
    entries = p["top"]["entries"]
    h = Harness(dut)
    failures = 0
    for k in p["chunks"]:
        t0 = time.perf_counter()
        c = fuzz_chunk(p["seed"], k, p["packets"])
        pkts, release, idle = c["pkts"], c["release"], c["idle"]
        run = await run_stream(dut, h, pkts, release, entries, idle,
                               run_end(release, entries, idle), BUDGET_CYCLES)
        hang, counters, stop = run.hang, run.counters, run.stop
        outs, delivers, acks, closes = run.outs, run.delivers, run.acks, run.closes
        want = model_events(pkts, run.played, entries, idle, end=stop)
        sb = Scoreboard(dut._log)
        compare_with_twin(sb, run, release, want, want[-1])
        by_outcome = {o: counters[o] for o in RECV_OUTCOMES}
        violations = (invariant_errors(pkts, outs, delivers, by_outcome)
                      + sentinel_errors(pkts, outs, delivers, acks, SENTINEL))
        frames = {}
        for pk in pkts:
            frames[packet_kind(pk)] = frames.get(packet_kind(pk), 0) + 1
        record = {
            "chunk": k, "frames": len(pkts), "injected": len(pkts), "cycles": stop,
            "model_cycles": stop, "by_outcome": by_outcome, "by_mutation": c["by_mutation"],
            "by_field": c["by_field"], "by_frame": frames,
            "by_effect": {"idle_closes": len(closes)},
            "idle": idle, "sources": c["sources"],
            "violations": violations, "hangs": int(hang is not None), "hang": hang,
            "mismatches": len(sb.mismatches), "first_mismatches": sb.mismatches[:8],
            "seconds": time.perf_counter() - t0}
        failures += report_chunk(dut, record, sb.mismatches, p.get("out"))
        await ClockCycles(dut.clk, 1)          # out of the snapshot's read-only phase
    assert p["chunks"], "no chunk to run"
    assert failures == 0, f"{failures} of {len(p['chunks'])} chunks failed (see the log)"
