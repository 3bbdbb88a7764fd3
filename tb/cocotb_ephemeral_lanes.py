"""cocotb test of :class:`rtl.tops.ephemeral_lanes_top.EphemeralLanesTop` against the
sender's twin, lane by lane.

The posted messages (:func:`tb.cocotb_ephemeral_sender.posted`'s destinations split among
the lanes by :func:`tb.ephemeral.point.lane_shares`, each lane's "last for now" bits from
its own messages, as the model's point computes them) go into each lane's player before
reset; the simulator runs until every lane has sent its messages and then until the
longest of the lanes' twin flows ended (plus a margin). Each lane's sends, CLOSEs,
counters, ``used_max`` and ACKs left are compared with its own twin
(:func:`tb.ephemeral_sender.model_events` from the lane's first send, as
:mod:`tb.cocotb_ephemeral_sender` compares its one). Writes ``ephemeral_lanes.json`` to
its run folder: per lane the RTL's sends, CLOSEs and counters, and the mismatches.
"""

import json
from pathlib import Path

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly

from analysis.ephemeral.flow import ack_requests
from analysis.load.traffic import qp_sequence
from rtl.ephemeral.sender import msg_layout, sent_layout
from rtl.tops.ephemeral_lanes_top import LANE_OUTS, lane_name
from spec.ephemeral import NODE_BITS
from tb.cocotb_ephemeral_sender import MARGIN, _fields
from tb.cosim import cosim_params
from tb.ephemeral.point import lane_shares
from tb.ephemeral_sender import model_events
from tb.harness import Harness
from tb.scoreboard import Scoreboard


def lane_posted(p):
    """The messages ``(dest, last)`` of each lane for the run's parameters."""
    dests = qp_sequence(p["popularity"], p["peers"], p["messages"], p["seed"])
    return [list(zip(mine, ack_requests(mine, p["lookahead"]), strict=True))
            for mine in lane_shares(dests, p["peers"], p["lanes"])]


@cocotb.test()
async def ephemeral_lanes_match_model(dut):
    p = cosim_params()
    lanes = lane_posted(p)
    knobs = {k: p[k] for k in ("entries", "idle", "ack_every", "ii", "completion",
                               "ack_slots")}
    mlay, slay = msg_layout(NODE_BITS), sent_layout(p["entries"])
    harness = Harness(dut)
    for j, msgs in enumerate(lanes):
        harness.load_player(lane_name(j, "msgs"),
                            [mlay.const({"dest": d, "last": last}).as_value().value
                             for d, last in msgs])
        harness.arm_recorder(lane_name(j, "sent"), len(msgs))
        harness.arm_recorder(lane_name(j, "closed"), len(msgs))
    for name in ("idle", "ack_every", "ii", "completion"):
        harness.set(name, p[name])
    await harness.reset()
    # The twins first: how long each lane's flow runs after its last send.
    after, longest = 0, 0
    for msgs in lanes:
        sends, _, model = model_events(msgs, knobs)
        if sends:
            after = max(after, model.t - sends[-1][0])
            longest = max(longest, sends[-1][0])
    busy = [lane_name(j, "sent__done") for j, msgs in enumerate(lanes) if msgs]
    now = await harness.wait_done(busy, timeout_cycles=50 * longest + 100_000)
    await ClockCycles(dut.clk, after + MARGIN)
    await ReadOnly()
    ends = [{n: int(harness.port(lane_name(j, n)).value) for n in LANE_OUTS}
            for j in range(len(lanes))]
    await harness.snapshot(recorders=[lane_name(j, n) for j in range(len(lanes))
                                      for n in ("sent", "closed")])
    sb, out = Scoreboard(dut._log), []
    for j, msgs in enumerate(lanes):
        items, stamps = harness.recorded(lane_name(j, "sent"))
        start = stamps[0] if stamps else 0
        got_s = []
        for item, stamp in zip(items, stamps, strict=True):
            f = _fields(slay, item)
            got_s.append((stamp - start, f["entry"], bool(f["asked"]), bool(f["opened"])))
        keys, cstamps = harness.recorded(lane_name(j, "closed"))
        got_c = [(c - start, k) for k, c in zip(keys, cstamps, strict=True)]
        # The lane's twin again, with the pool's clock as the RTL's at its first send.
        sends, closes, model = model_events(msgs, knobs, now=start)
        want_end = dict(model.pool.count, used=model.pool.used,
                        used_max=model.pool.used_max, acks_pending=len(model.acks))
        before = len(sb.mismatches)
        sb.compare(f"lane {j} sends (cycle, entry, asked, opened)", got_s, sends, fmt=str)
        sb.compare(f"lane {j} CLOSEs (cycle, key)", got_c, closes, fmt=str)
        sb.compare(f"lane {j} counters, used, used_max, ACKs left", [ends[j]], [want_end],
                   fmt=str)
        out.append({"sends": got_s, "closes": got_c, "counters": ends[j],
                    "mismatches": len(sb.mismatches) - before})
    Path("ephemeral_lanes.json").write_text(json.dumps(
        {"lanes": out, "mismatches": len(sb.mismatches), "done_at": now}))
    sb.check()
