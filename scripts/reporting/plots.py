"""The report's PNG plots (matplotlib, Agg): cycles against size and against QPs or
peers, wire efficiency, control operations, area."""

from .grid import CACHES, FRAMINGS, PEERS, QPS, SIZES
from .tables import area_components, efficiency, find

__all__ = ["plots", "figure_saver"]


def figure_saver(out):
    """``(plt, save, names)`` for a report section's plots: matplotlib without a display,
    and ``save(fig, name)``, which writes ``out / name`` and appends ``name`` to
    ``names``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []

    def save(fig, name):
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        names.append(name)

    return plt, save, names


def plots(grid, area, out):
    plt, save, files = figure_saver(out)

    series = [("NIC compact", dict(design="nic", framing="compact", peers=1)),
              ("NIC L2", dict(design="nic", framing="l2", peers=1)),
              ("RDMA 1 QP", dict(design="rdma", qps=1, cache_entries=16)),
              ("RDMA 4096 QPs / 16 entries", dict(design="rdma", qps=4096,
                                                  cache_entries=16))]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, metric, title in ((axes[0], "latency_cycles", "latency (cycles)"),
                              (axes[1], "ii_cycles", "ii (cycles between messages)")):
        for label, sel in series:
            pts = [(s, find(grid, msg_bytes=s, **sel)) for s in SIZES]
            pts = [(s, r[f"{metric}_model"]) for s, r in pts if r]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message bytes")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    save(fig, "cycles_vs_size.png")

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, metric, title in ((axes[0], "latency_cycles", "latency at 128 B (cycles)"),
                              (axes[1], "ii_cycles", "ii at 128 B (cycles)")):
        for c in CACHES:
            pts = [(q, find(grid, design="rdma", msg_bytes=128, qps=q, cache_entries=c))
                   for q in QPS]
            ax.plot([q for q, r in pts if r], [r[f"{metric}_model"] for q, r in pts if r],
                    marker="o", label=f"RDMA, {c}-entry cache (x = QPs)")
        for f in FRAMINGS:
            pts = [(p, find(grid, design="nic", framing=f, msg_bytes=128, peers=p))
                   for p in PEERS]
            ax.plot([p for p, r in pts if r], [r[f"{metric}_model"] for p, r in pts if r],
                    marker="s", linestyle="--", label=f"NIC {f} (x = peers)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("QPs (RDMA) / destination peers (NIC)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    save(fig, "cycles_vs_qps.png")

    fig, ax = plt.subplots(figsize=(6, 4))
    for label, sel in (("RoCEv2 (with ACK)", dict(design="rdma", qps=1, cache_entries=16)),
                       ("NIC L2", dict(design="nic", framing="l2", peers=1)),
                       ("NIC compact", dict(design="nic", framing="compact", peers=1))):
        pts = [(s, find(grid, msg_bytes=s, **sel)) for s in SIZES]
        ax.plot([s for s, r in pts if r], [100 * efficiency(r) for s, r in pts if r],
                marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message bytes")
    ax.set_ylabel("payload / wire bytes (%)")
    ax.set_title("wire efficiency (preamble, SFD, IFG, FCS counted)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, "wire_efficiency.png")

    cases = [("NIC compact", find(grid, design="nic", framing="compact", msg_bytes=128,
                                  peers=1)),
             ("RDMA 1 QP", find(grid, design="rdma", msg_bytes=128, qps=1,
                                cache_entries=16)),
             ("RDMA 4096 QPs", find(grid, design="rdma", msg_bytes=128, qps=4096,
                                    cache_entries=16))]
    cases = [(n, r) for n, r in cases if r]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    kinds = sorted({k for _, r in cases for k in r["ctrl_ops_model"]})
    bottom = [0.0] * len(cases)
    for k in kinds:
        vals = [r["ctrl_ops_model"].get(k, 0) for _, r in cases]
        if any(vals):
            axes[0].bar([n for n, _ in cases], vals, bottom=bottom, label=k)
            bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    axes[0].set_title("control operations per 128-B message")
    axes[0].legend(fontsize=7)
    axes[1].bar([n for n, _ in cases], [r.get("ctrl_bytes_model", 0) for _, r in cases])
    axes[1].set_title("control bytes over the host interface per message")
    save(fig, "ctrl_ops.png")

    comps = area_components(area)
    for name, d in (area or {}).get("designs", {}).items():
        comps[name] = dict(d, group="design")
    if comps:
        names = sorted(comps, key=lambda n: (comps[n].get("group", ""), n))
        fig, axes = plt.subplots(1, 2, figsize=(12, max(4, 0.28 * len(names))))
        axes[0].barh(names, [comps[n].get("lut4", 0) for n in names])
        axes[0].set_title("LUT4 (Yosys abc -lut 4)")
        axes[1].barh(names, [comps[n].get("ff_bits", 0) for n in names], label="flip-flop")
        axes[1].barh(names, [comps[n].get("mem_bits", 0) for n in names],
                     left=[comps[n].get("ff_bits", 0) for n in names], label="memory")
        axes[1].set_xscale("symlog")
        axes[1].set_title("state bits")
        axes[1].legend(fontsize=8)
        for ax in axes:
            ax.tick_params(axis="y", labelsize=7)
        save(fig, "area.png")
    return files

