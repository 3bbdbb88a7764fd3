"""cocotb test of NicTop with end-to-end completion: RTL = model, and each scenario's own
oracle (independent of the model).

Scenarios (``scenario``): ``pair``, ``all_to_all`` and ``windows`` of
:func:`analysis.scenarios.nic.build_scenario`; ``dropped`` (node 0 stores 24 frames to
node 1, whose window for source 0 leaves 6 of them outside: the sender learns of
exactly those 6); ``lost_first`` / ``lost_last`` (node 0 stores 40 frames to node 1;
the first / the last completion is damaged on node 0's downlink: the first is
recovered by the next cumulative one, the last is reported by timeouts); ``forge``
(node 3 is configured with node 0's id and stores to node 1, node 0 sends 2 stores to
node 1: the completions that node 1 returns to id 0 count more than node 0 sent, so
node 0 drops and counts every one; node 2's stores to node 1 complete as usual);
``ack_req`` (node 0 stores one 64-byte store with ``ack_req`` to node 1, node 2 the
same store without it to node 3, on paths of the same timing: the flagged one completes
exactly ``flush_idle`` cycles earlier, the idle flush being what the other waits for);
``ack_req_stream`` (node 0 stores 40 frames back to back to node 1, the issuer's rule
flags the last; node 2 forges the flag on every one of its 40 frames to node 3: node 1
still coalesces, 1 completion per 16 frames and the tail's at once, 3 in all; node 3
counts 40 flags and completes every frame).
``stall_rate``: the command players' seeded stall pattern (as in :mod:`tb.nic.cocotb_nic`).
``attachment`` (default ``integrated``): with ``pcie`` (a 64-byte top) each store is the
host's posted write into its sender and each received frame a posted DMA write
(:class:`rtl.tops.nic_top.NicTop`); the scenarios and their oracles are the same.

Compared cycle for cycle with :class:`pymodel.nic.system.NicSystemModel`: every uplink
beat (completion frames included), command accept, memory write, credit, receive
counter and memory word (:meth:`tb.nic.testbench.NicTestbench.compare`), and every
completion that reached each tracker (recorder ``cp<p>``), the completion counters
and the per-destination ``outstanding``/``completed``/``dropped``/``timeouts`` ports.
"""

import json
from pathlib import Path

import cocotb

from analysis.scenarios.nic import (
    build_scenario,
    mark_last_queued,
    table_writes,
    window_writes,
)
from pymodel.nic.frames import build_completion
from pymodel.nic.system import NicSystemModel, Store
from spec.formats.nic import completion_beats
from tb.cosim import cosim_params
from tb.nic.e2e_check import (
    arm_completions,
    compare_completions,
    read_completions,
    store_completions,
)
from tb.nic.testbench import NicTestbench
from tb.scoreboard import Scoreboard

#: Frames of the ``lost_*`` and ``dropped`` scenarios (64-byte stores: one frame each).
LOST_FRAMES, DROPPED_FRAMES, DROPPED_OUTSIDE = 40, 24, 6


def _stores(p):
    """``(stores, node_ids, faults, windows)`` of the scenario, and its intent: what the
    tracker ports must read at the end, independently of the model (``None`` where the
    scenario does not say)."""
    w, nodes, kind = p["width"], p["nodes"], p["scenario"]
    ids = list(range(nodes))
    payload = lambda k: bytes((k * 7 + i) & 0xFF for i in range(64))  # noqa: E731
    if kind in ("pair", "all_to_all", "windows"):
        stores, ids, faults = build_scenario(
            kind, nodes=nodes, width=w, window=p["mem_words"] * w,
            max_payload=p["max_payload"], seed=p["seed"], count=6, msg_bytes=128,
            messages=20)
        wins = window_writes(kind, nodes=nodes, mem_words=p["mem_words"], width=w)
        return stores, ids, faults, wins
    if kind == "dropped":
        # Source 0 may write words [0, 18 * 64 / w) of node 1: stores 18 .. 23 fall outside.
        inside = (DROPPED_FRAMES - DROPPED_OUTSIDE) * 64 // w
        stores = {0: [Store(1, 64 * k, payload(k)) for k in range(DROPPED_FRAMES)]}
        return stores, ids, {}, {1: [(0, 0, inside)]}
    if kind in ("lost_first", "lost_last"):
        stores = {0: [Store(1, 64 * k, payload(k)) for k in range(LOST_FRAMES)]}
        beats = completion_beats(w, p["framing"])
        # Node 0's downlink carries only node 1's completions: 16, 32 and the flush at 40.
        lost = 0 if kind == "lost_first" else 2
        return stores, ids, {0: [lost * beats]}, {}
    if kind == "ack_req":
        stores = {0: [Store(1, 0, payload(0), ack_req=True)], 2: [Store(3, 0, payload(0))]}
        return stores, ids, {}, {}
    if kind == "ack_req_stream":
        stores = mark_last_queued({0: [Store(1, 64 * k, payload(k)) for k in range(40)]})
        stores[2] = [Store(3, 64 * k, payload(k), ack_req=True) for k in range(40)]
        return stores, ids, {}, {}
    if kind == "forge":
        ids = [0, 1, 2, 0]
        stores = {0: [Store(1, 64 * k, payload(k)) for k in range(2)],
                  3: [Store(1, 64 * (4 + k), payload(k)) for k in range(18)],
                  2: [Store(1, 64 * (40 + k), payload(k)) for k in range(20)]}
        return stores, ids, {}, {}
    raise ValueError(f"scenario {kind!r}")


def _check_intent(sb, tb, p, stores, ids, ports, counters):
    """The scenario's own oracle, from the stores alone (and the RTL's receive counters)."""
    kind, nodes = p["scenario"], p["nodes"]
    sent = {q: {} for q in range(nodes)}
    for q, ss in stores.items():
        for s in ss:
            n = len(s.segments(p["width"], p["max_payload"]))
            sent[q][s.dst] = sent[q].get(s.dst, 0) + n
    if kind in ("pair", "all_to_all", "windows", "dropped", "lost_first", "ack_req",
                "ack_req_stream"):
        # Every frame completed, nothing outstanding, no forged completion, no timeout.
        for q in range(nodes):
            for d in range(nodes):
                sb.equal(f"intent completed{q}_{d}", ports[q]["completed"][d],
                         sent[q].get(d, 0) & 0xFFFF)
                sb.equal(f"intent outstanding{q}_{d}", ports[q]["outstanding"][d], 0)
                sb.equal(f"intent timeouts{q}_{d}", ports[q]["timeouts"][d], 0)
            sb.equal(f"intent cpl_bad{q}", counters[q]["cpl_bad"], 0)
        # Every store dropped at a receiver's address or window check was reported.
        dropped = sum(ports[q]["dropped"][d] for q in range(nodes) for d in range(nodes))
        at_rx = sum(tb.counters(d)["drop_window"] + tb.counters(d)["drop_addr"]
                    for d in range(nodes))
        sb.equal("intent drops reported = drops at the receivers", dropped, at_rx)
    if kind == "dropped":
        sb.equal("intent dropped0_1", ports[0]["dropped"][1], DROPPED_OUTSIDE)
    if kind == "ack_req":
        sb.equal("intent ack_req: node 1 saw one flag", counters[1]["ack_req_seen"], 1)
        sb.equal("intent ack_req: node 3 saw none", counters[3]["ack_req_seen"], 0)
    if kind == "ack_req_stream":
        sb.equal("intent ack_req_stream: node 1 saw one flag", counters[1]["ack_req_seen"], 1)
        sb.equal("intent ack_req_stream: 1 per 16 and the tail", counters[1]["cpl_sent"],
                 40 // p["coalesce"] + 1)
        sb.equal("intent ack_req_stream: node 3 counted every forged flag",
                 counters[3]["ack_req_seen"], 40)
        sb.equal("intent ack_req_stream: the forger got more completions",
                 counters[3]["cpl_sent"] > 40 // p["coalesce"] + 1, True)
    if kind == "windows":
        sb.equal("intent windows scenario drops stores", dropped > 0, True)
    if kind == "lost_first":
        sb.equal("intent lost: one completion failed FCS at node 0",
                 tb.counters(0)["drop_fcs"], 1)
        sb.equal("intent lost: the others accepted", counters[0]["cpl_ok"],
                 counters[1]["cpl_sent"] - 1)
    if kind == "lost_last":
        # The flush (count 40) is lost: the sender stays at 32 and times out.
        sb.equal("intent lost_last completed0_1", ports[0]["completed"][1], 32)
        sb.equal("intent lost_last outstanding0_1", ports[0]["outstanding"][1], 8)
        sb.equal("intent lost_last timed out", ports[0]["timeouts"][1] >= 1, True)
    if kind == "forge":
        sb.equal("intent forge: node 0 accepted none", counters[0]["cpl_ok"], 0)
        sb.equal("intent forge: node 0 dropped some", counters[0]["cpl_bad"] >= 1, True)
        sb.equal("intent forge: node 0 completed nothing", ports[0]["completed"][1], 0)
        sb.equal("intent forge: node 1's completions went to ids 0 and 2",
                 counters[0]["cpl_bad"] + counters[2]["cpl_ok"], counters[1]["cpl_sent"])
        sb.equal("intent forge: node 2 completed its 20", ports[2]["completed"][1], 20)
        sb.equal("intent forge: node 2 nothing outstanding", ports[2]["outstanding"][1], 0)


@cocotb.test()
async def nic_e2e_matches_model(dut):
    p = cosim_params()
    w, nodes, fr = p["width"], p["nodes"], p["framing"]
    model = NicSystemModel(w, fr, nodes, p["link_latency"], p["mem_words"],
                           p["max_payload"], p["credits"], completion="e2e",
                           coalesce=p["coalesce"], flush_idle=p["flush_idle"],
                           timeout=p["timeout"],
                           attachment=p.get("attachment", "integrated"))
    stores, ids, faults, wins = _stores(p)
    if p.get("attachment") == "pcie":        # the host writes each store as posted writes
        stores = {q: [t for s in ss for t in s.host_writes()] for q, ss in stores.items()}
    tbl = table_writes(ids, nodes)
    stalls = {q: (101 + 7 * q, p.get("stall_rate", 0)) for q in range(nodes)}
    want = model.run(stores, ids, stalls, faults, table_writes=tbl, window_writes=wins,
                     until=p.get("extra_cycles", 0))
    tb = NicTestbench(dut, nodes, w, p["mem_words"])
    tb.load(stores, ids, stalls=stalls, faults=faults, table=tbl, windows=wins)
    tb.arm(want)
    arm_completions(tb, want)
    await tb.run(timeout_cycles=4 * want["cycles"] + 2000, until=want["cycles"] + 8)
    cp = await read_completions(tb)
    sb = Scoreboard(dut._log)
    tb.compare(sb, want)
    ports, counters = await compare_completions(sb, tb, want, cp)
    _check_intent(sb, tb, p, stores, ids, ports, counters)
    # Each store's end-to-end completion, from the RTL's completion stamps by the
    # tracker's contract, equals the model's.
    for q in range(nodes):
        frames = [(s.dst, len(s.segments(w, p["max_payload"]))) for s in stores.get(q, [])]
        sb.compare(f"store completions of node {q}",
                   store_completions(cp[q][0], cp[q][1], frames),
                   [st["completion"] for st in want["stores"] if st["src"] == q], fmt=str)
    if p["scenario"] == "ack_req":
        # Independent of the model: the two lone stores take paths of the same timing;
        # the flagged one's completion is chosen the cycle after its frame finishes, the
        # other's when its source has been idle for flush_idle cycles.
        done = {q: store_completions(cp[q][0], cp[q][1], [(s.dst, 1) for s in stores[q]])
                for q in (0, 2)}
        sb.equal("intent ack_req: the flagged store skips the idle flush",
                 done[2][0] - done[0][0], p["flush_idle"])
    # The completion frames on the wire are the frames the spec defines.
    for q in range(nodes):
        for _c, dst, status, count, dropped in want["e2e"][q]["sent"][:1]:
            raw = build_completion(fr, ids[q], dst, status, count, dropped)
            frames = [f.data for f in tb.links[q].frames()]
            sb.equal(f"tx{q} carries its first completion frame", raw in frames, True)
    Path("nic_e2e_results.json").write_text(json.dumps({
        "mismatches": len(sb.mismatches), "cycles": tb.end,
        "e2e": {q: {**counters[q], **ports[q]} for q in range(nodes)}}))
    sb.check()
    assert any(want["e2e"][q]["cp"][0] for q in range(nodes)), "no completion reached a sender"
