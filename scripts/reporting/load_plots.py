"""The plots of the report's "Under load" section (:mod:`.load`): p99 against offered
load with each curve's knee, p50/p99/p99.9 against offered load, and latency CDFs."""

from .load_rows import CDF_LOADS, knee

__all__ = ["load_plots"]


def load_plots(out, rows):
    """The section's plots (``load_p99.png``, ``load_percentiles.png``,
    ``load_cdf.png``) of the model ``rows`` into ``out``; returns their names."""
    from .plots import figure_saver
    plt, save, names = figure_saver(out)
    curves = {}
    for r in rows:
        if r["group"] == "curve":
            curves.setdefault(r["curve"], []).append(r)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for ax, entries in zip(axes, (16, 256), strict=True):
        for label, rs in curves.items():
            if f"/ {entries} entries" not in label and "entries" in label:
                continue
            rs = sorted(rs, key=lambda r: r["load"])
            x = [1e3 * r["offered_per_cycle"] for r in rs]
            y = [r["latency_p99_cycles"] for r in rs]
            extra = {"color": "black", "lw": 2} if label.startswith("NIC") else {}
            (line,) = ax.plot(x, y, marker="o", ms=3, label=label.split(" /")[0], **extra)
            k = knee(rs)
            if k is not None:
                r = next(r for r in rs if r["load"] == k)
                ax.plot([1e3 * r["offered_per_cycle"]], [r["latency_p99_cycles"]], "x",
                        ms=11, mew=2, color=line.get_color())
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("offered load (M messages/s), 10 % to saturation")
        ax.set_title(f"p99 latency from arrival, {entries}-entry context caches "
                     "(x: knee)", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    axes[0].set_ylabel("cycles (ns)")
    save(fig, "load_p99.png")

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5), sharey=True)
    for ax, (key, name) in zip(axes, (("latency_p50_cycles", "p50"),
                                      ("latency_p99_cycles", "p99"),
                                      ("latency_p999_cycles", "p99.9")), strict=True):
        for label, rs in curves.items():
            rs = sorted(rs, key=lambda r: r["load"])
            style = ":" if "/ 256 entries" in label else "-"
            extra = {"color": "black", "lw": 2} if label.startswith("NIC") else {}
            ax.plot([1e3 * r["offered_per_cycle"] for r in rs], [r[key] for r in rs],
                    style, marker="o", ms=2, label=label, **extra)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("offered load (M messages/s)")
        ax.set_title(f"{name} latency from arrival (dotted: 256 entries)", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("cycles (ns)")
    if axes[0].get_legend_handles_labels()[0]:
        axes[2].legend(fontsize=6)
    save(fig, "load_percentiles.png")

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, rs in curves.items():
        for r in rs:
            if r.get("latencies"):
                s = sorted(r["latencies"])
                ax.plot(s, [(k + 1) / len(s) for k in range(len(s))], label=label)
    ax.set_xscale("log")
    ax.set_xlabel("latency from arrival (cycles)")
    ax.set_ylabel("fraction of messages")
    ax.set_title(f"latency CDF at {int(100 * CDF_LOADS[0])} % of saturation", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=6)
    save(fig, "load_cdf.png")
    return names
