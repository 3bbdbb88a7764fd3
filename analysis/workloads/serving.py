"""Deployments at a latency target: tokens per second per GPU at TPOT <= 50 ms.

:data:`SERVING` lists deployments as an inference engineer would run them; for each and
for each design (the NIC, and the RDMA engine on the fastest of :data:`SERVING_RUNGS`,
both attached as the grid's pairing says), :func:`serving_rows` steps the batch up
(:data:`analysis.workloads.grid.BATCHES`) and keeps the largest batch whose decode step
(the grid's calibrated roofline, :func:`analysis.workloads.roofline.decode_roofline`) is
at most :data:`TPOT_TARGET_S` and whose weights and KV cache fit: its time per output
token (the step) and its tokens per second per GPU.

Where each design runs, as a deployer builds it. In one scale-up domain the design is
the domain's fabric: it carries every message, on 8 ports a GPU (NVLink-class). Across
nodes of ``node_gpus`` GPUs (``node_gpus`` > 0) the design is the scale-out NIC: it
carries the messages between nodes, one 400 Gb/s port a GPU
(:data:`analysis.workloads.timing.SCALE_OUT_BYTES_PER_CYCLE`, a ConnectX-7 a GPU as in a
DGX H100), while the messages inside a node go over the node's NVLink at the same time,
timed as the scale-up NIC's model on 8 ports a GPU with its stores issued by the SMs
(:data:`NVLINK`: NVLink is a store fabric with no per-peer state, the NIC's kind) and
the same for both designs' rows (:class:`analysis.workloads.timing.ScaleOut`). Every
message of every deployment crosses one switch hop of the table's fabric profile
(:data:`SERVING_FABRIC`).
"""

from dataclasses import dataclass

from analysis.workloads.carriers import Carrier
from analysis.workloads.generate import Deployment, decode_step
from analysis.workloads.grid import (
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
from analysis.workloads.roofline import decode_roofline
from analysis.workloads.timing import ScaleOut
from analysis.workloads.trace import Trace

__all__ = ["Serving", "SERVING", "SERVING_RUNGS", "TPOT_TARGET_S", "serving_rows",
           "between_nodes", "SERVING_FABRIC", "NVLINK_PORTS"]

#: The latency target: 50 ms per output token (20 tokens/s per sequence), the target
#: the study asks for.
TPOT_TARGET_S = 0.050
#: The RDMA rungs tried (the fastest covered one is kept): the pipelined engine, with
#: doorbell batching (fastest on EP traffic) and with WQEs by MMIO (fastest on TP).
SERVING_RUNGS = ("pipelined", "+doorbell batching 16", "+WQE by MMIO, inline")
#: The fabric profile of every path of the table (:mod:`spec.fabric_profiles`): one
#: switch hop of 250 ns and two 75 ns links, inside a domain or node and between nodes.
SERVING_FABRIC = "rack"
#: Ports a GPU has on the scale-up fabric (the design in one domain, NVLink inside a
#: node), 64 bytes a cycle each: 512 GB/s each way, NVLink-class (H100: 18 NVLink 4 links,
#: 900 GB/s both ways, NVIDIA H100 Tensor Core GPU datasheet).
NVLINK_PORTS = 8


@dataclass(frozen=True)
class Serving:
    """One deployment: ``tp``/``ep`` as :class:`Deployment`; ``ports`` per GPU;
    ``node_gpus``: GPUs per node when the deployment spans nodes (only messages between
    nodes are carried by the design, on ``ports`` scale-out ports; those inside a node by
    NVLink), 0 in one scale-up domain; ``redundant_experts`` and
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
#: on the experts, :mod:`analysis.workloads.experts`), so both carry the busiest GPU's
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
                 calibration=CALIBRATION, target_s=TPOT_TARGET_S, nic_issuer=NIC_ISSUER,
                 fabric=SERVING_FABRIC):
    """One dict per (deployment, design): the largest batch within ``target_s`` that
    fits (``batch`` 0 when none does), its ``tpot_ms``, ``tok_s_gpu``, ``comm_ms`` and,
    for RDMA, the rung; ``limit`` says what stopped the batch (``TPOT``, ``HBM`` or the
    ``largest batch tried``); ``attachment`` names how the design attaches, ``issue``
    what posting costs in the model (the RDMA engine's ``issuer``, the NIC's
    ``nic_issuer``: a key of :data:`~analysis.workloads.issuers.NIC_ISSUERS`), ``fabric``
    the profile of every path, ``link_gbps`` the design's port rate."""
    cal = step_calibration(calibration)
    cs = carriers(issuer, pairing, nic_issuer)
    # NVLink inside a node: stores from the SMs into a store fabric (module doc).
    nvlink = Carrier("nic", framing="compact", issuer=nic_issuer)
    designs = {"NIC": [cs["nic"]], "RDMA": [cs[f"rdma {r}"] for r in SERVING_RUNGS]}
    g = cs[f"rdma {SERVING_RUNGS[0]}"].issuer
    nic = ("sm: ceil(B / 512) store issue cycles at 1.98 GHz, a fence per flag (the last "
           "store's completion), a warp per peer" if cs["nic"].issuer.name == "sm"
           else "none")
    issue = {"NIC": nic,
             "RDMA": f"{g.name}: {g.wqe_cycles:.0f} ns/WQE + {g.doorbell_cycles:.0f} ns/"
                     f"doorbell per poster, a poster per QP" if g.parallel else
                     f"{g.name}: {g.wqe_cycles:.0f} ns/WQE + {g.doorbell_cycles:.0f} ns/"
                     f"doorbell"}
    rows = []
    for sv in servings:
        so = ScaleOut(sv.node_gpus, nvlink, NVLINK_PORTS) if sv.node_gpus else None
        for name, cars in designs.items():
            best, limit = None, "largest batch tried"
            for b in batches:
                dep = Deployment(batch=b, tp=sv.tp, ep=sv.ep, context=CONTEXT,
                                 redundant_experts=sv.redundant_experts,
                                 routing=sv.routing)
                tr = decode_step(sv.model, dep, allreduce=sv.allreduce,
                                 channels=sv.node_gpus or sv.ports, node_gpus=sv.node_gpus)
                res = []
                for car in cars:
                    try:
                        res.append((decode_roofline(
                            sv.model, dep, accelerator=ACCELERATOR, carrier=car, trace=tr,
                            ports=sv.ports, hbm_efficiency=cal.hbm_efficiency,
                            overhead_s=cal.overhead_s, fabric=fabric, scale_out=so), car))
                    except ValueError:          # a rung the fast path does not cover
                        continue
                r, car = min(res, key=lambda x: x[0].step_s)
                if r.step_s > target_s or not r.fits:
                    limit = "HBM" if not r.fits else "TPOT"
                    break
                best = (r, car)
            row = {"deployment": sv.label, "model": sv.model, "design": name,
                   "attachment": cars[0].attachment, "issue": issue[name],
                   "ports": sv.ports, "fabric": fabric,
                   "link_gbps": (so.link_bytes_per_cycle if so else 64) * 8,
                   "batch": 0, "tpot_ms": None, "tok_s_gpu": 0.0,
                   "comm_ms": None, "rung": "-", "limit": limit}
            if best is not None:
                r, car = best
                row.update(batch=r.batch, tpot_ms=r.step_s * 1e3,
                           tok_s_gpu=r.tokens / r.step_s / r.gpus,
                           comm_ms=r.coordination_s * 1e3,
                           rung=car.rung.name if car.design == "rdma" else "-")
            rows.append(row)
    return rows
