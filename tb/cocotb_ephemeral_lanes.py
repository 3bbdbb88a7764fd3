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

import functools
import json
from pathlib import Path

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly

from analysis.ephemeral.flow import ack_requests
from analysis.load.traffic import qp_sequence
from rtl.tops.ephemeral_lanes_top import LANE_OUTS, lane_name
from tb.cocotb_ephemeral_sender import MARGIN
from tb.cosim import cosim_params
from tb.ephemeral.point import lane_shares
from tb.ephemeral_sender import KNOBS, compare_sender, load_sender, model_events
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
    knobs = {k: p[k] for k in KNOBS}
    names = [functools.partial(lane_name, j) for j in range(len(lanes))]
    harness = Harness(dut)
    for name, msgs in zip(names, lanes, strict=True):
        load_sender(harness, msgs, name)
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
    busy = [name("sent__done") for name, msgs in zip(names, lanes, strict=True) if msgs]
    now = await harness.wait_done(busy, timeout_cycles=50 * longest + 100_000)
    await ClockCycles(dut.clk, after + MARGIN)
    await ReadOnly()
    ends = [{n: int(harness.port(name(n)).value) for n in LANE_OUTS} for name in names]
    await harness.snapshot(recorders=[name(n) for name in names for n in ("sent", "closed")])
    sb = Scoreboard(dut._log)
    out = [compare_sender(harness, sb, msgs, knobs, end, name, f"lane {j} ")
           for j, (name, msgs, end) in enumerate(zip(names, lanes, ends, strict=True))]
    Path("ephemeral_lanes.json").write_text(json.dumps(
        {"lanes": out, "mismatches": len(sb.mismatches), "done_at": now}))
    sb.check()
