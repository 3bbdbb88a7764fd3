"""`make report`: sweeps of both designs, area proxies and plots into build/report/.

1. Model grid (the golden model, every point): message sizes x framings x NIC peers, and
   message sizes x RDMA QPs x context-cache entries. Each point uses the fast path
   (pymodel/fastpath.py, equal to the cycle-level model on the grid of
   tests/test_fastpath.py) and falls back to the cycle-level model where the fast path
   does not apply. Spread over ``--jobs`` processes.
2. RTL subset (co-simulation, RTL against the cycle-level model, every metric): the
   points of :data:`RTL_POINTS`, which touch every axis of the grid. Each row says its
   mismatches (RTL against model: frames, writes, stamps, counters and every metric);
   the fast path's figures for the same point are compared too.
3. Area proxies (scripts/area.py, Yosys; cached) into area.json.
4. results.json / results.csv (SPEC.md row format; model-only rows have
   ``simulator: "model"`` and no ``_rtl`` values), report.md, PNG plots.

Options: --sim, --jobs, --rtl-messages, --model-messages, --no-rtl, --no-area, --out.
"""

import argparse
import concurrent.futures
import csv
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from spec.metrics import row_metrics  # noqa: E402

SIZES = (8, 64, 128, 256, 512, 1024, 4096)
QPS = (1, 16, 256, 1024, 4096)
CACHES = (16, 64, 256)
PEERS = (1, 2, 4, 8, 16, 32, 64)
FRAMINGS = ("compact", "l2")

#: The co-simulated subset: every size on both framings and on RDMA, every QP count,
#: every cache size, and more than one NIC peer. ``messages`` None = ``--rtl-messages``.
RTL_POINTS = (
    [("nic", dict(framing=f, msg_bytes=s, peers=1)) for f in FRAMINGS
     for s in (8, 128, 1024, 4096)]
    + [("nic", dict(framing="compact", msg_bytes=128, peers=3))]
    + [("rdma", dict(msg_bytes=s, qps=1, cache_entries=16)) for s in (8, 128, 4096)]
    + [("rdma", dict(msg_bytes=128, qps=q, cache_entries=16)) for q in (16, 256, 4096)]
    + [("rdma", dict(msg_bytes=128, qps=256, cache_entries=c)) for c in (64, 256)]
)


class Progress:
    """A one-line progress bar on stderr (a plain line per step when not a terminal)."""

    def __init__(self, total, title):
        self.total, self.title, self.done, self.t0 = total, title, 0, time.time()
        self.tty = sys.stderr.isatty()

    def step(self, what):
        self.done += 1
        frac = self.done / max(self.total, 1)
        bar = "#" * int(30 * frac) + "-" * (30 - int(30 * frac))
        line = (f"{self.title} [{bar}] {self.done}/{self.total} "
                f"{time.time() - self.t0:6.1f} s  {what}")
        if self.tty:
            sys.stderr.write("\r" + line[:150].ljust(150))
            if self.done == self.total:
                sys.stderr.write("\n")
        elif self.total <= 40 or self.done % max(1, self.total // 20) == 0 \
                or self.done == self.total:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


# -- model grid --------------------------------------------------------------------------
def model_points():
    pts = []
    for f in FRAMINGS:
        for s in SIZES:
            for p in PEERS:
                pts.append(("nic", dict(framing=f, msg_bytes=s, peers=p)))
    for s in SIZES:
        for q in QPS:
            for c in CACHES:
                pts.append(("rdma", dict(msg_bytes=s, qps=q, cache_entries=c)))
    return pts


def model_knobs(design, point):
    """Knobs of pymodel.points/fastpath for a report point (all but the size)."""
    knobs = dict(point)
    knobs.pop("msg_bytes")
    return knobs


def model_row(task):
    design, point, messages = task
    from pymodel.fastpath import fast_point
    from pymodel.points import cycle_point
    knobs = model_knobs(design, point)
    t0 = time.perf_counter()
    try:
        res, source = fast_point(design, msg_bytes=point["msg_bytes"], messages=messages,
                                 **knobs), "fast"
    except ValueError:
        res, source = cycle_point(design, msg_bytes=point["msg_bytes"],
                                  messages=min(messages, 400), **knobs), "cycle"
    row = {"design": design, "framing": point.get("framing", "rocev2"),
           "simulator": "model", "msg_bytes": point["msg_bytes"],
           "messages": res.get("messages", messages), "model_source": source}
    row.update({k: point[k] for k in ("qps", "cache_entries", "peers") if k in point})
    for key in row_metrics(design):
        row[f"{key}_model"] = res[key]
    row["model_s"] = round(time.perf_counter() - t0, 3)
    return row


def run_model_grid(jobs, messages):
    pts = model_points()
    rows = []
    prog = Progress(len(pts), "model grid")
    tasks = [(d, p, max(messages, 3 * p.get("qps", 1))) for d, p in pts]
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
        for row in pool.map(model_row, tasks, chunksize=4):
            rows.append(row)
            prog.step(f"{row['design']} {row['msg_bytes']} B")
    return rows


# -- RTL subset --------------------------------------------------------------------------
def _nonzero(value):
    """A metric for comparison: a ctrl_ops dict without its zero counts."""
    return {k: v for k, v in value.items() if v} if isinstance(value, dict) else value


def _rtl_group(args):
    """Run the RTL points of one top, in order (a top is built once, by one process)."""
    sim, points, messages = args
    from pymodel.fastpath import fast_point
    out = []
    for design, point in points:
        n = messages
        if 256 <= point.get("qps", 1) < 4096:
            # Round robin over the QP set twice, so that the second pass shows whether
            # the cache holds it (4096 QPs miss on every lookup from the start).
            n = max(messages, 2 * point["qps"] + 88)
        try:
            if design == "nic":
                from tb.nic.headline import run_point
                n = n if point["msg_bytes"] < 4096 else max(40, n // 4)
                row = run_point(sim, point["framing"], point["msg_bytes"], n,
                                point["peers"])
            else:
                from spec.rdma import DEFAULTS
                from tb.rdma.headline import run_point
                # Both ends' buffers live in the host memories of the top.
                n = min(n, DEFAULTS["depth"] * 64 // 4 // point["msg_bytes"])
                row = run_point(sim, point["msg_bytes"], n, point["qps"],
                                point["cache_entries"])
        except Exception as exc:       # keep going; the report shows the failed point
            out.append({"design": design, "framing": point.get("framing", "rocev2"),
                        "simulator": sim, "msg_bytes": point["msg_bytes"], "messages": n,
                        **{k: point[k] for k in ("qps", "cache_entries", "peers")
                           if k in point},
                        "mismatches": None, "error": f"{type(exc).__name__}: {exc}"})
            continue
        row.pop("frames", None)
        try:
            fast = fast_point(design, msg_bytes=point["msg_bytes"], messages=n,
                              **model_knobs(design, point))
            row["fast_path_differs"] = sorted(
                k for k in row_metrics(design)
                if _nonzero(fast[k]) != _nonzero(row[f"{k}_model"]))
        except ValueError as exc:
            row["fast_path_differs"] = f"not covered: {exc}"
        out.append(row)
    return out


def run_rtl_subset(sim, jobs, messages):
    groups = {}
    for design, point in RTL_POINTS:
        key = (design, point.get("framing"), point.get("cache_entries"),
               point.get("peers", 1) + 1 > 4)
        groups.setdefault(key, []).append((design, point))
    prog = Progress(len(RTL_POINTS), f"RTL ({sim})")
    rows = []
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
        futs = [pool.submit(_rtl_group, (sim, pts, messages)) for pts in groups.values()]
        for fut in concurrent.futures.as_completed(futs):
            for row in fut.result():
                rows.append(row)
                prog.step(f"{row['design']} {row['msg_bytes']} B "
                          f"mismatches {row['mismatches']}")
    return rows


# -- outputs -----------------------------------------------------------------------------
def efficiency(row, suffix="model"):
    wire = row.get(f"wire_bytes_{suffix}")
    return row["msg_bytes"] / wire if wire else None


def ctrl_total(ops):
    return sum(ops.values()) if isinstance(ops, dict) else ops


def write_csv(rows, path):
    keys = []
    for r in rows:
        for k in r:
            if k not in keys:
                keys.append(k)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else v
                        for k, v in r.items()})


def find(rows, **want):
    for r in rows:
        if all(r.get(k) == v for k, v in want.items()):
            return r
    return None


def area_components(area):
    """area.json's components as a dict by name (the file keeps a list)."""
    comps = (area or {}).get("components", [])
    if isinstance(comps, dict):
        return comps
    return {c["component"]: c for c in comps}


def state_per(area, design):
    """State bits per peer (NIC) or per QP (RDMA) from area.json, as a table cell."""
    st = (area or {}).get("state", {})
    if design == "nic":
        v = st.get("nic", {}).get("per_peer_bits")
        return "-" if v is None else str(v)
    r = st.get("rdma", {})
    if "qp_context_host_bits" not in r:
        return "-"
    return (f"{r['qp_context_host_bits']} in host memory + {r['on_chip_bits_per_cached_qp']}"
            " on chip while cached")


def plots(grid, area, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []

    def save(fig, name):
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        files.append(name)

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


def fmt(v, digits=1):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}".rstrip("0").rstrip(".") if not v.is_integer() else str(int(v))
    return str(v)


def headline_table(grid, area):
    designs = (area or {}).get("designs", {})
    lines = ["| at 128 B | latency | completion | ii | wire eff. | ctrl ops | ctrl bytes "
             "| state bits per peer / QP | flip-flop bits | memory bits |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    cases = [("NIC compact", dict(design="nic", framing="compact", peers=1), "nic"),
             ("NIC L2", dict(design="nic", framing="l2", peers=1), "nic"),
             ("RDMA 1 QP", dict(design="rdma", qps=1, cache_entries=16), "rdma_c16"),
             ("RDMA 4096 QPs, 16-entry cache", dict(design="rdma", qps=4096,
                                                   cache_entries=16), "rdma_c16")]
    for name, sel, design in cases:
        r = find(grid, msg_bytes=128, **sel)
        if not r:
            continue
        per = state_per(area, design[:4].rstrip("_"))
        total = designs.get(f"{design.split('_')[0]}_design"
                            + (f"_{design.split('_')[1]}" if "_" in design else ""), {})
        lines.append("| " + " | ".join([
            name, fmt(r["latency_cycles_model"]), fmt(r["completion_cycles_model"]),
            fmt(r["ii_cycles_model"]), f"{100 * efficiency(r):.1f} %",
            fmt(ctrl_total(r["ctrl_ops_model"]), 2), fmt(r.get("ctrl_bytes_model", 0)),
            per, fmt(total.get("ff_bits")), fmt(total.get("mem_bits"))]) + " |")
    return lines


def write_report(grid, rtl, area, pngs, out, args, elapsed):
    md = ["# Report: MAC-routed NIC against a QP-based RDMA engine", "",
          f"Written by `make report` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())},"
          f" {elapsed:.0f} s). Golden-model grid: {len(grid)} points; RTL "
          f"co-simulation ({args.sim}): {len(rtl)} points. Cycles are clock cycles of "
          "the 64-byte datapath. Definitions: ../../docs/findings.md and SPEC.md.", "",
          "## Headline (128-byte stores, golden model; the RTL agrees on every RTL point)",
          ""] + headline_table(grid, area)
    md += ["", "State bits per peer / QP and the flip-flop and memory bits come from "
           "area.json (`make area`): the NIC's are one compact-framing node plus a quarter "
           "of the 4-port switch, the RDMA engine's are requester + responder with a "
           "16-entry cache (docs/area.md)." if area else "", ""]
    md += ["## RTL against the model", "",
           "| design | framing | bytes | QPs / peers | cache | messages | latency | ii | "
           "wire B | mismatches | fast path |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rtl, key=lambda r: (r["design"], r.get("framing"), r["msg_bytes"],
                                        r.get("qps", r.get("peers")))):
        fp = r.get("fast_path_differs")
        md.append("| " + " | ".join([
            r["design"], r["framing"], str(r["msg_bytes"]),
            str(r.get("qps", r.get("peers"))), fmt(r.get("cache_entries")),
            str(r["messages"]), fmt(r.get("latency_cycles_rtl")), fmt(r.get("ii_cycles_rtl")),
            fmt(r.get("wire_bytes_rtl")), str(r["mismatches"]),
            "equal" if fp == [] else str(fp)]) + " |")
    bad = [r for r in rtl if r["mismatches"] != 0]
    md += ["", f"RTL points with mismatches or errors: {len(bad)} of {len(rtl)}."]
    md += [f"- {r['design']} {r['msg_bytes']} B: {r['error']}" for r in bad if "error" in r]
    md += [""]
    md += ["## Sweeps (golden model)", ""]
    md += ["### Cycles and wire efficiency against message size", "",
           "| design | bytes | latency | completion | ii | wire B | efficiency |",
           "|---|---|---|---|---|---|---|"]
    for label, sel in (("NIC compact", dict(design="nic", framing="compact", peers=1)),
                       ("NIC L2", dict(design="nic", framing="l2", peers=1)),
                       ("RDMA 1 QP", dict(design="rdma", qps=1, cache_entries=16))):
        for s in SIZES:
            r = find(grid, msg_bytes=s, **sel)
            if r:
                md.append(f"| {label} | {s} | {fmt(r['latency_cycles_model'])} | "
                          f"{fmt(r['completion_cycles_model'])} | {fmt(r['ii_cycles_model'])}"
                          f" | {fmt(r['wire_bytes_model'])} | {100 * efficiency(r):.1f} % |")
    md += ["", "### RDMA at 128 B against QPs and context-cache entries", "",
           "| QPs | cache | latency | ii | ctx misses / msg | write-backs / msg | "
           "ctrl bytes / msg |", "|---|---|---|---|---|---|---|"]
    for q in QPS:
        for c in CACHES:
            r = find(grid, design="rdma", msg_bytes=128, qps=q, cache_entries=c)
            if r:
                ops = r["ctrl_ops_model"]
                md.append(f"| {q} | {c} | {fmt(r['latency_cycles_model'])} | "
                          f"{fmt(r['ii_cycles_model'])} | {fmt(ops.get('ctx_misses'), 3)} | "
                          f"{fmt(ops.get('ctx_writebacks'), 3)} | "
                          f"{fmt(r.get('ctrl_bytes_model'))} |")
    md += ["", "### NIC at 128 B against destination peers", "",
           "| framing | peers | latency | ii | state bits per peer |", "|---|---|---|---|---|"]
    per_peer = state_per(area, "nic")
    for f in FRAMINGS:
        for p in PEERS:
            r = find(grid, design="nic", framing=f, msg_bytes=128, peers=p)
            if r:
                md.append(f"| {f} | {p} | {fmt(r['latency_cycles_model'])} | "
                          f"{fmt(r['ii_cycles_model'])} | {per_peer} |")
    comps = area_components(area)
    for name, d in (area or {}).get("designs", {}).items():
        comps[name] = dict(d, group="design")
    if comps:
        md += ["", "## Area proxies (Yosys; see docs/area.md)", "",
               "| component | group | flip-flop bits | memory bits | ROM bits | cells | LUT4 |",
               "|---|---|---|---|---|---|---|"]
        for n in sorted(comps, key=lambda n: (comps[n].get("group", ""), n)):
            c = comps[n]
            md.append(f"| {n} | {c.get('group', '')} | {fmt(c.get('ff_bits'))} | "
                      f"{fmt(c.get('mem_bits'))} | {fmt(c.get('rom_bits'))} | "
                      f"{fmt(c.get('cells'))} | {fmt(c.get('lut4'))} |")
    md += ["", "## Plots", ""] + [f"![{p}]({p})" for p in pngs]
    md += ["", "Files: results.json and results.csv (one row per point, SPEC.md format; "
           "`simulator: \"model\"` rows are golden-model only), area.json, the PNGs.", ""]
    (out / "report.md").write_text("\n".join(md))


def main(argv=None):
    from tb.cosim import SIMULATORS, selected_sim
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", default=None, help=f"one of {', '.join(SIMULATORS)}")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--rtl-messages", type=int, default=200)
    ap.add_argument("--model-messages", type=int, default=2000)
    ap.add_argument("--no-rtl", action="store_true", help="the model grid only")
    ap.add_argument("--no-area", action="store_true", help="skip Yosys (reuse area.json)")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "report")
    args = ap.parse_args(argv)
    try:
        args.sim = selected_sim(args.sim)
    except ValueError as exc:
        ap.error(str(exc))
    if args.jobs < 1:
        ap.error(f"--jobs must be at least 1, not {args.jobs}")
    if args.rtl_messages < 20:
        ap.error(f"--rtl-messages must be at least 20, not {args.rtl_messages}")
    if args.model_messages < 20:
        ap.error(f"--model-messages must be at least 20, not {args.model_messages}")
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()

    grid = run_model_grid(args.jobs, args.model_messages)
    rtl = [] if args.no_rtl else run_rtl_subset(args.sim, args.jobs, args.rtl_messages)

    area = None
    area_path = out / "area.json"
    if not args.no_area:
        import area as area_script
        print("area proxies (Yosys, cached by Verilog text) ...", file=sys.stderr)
        area_script.main(["--out", str(area_path), "--jobs", str(args.jobs)])
    if area_path.exists():
        area = json.loads(area_path.read_text())

    rows = rtl + grid
    (out / "results.json").write_text(json.dumps(rows, indent=1))
    write_csv(rows, out / "results.csv")
    pngs = plots(grid, area, out)
    write_report(grid, rtl, area, pngs, out, args, time.time() - t0)
    bad = [r for r in rtl if r["mismatches"] != 0 or (isinstance(r.get("fast_path_differs"),
                                                                  list)
                                                       and r["fast_path_differs"])]
    print(f"report: {out / 'report.md'} ({len(grid)} model points, {len(rtl)} RTL points, "
          f"{len(bad)} with a mismatch)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "scripts"))
    sys.exit(main())
