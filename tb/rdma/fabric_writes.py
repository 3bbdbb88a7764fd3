"""The ``writes`` kind of the RDMA fabric co-simulation (:mod:`tb.rdma.cocotb_fabric`) and
its parameter checks, without cocotb: the RdmaTop headline's run on a two-node
:class:`rtl.tops.rdma_fabric_top.RdmaFabricTop` (node 0's requester posts the WRITEs of
:func:`analysis.scenarios.rdma.writes_scenario` to node 1's responder; its MACs route node
A to port 0 and node B to port 1 of the switch's power-up table), its model
configuration (:func:`fabric_config`, also the open-loop runs'), and the mapping of a
two-node run onto RdmaTop's records (:func:`pair_run`), so that
:func:`analysis.rdma.point.reduce_run` reduces it. Used by the co-simulation and by
:mod:`tb.rdma.headline` (its ``switch`` points, model side alone too)."""

import dataclasses

from analysis.rdma.point import ENGINE_KNOBS, knobs_of
from analysis.scenarios.rdma import writes_scenario
from pymodel.rdma.engine_config import context_words
from pymodel.rdma.fabric_system import FabricConfig
from spec.design_point import RdmaPoint
from spec.rdma_engine import REQUESTER_DEFAULTS, RESPONDER_DEFAULTS, SIM_TIMEOUT
from spec.rdma_fabric import FABRIC_DEFAULTS

__all__ = ["fabric_config", "WRITES_PARAMS", "writes_setup", "writes_images", "pair_run",
           "check_writes_params", "OPEN_LOOP_PARAMS", "check_run_params"]


def fabric_config(top, sc, cache_entries=16):
    """The model's :class:`FabricConfig` of a top (its parameters) and a scenario."""
    t = dict(FABRIC_DEFAULTS, **top)
    return FabricConfig(**FabricConfig.fields_of({k: t[k] for k in FABRIC_DEFAULTS
                                                  if k != "cache_entries"}),
                        cache_entries=cache_entries, cache_capacity=t["cache_entries"],
                        **{k: t.get(k, v) for k, v in REQUESTER_DEFAULTS.items()
                           if k != "timeout"},
                        timeout=t.get("timeout", SIM_TIMEOUT),
                        responder_sizes={k: t.get(k, v) for k, v in
                                         RESPONDER_DEFAULTS.items()},
                        cq_base=sc.cq_base, cq_log2=sc.cq_log2)


#: The design point's run-time ports a ``writes`` run takes as its parameters of the same
#: names (the engines' recovery is go-back-N here).
_PORTS = tuple(n for n in RdmaPoint.of_kind("port") if n != "selective")
#: The parameters of a ``writes`` run (as :data:`tb.rdma.cocotb_rdma.KIND_PARAMS`'s).
WRITES_PARAMS = ("kind", "top", "messages", "sizes", "qps", "warmup", "spacing", *_PORTS,
                 "knobs", "out_json", "popularity")


def writes_setup(top, p):
    """``(cfg, verbs)`` of a ``writes`` run ``p`` on a two-node top ``top``: the verbs of
    :func:`~analysis.scenarios.rdma.writes_scenario` (node A is node 0, node B node 1;
    ``popularity``: its QP of each message, round robin by default)
    and the model's :class:`FabricConfig` with the run's engine knobs and cache
    entries in use. ``ValueError`` names a bad parameter."""
    unknown = sorted(set(p) - set(WRITES_PARAMS))
    if unknown:
        raise ValueError(f"unknown parameter(s) of a fabric run of kind 'writes': {unknown} "
                         f"(accepted: {sorted(WRITES_PARAMS)})")
    t = dict(FABRIC_DEFAULTS, **top)
    if t["nodes"] != 2:
        raise ValueError(f"a 'writes' run needs a top of 2 nodes, not {t['nodes']!r}")
    knobs = knobs_of(p.get("rung"), p.get("knobs"))
    entries = p.get("cache_entries", 16)
    words = context_words(p, "fabric writes run")
    v = writes_scenario(p["messages"], p["sizes"], p["qps"], spacing=p.get("spacing", 0),
                        warmup=p.get("warmup", 0), cache_entries=entries, depth=t["depth"],
                        mr_entries=t["mr_entries"], qpc_words=words,
                        popularity=p.get("popularity", "round_robin"), **knobs)
    cfg = fabric_config(top, v, entries)
    cfg = dataclasses.replace(cfg.with_qpc_words(words),
                              **{k: knobs[k] for k in ENGINE_KNOBS})
    return cfg, v


def writes_images(v):
    """The per-node images of a ``writes`` run's verbs ``v``: node 0 posts (requester
    memory, MMIO), node 1 takes the WRITEs (responder memory, MR table)."""
    items, release = v.mmio_items()
    return [dict(mem_rq=dict(v.mem_a), mem_rs={}, mr_table=[], mmio=items, release=release),
            dict(mem_rq={}, mem_rs=dict(v.mem_b), mr_table=list(v.mr_table), mmio=[],
                 release=[])]


def pair_run(run):
    """A two-node fabric run (the model's or the RTL's records) in the shape of an RdmaTop
    run (:func:`analysis.rdma.point.reduce_run`)."""
    return dict(wire_ab=run["wire"][0], wire_ba=run["wire"][1],
                mmio_stamps=run["mmio_stamps"][0], written=run["written"][1],
                completed=run["completed"][0], req=run["req"][0], resp=run["resp"][1],
                host_a=run["host_rq"][0], host_b=run["host_rs"][1])


def check_writes_params(p):
    """Refuse a ``writes`` run's parameters (``p`` with its ``top``) before anything is
    built: what :func:`writes_setup` and the top's model refuse (``ValueError``)."""
    if not isinstance(p, dict) or p.get("kind") != "writes":
        raise ValueError(f"a fabric 'writes' run needs kind 'writes', not {p!r}")
    try:
        writes_setup(p.get("top", {}), {k: v for k, v in p.items() if k != "top"})
    except (TypeError, KeyError) as exc:
        raise ValueError(f"fabric 'writes' run: {type(exc).__name__}: {exc}") from exc


#: The parameters of an open-loop run (the default kind): the fabric top's parameters of
#: :data:`spec.rdma_fabric.FABRIC_DEFAULTS` but its player and recorder depths, hop
#: latency and link retry, and the run's own.
OPEN_LOOP_PARAMS = ("top", *(k for k in FABRIC_DEFAULTS if k not in (
    "mmio", "wire_beats", "events", "hop_latency", "link_retry")), "qps", "msg_bytes",
    "messages", "load", "pattern", "seed", "warmup", "out_json", "expect_merge_wait",
    "expect_merge_held", "expect_pause", "timeout")


def check_run_params(p):
    """The parameter check of this module (:func:`tb.cosim.check_params`): a ``writes``
    run by :func:`check_writes_params`, an open-loop run by its keys
    (:data:`OPEN_LOOP_PARAMS`). ``ValueError`` names what is refused (a ``reads`` run
    is :mod:`tb.rdma.cocotb_fabric_reads`'s)."""
    if isinstance(p, dict) and p.get("kind") == "writes":
        check_writes_params(p)
        return
    unknown = sorted(set(p) - set(OPEN_LOOP_PARAMS))
    if unknown:
        raise ValueError(f"tb.rdma.cocotb_fabric: unknown parameter(s) {unknown} (accepted: "
                         f"{sorted(OPEN_LOOP_PARAMS)}, or kind 'writes'; kind 'reads' is "
                         f"tb.rdma.cocotb_fabric_reads')")
