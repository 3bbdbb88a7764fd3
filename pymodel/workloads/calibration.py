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

__all__ = ["NIM", "load_nim", "nim_calibration", "CalibrationRow"]

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
