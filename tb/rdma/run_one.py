"""One RdmaTop run in a cocotb simulation: a verbs-built scenario, bulk loaded, run,
compared with the golden model (:func:`run_one`).

Everything is loaded before reset (host memories, MR table, MMIO and injection players)
and drained after the run (recorders, memories, counters) through
:class:`tb.rdma.testbench.RdmaTestbench`: no Python runs per cycle. Measurements go to
``p["out_json"]`` when given: the metrics of the RTL's records and of the model's,
reduced by the same function (:func:`analysis.rdma.point.reduce_run`), with the
independent checks' figures (``lost``, ``corrupted_bytes``, the clean baseline's
``recovery_cycles``/``cqe_delay_cycles``, per operation with READs and atomics).

The plain test (:mod:`tb.rdma.cocotb_rdma`) makes one run per simulation; the RDMA soak
(:mod:`tb.soak.cocotb_rdma_soak`) makes many, one after the other, on one testbench.
"""

import json
import time

from analysis.load.rdma import load_per_message
from analysis.rdma.point import reduce_run
from pymodel.rdma.links import retry_counters
from spec.fabric import COUNTERS as LINK_COUNTERS
from spec.fabric import FLAGS as LINK_FLAGS
from spec.formats.roce import CqeStatus, OpCode
from spec.formats.scaleup import framing
from spec.rdma import DROP_REASONS, LINKS, SEQUENCE_COUNTERS
from tb.rdma import reads
from tb.rdma.intent import cqes_per_qp, intended_statuses, mr_lookup_check
from tb.rdma.phases import Phases
from tb.rdma.point_params import params_point
from tb.rdma.run_inputs import config, run_model, scenario, with_cq
from tb.rdma.testbench import RdmaTestbench, member_port, retry_counter_port, run_ports, value_of
from tb.rdma.wirecheck import scaleup_problems, wire_problems
from tb.scoreboard import Scoreboard

__all__ = ["run_one", "testbench_of", "SETTLE", "RETRY_LINK_PORTS"]

#: Cycles the design keeps running after the last expected event, to catch extras.
SETTLE = 300
#: With ``link_retry``: a reliable link's counters besides the plain link's
#: (:func:`pymodel.rdma.links.retry_counters`; ports: :func:`tb.rdma.testbench.retry_counter_port`).
RETRY_LINK_PORTS = tuple(n for n in retry_counters() if n not in LINK_COUNTERS + LINK_FLAGS)


def testbench_of(dut, cfg):
    """The :class:`RdmaTestbench` of the top ``dut`` whose model configuration is ``cfg``
    (its depth and build parameters: the same for every run of one top)."""
    return RdmaTestbench(dut, cfg.depth, cfg.link_retry, cfg.mr_in_host, cfg.read_words,
                         cfg.reads)


async def run_one(dut, p, tb=None):
    """Run ``p`` (the parameters of :mod:`tb.rdma.cocotb_rdma`, ``top`` included) on the
    top ``dut`` and compare it with the golden model; returns the scoreboard (every
    mismatch in it, none raised) after ``p["out_json"]`` is written.

    ``tb``: the testbench to run on (default: a new one, for the first run of a
    simulation). A testbench that has run before (its clock runs) is held in reset from
    the next rising clock edge while the run is loaded, the words the last run left in
    the host memories and the context caches' tags are cleared, and the run then starts
    from its reset as a first run does: its cycles, stamps and counters are those of a
    run alone in its simulation. The run ends in the ``ReadOnly`` phase half a cycle
    after its last settle cycle (:meth:`RdmaTestbench.run`); a next run on ``tb``
    leaves that phase at the next rising edge.

    An exception (the model's ``NoProgress``, a broken simulation) propagates; the
    scoreboard's mismatches do not."""
    phases = Phases()
    params_point(p["top"], p)       # the simulator side's check: the option named
    cfg, knobs = config(p["top"], p)
    v, inject, reasons = scenario(p, cfg, knobs)
    cfg = with_cq(cfg, v)
    phases.mark("scenario")
    inj_stall = tuple(p.get("inject_stall", (1, 0)))
    model = run_model(cfg, v, inject, inj_stall, p.get("model_mmio_delay", 0),
                      p.get("model_limit", 1 << 26))
    phases.mark("model")
    items, release = v.mmio_items()

    tb = tb or testbench_of(dut, cfg)
    again = tb.harness.started
    if again:
        await tb.harness.hold_reset()
    ports = run_ports(cfg)
    tb.load(mem_a=v.mem_a, mem_b=v.mem_b, mr_table=v.mr_table, mmio=items, release=release,
            inject=inject, inject_stall=inj_stall, ports=ports,
            links=dict(zip(LINKS, (cfg.faults_ab, cfg.faults_ba), strict=True)), clear=again)
    if cfg.link_retry:                  # the reliable links' own settings
        for link, settings in zip(LINKS, (cfg.faults_ab, cfg.faults_ba), strict=True):
            for name, value in settings.retry_ports().items():
                tb.harness.set(member_port(f"{link}_settings", name), value)
    tb.arm_for(model)
    phases.mark("load")
    t0 = time.perf_counter()
    await tb.run(timeout_cycles=model["cycles"] + 5000, settle=SETTLE)
    phases.mark("run", t0 + tb.run_s)
    phases.mark("snapshot")
    dut._log.info("model %d cycles; simulator in %.2f s (memories to files: %.2f s)",
                  model["cycles"], tb.run_s, time.perf_counter() - t0 - tb.run_s)
    sb = Scoreboard(dut._log)
    if tb.hang:              # compared anyway: the scoreboard says what is missing
        sb.equal("recorders done", tb.hang, "")
    got = tb.compare(sb, model, len(items))
    phases.mark("compare")
    req, resp, links = got["req"], got["resp"], got["links"]
    if cfg.link_retry:                  # the reliable links' own counters
        for link in LINKS:
            for n in RETRY_LINK_PORTS:
                links[link][n] = value_of(getattr(dut, retry_counter_port(link, n)))
                sb.equal(f"link {link} {n}", links[link][n], model["links"][link][n])
    # What the scenario says it exercises must have happened (on the RTL's counters).
    seen = dict({f"req_{n}": x for n, x in req.items()},
                **{f"resp_{n}": x for n, x in resp.items()},
                **{f"{link}_{n}": x for link in LINKS for n, x in links[link].items()})
    bth_at = framing(cfg.header).outer     # behind Ethernet/IPv4/UDP (42) or scale-up (10)
    mr_lookup_check(sb, cfg, resp, [frame for _, frame in got["wire_ab"]], bth_at)
    for name, least in p.get("expect_min", {}).items():
        sb.equal(f"{name} >= {least}", isinstance(seen[name], int) and seen[name] >= least,
                 True)
    for name, value in p.get("expect", {}).items():
        sb.equal(name, seen[name], value)

    if p.get("resend_only_qps") is not None:
        # Independent of the model: a frame sent twice (same QP and PSN) on the A->B link
        # is a resend; only the listed QPs may have any.
        qpn_a = {q.qpn_b: q.qpn_a for q in v.qps.values()}
        seen_psn, resent = set(), set()
        for _, frame in got["wire_ab"]:
            key = (int.from_bytes(frame[bth_at + 5:bth_at + 8], "big"),
                   int.from_bytes(frame[bth_at + 9:bth_at + 12], "big"))
            if key in seen_psn:
                resent.add(qpn_a.get(key[0], key[0]))
            seen_psn.add(key)
        sb.equal("QPs that resent frames", sorted(resent),
                 sorted(set(p["resend_only_qps"]) & resent) or sorted(resent))
        sb.equal("QPs that resent frames are only the lossy ones",
                 sorted(resent - set(p["resend_only_qps"])), [])
        sb.equal("a lossy QP resent frames", bool(resent), True)
    if not inject:
        frames = [frame for _, frame in got["wire_ab"] + got["wire_ba"]]
        if cfg.header == "scaleup":
            checked = [(k, scaleup_problems(fr)) for k, fr in enumerate(frames)]
        else:
            checked = wire_problems(frames)
            if cfg.reads:       # every READ/atomic request started is a frame on the link
                reads.sender_checks(sb, req, frames[:len(got["wire_ab"])], bth_at)
        for k, problems in checked:
            sb.equal(f"independent check of frame {k}", problems, [])
    else:
        # Independent of the model: every injected frame is counted once, accepted or
        # under one reason.
        outcomes = ("frames_ok",) + DROP_REASONS + SEQUENCE_COUNTERS
        sb.equal("injected frames = accepted + dropped (responder counters)",
                 sum(resp[r] for r in outcomes if isinstance(resp[r], int)), len(inject))
    mixed = reads.kind_checks(p["kind"], sb, v, got, reasons, bth_at)
    if reasons is not None:
        expect = {}
        for r in reasons:
            expect[r] = expect.get(r, 0) + 1
        for r, n in expect.items():
            sb.equal(f"frames counted as {r}", resp[r], n)
    mem_a = dict(enumerate(got["mem_a"]))
    # The intended status of each WRITE, in posting order: the scenario's (from the IBTA
    # rules), else ``cqe_status`` (one name for all, or one per WRITE), else SUCCESS.
    status_of = intended_statuses(v.messages, getattr(v, "expect_status", None),
                                  p.get("cqe_status", "SUCCESS"))
    signalled = [m for k, m in enumerate(v.messages)
                 if m.signalled or status_of[k] != CqeStatus.SUCCESS.value]
    soak = mixed or {"lost": len(v.posted), "corrupted_bytes": 0}
    if mixed is None:                   # (a mixed run's CQEs: reads.mixed_checks)
        cqes = v.poll_cq(mem_a, len(signalled))
        sb.equal("CQEs polled", len(cqes), len(signalled))
    if p["kind"] in ("writes", "qp_error", "load"):
        # Independent of the model: every signalled (or failed) WRITE completed, per QP
        # in order (RC orders completions within a QP only, tb.rdma.intent), with the
        # status the scenario intends; those that completed with SUCCESS (and the
        # unsignalled ones before them on their QP) landed once, nothing else did.
        per_qp, want_qp = cqes_per_qp(v.messages, status_of, cqes)
        sb.equal("CQE (send-queue index, status) per QP, in order", per_qp, want_qp)
        if p.get("cq_order_differs"):
            # The scenario must exercise the rule: the CQ order is not the posting order.
            posted = [(m.qpn, m.sq_index) for m in signalled]
            sb.equal("CQ order differs from the posting order",
                     [(c["qpn"], c["sq_index"]) for c in cqes] != posted, True)
        # Independent of the model: WRITEs the scenario says never reach the wire
        # (flushed by a QP in ERR) have no frame (each WRITE has its own target).
        reth = (OpCode.RC_RDMA_WRITE_FIRST.value, OpCode.RC_RDMA_WRITE_ONLY.value)
        vas = {int.from_bytes(fr[bth_at + 12:bth_at + 20], "big") for _, fr in got["wire_ab"]
               if len(fr) > bth_at + 20 and fr[bth_at] in reth}
        for k in sorted(getattr(v, "no_frames", ())):
            sb.equal(f"no frame of WRITE {k}", v.posted[k][0] in vas, False)
        ok = {(c["qpn"], c["sq_index"]) for c in cqes
              if c["status"] == CqeStatus.SUCCESS.value}
        landed, pending = set(), {}
        for k, m in enumerate(v.messages):
            pending.setdefault(m.qpn, []).append(k)
            if m.signalled or status_of[k] != CqeStatus.SUCCESS.value:
                if (m.qpn, m.sq_index) in ok:
                    landed.update(pending[m.qpn])
                pending[m.qpn] = []
        got_b = got["mem_b"]
        for base, want in v.expected_mr_bytes(landed).items():
            nw = -(-len(want) // 64)
            have = b"".join(got_b[base // 64 + k].to_bytes(64, "little")
                            for k in range(nw))[:len(want)]
            bad = [] if have == want else [k for k in range(len(want))
                                           if have[k] != want[k]]
            soak["corrupted_bytes"] += len(bad)
            sb.equal(f"MR at {base:#x}: bytes that differ from the posted data (first 8)",
                     bad[:8], [])
        soak["lost"] = len(v.posted) - len(landed)
        sb.equal("payload words written (each message once)", resp["words"],
                 sum(-(-len(pl) // 64) for k, (_, pl) in enumerate(v.posted)
                     if k in landed))
    phases.mark("checks")
    if p.get("clean_baseline") and model["written"] and model["completed"]:
        # The same scenario without faults: the delays tb.soak.recovery defines.
        cfg0, knobs0 = config(p["top"], dict(p, faults_ab={}, faults_ba={}))
        base = run_model(cfg0, *scenario(p, cfg0, knobs0)[:2], inj_stall)
        for key, marks in (("recovery_cycles", "written"), ("cqe_delay_cycles", "completed")):
            soak[key] = max(c for c, _ in model[marks]) - max(c for c, _ in base[marks])
    if p.get("out_json"):
        n = max(len(v.messages), 1)
        plain = v.messages and p["kind"] != "mixed"
        try:
            rtl = reduce_run(v, got, n) if plain else reads.op_times(got)
        except (ValueError, IndexError, KeyError, TypeError):  # see the scoreboard
            rtl = None
        mdl = reduce_run(v, model, n) if plain else reads.op_times(model)
        if p["kind"] == "load":          # per-message cycles from arrival, both sides
            for side, run in (("rtl", got), ("model", model)):
                try:
                    per = load_per_message(v, run, v.arrivals, v.warm)
                    soak[f"per_{side}"] = {k: a.tolist() for k, a in per.items()}
                except (RuntimeError, ValueError, IndexError, KeyError, TypeError):
                    soak[f"per_{side}"] = None
        with open(p["out_json"], "w") as f:
            json.dump({"rtl": rtl, "model": mdl, "mismatches": len(sb.mismatches),
                       "cycles": int(dut.now.value), "counters": seen, "hang": tb.hang,
                       "messages": len(v.posted), "token": p.get("token"), **soak,
                       "frames": sorted([[c[0], fr.hex()] for c, fr in
                                         got["wire_ab"] + got["wire_ba"]])}, f)
    phases.mark("results")
    dut._log.info(phases.line())
    return sb
