"""The PNG plots of the "Inference" section (:mod:`scripts.reporting.inference`); matplotlib
is imported only here, when plotting."""

from analysis.workloads.grid import KV_ISSUERS, PAIRING

from .inference_rows import _STYLE, SHOWN, _pick
from .plots import figure_saver


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
