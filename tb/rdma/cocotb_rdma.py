"""cocotb test of RdmaTop: a verbs-built scenario, bulk loaded, run, compared with the model.

Everything is loaded before reset (host memories, MR table, doorbell and injection
players) and drained after the run (recorders, memories, counters) through
:class:`tb.rdma.testbench.RdmaTestbench`: no Python runs per cycle. Measurements go to
``params["out_json"]`` when given.
"""

import json

import cocotb

from pymodel.packet import beats_to_frames, unpack_beat
from pymodel.rdma.engine import Config, simulate
from pymodel.rdma.metrics import summarize
from pymodel.scenarios.rdma import (
    bad_frames_scenario,
    fault_settings,
    overflow_scenario,
    writes_scenario,
)
from spec.formats.roce import CqeStatus
from spec.rdma import DEFAULTS, DROP_REASONS, LINKS, SEQUENCE_COUNTERS
from tb.cosim import cosim_params
from tb.rdma.testbench import RdmaTestbench
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


@cocotb.test()
async def rdma_matches_model(dut):
    p = cosim_params()
    cfg = _config(p["top"], p)
    v, inject, reasons = _scenario(p, cfg)
    db_stall = tuple(p.get("db_stall", (1, 0)))
    inj_stall = tuple(p.get("inject_stall", (1, 0)))
    model = simulate(cfg, v.mem_a, v.mem_b, v.mr_table, v.doorbells, db_stall, inject,
                     inj_stall)

    tb = RdmaTestbench(dut, cfg.depth)
    tb.load(mem_a=v.mem_a, mem_b=v.mem_b, mr_table=v.mr_table, doorbells=v.doorbells,
            inject=inject, stall=db_stall, inject_stall=inj_stall,
            ports={port: getattr(cfg, port) for port in ("qpc_base_a", "qpc_base_b",
                                                          "cq_base", "cq_log2")},
            links=dict(zip(LINKS, (cfg.faults_ab, cfg.faults_ba), strict=True)),
            ack_timeout=p.get("ack_timeout", 0))
    tb.arm_for(model)
    last = max([c[-1] for c, _ in model["wire_ab"] + model["wire_ba"]] + [0])
    await tb.run(timeout_cycles=last + 5000, settle=SETTLE)
    sb = Scoreboard(dut._log)
    if tb.hang:              # compared anyway: the scoreboard says what is missing
        sb.equal("recorders done", tb.hang, "")
    hang = tb.hang is not None

    got = tb.compare(sb, model, v.doorbells)
    (got_ab, got_ab_at), (got_ba, got_ba_at) = got["ab"], got["ba"]
    req, resp, links = got["req"], got["resp"], got["links"]
    # What the scenario says it exercises must have happened (on the RTL's counters).
    seen = dict({f"req_{n}": v for n, v in req.items()},
                **{f"resp_{n}": v for n, v in resp.items()},
                **{f"{link}_{n}": v for link in LINKS for n, v in links[link].items()})
    for name, least in p.get("expect_min", {}).items():
        sb.equal(f"{name} >= {least}", isinstance(seen[name], int) and seen[name] >= least,
                 True)
    for name, value in p.get("expect", {}).items():
        sb.equal(name, seen[name], value)
    dumps = {"A": got["mem_a"], "B": got["mem_b"]}

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
            rtl = summarize(n, got["doorbells"], got["written"][1], got["completed"][1],
                            frames_ab, frames_ba, req, resp)
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


def _stamped(ab, ab_at, ba, ba_at):
    """(cycle of the first beat, frame) for every frame of both links, in time order."""
    out = []
    for beats, stamps in ((ab, ab_at), (ba, ba_at)):
        starts = [s for b, s in zip(beats, stamps, strict=True) if unpack_beat(64, b)[2]]
        out += list(zip(starts, beats_to_frames(beats, 64), strict=True))
    return sorted(out, key=lambda x: x[0])
