"""The calibration tables of the "Inference" section (:mod:`scripts.reporting.inference`):
DeepEP's dispatch and combine, the GPU synchronisation per collective, and the words on
the step calibration in use."""

from analysis.workloads.calibration import DEEPEP_TABLES, GPU_SYNC_S, deepep_calibration
from analysis.workloads.grid import CONTEXT
from spec.rdma_engine import LADDER

from .inference_rows import FASTEST, _pick, _table

_CAL_HERE = "<!-- calibrations -->"


def _more_calibrations(grid, scenarios, step_cal):
    """DeepEP's dispatch/combine (NIC, pipelined and fastest-at-EP32 rungs) and the GPU
    synchronisation term on the TP scenarios at batch 1 (pairing :data:`PAIRING`; steps
    with the grid's ``step_cal``)."""
    from analysis.workloads.generate import Deployment
    from analysis.workloads.grid import carriers
    from analysis.workloads.roofline import decode_roofline
    cs = carriers()
    pick = {"nic": cs["nic"], f"rdma {LADDER[1][0]}": cs[f"rdma {LADDER[1][0]}"],
            "rdma +doorbell batching 16": cs["rdma +doorbell batching 16"]}
    deepep = [r for ref in DEEPEP_TABLES for r in deepep_calibration(pick, ref)]
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
    d0, d1 = DEEPEP_TABLES
    out = ["### Calibration against DeepEP's low-latency kernels", "",
           f"Published: EP{d0['ep']}, {d0['batch']} tokens per GPU, H800 with a ConnectX-7 "
           f"at about {d0['link_bytes_per_s'] / 1e9:.0f} GB/s each; {d0['table']} "
           f"({d0['source']}): dispatch {d0['dispatch_us']:.0f} us, combine "
           f"{d0['combine_us']:.0f} us; {d1['table']} ({d1['source']}; 7 of a GPU's 31 "
           f"peers in its node of {d1['gpus_per_node']}): dispatch {d1['dispatch_us']:.0f} "
           f"us, combine {d1['combine_us']:.0f} us. Model: one MoE layer of DeepSeek-V3 at "
           "that setting (pairing integrated; for NVLink + RDMA only the messages between "
           "nodes), timed at the designs' 64 GB/s, then its payload part stretched to the "
           "published link (docs/inference.md, section 8b). 'delivered' is the payload "
           "over the design divided by the published time: what DeepEP's RDMA link "
           "carried.", "",
           _table(["table", "design", "phase", "payload per GPU MB",
                   "payload at 50 GB/s us", "model us (64 GB/s)", "model us (at their link)",
                   "published us", "residual", "delivered GB/s"],
                  [[r["table"], r["design"], r["phase"], r["payload_mb"], r["payload_us"],
                    r["model_us"], r["at_link_us"], r["published_us"],
                    f"{100 * r['residual']:+.0f} %", r["delivered_gbs"]]
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
