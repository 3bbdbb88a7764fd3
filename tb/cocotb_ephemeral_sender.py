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
from rtl.ephemeral.sender import msg_layout, sent_layout
from spec.ephemeral import NODE_BITS, POOL_COUNTERS
from tb.cosim import cosim_params
from tb.ephemeral_sender import model_events
from tb.harness import Harness
from tb.scoreboard import Scoreboard

#: Cycles run after the twin's flow ended (a later RTL event shows as a mismatch).
MARGIN = 64


def posted(p):
    """The messages ``(dest, last)`` of the run's parameters."""
    dests = qp_sequence(p["popularity"], p["peers"], p["messages"], p["seed"])
    return list(zip(dests, ack_requests(dests, p["lookahead"]), strict=True))


def _fields(layout, value):
    """The fields of a flat ``value`` of ``layout`` as integers."""
    return {name: (value >> f.offset) & ((1 << f.width) - 1) for name, f in layout}


@cocotb.test()
async def ephemeral_sender_matches_model(dut):
    p = cosim_params()
    msgs = posted(p)
    knobs = {k: p[k] for k in ("entries", "idle", "ack_every", "ii", "completion",
                               "ack_slots")}
    mlay, slay = msg_layout(NODE_BITS), sent_layout(p["entries"])
    harness = Harness(dut)
    harness.load_player("msgs", [mlay.const({"dest": d, "last": last}).as_value().value
                                 for d, last in msgs])
    harness.arm_recorder("sent", len(msgs))
    harness.arm_recorder("closed", len(msgs))
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
    items, stamps = harness.recorded("sent")
    start = stamps[0] if stamps else 0
    got_s = []
    for item, stamp in zip(items, stamps, strict=True):
        f = _fields(slay, item)
        got_s.append((stamp - start, f["entry"], bool(f["asked"]), bool(f["opened"])))
    keys, cstamps = harness.recorded("closed")
    got_c = [(c - start, k) for k, c in zip(keys, cstamps, strict=True)]
    # The twin again, with the pool's clock as the RTL's at the first send.
    sends, closes, model = model_events(msgs, knobs, now=start)
    want_end = dict(model.pool.count, used=model.pool.used, used_max=model.pool.used_max,
                    acks_pending=len(model.acks))
    sb = Scoreboard(dut._log)
    sb.compare("sends (cycle, entry, asked, opened)", got_s, sends, fmt=str)
    sb.compare("CLOSEs (cycle, key)", got_c, closes, fmt=str)
    sb.compare("counters, used, used_max, ACKs left", [end], [want_end], fmt=str)
    mismatches = len(sb.mismatches)
    Path("ephemeral_sender.json").write_text(json.dumps(
        {"sends": got_s, "closes": got_c, "counters": end, "mismatches": mismatches,
         "done_at": now}))
    sb.check()
