"""cocotb test of :class:`rtl.tops.ephemeral_sender_top.EphemeralSenderTop` against the
sender's twin.

The posted messages (:func:`analysis.load.traffic.qp_sequence` destinations with their
"last for now" bits, :func:`analysis.ephemeral.flow.ack_requests`) go into the player
before reset; the simulator runs freely until every message is sent and then until the
twin's flow ended (plus a margin); the sends and CLOSEs come out of the recorders with
their cycles. Compared with :class:`pymodel.ephemeral.sender.SenderModel` on the same
messages offered back to back from the first send's cycle: every send (cycle, entry,
asked, opened), every CLOSE (cycle, key), the pool's counters, ``used_max`` and the
ACKs left. Writes ``ephemeral_sender.json`` to its run folder: the RTL's sends and
CLOSEs (for the point's figures) and the mismatches.
"""

import json
from pathlib import Path

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly

from analysis.ephemeral.flow import ack_requests
from analysis.load.traffic import qp_sequence
from spec.ephemeral import POOL_COUNTERS
from tb.cosim import cosim_params
from tb.ephemeral_sender import KNOBS, compare_sender, load_sender, model_events
from tb.harness import Harness
from tb.scoreboard import Scoreboard

#: Cycles run after the twin's flow ended (a later RTL event shows as a mismatch).
MARGIN = 64


def posted(p):
    """The messages ``(dest, last)`` of the run's parameters."""
    dests = qp_sequence(p["popularity"], p["peers"], p["messages"], p["seed"])
    return list(zip(dests, ack_requests(dests, p["lookahead"]), strict=True))


@cocotb.test()
async def ephemeral_sender_matches_model(dut):
    p = cosim_params()
    msgs = posted(p)
    knobs = {k: p[k] for k in KNOBS}
    harness = Harness(dut)
    load_sender(harness, msgs)
    for name in ("idle", "ack_every", "ii", "completion"):
        harness.set(name, p[name])
    await harness.reset()
    # The twin first: how long the flow runs after its last send.
    sends, closes, model = model_events(msgs, knobs)
    tail = sends[-1][0]
    now = await harness.wait_done(["sent__done"], timeout_cycles=50 * tail + 100_000)
    await ClockCycles(dut.clk, model.t - tail + MARGIN)
    await ReadOnly()
    end = {name: int(getattr(dut, name).value)
           for name in POOL_COUNTERS + ("used", "used_max", "acks_pending")}
    await harness.snapshot(recorders=("sent", "closed"))
    sb = Scoreboard(dut._log)
    res = compare_sender(harness, sb, msgs, knobs, end)
    Path("ephemeral_sender.json").write_text(json.dumps(dict(res, done_at=now)))
    sb.check()
