"""The "Inference" section of the report: the inference grid's tables and plots.

:func:`inference_section` runs the grid of :mod:`pymodel.workloads.grid` (every scenario
at every batch, carried by the NIC and by the RDMA engine on each rung of its
optimisation ladder; KV bytes per token; KV transfers plain and coalesced; the NIM
calibration), writes its PNG plots and ``inference.json`` into a folder and returns the
section's markdown. Both designs are attached alike in every row (the pairings of
:data:`pymodel.workloads.grid.PAIRINGS`: the NIC integrated against the RDMA engine on
die, both behind PCIe; each row names its pairing). The tables and plots show the NIC
against two RDMA rungs: the pipelined engine and, per row, the fastest rung the fast
path covers (:data:`SHOWN`, named in each row); ``inference.json`` holds every rung.
docs/inference.md gives each formula and source. matplotlib is imported only here,
when plotting.
"""

import json
import time
from dataclasses import asdict
from pathlib import Path

from pymodel.workloads.calibration import (
    DEEPEP_LL,
    GPU_SYNC_S,
    HBM_EFFICIENCY,
    NIM,
    NIM_CHECK,
    NIM_FIT,
    deepep_calibration,
    nim_calibration,
)
from pymodel.workloads.config import load_model
from pymodel.workloads.grid import (
    ACCELERATOR,
    BATCHES,
    CALIBRATION,
    CONTEXT,
    ISSUER,
    KV_CASE,
    KV_ISSUERS,
    KV_RUNG,
    LEVER_KV_BATCH,
    LEVER_KV_ISSUER,
    LEVER_PROMPT,
    LEVERS,
    PAIRING,
    PAIRINGS,
    SCENARIOS,
    fastest_rdma,
    kv_rows,
    kv_transfer_rows,
    lever_rows,
    run_grid,
    step_calibration,
)
from pymodel.workloads.roofline import ACCELERATORS, REMEDY
from spec.rdma_engine import LADDER

from .plots import figure_saver

__all__ = ["inference_section", "SHOWN", "sweep_markdown", "SWEEP_COLUMNS"]

#: The designs the tables and plots compare: ``(grid key, label)``.
#: ``rdma fastest`` is, per (pairing, scenario, batch), the covered rung with the least
#: communication time (:func:`pymodel.workloads.grid.fastest_rdma`; its ``rung`` names it).
FASTEST = "rdma fastest"
SHOWN = (("nic", "NIC"), (f"rdma {LADDER[1][0]}", "RDMA pipelined"),
         (FASTEST, "RDMA fastest"))
_STYLE = {"nic": "-", f"rdma {LADDER[1][0]}": "--", FASTEST: ":"}


def _fmt(v, digits=2):
    if isinstance(v, str):
        return v
    if isinstance(v, int) or abs(v) >= 100:
        return f"{int(round(v)):,}"
    return f"{v:,.{digits}f}"


def _table(head, rows):
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_fmt(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _plots(out, grid, kv, kvt, cal, t0, scenarios, batches):
    plt, save, names = figure_saver(out)

    comm = [s for s in scenarios if s.tp > 1 or s.ep > 1]
    comm_lines = tuple((d, "coordination_s", _STYLE[d], what) for d, what in SHOWN)
    ctrl_lines = tuple((d, "ctrl_ops_per_token", _STYLE[d], f"{what} control actions")
                       for d, what in SHOWN[1:]) + (
        ("nic", "credits_per_token", "-", "NIC link credits"),)
    for lines, ylabel, fname in (
            (comm_lines, "communication per step (us)", "inference_comm_vs_batch.png"),
            (ctrl_lines, "control operations per decoded token",
             "inference_ctrl_per_token.png")):
        fig, ax = plt.subplots(figsize=(8, 5))
        for i, sc in enumerate(comm):
            for d, key, style, what in lines:
                pts = [r for r in grid if r["scenario"] == sc.label and r["design"] == d
                       and r.get("covered", True) and r["pairing"] == PAIRING]
                ys = [r[key] * (1e6 if key.endswith("_s") else 1) for r in pts]
                ax.plot([r["batch"] for r in pts], ys, style, color=f"C{i}", marker="o",
                        ms=3, label=f"{sc.label} ({what})")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch (sequences per attention group)")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
        save(fig, fname)

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar([f"{r['model']}\n{r['attention']}" for r in kv], [r["bf16"] / 1024 for r in kv],
           color=[{"MHA": "C3", "GQA": "C0", "MQA": "C2", "MLA": "C1"}[r["attention"]]
                  for r in kv])
    for i, r in enumerate(kv):
        ax.text(i, r["bf16"] / 1024, f"{r['bf16']:,}", ha="center", va="bottom", fontsize=7)
    ax.set_ylabel("KV cache per token, BF16 (KiB)")
    ax.set_yscale("log")
    save(fig, "inference_kv_bytes_per_token.png")

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    labels = [f"{r['coalesce']}\nrun {r['run_blocks']}" for r in kvt]
    a1.bar(labels, [r["descriptors"] for r in kvt], color="C0")
    a1.set_yscale("log")
    a1.set_ylabel("descriptors per GPU per request")
    for j, iss in enumerate(KV_ISSUERS):
        a2.plot(labels, [r[f"post_{iss}_us"] for r in kvt], marker="o", color=f"C{j}",
                label=f"posting, {iss}")
    a2.plot(labels, [r["nic_us"] for r in kvt], "k--", marker="s", label="transfer, NIC")
    a2.plot(labels, [r["rdma_cpu_us"] for r in kvt], "k:", marker="^",
            label="transfer, RDMA (cpu)")
    a2.plot(labels, [r["rdma_cpu_framework_us"] for r in kvt], "k-.", marker="v",
            label="transfer, RDMA (cpu_framework)")
    a2.set_yscale("log")
    a2.set_ylabel("us per request (per GPU)")
    a2.legend(fontsize=7)
    fig.suptitle("Llama-3-70B TP8, 1,888-token prompt (118 blocks of 16)")
    save(fig, "inference_kv_transfer.png")

    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch
    classes = ("compute", "memory", "coordination")
    cmap = ListedColormap(["#d62728", "#1f77b4", "#ffbf00"])
    fig, axes = plt.subplots(1, len(SHOWN), figsize=(5.5 * len(SHOWN), 4.2), sharey=True)
    for ax, (d, what) in zip(axes, SHOWN, strict=True):
        cells = [[_pick(grid, sc.label, b, d) for b in batches] for sc in scenarios]
        ax.imshow([[classes.index(r["bottleneck"]) if r else -1 for r in row]
                   for row in cells], cmap=cmap, vmin=0, vmax=2, aspect="auto")
        for y, row in enumerate(cells):
            for x, r in enumerate(row):
                label = f"{100 * r['coordination_s'] / r['step_s']:.0f}" if r else "n/c"
                ax.text(x, y, label, ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(batches)), [str(b) for b in batches])
        ax.set_yticks(range(len(scenarios)), [s.label for s in scenarios], fontsize=7)
        ax.set_xlabel("batch")
        ax.set_title(f"{what} (numbers: communication, % of the step)", fontsize=9)
    fig.legend(handles=[Patch(color=cmap(i), label=c) for i, c in enumerate(classes)],
               loc="lower center", ncol=3, fontsize=8)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    save(fig, "inference_bottleneck_map.png")

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for i, sc in enumerate(scenarios):
        for d, what in SHOWN:
            pts = [r for r in grid if r["scenario"] == sc.label and r["design"] == d
                   and r.get("covered", True) and r["pairing"] == PAIRING]
            a1.plot([r["batch"] for r in pts], [r["step_s"] * 1e3 for r in pts], _STYLE[d],
                    color=f"C{i}", label=f"{sc.label} ({what})")
            a2.plot([r["batch"] for r in pts], [r["tokens_per_s"] for r in pts], _STYLE[d],
                    color=f"C{i}")
    for ax in (a1, a2):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch")
        ax.grid(True, which="both", alpha=0.3)
    a1.set_ylabel("per-token latency (ms)")
    a2.set_ylabel("tokens per second (deployment)")
    a1.legend(fontsize=6)
    save(fig, "inference_latency_throughput.png")

    fig, ax = plt.subplots(figsize=(6, 4))
    cs = [r.concurrency for r in cal]
    ax.plot(cs, [r.measured_ms for r in cal], "ko-", label="NIM 1.8.0 (measured)")
    ax.plot(cs, [r.model_ms for r in cal], "C0s--", label="roofline")
    ax.plot(cs, [r.calibrated_ms for r in cal], "C1^:",
            label=f"roofline + {t0:.2f} ms per step (fitted at 1)")
    ax.set_xlabel("concurrency (batch)")
    ax.set_ylabel("inter-token latency (ms)")
    ax.legend(fontsize=7)
    ax.grid(True, alpha=0.3)
    save(fig, "inference_nim_calibration.png")
    return names


def inference_section(out_dir, *, plots=True, scenarios=SCENARIOS, batches=BATCHES,
                      levers=LEVERS, calibration=CALIBRATION, micro_batches=1):
    """Run the inference grid, write plots and ``inference.json`` into ``out_dir``
    (created if missing) and return the markdown of the "Inference" section.

    ``plots=False`` skips matplotlib (the tables and JSON are still written); ``levers``
    picks the rows of the lever table (:data:`pymodel.workloads.grid.LEVERS`);
    ``calibration`` (:data:`pymodel.workloads.grid.CALIBRATIONS`, default the NIM fit) and
    ``micro_batches`` (2: dual micro-batch overlap) go to the grid. The markdown says how
    long the grid took (wall time, seconds).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    grid = run_grid(scenarios, batches, pairings=tuple(PAIRINGS), calibration=calibration,
                    micro_batches=micro_batches)
    grid += _fastest_rows(grid, scenarios, batches)
    t_grid = time.perf_counter() - t_start
    kv = kv_rows()
    kvt = kv_transfer_rows()
    cal, t0 = nim_calibration()
    levers = lever_rows(levers=levers, calibration=calibration)
    step_cal = step_calibration(calibration)
    cal2 = _more_calibrations(grid, scenarios, step_cal)
    elapsed = time.perf_counter() - t_start
    pngs = _plots(out, grid, kv, kvt, cal, t0, scenarios, batches) if plots else []
    with open(out / "inference.json", "w") as f:
        json.dump({"grid": grid, "kv_bytes_per_token": kv, "kv_transfer": kvt,
                   "nim_calibration": [dict(asdict(r), residual=r.residual,
                                            calibrated_residual=r.calibrated_residual)
                                       for r in cal], "nim_overhead_ms": t0,
                   "levers": levers, "deepep_calibration": cal2["deepep"],
                   "gpu_sync": cal2["sync"],
                   "grid_seconds": t_grid, "seconds": elapsed}, f, indent=1)
    md = _markdown(grid, kv, kvt, cal, t0, pngs, t_grid, elapsed, scenarios, batches,
                   step_cal, micro_batches)
    md = md.replace(_CAL_HERE, calibration_markdown(cal2))
    return md.replace(_LEVERS_HERE, lever_markdown(levers))


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


_LEVERS_HERE = "<!-- levers -->"


def lever_markdown(rows):
    """The lever table (:func:`pymodel.workloads.grid.lever_rows`) as markdown."""
    out = ["### Levers: what each does to coordination density", "",
           f"Pairing `{PAIRING}`. RDMA: the fastest covered rung (named); decode steps "
           f"posted by {ISSUER} threads, KV transfers (one request of {LEVER_PROMPT:,} "
           f"prompt tokens) by a `{LEVER_KV_ISSUER}` issuer. Control per useful KiB: the "
           "RDMA engine's per-message actions, the NIC's link credits (one per 64-byte "
           "beat). Descriptors (WQEs) per MiB of useful bytes. State bits in flight: "
           "each design's high-water mark times ports and GPUs (the whole deployment). "
           "Time: the step (decode "
           "rows, roofline max(compute, memory) + communication + the calibration's "
           "overhead, as the grid) or the transfer over one "
           f"port (KV rows); the attention rows add the KV read of a step at batch "
           f"{LEVER_KV_BATCH}, context {CONTEXT}, on {ACCELERATOR} at the calibrated HBM "
           "efficiency (what MHA -> GQA -> MQA "
           "-> MLA buys, a memory term).", ""]
    body = []
    for r in rows:
        t_nic = r.get("nic_step_ms", r["nic_us"] / 1e3)
        t_rdma = r.get("rdma_step_ms", r["rdma_us"] / 1e3)
        body.append([r["lever"], r["setting"], r["workload"], r["messages"],
                     r["nic_credits_per_kib"], r["rdma_ctrl_per_kib"], r["rdma_wqes_per_mib"],
                     r["rdma_rung"], r["rdma_host_per_useful"],
                     f"{r['nic_inflight_bits']:,.0f} / {r['rdma_inflight_bits']:,.0f}",
                     t_nic, t_rdma,
                     "step" if "nic_step_ms" in r else "transfer",
                     r.get("kv_read_ms", "-")])
    out += [_table(["lever", "setting", "workload", "messages", "NIC credits / useful KiB",
                    "RDMA control / useful KiB", "RDMA descriptors / MiB", "RDMA rung",
                    "RDMA host B / useful B", "state bits in flight NIC / RDMA", "NIC ms",
                    "RDMA ms", "time is", "KV read ms"], body), ""]
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


def _markdown(grid, kv, kvt, cal, t0, pngs, t_grid, elapsed, scenarios, batches, step_cal,
              micro_batches):
    acc = ACCELERATORS[ACCELERATOR]
    md = ["## Inference", "",
          "One decode step of real models, carried by both designs (per-message costs "
          "from the golden model's fast path; the NIC behind PCIe from its cycle-level "
          "model), and a decode roofline on "
          f"{acc.title} (HBM {acc.hbm_bytes_per_s / 1e12:.2f} TB/s, dense BF16 "
          f"{acc.bf16_flops / 1e12:.0f} TFLOP/s, FP8 {acc.fp8_flops / 1e12:.0f}). "
          f"Context {CONTEXT} tokens, KV cache BF16; NIC = compact header; RDMA = the "
          "pipelined engine and, per row, the fastest rung of its ladder that the fast "
          "path covers (named; every rung is in inference.json), posted by "
          f"{ISSUER} threads (DeepEP policy: a doorbell per 4 WQEs, every WQE signalled, "
          "where the rung does not set its own). Both designs are attached alike in every "
          "row: pairing `integrated` = the NIC inside the accelerator against the RDMA "
          "engine on the `on_die` host profile; `pcie` = both behind the PCIe profile "
          f"(plots: `{PAIRING}`). "
          + _calibration_words(step_cal, micro_batches) + " "
          "Formulas and sources: docs/inference.md. The whole grid "
          f"({len(grid)} rows) ran in {t_grid:.1f} s, the section in {elapsed:.1f} s.", ""]
    md += ["### Communication per decode step", "",
           "Per-step communication time (critical path over the phases' dependencies) and "
           "the share of it that is not payload on the links (organising). `ports`: copies "
           "of the design per GPU (8 for scale-up TP, NVLink-class; 1 for scale-out EP).",
           ""]
    show = [b for b in (1, 16, 64, 256) if b in batches]
    comm = [sc for sc in scenarios if sc.tp > 1 or sc.ep > 1]
    rows = []
    (_, _), (pipe, _), (best, _) = SHOWN
    for pairing, knobs in PAIRINGS.items():
        att = f"{knobs['nic']['attachment']} / {knobs['rdma']['host']}"
        for sc in comm:
            for b in show:
                n = _pick(grid, sc.label, b, "nic", pairing)
                rp = _pick(grid, sc.label, b, pipe, pairing)
                rb = _pick(grid, sc.label, b, best, pairing)
                rows.append([pairing, att, sc.label, b, sc.ports, n["messages"],
                             n["coordination_s"] * 1e6, _v(rp, "coordination_s", 1e6),
                             _v(rb, "coordination_s", 1e6),
                             "n/c" if rb is None else rb["rung"],
                             "n/c" if rb is None else rb["coordination_s"]
                             / n["coordination_s"],
                             100 * n["organising_s"] / n["coordination_s"],
                             "n/c" if rb is None else 100 * rb["organising_s"]
                             / rb["coordination_s"]])
    md += [_table(["pairing", "attachment NIC / RDMA", "scenario", "batch", "ports",
                   "messages / step", "NIC us", "RDMA pipelined us", "RDMA fastest us",
                   "fastest rung", "fastest / NIC", "NIC organising %",
                   "RDMA fastest organising %"], rows), ""]
    md += ["### Coordination density per design", "",
           "Per decoded token (all GPUs of the deployment): the RDMA engine's per-message "
           "control actions (doorbells, WQE reads, context lookups, misses and "
           "write-backs, ACKs, CQEs), per token and per KiB of useful bytes (the payload "
           "of data messages; flags and counts are not useful bytes); the NIC's link "
           "credit updates apart (one per 64-byte beat, a counter in the link, no "
           "per-message state: not the same kind of action); the state each design holds "
           "in flight (its high-water mark while streaming the step's heaviest message "
           "class, times ports and GPUs, per token); host-interface bytes per useful byte "
           "(payload, control and TLP overheads at both ends; the integrated NIC has none: "
           "its stores come from the accelerator's fabric).", ""]
    rows = []
    for pairing in PAIRINGS:
        for sc in comm:
            for b in (x for x in (1, 256) if x in batches):
                n = _pick(grid, sc.label, b, "nic", pairing)
                for key, what in SHOWN[1:]:
                    r = _pick(grid, sc.label, b, key, pairing)
                    label = what if key != best or r is None else f"{what} ({r['rung']})"
                    rows.append([pairing, sc.label, b, label, r["attachment"] if r else "n/c",
                                 _v(r, "ctrl_ops_per_token"), _v(r, "ctrl_per_useful_kb"),
                                 _v(r, "inflight_bits_per_token"),
                                 _v(r, "host_bytes_per_useful_byte"),
                                 _v(r, "step_s", 1e3)])
                rows.append([pairing, sc.label, b, "NIC", n["attachment"],
                             f"{n['credits_per_token']:,.0f} credits",
                             f"{n['credits_per_token'] * 1024 / n['useful_bytes_per_token']:.2f}"
                             " credits", n["inflight_bits_per_token"],
                             n["host_bytes_per_useful_byte"] if n["attachment"] == "pcie"
                             else "-", n["step_s"] * 1e3])
    md += [_table(["pairing", "scenario", "batch", "design", "attachment",
                   "control actions / token", "control actions / useful KiB",
                   "state bits in flight / token", "host bytes / useful byte",
                   "step ms"], rows), ""]
    md += [_LEVERS_HERE, ""]
    md += ["### KV cache per token (MHA, GQA, MQA, MLA)", "",
           "FP8 MLA (DeepSeek-V3) as FlashMLA stores it: per layer 512 FP8 latent values, "
           "4 float32 scales and 64 BF16 RoPE values, 656 bytes. Parameters: by the "
           "formula (docs/inference.md, section 1) and as the model card rounds them.", "",
           _table(["model", "attention", "BF16 bytes", "FP8 bytes", "params (formula)",
                   "params (card)"],
                  [[r["model"], r["attention"], r["bf16"], r["fp8"], r["params"],
                    f"{r['params_card'] / 1e9:g} B"] for r in kv]), ""]
    c = KV_CASE
    md += ["### KV transfer, prefill -> decode: descriptors and posting", "",
           f"{load_model(c['model']).title}, TP{c['tp']}, {c['prompt_tokens']:,}-token prompt "
           f"({c['prompt_tokens'] // 16} blocks of 16), per GPU. Posting time = WQEs x the "
           "issuer's cost per WQE and doorbell (docs/inference.md, issuer profiles); "
           f"transfer time over one port; RDMA on the {KV_RUNG} rung; pairing "
           f"`{PAIRING}` (the NIC integrated, the RDMA engine on die).", ""]
    md += [_table(["coalescing", "run (blocks)", "descriptors", "bytes each",
                   "post cpu us", "post cpu_framework us", "post gpu us",
                   "post controller us", "NIC us", "RDMA (cpu) us",
                   "RDMA (cpu_framework) us"],
                  [[r["coalesce"], r["run_blocks"], r["descriptors"], r["bytes_each"],
                    r["post_cpu_us"], r["post_cpu_framework_us"], r["post_gpu_us"],
                    r["post_controller_us"], r["nic_us"], r["rdma_cpu_us"],
                    r["rdma_cpu_framework_us"]] for r in kvt]), ""]
    md += ["### Which bottleneck dominates", "",
           "step = max(compute, memory) + coordination + overhead (memory at the "
           "calibrated HBM efficiency; the fixed overhead is no regime); the largest of "
           "compute, memory and coordination names the regime and the seed's remedy: "
           + "; ".join(f"{k} -> {v}" for k, v in REMEDY.items()) + ".", ""]
    rows = []
    for sc in scenarios:
        for b in show:
            n = _pick(grid, sc.label, b, "nic")
            r = _pick(grid, sc.label, b, best)
            rows.append([sc.label, b, n["compute_s"] * 1e3, n["memory_s"] * 1e3,
                         n["coordination_s"] * 1e3, _v(r, "coordination_s", 1e3),
                         "-" if r is None else r["rung"],
                         n["step_s"] * 1e3, _v(r, "step_s", 1e3), n["tokens_per_s"],
                         _v(r, "tokens_per_s"), n["bottleneck"],
                         "-" if r is None else r["bottleneck"],
                         "yes" if n["fits"] else "no"])
    md += [f"Pairing `{PAIRING}`; a scenario without communication has no RDMA rung (-).",
           "", _table(["scenario", "batch", "compute ms", "memory ms", "comm NIC ms",
                       "comm RDMA fastest ms", "fastest rung", "step NIC ms",
                       "step RDMA fastest ms", "tok/s NIC", "tok/s RDMA fastest",
                       "bound NIC", "bound RDMA fastest", "fits HBM"], rows), ""]
    md += [_CAL_HERE, ""]
    a = NIM["assumed"]
    md += ["### Calibration against NVIDIA NIM (Llama-3.1-8B, H100)", "",
           f"Measured: NIM 1.8.0 table ({NIM['table']['source']}). Assumed (not stated in "
           f"the excerpt we have): {a['gpus']} GPU, {a['weights_dtype'].upper()} weights, "
           f"{a['kv_dtype'].upper()} KV cache, {a['input_tokens']} input / "
           f"{a['output_tokens']} output tokens (mean context "
           f"{a['input_tokens'] + a['output_tokens'] // 2}); docs/inference.md says why. "
           f"Calibrated = roofline + {t0:.2f} ms per step, the one parameter, fitted at "
           "concurrency 1. Grid fit = the roofline at FlashMLA's HBM efficiency "
           f"({100 * HBM_EFFICIENCY:.1f} % of peak, cited, not fitted) + "
           f"{NIM_FIT.overhead_s * 1e3:.2f} ms per step fitted at concurrency 1, checked at "
           f"{NIM_CHECK}: what the grid applies unless asked for the pure roofline.", ""]
    fit, _ = nim_calibration(hbm_efficiency=HBM_EFFICIENCY)
    md += [_table(["concurrency", "measured ITL ms", "roofline ms", "residual",
                   "calibrated ms", "residual", "grid fit ms", "residual", "bound"],
                  [[r.concurrency, r.measured_ms, r.model_ms, f"{100 * r.residual:+.0f} %",
                    r.calibrated_ms, f"{100 * r.calibrated_residual:+.0f} %",
                    f.calibrated_ms, f"{100 * f.calibrated_residual:+.1f} %", r.bottleneck]
                   for r, f in zip(cal, fit, strict=True)]), ""]
    for p in pngs:
        md += [f"![{p}]({p})", ""]
    return "\n".join(md)


def _fastest_rows(grid, scenarios, batches):
    """One ``rdma fastest`` row per (pairing, scenario, batch): a copy of the fastest
    covered rung's row with ``rung`` naming it (none where no rung covers the step)."""
    out = []
    for pairing in PAIRINGS:
        for sc in scenarios:
            for b in batches:
                r = fastest_rdma(grid, sc.label, b, pairing)
                if r is not None:
                    rung = r["design"][len("rdma "):] if r["messages"] else "-"
                    out.append(dict(r, design=FASTEST, rung=rung))
    return out


def _pick(grid, label, batch, design, pairing=PAIRING):
    """The grid row of (pairing, scenario, batch, design); ``None`` where the fast path
    did not cover it."""
    row = next((r for r in grid if r["scenario"] == label and r["batch"] == batch
                and r["design"] == design and r.get("pairing", PAIRING) == pairing), None)
    return row if row is not None and row.get("covered", True) else None


def _v(row, key, scale=1.0):
    return "n/c" if row is None else row[key] * scale


#: The columns of each sweep's table (:mod:`pymodel.workloads.sweeps`): ``(key, head)``.
_STEP_COLS = (("kv_gb", "KV GB / GPU"), ("memory_ms", "memory ms"),
              ("compute_ms", "compute ms"), ("nic_comm_us", "NIC comm us"),
              ("rdma_comm_us", "RDMA comm us"), ("rdma_rung", "RDMA rung"),
              ("nic_step_ms", "NIC step ms"), ("rdma_step_ms", "RDMA step ms"),
              ("nic_bound", "bound NIC"), ("rdma_bound", "bound RDMA"), ("fits", "fits HBM"))
_KV_COLS = (("descriptors", "descriptors / prefill GPU"),
            ("descriptors_in", "most descriptors into one decode GPU"),
            ("bytes_each", "bytes each"), ("nic_us", "NIC us"), ("rdma_post_us", "RDMA post us"),
            ("rdma_us", "RDMA us"))
SWEEP_COLUMNS = {
    "context": (("context", "context"),) + _STEP_COLS,
    "links": (("links", "links / GPU"),) + _STEP_COLS,
    "block": (("block_tokens", "block tokens"),) + _KV_COLS,
    "kv-tp": (("prefill_tp", "prefill TP"), ("decode_tp", "decode TP")) + _KV_COLS,
}


def sweep_markdown(kind, rows):
    """A sweep's rows (a key of :data:`SWEEP_COLUMNS`) as a markdown table, with a line
    naming what was held fixed."""
    cols = SWEEP_COLUMNS[kind]
    vary = {k for k, _ in cols}
    fixed = ", ".join(f"{k} {v}" for k, v in rows[0].items()
                      if k not in vary and k not in {c for c, _ in _STEP_COLS + _KV_COLS}
                      and k not in ("bytes",))
    body = [["-" if r[k] is None else ("yes" if r[k] is True else "no" if r[k] is False
                                        else r[k]) for k, _ in cols] for r in rows]
    return f"Fixed: {fixed}.\n\n" + _table([h for _, h in cols], body)
