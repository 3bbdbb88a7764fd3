"""cocotb test of RdmaTop: a verbs-built scenario, bulk loaded, run, compared with the model.

Everything is loaded before reset (host memories, MR table, doorbell and injection
players) and drained after the run (recorders, memories, counters): no Python runs per
cycle. Measurements go to ``params["out_json"]`` when given.
"""

import json

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly

from pymodel.packet import beats_to_frames, frame_to_beats, unpack_beat
from pymodel.rdma.engine import Config, simulate
from pymodel.rdma.fields import pack
from pymodel.rdma.metrics import summarize
from pymodel.scenarios.rdma import (
    bad_frames_scenario,
    fault_settings,
    overflow_scenario,
    writes_scenario,
)
from spec.fabric import COUNTERS as LINK_COUNTERS
from spec.fabric import FLAGS as LINK_FLAGS
from spec.formats.roce import CqeStatus
from spec.rdma import (
    DEFAULTS,
    DROP_REASONS,
    LINKS,
    REQUESTER_COUNTERS,
    RESPONDER_COUNTERS,
    SEQUENCE_COUNTERS,
    doorbell_layout,
)
from tb.cosim import cosim_params
from tb.harness import Harness, HarnessTimeout, dump_memory, load_image, load_memory
from tb.rdma.wirecheck import frame_problems
from tb.scoreboard import Scoreboard

#: Cycles the design keeps running after the last expected event, to catch extras.
SETTLE = 300


def _config(top, params=None):
    """The model's Config of a top (parameters) and a run (``faults_ab``/``faults_ba``
    link settings in ``params``)."""
    p = dict(DEFAULTS, **top)
    params = params or {}
    if params.get("ack_timeout"):
        p["timeout"] = params["ack_timeout"]
    return Config(**{k: p[k] for k in ("cache_entries", "depth", "mem_latency",
                                       "link_latency", "mr_entries", "timeout",
                                       "retry_limit")},
                  faults_ab=fault_settings(params.get("faults_ab")),
                  faults_ba=fault_settings(params.get("faults_ba")))


def _scenario(p, cfg):
    if p["kind"] == "writes":
        v = writes_scenario(cfg, p["messages"], p["sizes"], p["qps"],
                            pmtu_log2=p.get("pmtu_log2", 12), seed=p.get("seed", 1),
                            ring_every=p.get("ring_every", 1))
        return v, [], None
    if p["kind"] == "bad":
        return bad_frames_scenario(cfg, seed=p.get("seed", 2))
    if p["kind"] == "overflow":
        return overflow_scenario(cfg, seed=p.get("seed", 3))
    raise ValueError(f"unknown scenario kind {p['kind']!r}")


def _beats(frames_with_cycles):
    beats, stamps = [], []
    for cycles, frame in frames_with_cycles:
        beats += frame_to_beats(frame, 64)
        stamps += list(cycles)
    return beats, stamps


@cocotb.test()
async def rdma_matches_model(dut):
    p = cosim_params()
    cfg = _config(p["top"], p)
    v, inject, reasons = _scenario(p, cfg)
    db_stall = tuple(p.get("db_stall", (1, 0)))
    inj_stall = tuple(p.get("inject_stall", (1, 0)))
    model = simulate(cfg, v.mem_a, v.mem_b, v.mr_table, v.doorbells, db_stall, inject,
                     inj_stall)
    ab_beats, ab_stamps = _beats(model["wire_ab"])
    ba_beats, ba_stamps = _beats(model["wire_ba"])

    harness = Harness(dut)
    load_image(dut.mem_a.mem, v.mem_a)
    load_image(dut.mem_b.mem, v.mem_b)
    load_memory(dut.responder.mr_table, v.mr_table)
    db_items = [pack(doorbell_layout(), qpn=q, sq_tail=t) for q, t in v.doorbells]
    harness.load_player("db_writes", db_items, db_stall)
    inj_beats = [b for f in inject for b in frame_to_beats(f, 64)]
    harness.load_player("inject", inj_beats, inj_stall)
    harness.set("inject_select", 1 if inject else 0)
    for port in ("qpc_base_a", "qpc_base_b", "cq_base", "cq_log2"):
        harness.set(port, getattr(cfg, port))
    harness.set("ack_timeout", p.get("ack_timeout", 0))
    for link, settings in zip(LINKS, (cfg.faults_ab, cfg.faults_ba), strict=True):
        for name, value in settings.ports().items():
            harness.set(f"{link}_{name}", value)
    harness.arm_recorder("wire_ab", len(ab_beats))
    harness.arm_recorder("wire_ba", len(ba_beats))
    harness.arm_recorder("written", len(model["written"]))
    harness.arm_recorder("completed", len(model["completed"]))
    last = max([s[-1] for s in (ab_stamps, ba_stamps) if s] + [0])
    await harness.reset()
    sb = Scoreboard(dut._log)
    hang = False
    try:
        await harness.wait_done(["db_writes_done", "inject_done", "wire_ab_done",
                             "wire_ba_done", "written_done", "completed_done"],
                            timeout_cycles=last + 5000)
    except HarnessTimeout as exc:      # compare anyway: the scoreboard says what is missing
        sb.equal("recorders done", str(exc), "")
        hang = True
    await ClockCycles(dut.clk, SETTLE)
    await ReadOnly()

    got_ab, got_ab_at = harness.recorded("wire_ab")
    got_ba, got_ba_at = harness.recorded("wire_ba")
    sb.compare("A->B beats", got_ab, ab_beats)
    sb.compare("A->B beat cycles", got_ab_at, ab_stamps, fmt=str)
    sb.compare("B->A beats", got_ba, ba_beats)
    sb.compare("B->A beat cycles", got_ba_at, ba_stamps, fmt=str)
    written, written_at = harness.recorded("written")
    completed, completed_at = harness.recorded("completed")
    sb.compare("written (qpn, cycle)", list(zip(written, written_at, strict=True)),
               [(q, c) for c, q in model["written"]], fmt=str)
    sb.compare("completed (qpn, cycle)", list(zip(completed, completed_at, strict=True)),
               [(q, c) for c, q in model["completed"]], fmt=str)
    db_at = harness.played_stamps("db_writes", len(v.doorbells))
    sb.compare("doorbell accept cycles", db_at, model["doorbell_stamps"], fmt=str)
    req = {n: _value(getattr(dut, f"req_{n}")) for n in REQUESTER_COUNTERS}
    resp = {n: _value(getattr(dut, f"resp_{n}")) for n in RESPONDER_COUNTERS}
    for n in REQUESTER_COUNTERS:
        sb.equal(f"requester counter {n}", req[n], model["req"][n])
    for n in RESPONDER_COUNTERS:
        sb.equal(f"responder counter {n}", resp[n], model["resp"][n])
    links = {link: {n: _value(getattr(dut, f"{link}_{n}"))
                    for n in LINK_COUNTERS + LINK_FLAGS} for link in LINKS}
    for link in LINKS:
        for n in LINK_COUNTERS + LINK_FLAGS:
            sb.equal(f"link {link} {n}", links[link][n], model["links"][link][n])
    # What the scenario says it exercises must have happened (on the RTL's counters).
    seen = dict({f"req_{n}": v for n, v in req.items()},
                **{f"resp_{n}": v for n, v in resp.items()},
                **{f"{link}_{n}": v for link in LINKS for n, v in links[link].items()})
    for name, least in p.get("expect_min", {}).items():
        sb.equal(f"{name} >= {least}", isinstance(seen[name], int) and seen[name] >= least,
                 True)
    for name, value in p.get("expect", {}).items():
        sb.equal(name, seen[name], value)
    dumps = {"A": dump_memory(dut.mem_a.mem, cfg.depth),
             "B": dump_memory(dut.mem_b.mem, cfg.depth)}
    for node, words in (("A", model["mem_a"]), ("B", model["mem_b"])):
        name = f"host memory {node}"
        got = dumps[node]
        want = [words.get(a, 0) for a in range(cfg.depth)]
        bad = [a for a in range(cfg.depth) if got[a] != want[a]]
        sb.equal(f"{name}: words that differ (first 8)", bad[:8], [])

    frames_ab = beats_to_frames(got_ab, 64)
    frames_ba = beats_to_frames(got_ba, 64)
    if not inject:
        for k, frame in enumerate(frames_ab + frames_ba):
            sb.equal(f"independent check of frame {k}", frame_problems(frame), [])
    else:
        # Independent of the model: every injected frame is counted once, accepted or
        # under one reason.
        outcomes = ("frames_ok",) + DROP_REASONS + SEQUENCE_COUNTERS
        sb.equal("injected frames = accepted + dropped (responder counters)",
                 sum(resp[r] for r in outcomes if isinstance(resp[r], int)), len(inject))
    if reasons is not None:
        expect = {}
        for r in reasons:
            expect[r] = expect.get(r, 0) + 1
        for r, n in expect.items():
            sb.equal(f"frames counted as {r}", resp[r], n)
    cqes = v.poll_cq(dict(enumerate(dumps["A"])), len(v.posted))
    soak = {"lost": len(v.posted), "corrupted_bytes": 0}
    sb.equal("CQEs polled", len(cqes), len(v.posted))
    sb.equal("CQE wr_ids", [c["wr_id"] for c in cqes],
             [0x1000_0000 + k for k in range(len(cqes))] if p["kind"] == "writes" else [])
    if p["kind"] == "writes":
        # Independent of the model: every WRITE completed with the status the scenario
        # expects (SUCCESS unless it says otherwise), those completed with SUCCESS
        # landed once, nothing else did.
        status = CqeStatus[p.get("cqe_status", "SUCCESS")].value
        sb.equal("CQE statuses", [c["status"] for c in cqes], [status] * len(cqes))
        sb.equal("messages left in the window (model)", model["window_left"], 0)
        landed = {k for k, c in enumerate(cqes) if c["status"] == CqeStatus.SUCCESS.value}
        got_b = dumps["B"]
        for base, want in v.expected_mr_bytes(landed).items():
            nw = -(-len(want) // 64)
            have = b"".join(got_b[base // 64 + k].to_bytes(64, "little")
                            for k in range(nw))[:len(want)]
            bad = [k for k in range(len(want)) if have[k] != want[k]]
            soak["corrupted_bytes"] += len(bad)
            sb.equal(f"MR at {base:#x}: bytes that differ from the posted data (first 8)",
                     bad[:8], [])
        soak["lost"] = len(v.posted) - len(landed)
        sb.equal("payload words written (each message once)", resp["words"],
                 sum(-(-len(pl) // 64) for k, (_, pl) in enumerate(v.posted)
                     if k in landed))
    if p.get("clean_baseline") and model["completed"]:
        # The same scenario without faults: the cycles the faults cost.
        cfg0 = _config(p["top"], dict(p, faults_ab={}, faults_ba={}))
        v0, inject0, _ = _scenario(p, cfg0)
        base = simulate(cfg0, v0.mem_a, v0.mem_b, v0.mr_table, v0.doorbells, db_stall,
                        inject0, inj_stall)
        soak["recovery_cycles"] = model["completed"][-1][0] - base["completed"][-1][0]
    if p.get("out_json"):
        n = max(len(v.doorbells), 1)
        try:
            rtl = summarize(n, db_at, written_at, completed_at, frames_ab, frames_ba, req,
                            resp)
        except ValueError:           # the RTL missed events: the scoreboard says which
            rtl = None
        mdl = summarize(n, model["doorbell_stamps"], [c for c, _ in model["written"]],
                        [c for c, _ in model["completed"]], [f for _, f in model["wire_ab"]],
                        [f for _, f in model["wire_ba"]], model["req"], model["resp"])
        with open(p["out_json"], "w") as f:
            json.dump({"rtl": rtl, "model": mdl, "mismatches": len(sb.mismatches),
                       "cycles": int(dut.now.value), "counters": seen, "hang": hang,
                       "messages": len(v.posted), **soak,
                       "frames": [[s, fr.hex()] for s, fr in _stamped(
                           got_ab, got_ab_at, got_ba, got_ba_at)]},
                      f)
    if sb.mismatches:
        with open("mismatches.txt", "w") as f:
            f.write("\n".join(sb.mismatches) + "\n")
    sb.check()


def _value(handle):
    """A counter port as an int, or its text if it holds X/Z bits (a mismatch then)."""
    value = handle.value
    return int(value) if value.is_resolvable else str(value)


def _stamped(ab, ab_at, ba, ba_at):
    """(cycle of the first beat, frame) for every frame of both links, in time order."""
    out = []
    for beats, stamps in ((ab, ab_at), (ba, ba_at)):
        starts = [s for b, s in zip(beats, stamps, strict=True) if unpack_beat(64, b)[2]]
        out += list(zip(starts, beats_to_frames(beats, 64), strict=True))
    return sorted(out, key=lambda x: x[0])
