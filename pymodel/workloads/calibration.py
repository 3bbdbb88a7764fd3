"""Calibration of the decode roofline against NVIDIA NIM's published Llama-3.1-8B table.

The table (data file ``data/nim_llama31_8b_h100.toml``, with its source) gives the
inter-token latency (ITL) of Llama-3.1-8B-Instruct on H100 at 8 concurrencies. The
roofline (:func:`pymodel.workloads.roofline.decode_roofline`, one GPU, no communication)
is evaluated at ``batch = concurrency`` with the data file's assumed setup (precision,
mean context), and compared two ways:

- *pure*: the roofline as is; residual ``(model - measured) / measured``;
- *calibrated*: one parameter, a fixed per-step overhead ``t0``, fitted at concurrency 1
  (``t0 = measured(1) - model(1)``) and added at every concurrency; the residuals at
  the other seven are the test of the model.

Nothing else is fitted. Above ~100 concurrent requests NIM's scheduler also runs the
prefills of arriving requests between decode steps, which a decode-only roofline does
not model.
"""

import tomllib
from dataclasses import dataclass
from pathlib import Path

from pymodel.workloads.generate import Deployment
from pymodel.workloads.roofline import decode_roofline

__all__ = ["NIM", "load_nim", "nim_calibration", "CalibrationRow", "DEEPEP_LL",
           "deepep_calibration", "GPU_SYNC_S"]

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


def nim_calibration(weights_dtype=None, kv_dtype=None, context=None, nim=NIM):
    """Rows of :class:`CalibrationRow` and the fitted overhead ``t0`` (ms).

    ``weights_dtype``, ``kv_dtype`` and ``context`` (tokens) default to the data file's
    assumptions (``fp8``, ``fp8``, ``input + output / 2``). Returns ``(rows, t0_ms)``.
    """
    t, a = nim["table"], nim["assumed"]
    wd = weights_dtype or a["weights_dtype"]
    kd = kv_dtype or a["kv_dtype"]
    ctx = context or a["input_tokens"] + a["output_tokens"] // 2
    model = [decode_roofline(t["model"], Deployment(batch=c, weights_dtype=wd, kv_dtype=kd,
                                                    context=ctx),
                             accelerator=t["accelerator"])
             for c in t["concurrency"]]
    t0 = t["itl_ms"][0] - model[0].step_s * 1e3
    rows = [CalibrationRow(c, ms, r.step_s * 1e3, r.step_s * 1e3 + t0, r.bottleneck)
            for c, ms, r in zip(t["concurrency"], t["itl_ms"], model, strict=True)]
    return rows, t0


#: GPU-side synchronisation per collective (seconds), low and high: small all-reduces on
#: an HGX 8x H100 node take about 6 us at 2 GPUs with CUDA graphs and NVLS (NVIDIA/nccl
#: issue 1259) and more with more GPUs, up to about 17 us at 8 (as cited with PyTorch
#: issue 131739; the 8-GPU figure was not re-checked here). The designs' own
#: per-collective cost is the interface's; this is the GPU's launch and barrier.
GPU_SYNC_S = (6e-6, 17e-6)


# -- DeepEP's published low-latency dispatch and combine ----------------------------------

#: DeepEP README, "Low-latency kernels with pure RDMA" table: H800 with ConnectX-7
#: InfiniBand 400 Gb/s RDMA NICs (about 50 GB/s each), 128 tokens per batch, hidden 7168,
#: top-8 experts, FP8 dispatch and BF16 combine; EP32: dispatch 155 us, combine 273 us.
DEEPEP_LL = {"ep": 32, "batch": 128, "link_bytes_per_s": 50e9,
             "dispatch_us": 155.0, "combine_us": 273.0,
             "source": "github.com/deepseek-ai/DeepEP README, low-latency kernels table"}
#: The designs' link: 64 bytes per 1 GHz cycle (SPEC.md).
LINK_BYTES_PER_S = 64e9


def deepep_calibration(carriers, ref=DEEPEP_LL, layer=None):
    """One MoE layer's dispatch and combine of DeepSeek-V3 at DeepEP's setting (EP32,
    128 tokens per GPU, FP8 dispatch, BF16 combine) carried by each design, against
    DeepEP's published latencies.

    ``carriers`` maps a label to a :class:`~pymodel.workloads.carriers.Carrier`. Each
    phase's time comes from :func:`~pymodel.workloads.timing.comm_time` at the designs'
    link (64 GB/s) and is rescaled to DeepEP's link: the payload part (the most bytes any
    GPU sends in the phase, at 64 bytes per cycle) is stretched by ``64e9 /
    link_bytes_per_s``; the rest (headers, control, waits, posting) is kept. Returns a
    list of dicts: ``design``, ``phase``, ``model_us`` (at 64 GB/s), ``at_link_us``,
    ``published_us``, ``residual`` (``at_link / published - 1``), ``payload_mb`` (per
    GPU). ``layer``: the MoE layer (default the first).
    """
    import numpy as np

    from pymodel.workloads.config import load_model
    from pymodel.workloads.generate import decode_step
    from pymodel.workloads.timing import comm_time
    m = load_model("deepseek-v3")
    tr = decode_step(m, Deployment(batch=ref["batch"], ep=ref["ep"]))
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
            out.append({"design": label, "phase": phase, "model_us": t / 1e3,
                        "at_link_us": float(at_link) / 1e3, "published_us": pub,
                        "residual": float(at_link) / 1e3 / pub - 1,
                        "payload_mb": float(sent.max()) / 1e6})
    return out
