"""Seeded regressions on both simulators, with a summary table and merged coverage.

Usage::

    python scripts/regress.py --seeds 5                  # seeds 1..5, both simulators
    python scripts/regress.py --seeds 3 --first-seed 100 --sims icarus --jobs 2
    python scripts/regress.py --seeds 2 --only rdma_uvm   # one design's environment
    make regress SEEDS=5

Each regression of :data:`REGRESSIONS` is a pytest test that takes the seeds from
``UVM_SEEDS`` (comma separated), the simulators from ``COSIM_SIMS``, and, when
``REGRESS_DIR`` is set, writes one JSON record per run there: ``regression``, ``sim``,
``seed``, ``status`` (``pass`` or ``fail``), and optionally ``framing``, ``seconds``,
``coverage`` (percent of bins hit), ``errors_hit``, ``run_dir`` (holding a
``coverage.json`` with a ``merged`` report) and ``error``. The script runs pytest once
per regression (``-n JOBS --dist loadgroup``: one simulator per worker, so builds are
never shared between processes), prints one row per run, writes
``build/regress/summary.json`` and, per regression (one per design: the NIC and the RDMA
environments have different covergroups), the coverage merged over its passing runs
(``build/regress/coverage.json``: ``{regression: merged report}``), and exits non-zero
when any run failed or is missing.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tb.cosim import SIMULATORS, toolchain_path  # noqa: E402
from tb.nic.uvm.coverage import COVERAGE_FILE, merge_reports  # noqa: E402

#: name -> pytest node id (its test honours UVM_SEEDS, COSIM_SIMS and REGRESS_DIR).
REGRESSIONS = {
    "nic_uvm": "tests/test_uvm_nic.py::test_uvm_nic",
    "rdma_uvm": "tests/test_uvm_rdma.py::test_uvm_rdma",
}
#: Configurations each regression runs per seed and simulator (for "missing" rows); a
#: regression not listed runs one configuration, ``-``.
CONFIGS = {
    "nic_uvm": ("compact", "l2"),
}


def _args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=1, help="number of seeds (default 1)")
    ap.add_argument("--first-seed", type=int, default=1, help="first seed (default 1)")
    ap.add_argument("--sims", default=",".join(SIMULATORS),
                    help=f"comma separated simulators (default {','.join(SIMULATORS)})")
    ap.add_argument("--jobs", type=int, default=2, help="pytest-xdist workers (default 2)")
    ap.add_argument("--only", default=",".join(REGRESSIONS),
                    help=f"comma separated regressions (default {','.join(REGRESSIONS)})")
    ap.add_argument("--out", default=str(ROOT / "build" / "regress"),
                    help="folder of records and summaries (default build/regress)")
    args = ap.parse_args(argv)
    if args.seeds < 1:
        ap.error(f"--seeds must be at least 1, not {args.seeds}")
    if args.jobs < 1:
        ap.error(f"--jobs must be at least 1, not {args.jobs}")
    args.sims = [s.strip() for s in args.sims.split(",") if s.strip()]
    bad = [s for s in args.sims if s not in SIMULATORS]
    if bad or not args.sims:
        ap.error(f"--sims: unknown simulator(s) {bad}; use {', '.join(SIMULATORS)}")
    args.only = [r.strip() for r in args.only.split(",") if r.strip()]
    bad = [r for r in args.only if r not in REGRESSIONS]
    if bad or not args.only:
        ap.error(f"--only: unknown regression(s) {bad}; use {', '.join(REGRESSIONS)}")
    return args


def _run_pytest(name, seeds, args, out):
    records = out / "records" / name
    if records.exists():
        shutil.rmtree(records)
    records.mkdir(parents=True)
    junit = out / f"junit-{name}.xml"
    env = dict(os.environ, UVM_SEEDS=",".join(map(str, seeds)), COSIM_SIMS=",".join(args.sims),
               REGRESS_DIR=str(records), PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", REGRESSIONS[name],
           f"--junitxml={junit}"]
    if args.jobs > 1:
        cmd += ["-n", str(args.jobs), "--dist", "loadgroup"]
    print("$", " ".join(cmd), flush=True)
    rc = subprocess.call(cmd, cwd=ROOT, env=env)
    recs = [json.loads(p.read_text()) for p in sorted(records.glob("*.json"))]
    return rc, recs, junit


def _rows(name, seeds, sims, recs):
    """One row per expected run; runs without a record (crashed, never ran) are failures."""
    got = {(r["sim"], r.get("framing", "-"), int(r["seed"])): r for r in recs}
    rows = []
    for seed in seeds:
        for sim in sims:
            for cfg in CONFIGS.get(name, ("-",)):
                r = got.pop((sim, cfg, seed), None)
                rows.append(r or {"regression": name, "sim": sim, "framing": cfg,
                                  "seed": seed, "status": "missing"})
    rows += list(got.values())             # records of configurations not listed
    return rows


def _table(rows):
    head = ("regression", "seed", "sim", "config", "result", "coverage", "errors", "time")
    lines = [head]
    for r in rows:
        lines.append((r["regression"], str(r["seed"]), r["sim"], r.get("framing", "-"),
                      r["status"],
                      f"{r['coverage']:.1f} %" if r.get("coverage") is not None else "-",
                      str(r.get("errors_hit", "-")),
                      f"{r['seconds']:.0f} s" if r.get("seconds") is not None else "-"))
    widths = [max(len(line[k]) for line in lines) for k in range(len(head))]
    out = []
    for k, line in enumerate(lines):
        out.append("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
        if k == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def main(argv=None):
    args = _args(argv)
    toolchain_path()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    rows, rcs = [], []
    for name in args.only:
        rc, recs, _ = _run_pytest(name, seeds, args, out)
        rcs.append(rc)
        rows += _rows(name, seeds, args.sims, recs)
    reports = {name: [] for name in args.only}
    for r in rows:
        cov = Path(r.get("run_dir", "")) / COVERAGE_FILE
        if r["status"] == "pass" and r.get("run_dir") and cov.exists():
            reports[r["regression"]].append(json.loads(cov.read_text())["merged"])
    print()
    print(_table(rows))
    failed = [r for r in rows if r["status"] != "pass"]
    for r in failed:
        if r.get("error"):
            print(f"  {r['regression']} seed {r['seed']} {r['sim']} {r.get('framing', '-')}: "
                  f"{r['error']}")
    merged = {name: merge_reports(reps) for name, reps in reports.items() if reps}
    for name, m in merged.items():
        print(f"\n{name}: coverage merged over {len(reports[name])} passing runs: "
              f"{m['hit']}/{m['total']} bins ({m['percent']:.1f} %)")
        for g, data in m["groups"].items():
            holes = [b for b, v in data["bins"].items() if not v]
            print(f"  {g:<11} {data['hit']:>3}/{data['total']}"
                  + (f"  holes: {', '.join(holes)}" if holes else ""))
    if merged:
        (out / "coverage.json").write_text(json.dumps(merged, indent=1))
    (out / "summary.json").write_text(json.dumps({"seeds": seeds, "sims": args.sims,
                                                  "runs": rows, "coverage": merged or None},
                                                 indent=1))
    ok = not failed and all(rc == 0 for rc in rcs)
    print(f"\n{len(rows) - len(failed)}/{len(rows)} runs passed"
          + ("" if ok else " -- REGRESSION FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
