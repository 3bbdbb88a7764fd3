"""What an RdmaTop run is made of on the model's side: the model's configuration of a
top and a run's parameters (:func:`config`), the run's scenario (:func:`scenario`), and
the golden model's run of it (:func:`run_model`). The co-simulated run
(:func:`tb.rdma.run_one.run_one`), the parameter check of :mod:`tb.rdma.cocotb_rdma`
and the model-only users (headline points, the benches, the tests) build a run through
these, so that the model and the design always run the same thing.
"""

import dataclasses

from analysis.load.rdma import LOAD_KNOBS, check_load_knobs, load_scenario
from analysis.load.rdma_knobs import LOAD_FROM_CONFIG
from analysis.rdma.point import knobs_of
from analysis.scenarios.rdma import (
    bad_frames_scenario,
    fault_settings,
    overflow_scenario,
    qp_error_scenario,
    writes_scenario,
)
from analysis.scenarios.rdma_scaleup import scaleup_bad_frames_scenario
from pymodel.rdma.system import Config, simulate
from spec.design_point import RdmaPoint
from spec.rdma_engine import RESPONDER_DEFAULTS, SIM_TIMEOUT, TOP_DEFAULTS
from tb.rdma import reads

__all__ = ["config", "scenario", "with_cq", "run_model", "POINT_PORTS"]

#: The model's Config fields that are the top's parameters (by name; ``cache_entries``,
#: the caches' capacity, is the Config's ``cache_capacity``).
_TOP_FIELDS = tuple(k for k in TOP_DEFAULTS if k in {f.name for f in dataclasses.fields(Config)}
                    and k != "cache_entries")
_ENGINE_PORTS = ("serial", "ack_every", "ack_frames")
#: The design point's run-time ports: run parameters and Config fields by name.
POINT_PORTS = RdmaPoint.of_kind("port")


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
                  **Config.fields_of({k: params[k] for k in POINT_PORTS if k in params}
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

