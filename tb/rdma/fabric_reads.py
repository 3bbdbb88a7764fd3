"""The ``reads`` kind of the RDMA fabric co-simulation (:mod:`tb.rdma.cocotb_fabric`) and
its parameter checks, without cocotb: the READ/atomic point of `make sim` on a two-node
:class:`rtl.tops.rdma_fabric_top.RdmaFabricTop` with ``reads`` and ``read_words``. Node
0's requester posts the operations of
:func:`analysis.scenarios.rdma_read.read_point_scenario` (``op``, ``msg_bytes``,
``messages`` on one QP, one doorbell; or round robin over ``qps`` QPs) to node 1's
responder, whose READ responses and
ATOMIC ACKNOWLEDGEs come back through node 1's merge, the switch and node 0's demux (the
MACs of the scenario route node A to port 0 and node B to port 1, as the ``writes``
kind's)."""

import dataclasses

from analysis.scenarios.rdma_read import read_point_scenario
from spec.rdma_fabric import FABRIC_DEFAULTS
from tb.rdma.fabric_writes import fabric_config, pair_run

__all__ = ["READS_PARAMS", "reads_setup", "reads_images", "check_reads_params",
           "reads_pair"]

#: The parameters of a ``reads`` run.
READS_PARAMS = ("kind", "top", "op", "msg_bytes", "messages", "qps", "out_json")


def reads_setup(top, p):
    """``(cfg, verbs)`` of a ``reads`` run ``p`` on a two-node top ``top`` (with ``reads``
    and ``read_words``): the scenario's verbs and the model's
    :class:`~pymodel.rdma.fabric_config.FabricConfig`. ``ValueError`` names a bad
    parameter."""
    unknown = sorted(set(p) - set(READS_PARAMS))
    if unknown:
        raise ValueError(f"unknown parameter(s) of a fabric run of kind 'reads': {unknown} "
                         f"(accepted: {sorted(READS_PARAMS)})")
    t = dict(FABRIC_DEFAULTS, **top)
    if t["nodes"] != 2:
        raise ValueError(f"a 'reads' run needs a top of 2 nodes, not {t['nodes']!r}")
    if not (t.get("reads") and t.get("read_words")):
        raise ValueError("a 'reads' run needs a top with reads > 0 and read_words > 0")
    for name in ("op", "msg_bytes", "messages"):
        if name not in p:
            raise ValueError(f"a 'reads' run needs the parameter {name!r}")
    v = read_point_scenario(p["op"], p["msg_bytes"], p["messages"], depth=t["depth"],
                            mr_entries=t["mr_entries"], qps=p.get("qps", 1))
    cfg = dataclasses.replace(fabric_config(top, v).with_qpc_words(v.qpc_words),
                              reads=t["reads"], read_words=t["read_words"])
    return cfg, v


def reads_images(v):
    """The per-node images: node 0 posts (requester memory, MMIO), node 1 answers
    (responder memory, MR table)."""
    items, release = v.mmio_items()
    return [dict(mem_rq=dict(v.mem_a), mem_rs={}, mr_table=[], mmio=items, release=release),
            dict(mem_rq={}, mem_rs=dict(v.mem_b), mr_table=list(v.mr_table), mmio=[],
                 release=[])]


def _words(mem, depth):
    """A memory as a list of ``depth`` words (the model's are ``{word: int}``)."""
    if isinstance(mem, dict):
        return [mem.get(a, 0) for a in range(depth)]
    return list(mem)


def reads_pair(run, depth):
    """A two-node run in the shape RdmaTop's READ checks read
    (:func:`tb.rdma.reads.posted_read_checks`, :func:`tb.rdma.reads.op_times`): node 0's
    requester memory as ``mem_a``, node 1's responder memory as ``mem_b`` (lists of
    ``depth`` words)."""
    return dict(pair_run(run), mem_a=_words(run["mem_rq"][0], depth),
                mem_b=_words(run["mem_rs"][1], depth))


def check_reads_params(p):
    """Refuse a ``reads`` run's parameters (``p`` with its ``top``) before anything is
    built (``ValueError``)."""
    try:
        reads_setup(p.get("top", {}), {k: v for k, v in p.items() if k != "top"})
    except (TypeError, KeyError) as exc:
        raise ValueError(f"fabric 'reads' run: {type(exc).__name__}: {exc}") from exc
