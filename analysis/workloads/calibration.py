"""Calibration of the decode roofline against NVIDIA NIM's published Llama-3.1-8B table.

The table (data file ``data/nim_llama31_8b_h100.toml``, with its source) gives the
inter-token latency (ITL) of Llama-3.1-8B-Instruct on H100 at 8 concurrencies. The
roofline (:func:`analysis.workloads.roofline.decode_roofline`, one GPU, no communication)
is evaluated at ``batch = concurrency`` with the data file's assumed setup (precision,
mean context), and compared two ways:

- *pure*: the roofline as is; residual ``(model - measured) / measured``;
- *calibrated*: the roofline with its HBM bandwidth scaled by ``hbm_efficiency`` plus
  a fixed per-step overhead ``t0``, fitted at concurrency 1 (``t0 = measured(1) -
  model_eta(1)``) and added at every concurrency; the residuals at the other seven are
  the test of the model.

The table cannot separate the two parameters: at concurrency 1 the step is the weight
read, and the slope between 1 and 25 or 50 is below what even 100 % of the bandwidth
gives for the added KV reads (between 1 and 100 it gives 99 %). So the efficiency is
not fitted but taken from the best published decode kernel on that memory,
:data:`HBM_EFFICIENCY`, and ``t0`` is the one fitted number. :data:`NIM_FIT` holds both;
it is checked at concurrency :data:`NIM_CHECK` (the largest below the scheduler's
prefill interference). Above ~100 concurrent requests NIM's scheduler also runs the
prefills of arriving requests between decode steps, which a decode-only roofline does
not model.
"""

import tomllib
from dataclasses import dataclass
from pathlib import Path

from analysis.workloads.generate import Deployment
from analysis.workloads.roofline import decode_roofline

__all__ = ["NIM", "load_nim", "nim_calibration", "CalibrationRow", "DEEPEP_LL",
           "DEEPEP_LL_NVLINK", "DEEPEP_TABLES",
           "deepep_calibration", "GPU_SYNC_S", "HBM_EFFICIENCY", "StepCalibration",
           "nim_fit", "NIM_FIT", "NIM_CHECK", "PURE"]

_PATH = Path(__file__).resolve().parent / "data" / "nim_llama31_8b_h100.toml"


def load_nim(path=_PATH):
    """The NIM data file as a dict: ``table`` (measurements, source) and ``assumed``."""
    with open(path, "rb") as f:
        return tomllib.load(f)


NIM = load_nim()


@dataclass(frozen=True)
class CalibrationRow:
    """One concurrency of the table against the roofline (times in ms)."""

    concurrency: int
    measured_ms: float
    model_ms: float
    calibrated_ms: float
    bottleneck: str

    @property
    def residual(self):
        """``(model - measured) / measured`` of the pure roofline."""
        return (self.model_ms - self.measured_ms) / self.measured_ms

    @property
    def calibrated_residual(self):
        return (self.calibrated_ms - self.measured_ms) / self.measured_ms


def nim_calibration(weights_dtype=None, kv_dtype=None, context=None, nim=NIM,
                    hbm_efficiency=1.0):
    """Rows of :class:`CalibrationRow` and the fitted overhead ``t0`` (ms).

    ``weights_dtype``, ``kv_dtype`` and ``context`` (tokens) default to the data file's
    assumptions (``fp8``, ``fp8``, ``input + output / 2``). ``model_ms`` is the pure
    roofline; ``calibrated_ms`` the roofline at ``hbm_efficiency`` plus ``t0``, fitted at
    the table's first concurrency. Returns ``(rows, t0_ms)``.
    """
    t, a = nim["table"], nim["assumed"]
    wd = weights_dtype or a["weights_dtype"]
    kd = kv_dtype or a["kv_dtype"]
    ctx = context or a["input_tokens"] + a["output_tokens"] // 2

    def run(eta):
        return [decode_roofline(t["model"], Deployment(batch=c, weights_dtype=wd,
                                                       kv_dtype=kd, context=ctx),
                                accelerator=t["accelerator"], hbm_efficiency=eta)
                for c in t["concurrency"]]

    pure, scaled = run(1.0), run(hbm_efficiency)
    t0 = t["itl_ms"][0] - scaled[0].step_s * 1e3
    rows = [CalibrationRow(c, ms, r.step_s * 1e3, s.step_s * 1e3 + t0, r.bottleneck)
            for c, ms, r, s in zip(t["concurrency"], t["itl_ms"], pure, scaled, strict=True)]
    return rows, t0


#: The fraction of the HBM bandwidth the grid's decode steps reach: FlashMLA's best
#: memory-bound decode (FlashMLA README: "up to 3000 GB/s in memory-bound configuration"
#: on H800 SXM5, whose HBM3 is the H100 SXM's 3.35 TB/s): 3000 / 3350.
HBM_EFFICIENCY = 3000 / 3350
#: The NIM concurrency the fit is checked at: the largest before NIM's scheduler mixes in
#: prefills (the time to first token jumps from 120 to 347 ms between 100 and 150).
NIM_CHECK = 100


@dataclass(frozen=True)
class StepCalibration:
    """What a decode step gets on top of the pure roofline: ``hbm_efficiency`` (the
    fraction of HBM bandwidth reached) and ``overhead_s`` (fixed per step), with where
    they come from and how close they come at :data:`NIM_CHECK` (``check_residual``:
    ``(calibrated - measured) / measured``)."""

    name: str
    hbm_efficiency: float
    overhead_s: float
    source: str
    check_concurrency: int = 0
    check_residual: float = 0.0


#: The pure roofline: all of the bandwidth, no overhead.
PURE = StepCalibration("pure", 1.0, 0.0, "the roofline alone")


def nim_fit(hbm_efficiency=HBM_EFFICIENCY, nim=NIM):
    """The :class:`StepCalibration` of the NIM table: ``hbm_efficiency`` as given
    (default :data:`HBM_EFFICIENCY`), the overhead fitted at concurrency 1, checked at
    :data:`NIM_CHECK`."""
    rows, t0 = nim_calibration(nim=nim, hbm_efficiency=hbm_efficiency)
    chk = next(r for r in rows if r.concurrency == NIM_CHECK)
    return StepCalibration("nim", hbm_efficiency, t0 * 1e-3,
                           f"{nim['table']['source']}; HBM efficiency: FlashMLA README",
                           NIM_CHECK, chk.calibrated_residual)


#: The grid's default calibration (module doc): FlashMLA's efficiency, NIM's overhead.
NIM_FIT = nim_fit()


#: GPU-side synchronisation per collective (seconds), low and high: small all-reduces on
#: an HGX 8x H100 node take about 6 us at 2 GPUs with CUDA graphs and NVLS (NVIDIA/nccl
#: issue 1259) and more with more GPUs, up to about 17 us at 8 (as cited with PyTorch
#: issue 131739; the 8-GPU figure was not re-checked here). The designs' own
#: per-collective cost is the interface's; this is the GPU's launch and barrier.
GPU_SYNC_S = (6e-6, 17e-6)


# -- DeepEP's published low-latency dispatch and combine ----------------------------------

#: DeepEP's low-latency kernels with pure RDMA: README at commit 1a0c8f6 (2025-04-27),
#: table "Low-latency kernels with pure RDMA": H800, each GPU with a ConnectX-7
#: InfiniBand 400 Gb/s NIC (about 50 GB/s), 128 tokens per batch, hidden 7168, top-8
#: experts, FP8 dispatch, BF16 combine; EP32: dispatch 182 us (RDMA bandwidth 41 GB/s),
#: combine 350 us (41 GB/s). Every peer is reached over RDMA.
DEEPEP_LL = {"ep": 32, "batch": 128, "link_bytes_per_s": 50e9,
             "dispatch_us": 182.0, "combine_us": 350.0, "gpus_per_node": 8,
             "nvlink": False, "table": "pure RDMA",
             "source": "github.com/deepseek-ai/DeepEP README at commit 1a0c8f6, "
                       "'Low-latency kernels with pure RDMA'"}
#: The same table from DeepEP commit de8cfca (2025-06-05) on, after "low-latency kernels
#: now leverage NVLink as much as possible" (DeepEP PR #173): EP32 dispatch 155 us,
#: combine 273 us (the RDMA bandwidth column, 48 and 53 GB/s, counts the NVLink bytes
#: too). H800 nodes of 8 GPUs: 7 of a GPU's 31 peers are on NVLink, 24 over RDMA.
DEEPEP_LL_NVLINK = dict(DEEPEP_LL, dispatch_us=155.0, combine_us=273.0, nvlink=True,
                        table="NVLink + RDMA",
                        source="github.com/deepseek-ai/DeepEP README from commit de8cfca "
                               "(NVLink for intra-node peers, PR #173)")
#: Both tables, pure RDMA first.
DEEPEP_TABLES = (DEEPEP_LL, DEEPEP_LL_NVLINK)
#: The designs' link: 64 bytes per 1 GHz cycle (SPEC.md).
LINK_BYTES_PER_S = 64e9


def deepep_calibration(carriers, ref=DEEPEP_LL, layer=None):
    """One MoE layer's dispatch and combine of DeepSeek-V3 at DeepEP's setting (EP32,
    128 tokens per GPU, FP8 dispatch, BF16 combine) carried by each design, against
    DeepEP's published latencies.

    ``carriers`` maps a label to a :class:`~analysis.workloads.carriers.Carrier`;
    ``ref`` is :data:`DEEPEP_LL` (every peer over RDMA) or :data:`DEEPEP_LL_NVLINK` (the
    peers in a GPU's node, ``gpus_per_node - 1`` of them, over NVLink: only the messages
    between nodes are carried by the design; the NVLink part, 7/31 of the bytes at about
    160 GB/s on H800, is shorter and runs at the same time, so it is not timed). Each
    phase's time comes from :func:`~analysis.workloads.timing.comm_time` at the designs'
    link (64 GB/s) and is rescaled to DeepEP's link: the payload part (the most bytes any
    GPU sends in the phase, at 64 bytes per cycle) is stretched by ``64e9 /
    link_bytes_per_s``; the rest (headers, control, waits, posting) is kept. Returns a
    list of dicts: ``table``, ``design``, ``phase``, ``model_us`` (at 64 GB/s),
    ``at_link_us``, ``published_us``, ``residual`` (``at_link / published - 1``),
    ``payload_mb`` (per GPU, over the design), ``payload_us`` (that payload at
    ``link_bytes_per_s``) and ``delivered_gbs`` (that payload over the published time).
    ``layer``: the MoE layer (default the first).
    """
    import numpy as np

    from analysis.workloads.config import load_model
    from analysis.workloads.generate import decode_step
    from analysis.workloads.timing import comm_time
    from analysis.workloads.trace import Trace
    m = load_model("deepseek-v3")
    tr = decode_step(m, Deployment(batch=ref["batch"], ep=ref["ep"]))
    if ref["nvlink"]:
        node = ref["gpus_per_node"]
        keep = tr.columns["src"] // node != tr.columns["dst"] // node
        tr = Trace(tr.kind, tr.model, tr.deployment, tr.gpus, tr.phases,
                   {k: v[keep] for k, v in tr.columns.items()})
    layer = m.first_k_dense_replace if layer is None else layer
    c = tr.columns
    stretch = LINK_BYTES_PER_S / ref["link_bytes_per_s"]
    out = []
    for label, car in carriers.items():
        r = comm_time(tr, car)
        for phase in ("dispatch", "combine"):
            pid = tr.phase_id(f"L{layer}.moe.{phase}")
            sel = c["phase"] == pid
            sent = np.bincount(c["src"][sel], weights=(c["count"] * c["bytes"])[sel])
            moving = sent.max() / (LINK_BYTES_PER_S / 1e9)        # cycles of 1 ns
            t = float(r.phase_cycles[pid])
            at_link = t + moving * (stretch - 1)
            pub = ref[f"{phase}_us"]
            out.append({"table": ref["table"], "design": label, "phase": phase,
                        "model_us": t / 1e3, "at_link_us": float(at_link) / 1e3,
                        "published_us": pub, "residual": float(at_link) / 1e3 / pub - 1,
                        "payload_mb": float(sent.max()) / 1e6,
                        "payload_us": float(sent.max()) / ref["link_bytes_per_s"] * 1e6,
                        "delivered_gbs": float(sent.max()) / (pub * 1e-6) / 1e9})
    return out
