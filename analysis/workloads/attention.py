"""The attention lever like for like: one model at MHA, GQA, MQA and an MLA-style latent
(:func:`analysis.workloads.config.attention_variants`, same layers, width and heads), and
what each does to the sequences that fit and so to the batch (:func:`attention_rows`;
docs/inference.md, section 9b)."""

from analysis.workloads.config import (
    ATTENTION_BASE,
    MLA_LATENT,
    attention_variants,
    kv_bytes_per_token,
)
from analysis.workloads.generate import Deployment
from analysis.workloads.grid import (
    ACCELERATOR,
    CALIBRATION,
    CONTEXT,
    ISSUER,
    PAIRING,
    carriers,
    step_calibration,
)
from analysis.workloads.roofline import decode_roofline

__all__ = ["ATTENTION_BASE", "MLA_LATENT", "attention_variants", "attention_rows"]


def attention_rows(base=ATTENTION_BASE, tp=8, context=CONTEXT, pairing=PAIRING,
                   issuer=ISSUER, calibration=CALIBRATION):
    """The attention lever like for like (docs/inference.md, section 9b): each of
    :func:`attention_variants` at TP ``tp`` (RS+AG all-reduces, 8 ports), context
    ``context``: KV bytes per token, the most sequences that fit next to the weights in
    the accelerator's HBM (``fit_batch``: the held bytes grow linearly with the batch),
    and a decode step at batch 64 and at that batch for both designs (step time,
    tokens/s per GPU, RDMA control actions per useful KiB, the fastest covered rung).
    Cached bytes per sequence decide how many sequences fit; the batch then decides the
    coordination density."""
    from analysis.workloads.roofline import ACCELERATORS
    cal = step_calibration(calibration)
    dec = carriers(issuer, pairing)
    hbm = ACCELERATORS[ACCELERATOR].hbm_bytes
    rows = []
    for label, m in attention_variants(base).items():
        def step(b, car, m=m):
            return decode_roofline(m, Deployment(batch=b, tp=tp, context=context),
                                   accelerator=ACCELERATOR, carrier=car, allreduce="rsag",
                                   ports=8, hbm_efficiency=cal.hbm_efficiency,
                                   overhead_s=cal.overhead_s)
        h1, h2 = step(1, None).held_bytes, step(2, None).held_bytes
        fit = max(0, int((hbm - h1) // (h2 - h1)) + 1) if h1 <= hbm else 0
        row = {"attention": label, "model": m.title, "kv_bytes_per_token":
               kv_bytes_per_token(m), "fit_batch": fit, "tp": tp, "context": context}
        for tag, b in (("b64", 64), ("fit", fit)):
            if not b:
                continue
            nic = step(b, dec["nic"])
            rd = min((step(b, c) for k, c in dec.items() if k != "nic"),
                     key=lambda r: r.coordination_s)
            row[f"{tag}_nic_step_ms"] = nic.step_s * 1e3
            row[f"{tag}_rdma_step_ms"] = rd.step_s * 1e3
            row[f"{tag}_nic_tok_s_gpu"] = nic.tokens / nic.step_s / nic.gpus
            row[f"{tag}_rdma_tok_s_gpu"] = rd.tokens / rd.step_s / rd.gpus
            row[f"{tag}_rdma_ctrl_per_kib"] = (rd.ctrl_ops_per_token * 1024
                                              / rd.useful_bytes_per_token)
        rows.append(row)
    return rows
