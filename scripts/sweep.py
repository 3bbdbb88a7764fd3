"""`make sweep SPEC=file.toml`: your own sweep on the golden model, and optionally an RTL
subset in co-simulation, into build/sweep/<name>/ (results.json, results.csv, plots).

Usage::

    python scripts/sweep.py sweeps/example.toml
    python scripts/sweep.py sweeps/example.toml --jobs 4 --no-rtl
    python scripts/sweep.py sweeps/example.toml --scheduler tcp://head:8786
    make sweep SPEC=sweeps/example.toml ARGS="--scheduler local"

The file format is in docs/sweeps.md: a design, fixed knobs, axes (their cartesian
product is the sweep), and an optional ``[rtl]`` table naming points to co-simulate.
Every point runs on the fast path of the golden model where it applies and on the
cycle-level model elsewhere (as ``make report``'s grid). Points run ``--jobs`` at a time
in local processes, or on a Dask cluster (``--scheduler``); the results are the same
either way. A bad file or option stops before anything runs, with an error that names
the field (exit code 2).
"""

import argparse
import json
import os
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.executor import (  # noqa: E402
    CONNECT_TIMEOUT_S,
    ExecutorError,
    add_cluster_options,
    check_cluster_options,
    make_executor,
)
from scripts.sweep_spec import SweepError, load_sweep  # noqa: E402

__all__ = ["main", "model_rows", "rtl_row", "run_sweep"]

#: Metrics plotted against the first axis (when the rows have them).
PLOTTED = ("ii_cycles", "latency_cycles", "completion_cycles", "wire_bytes", "host_bytes",
           "inflight_bits")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec", type=Path, help="the sweep file (TOML; docs/sweeps.md)")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("JOBS", "2")),
                    help="points at a time (local processes, or Dask workers of "
                         "--scheduler local; default $JOBS or 2)")
    add_cluster_options(ap, "the points")
    ap.add_argument("--no-rtl", action="store_true", help="skip the [rtl] points")
    ap.add_argument("--out", type=Path, default=None,
                    help="output folder (default build/sweep/<name>)")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error(f"--jobs must be at least 1, not {args.jobs}")
    check_cluster_options(ap, args)
    return args


def _tag(point):
    return ", ".join(f"{k}={v}" for k, v in point.items())


def _model_task(task):
    """One model row (``make report``'s :func:`model_row`) with the point's knobs."""
    from scripts.reporting.grid import model_row

    design, point, messages = task
    try:
        row = model_row((design, point, messages))
    except ValueError as exc:     # a combination the model refuses only when it runs it
        raise SweepError(f"the point {_tag(point)}: {exc}") from None
    row.update(point)
    return row


def model_rows(sweep, executor, progress=None):
    """The model rows of every point of ``sweep``, in the sweep's order."""
    tasks = [(sweep.design, dict(p, msg_bytes=p.get("msg_bytes", 128)),
              max(sweep.messages, 3 * p.get("qps", 1))) for p in sweep.points]
    return executor.map(_model_task, tasks, progress=progress)


def rtl_row(task):
    """Co-simulate one point (``make sim``'s :func:`run_design_point`): the row with
    ``_rtl`` and ``_model`` figures and ``mismatches``."""
    from scripts.sim import check_point, run_design_point

    design, point, sim, messages = task
    knobs = dict(point)
    msg_bytes = knobs.pop("msg_bytes", 128)
    args = types.SimpleNamespace(design=design, sim=sim, messages=messages,
                                 msg_bytes=msg_bytes,
                                 knobs=check_point(design, msg_bytes, messages, knobs))
    row = run_design_point(args)
    row.pop("frames", None)
    row.pop("cycles", None)
    row.update(point)
    return row


def run_sweep(sweep, jobs=2, scheduler=None, rtl=True, log=print,
              connect_timeout=CONNECT_TIMEOUT_S):
    """Rows of ``sweep``: the model rows, then the RTL rows (if ``rtl``)."""
    t0 = time.monotonic()
    n = len(sweep.points)
    log(f"[sweep] {sweep.name}: {n} {sweep.design} points on the model"
        + (f", {len(sweep.rtl_points)} on {sweep.rtl_sim}" if rtl and sweep.rtl_points
           else "")
        + (f", on Dask ({scheduler})" if scheduler else f", {jobs} at a time"))
    done = [0]

    def tick(row):
        done[0] += 1
        if done[0] == n or done[0] % max(1, n // 10) == 0:
            left = (time.monotonic() - t0) / done[0] * (n - done[0])
            log(f"[sweep] model {done[0]}/{n} ({time.monotonic() - t0:.1f} s, about "
                f"{left:.0f} s left)")

    with make_executor(jobs, scheduler, connect_timeout) as ex:
        rows = model_rows(sweep, ex, progress=tick)
        if rtl and sweep.rtl_points:
            os.environ.setdefault("COSIM_PROGRESS", "1")
            tasks = [(sweep.design, p, sweep.rtl_sim, sweep.rtl_messages)
                     for p in sweep.rtl_points]
            rtl_rows = ex.map(rtl_row, tasks,
                              progress=lambda r: log(f"[sweep] rtl point done: "
                                                     f"{r.get('mismatches')} mismatches"))
            rows += rtl_rows
    log(f"[sweep] {len(rows)} rows in {time.monotonic() - t0:.1f} s")
    return rows


def plot(sweep, rows, out):
    """One PNG per metric of :data:`PLOTTED`: the model's value against the first axis,
    one line per combination of the other axes. Returns the file names."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    model = [r for r in rows if r.get("simulator") == "model"]
    first, others = list(sweep.axes)[0], list(sweep.axes)[1:]
    numeric = all(isinstance(v, (int, float)) for v in sweep.axes[first])
    files = []
    for metric in PLOTTED:
        key = f"{metric}_model"
        if not any(isinstance(r.get(key), (int, float)) for r in model):
            continue
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        lines = {}
        for r in model:
            lines.setdefault(tuple(r[o] for o in others), []).append(r)
        for combo, rs in lines.items():
            xs = [r[first] if numeric else str(r[first]) for r in rs]
            ax.plot(xs, [r.get(key) for r in rs], marker="o",
                    label=", ".join(f"{o}={v}" for o, v in zip(others, combo, strict=True))
                    or sweep.design)
        if numeric and len(sweep.axes[first]) > 2 and min(sweep.axes[first]) > 0 \
                and max(sweep.axes[first]) / min(sweep.axes[first]) >= 64:
            ax.set_xscale("log", base=2)
        ax.set_xlabel(first)
        ax.set_ylabel(metric)
        ax.set_title(f"{sweep.name}: {metric} ({sweep.design}, model)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        name = f"{metric}.png"
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        files.append(name)
    return files


def main(argv=None):
    args = parse_args(argv)
    try:
        sweep = load_sweep(args.spec)
        make_executor(args.jobs, args.scheduler)        # checks the options
    except (SweepError, ExecutorError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = args.out or ROOT / "build" / "sweep" / sweep.name
    out.mkdir(parents=True, exist_ok=True)
    try:
        rows = run_sweep(sweep, args.jobs, args.scheduler, rtl=not args.no_rtl,
                         connect_timeout=args.connect_timeout)
    except (SweepError, ExecutorError) as exc:
        print(f"error: sweep file {args.spec}: {exc}" if isinstance(exc, SweepError)
              and not str(exc).startswith("sweep file") else f"error: {exc}",
              file=sys.stderr)
        return 2
    from scripts.reporting.tables import write_csv

    (out / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    write_csv(rows, out / "results.csv")
    pngs = plot(sweep, rows, out)
    print(f"[sweep] wrote {out / 'results.json'}, results.csv and {len(pngs)} plots "
          f"({', '.join(pngs)})")
    bad = sum(r.get("mismatches", 0) or 0 for r in rows)
    if bad:
        print(f"[sweep] FAIL: {bad} RTL/model mismatches", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
