"""cocotb test of RdmaTop: a verbs-built scenario, bulk loaded, run, compared with the model.

One run per simulation, by :func:`tb.rdma.run_one.run_one` (what it loads, compares and
writes to ``params["out_json"]``); its parameters are held by :func:`check_params`
(:data:`COMMON_PARAMS`, :data:`KIND_PARAMS`) before anything is exported or built. The
model's side of a run (:func:`config`, :func:`scenario`, :func:`with_cq`,
:func:`run_model`) is :mod:`tb.rdma.run_inputs`, importable from here too.
"""

import cocotb

from analysis.load.rdma import LOAD_KNOBS
from pymodel.fabric.faulty_link import FaultSettings
from spec.fabric import COUNTERS as LINK_COUNTERS
from spec.fabric import FLAGS as LINK_FLAGS
from spec.fabric import RETRY_SETTINGS
from spec.rdma import LINKS
from spec.rdma_engine import REQUESTER_COUNTERS, TOP_DEFAULTS
from tb.cosim import cosim_params
from tb.rdma import reads
from tb.rdma.intent import responder_counters
from tb.rdma.point_params import params_point
from tb.rdma.run_inputs import POINT_PORTS, config, run_model, scenario, with_cq
from tb.rdma.run_one import RETRY_LINK_PORTS, SETTLE, run_one

__all__ = ["COMMON_PARAMS", "KIND_PARAMS", "RETRY_LINK_PORTS", "SETTLE", "check_params",
           "config", "scenario", "with_cq", "run_model"]

#: RdmaTop's parameters not in TOP_DEFAULTS: ``link_retry`` (reliable links; default False).
_TOP_EXTRA = ("link_retry",)
#: The parameters of a run (``run_cosim``'s ``params``), whatever its ``kind``: the top's
#: own (``top``, :data:`spec.rdma_engine.TOP_DEFAULTS`), the point's run-time ports
#: (``rung``: the engine's knobs, ``knobs`` on top), link faults, hooks, checks, output.
COMMON_PARAMS = ("kind", "top", *POINT_PORTS, "knobs", "ack_timeout", "seed",
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
        f"resp_{n}" for n in responder_counters(top)} | {
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


@cocotb.test()
async def rdma_matches_model(dut):
    """One run of the parameters (:func:`tb.rdma.run_one.run_one`); fails on any
    mismatch with the model, listed in ``mismatches.txt`` of the run folder."""
    sb = await run_one(dut, cosim_params())
    if sb.mismatches:
        with open("mismatches.txt", "w") as f:
            f.write("\n".join(sb.mismatches) + "\n")
    sb.check()
