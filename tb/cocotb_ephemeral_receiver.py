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
from cocotb.triggers import ClockCycles, ReadOnly

from pymodel.scenarios.fuzz_ephemeral import hostile
from rtl.ephemeral.receiver import ack_layout, deliver_layout, outcome_layout, pkt_layout
from spec.ephemeral import NODE_BITS, RECV_OUTCOMES
from tb.cosim import cosim_params
from tb.ephemeral_receiver import invariant_errors, model_events, run_end
from tb.harness import Harness
from tb.scoreboard import Scoreboard


def _fields(layout, value):
    """The fields of a flat ``value`` of ``layout`` as integers."""
    return {name: (value >> f.offset) & ((1 << f.width) - 1) for name, f in layout}


@cocotb.test()
async def ephemeral_receiver_matches_model(dut):
    p = cosim_params()
    entries, idle = p["entries"], p["idle"]
    pkts, release = hostile(p["seed"], p["packets"], p["sources"], idle)
    play = pkt_layout(NODE_BITS)
    harness = Harness(dut)
    fields = ("src", "psn", "open", "close", "off")
    harness.load_player("pkts", [play.const(dict(zip(fields, pk, strict=True))).as_value().value
                                 for pk in pkts], release=release)
    for name in ("outcome", "deliver", "ack", "expired"):
        harness.arm_recorder(name, len(pkts))
    harness.set("idle", idle)
    await harness.reset()
    now = await harness.wait_done(["pkts__done"], timeout_cycles=release[-1] + 1000)
    end = run_end(release, entries, idle)
    await ClockCycles(dut.clk, max(end - now, 0))
    await ReadOnly()
    counters = {name: int(getattr(dut, name).value)
                for name in RECV_OUTCOMES + ("used", "used_max")}
    stop = int(dut.now.value)
    await harness.snapshot(players=[("pkts", len(pkts))],
                           recorders=("outcome", "deliver", "ack", "expired"))
    played = harness.played_stamps("pkts", len(pkts))

    def recorded(name, layout, row):
        items, stamps = harness.recorded(name)
        return [row(t, _fields(layout, v) if layout is not None else v)
                for v, t in zip(items, stamps, strict=True)]

    outs = recorded("outcome", outcome_layout(entries),
                    lambda t, f: (t, RECV_OUTCOMES[f["outcome"]], f["entry"]))
    delivers = recorded("deliver", deliver_layout(entries, NODE_BITS),
                        lambda t, f: (t, f["entry"], f["src"], f["psn"]))
    acks = recorded("ack", ack_layout(NODE_BITS), lambda t, f: (t, f["src"], f["psn"]))
    closes = recorded("expired", None, lambda t, v: (t, v))

    want = model_events(pkts, played, entries, idle, end=stop)
    twin = want[-1]
    sb = Scoreboard(dut._log)
    sb.compare("packets played at their release cycles", played, release, fmt=str)
    sb.compare("outcomes (cycle, outcome, entry)", outs, want[0], fmt=str)
    sb.compare("deliveries (cycle, entry, src, psn)", delivers, want[1], fmt=str)
    sb.compare("ACKs (cycle, src, psn)", acks, want[2], fmt=str)
    sb.compare("idle closes (cycle, src)", closes, want[3], fmt=str)
    sb.compare("counters, used, used_max", [counters],
               [dict(twin.count, used=twin.pool.used, used_max=twin.pool.used_max)], fmt=str)
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
