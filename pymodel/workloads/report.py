"""The "Inference" section of the report: the whole inference grid, tables and plots.

:func:`inference_section` runs the grid (every scenario of :data:`SCENARIOS` at every
batch of :data:`BATCHES`, carried by both designs; KV bytes per token of every model; KV
transfers plain and coalesced; the NIM calibration), writes its PNG plots and
``inference.json`` into a folder and returns the section's markdown. Everything comes
from the fast path of the golden model (through :class:`~pymodel.workloads.carriers.
Carrier`) and the formulas of :mod:`pymodel.workloads.roofline`; docs/inference.md
gives each formula and source. matplotlib is imported only here, when plotting.
"""

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from pymodel.workloads.calibration import NIM, nim_calibration
from pymodel.workloads.carriers import Carrier
from pymodel.workloads.config import kv_bytes_per_token, load_model
from pymodel.workloads.generate import Deployment, decode_step, kv_transfer
from pymodel.workloads.roofline import ACCELERATORS, REMEDY, decode_roofline
from pymodel.workloads.timing import comm_time

__all__ = ["Scenario", "SCENARIOS", "BATCHES", "KV_MODELS", "run_grid", "kv_rows",
           "kv_transfer_rows", "inference_section", "carriers"]


@dataclass(frozen=True)
class Scenario:
    """One deployment shape of the grid (the batch varies)."""

    label: str
    model: str
    tp: int = 1
    ep: int = 1
    allreduce: str = "oneshot"
    ports: int = 1
    why: str = ""


#: Scale-up TP runs get 8 ports (8 x 512 Gb/s = 512 GB/s per direction, an NVLink-class
#: GPU: H100 SXM has 900 GB/s of NVLink, both directions); scale-out EP runs one port per
#: GPU (DeepEP's nodes have one 400 Gb/s RDMA NIC per GPU).
SCENARIOS = (
    Scenario("Llama-3-8B, 1 GPU", "llama-3-8b", why="GQA, no communication"),
    Scenario("Falcon-7B, 1 GPU", "falcon-7b", why="MQA (71 heads: TP must be 1 or 71)"),
    Scenario("Llama-2-7B, TP4", "llama-2-7b", tp=4, ports=8, why="MHA, one-shot all-reduce"),
    Scenario("Llama-3-70B, TP8 one-shot", "llama-3-70b", tp=8, ports=8,
             why="GQA, one-shot all-reduce"),
    Scenario("Llama-3-70B, TP8 RS+AG", "llama-3-70b", tp=8, allreduce="rsag", ports=8,
             why="GQA, reduce-scatter + all-gather"),
    Scenario("DeepSeek-V3, EP32", "deepseek-v3", ep=32, why="MLA + MoE, DeepEP low latency"),
    Scenario("DeepSeek-V3, EP64", "deepseek-v3", ep=64, why="MLA + MoE, DeepEP low latency"),
)
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
#: Context tokens per sequence during the grid's decode steps.
CONTEXT = 2048
ACCELERATOR = "h100-sxm"
KV_MODELS = ("llama-2-7b", "llama-3-8b", "llama-3-70b", "falcon-7b", "deepseek-v3")
#: The KV transfer of NIXL issue 1514: Llama-70B, TP8, 118 blocks of 16 tokens.
KV_CASE = dict(model="llama-3-70b", tp=8, prompt_tokens=118 * 16)


def carriers():
    """The two designs of the grid: the NIC (compact header) and the RDMA engine of
    today (sequential rung) posted by GPU threads (DeepEP/NVSHMEM's policy)."""
    return {"nic": Carrier("nic", framing="compact"),
            "rdma": Carrier("rdma", rung="sequential", issuer="gpu")}


def run_grid(scenarios=SCENARIOS, batches=BATCHES, context=CONTEXT, accelerator=ACCELERATOR,
             designs=None):
    """Roofline rows of every (scenario, batch, design): a list of dicts (the fields of
    :class:`~pymodel.workloads.roofline.StepResult` plus ``scenario``, ``design``,
    ``bottleneck``, ``organising_s``)."""
    designs = designs or carriers()
    rows = []
    for sc in scenarios:
        for b in batches:
            dep = Deployment(batch=b, tp=sc.tp, ep=sc.ep, context=context)
            tr = decode_step(sc.model, dep, allreduce=sc.allreduce)
            for dname, car in designs.items():
                r = decode_roofline(sc.model, dep, accelerator=accelerator, carrier=car,
                                    allreduce=sc.allreduce, ports=sc.ports, trace=tr)
                rows.append(dict(asdict(r), scenario=sc.label, design=dname,
                                 bottleneck=r.bottleneck, organising_s=r.organising_s))
    return rows


def kv_rows(models=KV_MODELS):
    """KV-cache bytes per token of each model, BF16 and FP8 (list of dicts)."""
    out = []
    for name in models:
        m = load_model(name)
        out.append({"model": m.title, "attention": m.attention.upper(),
                    "bf16": kv_bytes_per_token(m, "bf16"), "fp8": kv_bytes_per_token(m, "fp8")})
    return out


_ISSUERS = ("cpu", "cpu_framework", "gpu", "controller")


def kv_transfer_rows(case=KV_CASE, variants=None):
    """Descriptors, posting time and transfer time of one request's KV transfer, for
    each (coalescing, run length) variant (list of dicts, per GPU)."""
    variants = variants or [("none", None), ("layer", 8), ("layer", None), ("page", 8),
                            ("page", None)]
    nic = Carrier("nic", framing="compact")
    out = []
    for coalesce, run in variants:
        tr = kv_transfer(case["model"], prompt_tokens=case["prompt_tokens"], tp=case["tp"],
                         coalesce=coalesce, run_blocks=run)
        sizes = tr.sizes("data", src=0)
        row = {"coalesce": coalesce, "run_blocks": run or "all",
               "descriptors": tr.count("data", src=0),
               "bytes_each": "/".join(f"{s:,}" for s in sorted(sizes)),
               "bytes": sum(s * n for s, n in sizes.items()),
               "nic_us": comm_time(tr, nic).cycles / 1e3}
        for iss in _ISSUERS:
            car = Carrier("rdma", issuer=iss)
            r = comm_time(tr, car)
            senders = tr.gpus // 2
            row[f"post_{iss}_us"] = r.issuer_cycles / senders / 1e3
            row[f"rdma_{iss}_us"] = r.cycles / 1e3
            row[f"wqes_{iss}"] = r.wqes / senders
        out.append(row)
    return out


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
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []

    def save(fig, name):
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        names.append(name)

    comm = [s for s in scenarios if s.tp > 1 or s.ep > 1]
    for lines, ylabel, fname in (
            ((("nic", "coordination_s", "-", "NIC"), ("rdma", "coordination_s", "--", "RDMA")),
             "communication per step (us)", "inference_comm_vs_batch.png"),
            ((("rdma", "ctrl_ops_per_token", "--", "RDMA control actions"),
              ("nic", "credits_per_token", ":", "NIC link credits")),
             "control operations per decoded token", "inference_ctrl_per_token.png")):
        fig, ax = plt.subplots(figsize=(8, 5))
        for i, sc in enumerate(comm):
            for d, key, style, what in lines:
                pts = [r for r in grid if r["scenario"] == sc.label and r["design"] == d]
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
    for j, iss in enumerate(_ISSUERS):
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
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, d in zip(axes, ("nic", "rdma"), strict=True):
        cells = [[_pick(grid, sc.label, b, d) for b in batches] for sc in scenarios]
        ax.imshow([[classes.index(r["bottleneck"]) for r in row] for row in cells],
                  cmap=cmap, vmin=0, vmax=2, aspect="auto")
        for y, row in enumerate(cells):
            for x, r in enumerate(row):
                ax.text(x, y, f"{100 * r['coordination_s'] / r['step_s']:.0f}",
                        ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(batches)), [str(b) for b in batches])
        ax.set_yticks(range(len(scenarios)), [s.label for s in scenarios], fontsize=7)
        ax.set_xlabel("batch")
        ax.set_title(f"{d.upper()} (numbers: communication, % of the step)", fontsize=9)
    fig.legend(handles=[Patch(color=cmap(i), label=c) for i, c in enumerate(classes)],
               loc="lower center", ncol=3, fontsize=8)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    save(fig, "inference_bottleneck_map.png")

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for i, sc in enumerate(scenarios):
        for d, style in (("nic", "-"), ("rdma", "--")):
            pts = [r for r in grid if r["scenario"] == sc.label and r["design"] == d]
            a1.plot([r["batch"] for r in pts], [r["step_s"] * 1e3 for r in pts], style,
                    color=f"C{i}", label=f"{sc.label} ({d.upper()})")
            a2.plot([r["batch"] for r in pts], [r["tokens_per_s"] for r in pts], style,
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


def inference_section(out_dir, *, plots=True, scenarios=SCENARIOS, batches=BATCHES):
    """Run the inference grid, write plots and ``inference.json`` into ``out_dir``
    (created if missing) and return the markdown of the "Inference" section.

    ``plots=False`` skips matplotlib (the tables and JSON are still written). The
    markdown says how long the grid took (wall time, seconds).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    grid = run_grid(scenarios, batches)
    t_grid = time.perf_counter() - t_start
    kv = kv_rows()
    kvt = kv_transfer_rows()
    cal, t0 = nim_calibration()
    elapsed = time.perf_counter() - t_start
    pngs = _plots(out, grid, kv, kvt, cal, t0, scenarios, batches) if plots else []
    with open(out / "inference.json", "w") as f:
        json.dump({"grid": grid, "kv_bytes_per_token": kv, "kv_transfer": kvt,
                   "nim_calibration": [dict(asdict(r), residual=r.residual,
                                            calibrated_residual=r.calibrated_residual)
                                       for r in cal], "nim_overhead_ms": t0,
                   "grid_seconds": t_grid, "seconds": elapsed}, f, indent=1)
    return _markdown(grid, kv, kvt, cal, t0, pngs, t_grid, elapsed, scenarios, batches)


def _markdown(grid, kv, kvt, cal, t0, pngs, t_grid, elapsed, scenarios, batches):
    acc = ACCELERATORS[ACCELERATOR]
    md = ["## Inference", "",
          "One decode step of real models, carried by both designs (per-message costs "
          "from the golden model's fast path), and a decode roofline on "
          f"{acc.title} (HBM {acc.hbm_bytes_per_s / 1e12:.2f} TB/s, dense BF16 "
          f"{acc.bf16_flops / 1e12:.0f} TFLOP/s, FP8 {acc.fp8_flops / 1e12:.0f}). "
          f"Context {CONTEXT} tokens, KV cache BF16; NIC = compact header, RDMA = today's "
          "sequential engine posted by GPU threads (DeepEP policy: a doorbell per 4 WQEs, "
          "every WQE signalled). Formulas and sources: docs/inference.md. The whole grid "
          f"({len(grid)} steps) ran in {t_grid:.1f} s, the section in {elapsed:.1f} s.", ""]
    md += ["### Communication per decode step", "",
           "Per-step communication time (critical path over the phases' dependencies), the "
           "share of it that is not payload on the links (organising), and control "
           "operations per decoded token: the RDMA engine's per-message actions (doorbells, "
           "WQE reads, context lookups, misses and write-backs, ACKs, CQEs; with their "
           "host-interface bytes) and, apart, the NIC's link-level credit updates (one per "
           "64-byte beat, a counter in the link, no host-interface bytes). `ports`: copies "
           "of the design per GPU (8 for scale-up TP, NVLink-class; 1 for scale-out EP).",
           ""]
    show = [b for b in (1, 16, 64, 256) if b in batches]
    rows = []
    for sc in scenarios:
        if sc.tp == 1 and sc.ep == 1:
            continue
        for b in show:
            n = _pick(grid, sc.label, b, "nic")
            r = _pick(grid, sc.label, b, "rdma")
            rows.append([sc.label, b, sc.ports, n["messages"], n["coordination_s"] * 1e6,
                         r["coordination_s"] * 1e6,
                         r["coordination_s"] / n["coordination_s"],
                         100 * n["organising_s"] / n["coordination_s"],
                         100 * r["organising_s"] / r["coordination_s"],
                         r["ctrl_ops_per_token"], r["ctrl_bytes_per_token"],
                         n["credits_per_token"]])
    md += [_table(["scenario", "batch", "ports", "messages / step", "NIC us", "RDMA us",
                   "RDMA / NIC", "NIC organising %", "RDMA organising %",
                   "RDMA ctrl ops / token", "RDMA ctrl bytes / token",
                   "NIC credits / token"], rows), ""]
    md += ["### KV cache per token (MHA, GQA, MQA, MLA)", "",
           _table(["model", "attention", "BF16 bytes", "FP8 bytes"],
                  [[r["model"], r["attention"], r["bf16"], r["fp8"]] for r in kv]), ""]
    c = KV_CASE
    md += ["### KV transfer, prefill -> decode: descriptors and posting", "",
           f"{load_model(c['model']).title}, TP{c['tp']}, {c['prompt_tokens']:,}-token prompt "
           f"({c['prompt_tokens'] // 16} blocks of 16), per GPU. Posting time = WQEs x the "
           "issuer's cost per WQE and doorbell (docs/inference.md, issuer profiles); "
           "transfer time over one port.", ""]
    md += [_table(["coalescing", "run (blocks)", "descriptors", "bytes each",
                   "post cpu us", "post cpu_framework us", "post gpu us",
                   "post controller us", "NIC us", "RDMA (cpu) us",
                   "RDMA (cpu_framework) us"],
                  [[r["coalesce"], r["run_blocks"], r["descriptors"], r["bytes_each"],
                    r["post_cpu_us"], r["post_cpu_framework_us"], r["post_gpu_us"],
                    r["post_controller_us"], r["nic_us"], r["rdma_cpu_us"],
                    r["rdma_cpu_framework_us"]] for r in kvt]), ""]
    md += ["### Which bottleneck dominates", "",
           "step = max(compute, memory) + coordination; the largest term names the regime "
           "and the seed's remedy: " + "; ".join(f"{k} -> {v}" for k, v in REMEDY.items())
           + ".", ""]
    rows = []
    for sc in scenarios:
        for b in show:
            n = _pick(grid, sc.label, b, "nic")
            r = _pick(grid, sc.label, b, "rdma")
            rows.append([sc.label, b, n["compute_s"] * 1e3, n["memory_s"] * 1e3,
                         n["coordination_s"] * 1e3, r["coordination_s"] * 1e3,
                         n["step_s"] * 1e3, r["step_s"] * 1e3, n["tokens_per_s"],
                         r["tokens_per_s"], n["bottleneck"], r["bottleneck"],
                         "yes" if n["fits"] else "no"])
    md += [_table(["scenario", "batch", "compute ms", "memory ms", "comm NIC ms",
                   "comm RDMA ms", "step NIC ms", "step RDMA ms", "tok/s NIC",
                   "tok/s RDMA", "bound NIC", "bound RDMA", "fits HBM"], rows), ""]
    a = NIM["assumed"]
    md += ["### Calibration against NVIDIA NIM (Llama-3.1-8B, H100)", "",
           f"Measured: NIM 1.8.0 table ({NIM['table']['source']}). Assumed (not stated in "
           f"the excerpt we have): {a['gpus']} GPU, {a['weights_dtype'].upper()} weights, "
           f"{a['kv_dtype'].upper()} KV cache, {a['input_tokens']} input / "
           f"{a['output_tokens']} output tokens (mean context "
           f"{a['input_tokens'] + a['output_tokens'] // 2}); docs/inference.md says why. "
           f"Calibrated = roofline + {t0:.2f} ms per step, the one parameter, fitted at "
           "concurrency 1.", ""]
    md += [_table(["concurrency", "measured ITL ms", "roofline ms", "residual",
                   "calibrated ms", "residual", "bound"],
                  [[r.concurrency, r.measured_ms, r.model_ms, f"{100 * r.residual:+.0f} %",
                    r.calibrated_ms, f"{100 * r.calibrated_residual:+.0f} %", r.bottleneck]
                   for r in cal]), ""]
    for p in pngs:
        md += [f"![{p}]({p})", ""]
    return "\n".join(md)


def _pick(grid, label, batch, design):
    return next(r for r in grid if r["scenario"] == label and r["batch"] == batch
                and r["design"] == design)

