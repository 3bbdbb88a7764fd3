"""cocotb test of RdmaTop: a verbs-built scenario, bulk loaded, run, compared with the model.

Everything is loaded before reset (host memories, MR table, MMIO and injection players)
and drained after the run (recorders, memories, counters) through
:class:`tb.rdma.testbench.RdmaTestbench`: no Python runs per cycle. Measurements go to
``params["out_json"]`` when given: the metrics of the RTL's records and of the model's,
reduced by the same function (:func:`analysis.rdma.point.reduce_run`).
"""

import dataclasses
import json
import time

import cocotb

from analysis.load.rdma import LOAD_KNOBS, check_load_knobs, load_per_message, load_scenario
from analysis.load.rdma_knobs import LOAD_FROM_CONFIG
from analysis.rdma.point import knobs_of, reduce_run
from analysis.scenarios.rdma import (
    bad_frames_scenario,
    fault_settings,
    overflow_scenario,
    qp_error_scenario,
    writes_scenario,
)
from analysis.scenarios.rdma_scaleup import scaleup_bad_frames_scenario
from pymodel.fabric.faulty_link import FaultSettings
from pymodel.rdma.links import retry_counters
from pymodel.rdma.system import Config, simulate
from spec.design_point import RdmaPoint
from spec.fabric import COUNTERS as LINK_COUNTERS
from spec.fabric import FLAGS as LINK_FLAGS
from spec.fabric import RETRY_SETTINGS
from spec.formats.roce import CqeStatus, OpCode
from spec.formats.scaleup import framing
from spec.rdma import DROP_REASONS, LINKS, SEQUENCE_COUNTERS
from spec.rdma_engine import (
    REQUESTER_COUNTERS,
    RESPONDER_COUNTERS,
    RESPONDER_DEFAULTS,
    SIM_TIMEOUT,
    TOP_DEFAULTS,
)
from tb.cosim import cosim_params
from tb.rdma import reads
from tb.rdma.intent import cqes_per_qp, intended_statuses, mr_cache_check, mr_counters
from tb.rdma.phases import Phases
from tb.rdma.point_params import params_point
from tb.rdma.testbench import RdmaTestbench, member_port, retry_counter_port, run_ports, value_of
from tb.rdma.wirecheck import scaleup_problems, wire_problems
from tb.scoreboard import Scoreboard

#: Cycles the design keeps running after the last expected event, to catch extras.
SETTLE = 300
#: The model's Config fields that are the top's parameters (by name; ``cache_entries``,
#: the caches' capacity, is the Config's ``cache_capacity``).
_TOP_FIELDS = tuple(k for k in TOP_DEFAULTS if k in {f.name for f in dataclasses.fields(Config)}
                    and k != "cache_entries")
_ENGINE_PORTS = ("serial", "ack_every", "ack_frames")
#: RdmaTop's parameters not in TOP_DEFAULTS: ``link_retry`` (reliable links; default False).
_TOP_EXTRA = ("link_retry",)
#: With ``link_retry``: a reliable link's counters besides the plain link's
#: (:func:`pymodel.rdma.links.retry_counters`; ports: :func:`tb.rdma.testbench.retry_counter_port`).
RETRY_LINK_PORTS = tuple(n for n in retry_counters() if n not in LINK_COUNTERS + LINK_FLAGS)


_POINT_PORTS = RdmaPoint.of_kind("port")      # run parameters and Config fields by name
#: The parameters of a run (``run_cosim``'s ``params``), whatever its ``kind``: the top's
#: own (``top``, :data:`spec.rdma_engine.TOP_DEFAULTS`), the point's run-time ports
#: (``rung``: the engine's knobs, ``knobs`` on top), link faults, hooks, checks, output.
COMMON_PARAMS = ("kind", "top", *_POINT_PORTS, "knobs", "ack_timeout", "seed",
                 "faults_ab", "faults_ba", "inject_stall", "model_mmio_delay", "model_limit",
                 "expect", "expect_min", "resend_only_qps", "cqe_status", "cq_order_differs",
                 "clean_baseline", "out_json", "token")
#: The parameters of each scenario kind besides :data:`COMMON_PARAMS`.
KIND_PARAMS = {
    "writes": ("messages", "sizes", "qps", "pmtu_log2", "spacing", "warmup", "mrs", "popularity"),
    "qp_error": (),
    "bad": (),
    "reads": (),
    "posted_reads": ("op", "msg_bytes", "messages"),
    "mixed": ("messages", "mix", "sizes", "qps", "pmtu_log2"),
    "overflow": (),
    "load": ("msg_bytes", "messages", "load", "service_cycles", *LOAD_KNOBS),
}


def check_params(p):
    """Refuse a run's parameters before anything is exported or built: a key that is not
    a parameter of its ``kind`` (:data:`COMMON_PARAMS`, :data:`KIND_PARAMS`) or of the
    top, and every value the top, the model or the scenario would refuse (the model's
    configuration and the scenario are built here as the cocotb test builds them), and
    the design point of the run (:func:`tb.rdma.point_params.params_point`, which the
    cocotb test builds again). ``ValueError`` names the bad key or value."""
    if not isinstance(p, dict):
        raise ValueError(f"RDMA run parameters must be a dict, not {p!r}")
    kind = p.get("kind")
    if kind not in KIND_PARAMS:
        raise ValueError(f"kind must be one of {sorted(KIND_PARAMS)}, not {kind!r}")
    unknown = sorted(set(p) - set(COMMON_PARAMS) - set(KIND_PARAMS[kind]))
    if unknown:
        raise ValueError(f"unknown parameter(s) of an RDMA run of kind {kind!r}: {unknown} "
                         f"(accepted: {sorted(COMMON_PARAMS + KIND_PARAMS[kind])}; the "
                         f"engine's knobs go in 'knobs')")
    top = p.get("top", {})
    bad = (sorted(set(top) - set(TOP_DEFAULTS) - set(_TOP_EXTRA)) if isinstance(top, dict)
           else top)
    if bad:
        raise ValueError(f"unknown RdmaTop parameter(s) in 'top': {bad}")
    for name in ("faults_ab", "faults_ba"):
        fields = set(FaultSettings.__dataclass_fields__)
        extra = sorted(set(p.get(name) or {}) - fields)
        if extra:
            raise ValueError(f"{name}: unknown link setting(s) {extra} (accepted: "
                             f"{sorted(fields)})")
        retry_only = sorted(k for k, v in (p.get(name) or {}).items()
                            if k in RETRY_SETTINGS and v)
        if retry_only and not (isinstance(top, dict) and top.get("link_retry")):
            raise ValueError(f"{name}: {retry_only} need a reliable link (top parameter "
                             f"link_retry=True)")
    counters = {f"req_{n}" for n in REQUESTER_COUNTERS + reads.requester_read_counters(top)} | {
        f"resp_{n}" for n in RESPONDER_COUNTERS + mr_counters(top) + reads.read_counters(top)} | {
        f"{link}_{n}" for link in LINKS for n in LINK_COUNTERS + LINK_FLAGS}
    if isinstance(top, dict) and top.get("link_retry"):
        counters |= {f"{link}_{n}" for link in LINKS for n in RETRY_LINK_PORTS}
    for name in ("expect", "expect_min"):
        extra = sorted(set(p.get(name) or {}) - counters)
        if extra:
            raise ValueError(f"{name}: unknown counter(s) {extra} (names: req_<counter>, "
                             f"resp_<counter>, ab_<counter>, ba_<counter>)")
    stall = p.get("inject_stall", (1, 0))
    if (not isinstance(stall, (list, tuple)) or len(stall) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in stall)):
        raise ValueError(f"inject_stall must be [seed, rate] (two integers), not {stall!r}")
    try:
        cfg, knobs = config(top, p)
        scenario(p, cfg, knobs)
        params_point(top, p)                 # each field by the design point's own rule
    except (TypeError, KeyError) as exc:     # a value of the wrong type, a missing key
        raise ValueError(f"RDMA run of kind {kind!r}: {type(exc).__name__}: {exc}") from exc


def config(top, params):
    """The model's Config of a top (parameters) and a run (knobs, link faults, the
    timeout: ``ack_timeout``, else the top's, else the short ``SIM_TIMEOUT``)."""
    p = dict(TOP_DEFAULTS, **top)
    knobs = knobs_of(params.get("rung"), params.get("knobs"))
    p["timeout"] = params.get("ack_timeout") or top.get("timeout", SIM_TIMEOUT)
    entries = params.get("cache_entries", 16)
    if entries > p["cache_entries"] or entries < 16 or entries & (entries - 1):
        raise ValueError(f"cache_entries must be a power of two from 16 to the top's "
                         f"{p['cache_entries']}, not {entries!r}")
    return Config(**{k: p[k] for k in _TOP_FIELDS}, cache_capacity=p["cache_entries"],
                  **Config.fields_of({k: params[k] for k in _POINT_PORTS if k in params}
                                     | {"cache_entries": entries}),
                  responder_sizes={k: p[k] for k in RESPONDER_DEFAULTS},
                  **{k: knobs[k] for k in _ENGINE_PORTS},
                  faults_ab=fault_settings(params.get("faults_ab")),
                  faults_ba=fault_settings(params.get("faults_ba")),
                  link_retry=top.get("link_retry", False)), knobs


def scenario(p, cfg, knobs):
    """``(verbs, injected frames, expected drop reasons)`` of a run."""
    host = dict(depth=cfg.depth, mr_entries=cfg.mr_entries, qpc_words=cfg.qpc_words)
    if p["kind"] == "writes":
        v = writes_scenario(p["messages"], p["sizes"], p["qps"],
                            pmtu_log2=p.get("pmtu_log2", 12), seed=p.get("seed", 1),
                            spacing=p.get("spacing", 0), warmup=p.get("warmup", 0),
                            cache_entries=cfg.cache_entries, mrs=p.get("mrs", 1),
                            popularity=p.get("popularity", "round_robin"), **host, **knobs)
        return v, [], None
    if p["kind"] == "qp_error":
        return qp_error_scenario(seed=p.get("seed", 4), **host), [], None
    if p["kind"] == "bad" and cfg.header == "scaleup":
        return scaleup_bad_frames_scenario(seed=p.get("seed", 2), **host)
    if p["kind"] == "bad":
        return bad_frames_scenario(seed=p.get("seed", 2), **host)
    if p["kind"] == "overflow":
        return overflow_scenario(seed=p.get("seed", 3), **host)
    if p["kind"] == "reads":
        return reads.read_scenario(cfg, p.get("seed", 5), host)
    if p["kind"] == "posted_reads":
        return reads.posted_read_scenario(cfg, p, host), [], None
    if p["kind"] == "mixed":
        return reads.mixed_run_scenario(cfg, p, host), [], None
    if p["kind"] == "load":
        # Open-loop arrivals (analysis.load.rdma); ACK coalescing from ``knobs``.
        lp = {k: p[k] for k in LOAD_KNOBS if k in p}
        lp.update({k: getattr(cfg, k) for k in LOAD_FROM_CONFIG},
                  ack_every=knobs["ack_every"], ack_frames=knobs["ack_frames"])
        lp = check_load_knobs(p["msg_bytes"], p["messages"], lp)
        _, v, arrivals, warm = load_scenario(p["msg_bytes"], p["messages"], p["load"],
                                             p["service_cycles"], lp, p.get("seed", 1),
                                             depth=cfg.depth)
        v.warm, v.arrivals = warm, arrivals
        return v, [], None
    raise ValueError(f"unknown scenario kind {p['kind']!r}")


def with_cq(cfg, v):
    """``cfg`` with the completion queue the verbs ``v`` set up (``cq_base``,
    ``cq_log2``); ``ValueError`` if ``v`` laid out contexts of another size."""
    if v.qpc_words != cfg.qpc_words:
        raise ValueError(f"QP-context words: scenario {v.qpc_words}, engines {cfg.qpc_words}")
    return dataclasses.replace(cfg, cq_base=v.cq_base, cq_log2=v.cq_log2)


def run_model(cfg, v, inject, inj_stall, mmio_delay=0, limit=1 << 26):
    """The golden model's run of a scenario; ``mmio_delay`` (a test hook: a broken model)
    releases every MMIO word that many cycles later than the design gets it; past
    ``limit`` cycles the model gives up (RuntimeError: a run that never ends)."""
    items, release = v.mmio_items()
    release = [r + mmio_delay for r in release]
    cfg = with_cq(cfg, v)
    return simulate(cfg, v.mem_a, v.mem_b, v.mr_table, items, release, inject, inj_stall,
                    limit=limit)


@cocotb.test()
async def rdma_matches_model(dut):
    phases = Phases()
    p = cosim_params()
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

    tb = RdmaTestbench(dut, cfg.depth, cfg.link_retry, cfg.mr_in_host, cfg.read_words,
                       cfg.reads)
    ports = run_ports(cfg)
    tb.load(mem_a=v.mem_a, mem_b=v.mem_b, mr_table=v.mr_table, mmio=items, release=release,
            inject=inject, inject_stall=inj_stall, ports=ports,
            links=dict(zip(LINKS, (cfg.faults_ab, cfg.faults_ba), strict=True)))
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
    mr_cache_check(sb, cfg, resp, [frame for _, frame in got["wire_ab"]], bth_at)
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
            bad = [k for k in range(len(want)) if have[k] != want[k]]
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
    if sb.mismatches:
        with open("mismatches.txt", "w") as f:
            f.write("\n".join(sb.mismatches) + "\n")
    sb.check()
