"""The calibration tables of the "Inference" section (:mod:`scripts.reporting.inference`):
DeepEP's dispatch and combine, the GPU synchronisation per collective, and the words on
the step calibration in use."""

from pymodel.workloads.calibration import DEEPEP_LL, GPU_SYNC_S, deepep_calibration
from pymodel.workloads.grid import CONTEXT
from spec.rdma_engine import LADDER

from .inference_rows import FASTEST, _pick, _table

_CAL_HERE = "<!-- calibrations -->"


def _more_calibrations(grid, scenarios, step_cal):
    """DeepEP's dispatch/combine (NIC, pipelined and fastest-at-EP32 rungs) and the GPU
    synchronisation term on the TP scenarios at batch 1 (pairing :data:`PAIRING`; steps
    with the grid's ``step_cal``)."""
    from pymodel.workloads.generate import Deployment
    from pymodel.workloads.grid import carriers
    from pymodel.workloads.roofline import decode_roofline
    cs = carriers()
    pick = {"nic": cs["nic"], f"rdma {LADDER[1][0]}": cs[f"rdma {LADDER[1][0]}"],
            "rdma +doorbell batching 16": cs["rdma +doorbell batching 16"]}
    deepep = deepep_calibration(pick)
    sync = []
    for sc in scenarios:
        if sc.tp == 1:
            continue
        for d in ("nic", FASTEST):
            r0 = _pick(grid, sc.label, 1, d)
            if r0 is None:
                continue
            car = cs["nic"] if d == "nic" else cs[f"rdma {r0['rung']}"]
            row = {"scenario": sc.label, "design": "NIC" if d == "nic" else
                   f"RDMA {r0['rung']}", "comm_us": r0["coordination_s"] * 1e6,
                   "step_ms": r0["step_s"] * 1e3}
            for k, v in zip(("low", "high"), GPU_SYNC_S, strict=True):
                r = decode_roofline(sc.model, Deployment(batch=1, tp=sc.tp, ep=sc.ep,
                                                         context=CONTEXT),
                                    carrier=car, allreduce=sc.allreduce, ports=sc.ports,
                                    collective_sync_s=v,
                                    hbm_efficiency=step_cal.hbm_efficiency,
                                    overhead_s=step_cal.overhead_s)
                row[f"sync_{k}_ms"] = r.sync_s * 1e3
                row[f"step_{k}_ms"] = r.step_s * 1e3
            sync.append(row)
    return {"deepep": deepep, "sync": sync}


def calibration_markdown(cal):
    """The DeepEP and GPU-synchronisation calibration tables as markdown."""
    d = DEEPEP_LL
    out = ["### Calibration against DeepEP's low-latency kernels", "",
           f"Published ({d['source']}): EP{d['ep']}, {d['batch']} tokens per GPU, "
           f"ConnectX-7 at about {d['link_bytes_per_s'] / 1e9:.0f} GB/s: dispatch "
           f"{d['dispatch_us']:.0f} us, combine {d['combine_us']:.0f} us. Model: one MoE "
           "layer of DeepSeek-V3 at that setting (pairing integrated), timed at the "
           "designs' 64 GB/s, then its payload part stretched to the published link "
           "(docs/inference.md, section 8b).", "",
           _table(["design", "phase", "payload per GPU MB", "model us (64 GB/s)",
                   "model us (at their link)", "published us", "residual"],
                  [[r["design"], r["phase"], r["payload_mb"], r["model_us"],
                    r["at_link_us"], r["published_us"], f"{100 * r['residual']:+.0f} %"]
                   for r in cal["deepep"]]), ""]
    lo, hi = (f"{v * 1e6:.0f} us" for v in GPU_SYNC_S)
    out += ["### GPU synchronisation per collective", "",
            f"A GPU-side term per collective (launch and barrier: {lo} to {hi} for small "
            "all-reduces on 8x H100; NVIDIA/nccl issue 1259, PyTorch issue 131739) added "
            "to the step, batch 1, on top of each design's own time.", "",
            _table(["scenario", "design", "comm us", "step ms", f"sync ms ({lo})",
                    f"step ms ({lo})", f"sync ms ({hi})", f"step ms ({hi})"],
                   [[r["scenario"], r["design"], r["comm_us"], r["step_ms"],
                     r["sync_low_ms"], r["step_low_ms"], r["sync_high_ms"],
                     r["step_high_ms"]] for r in cal["sync"]]), ""]
    return "\n".join(out)



def _calibration_words(step_cal, micro_batches):
    if step_cal.name == "pure":
        words = "Steps: the pure roofline (all of the HBM bandwidth, no overhead)"
    else:
        words = (f"Steps calibrated ({step_cal.name}): HBM at "
                 f"{100 * step_cal.hbm_efficiency:.1f} % of peak (FlashMLA's best "
                 f"memory-bound decode) and {step_cal.overhead_s * 1e3:.2f} ms per step "
                 "(fitted to NVIDIA NIM at concurrency 1, "
                 f"{100 * step_cal.check_residual:+.1f} % at {step_cal.check_concurrency}; "
                 "section 'Calibration against NVIDIA NIM')")
    if micro_batches == 2:
        words += ("; two micro-batches overlapped (one communicates while the other "
                  "computes: step = max(W_a, M_b) + max(W_b, M_a) + overhead)")
    return words + "."
