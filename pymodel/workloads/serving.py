"""Deployments at a latency target: tokens per second per GPU at TPOT <= 50 ms.

:data:`SERVING` lists deployments as an inference engineer would run them; for each and
for each design (the NIC, and the RDMA engine on the fastest of :data:`SERVING_RUNGS`,
both attached as the grid's pairing says), :func:`serving_rows` steps the batch up
(:data:`pymodel.workloads.grid.BATCHES`) and keeps the largest batch whose decode step
(the grid's calibrated roofline, :func:`pymodel.workloads.roofline.decode_roofline`) is
at most :data:`TPOT_TARGET_S` and whose weights and KV cache fit: its time per output
token (the step) and its tokens per second per GPU.

A deployment ``across`` nodes of ``node_gpus`` GPUs carries only the messages between
nodes on the design (one port per GPU, a scale-out NIC each); the messages inside a
node go over NVLink at the same time and are not timed (as DeepEP's NVLink + RDMA
table, :data:`pymodel.workloads.calibration.DEEPEP_LL_NVLINK`). A deployment in one
scale-up domain carries every message on the design (8 ports per GPU, NVLink-class).
"""

from dataclasses import dataclass

from pymodel.workloads.generate import Deployment, decode_step
from pymodel.workloads.grid import (
    ACCELERATOR,
    BATCHES,
    CALIBRATION,
    CONTEXT,
    ISSUER,
    NIC_ISSUER,
    PAIRING,
    carriers,
    step_calibration,
)
from pymodel.workloads.roofline import decode_roofline
from pymodel.workloads.trace import Trace

__all__ = ["Serving", "SERVING", "SERVING_RUNGS", "TPOT_TARGET_S", "serving_rows",
           "between_nodes"]

#: The latency target: 50 ms per output token (20 tokens/s per sequence), the target
#: the study asks for.
TPOT_TARGET_S = 0.050
#: The RDMA rungs tried (the fastest covered one is kept): the pipelined engine, with
#: doorbell batching (fastest on EP traffic) and with WQEs by MMIO (fastest on TP).
SERVING_RUNGS = ("pipelined", "+doorbell batching 16", "+WQE by MMIO, inline")


@dataclass(frozen=True)
class Serving:
    """One deployment: ``tp``/``ep`` as :class:`Deployment`; ``ports`` per GPU;
    ``node_gpus``: GPUs per node when the deployment spans nodes (only messages between
    nodes are carried by the design), 0 in one scale-up domain; ``redundant_experts`` and
    ``routing`` as :class:`Deployment`."""

    label: str
    model: str
    tp: int = 1
    ep: int = 1
    ports: int = 8
    node_gpus: int = 0
    allreduce: str = "auto"
    redundant_experts: int = 0
    routing: str = "balanced"
    why: str = ""


#: The deployments of the table. DeepSeek-V3 as DeepSeek deploys it (arXiv 2412.19437
#: Sec. 3.4.1: EP32 over 4 nodes of 8, 32 redundant experts, each GPU one extra beside its
#: 8) against the whole EP group in one NVL72-class scale-up domain: EP72 holds 256 + 32 =
#: 288 replicas, 4 a GPU. Both route by a sampled draw (each step's tokens land unevenly
#: on the experts, :mod:`pymodel.workloads.experts`), so both carry the busiest GPU's
#: share. Llama-3.1-405B at TP16 in one domain and over two nodes of 8.
SERVING = (
    Serving("DeepSeek-V3 EP32, 4 nodes x 8 (NVLink inside, the design between)",
            "deepseek-v3", ep=32, ports=1, node_gpus=8, redundant_experts=32,
            routing="sampled", why="wide EP as DeepSeek and DeepEP deploy it"),
    Serving("DeepSeek-V3 EP72, one scale-up domain (NVL72-class)", "deepseek-v3", ep=72,
            ports=8, redundant_experts=32, routing="sampled",
            why="the whole EP group on the design's fabric"),
    Serving("Llama-3.1-405B TP16, one scale-up domain", "llama-3.1-405b", tp=16, ports=8,
            why="dense, per-phase latency decides TPOT"),
    Serving("Llama-3.1-405B TP16, 2 nodes x 8 (NVLink inside, the design between)",
            "llama-3.1-405b", tp=16, ports=1, node_gpus=8,
            why="TP across the scale-out link"),
    Serving("Mixtral-8x7B EP8, one scale-up domain", "mixtral-8x7b", ep=8, ports=8,
            why="a second MoE: 8 experts, top-2"),
)


def between_nodes(trace, node_gpus):
    """The trace's messages between nodes of ``node_gpus`` GPUs (GPU ``g`` in node
    ``g // node_gpus``), its phases unchanged."""
    c = trace.columns
    keep = c["src"] // node_gpus != c["dst"] // node_gpus
    return Trace(trace.kind, trace.model, trace.deployment, trace.gpus, trace.phases,
                 {k: v[keep] for k, v in c.items()}, trace.switch)


def serving_rows(servings=SERVING, batches=BATCHES, pairing=PAIRING, issuer=ISSUER,
                 calibration=CALIBRATION, target_s=TPOT_TARGET_S, nic_issuer=NIC_ISSUER):
    """One dict per (deployment, design): the largest batch within ``target_s`` that
    fits (``batch`` 0 when none does), its ``tpot_ms``, ``tok_s_gpu``, ``comm_ms`` and,
    for RDMA, the rung; ``limit`` says what stopped the batch (``TPOT``, ``HBM`` or the
    ``largest batch tried``); ``attachment`` names how the design attaches, ``issue``
    what posting costs in the model (the RDMA engine's ``issuer``, the NIC's
    ``nic_issuer``: a key of :data:`~pymodel.workloads.issuers.NIC_ISSUERS`)."""
    cal = step_calibration(calibration)
    cs = carriers(issuer, pairing, nic_issuer)
    designs = {"NIC": [cs["nic"]], "RDMA": [cs[f"rdma {r}"] for r in SERVING_RUNGS]}
    g = cs[f"rdma {SERVING_RUNGS[0]}"].issuer
    nic = ("sm: ceil(B / 512) store issue cycles at 1.98 GHz, a fence per flag (the last "
           "store's completion)" if cs["nic"].issuer.name == "sm" else "none")
    issue = {"NIC": nic,
             "RDMA": f"{g.name}: {g.wqe_cycles:g} ns/WQE + {g.doorbell_cycles:g} ns/"
                     f"doorbell per poster, a poster per QP" if g.parallel else
                     f"{g.name}: {g.wqe_cycles:g} ns/WQE + {g.doorbell_cycles:g} ns/doorbell"}
    rows = []
    for sv in servings:
        for name, cars in designs.items():
            best, limit = None, "largest batch tried"
            for b in batches:
                dep = Deployment(batch=b, tp=sv.tp, ep=sv.ep, context=CONTEXT,
                                 redundant_experts=sv.redundant_experts,
                                 routing=sv.routing)
                tr = decode_step(sv.model, dep, allreduce=sv.allreduce,
                                 channels=sv.node_gpus or sv.ports, node_gpus=sv.node_gpus)
                if sv.node_gpus:
                    tr = between_nodes(tr, sv.node_gpus)
                res = []
                for car in cars:
                    try:
                        res.append((decode_roofline(
                            sv.model, dep, accelerator=ACCELERATOR, carrier=car, trace=tr,
                            ports=sv.ports, hbm_efficiency=cal.hbm_efficiency,
                            overhead_s=cal.overhead_s), car))
                    except ValueError:          # a rung the fast path does not cover
                        continue
                r, car = min(res, key=lambda x: x[0].step_s)
                if r.step_s > target_s or not r.fits:
                    limit = "HBM" if not r.fits else "TPOT"
                    break
                best = (r, car)
            row = {"deployment": sv.label, "model": sv.model, "design": name,
                   "attachment": cars[0].attachment, "issue": issue[name],
                   "ports": sv.ports, "batch": 0, "tpot_ms": None, "tok_s_gpu": 0.0,
                   "comm_ms": None, "rung": "-", "limit": limit}
            if best is not None:
                r, car = best
                row.update(batch=r.batch, tpot_ms=r.step_s * 1e3,
                           tok_s_gpu=r.tokens / r.step_s / r.gpus,
                           comm_ms=r.coordination_s * 1e3,
                           rung=car.rung.name if car.design == "rdma" else "-")
            rows.append(row)
    return rows
