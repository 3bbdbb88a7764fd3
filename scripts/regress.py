"""Seeded regressions on both simulators, with a summary table and merged coverage.

Usage::

    python scripts/regress.py --seeds 5                  # seeds 1..5, both simulators
    python scripts/regress.py --seeds 3 --first-seed 100 --sims icarus --jobs 2
    python scripts/regress.py --seeds 2 --only rdma_uvm   # one design's environment
    python scripts/regress.py --seeds 8 --scheduler tcp://head:8786   # on a Dask cluster
    make regress SEEDS=5 ARGS="--scheduler local"

Each regression of :data:`REGRESSIONS` is a pytest test that takes the seeds from
``UVM_SEEDS`` (comma separated), the simulators from ``COSIM_SIMS``, and, when
``REGRESS_DIR`` is set, writes one JSON record per run there: ``regression``, ``sim``,
``seed``, ``status`` (``pass`` or ``fail``), and optionally ``framing``, ``seconds``,
``coverage`` (percent of bins hit), ``errors_hit``, ``run_dir`` (holding a
``coverage.json`` with a ``merged`` report) and ``error``.

The script makes one job per (regression, seed, simulator): a pytest process of that
test with ``UVM_SEEDS=seed COSIM_SIMS=sim`` (the NIC's job runs both framings), its
output in ``pytest.log`` next to its records. The jobs run on
:func:`scripts.executor.make_executor`: ``--jobs`` local processes by default,
``--scheduler local`` for a Dask ``LocalCluster`` of ``--jobs`` workers, or
``--scheduler tcp://host:8786`` for the workers of a running Dask scheduler (each with
this repository and its ``.venv``: docs/sweeps.md). Jobs that need the same build share
it (:func:`tb.cosim.run_cosim` locks exports and builds). A job returns its records and
the merged coverage of its passing runs, so the summary does not depend on where it ran.

The script prints one line per finished job (its result, time and host), then one row
per run, writes ``build/regress/summary.json`` and, per regression (one per design: the
NIC and the RDMA environments have different covergroups), the coverage merged over its
passing runs (``build/regress/coverage.json``: ``{regression: merged report}``), and
exits non-zero when any run failed or is missing. A job that fails (pytest exits
non-zero, times out after ``--timeout`` seconds, or its worker dies) is a row with its
error, never the end of the regression. A bad option or an unreachable ``--scheduler``
stops before anything runs, with a line naming the option (exit code 2).
"""

import argparse
import importlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.executor import (  # noqa: E402
    ExecutorError,
    ItemFailed,
    add_cluster_options,
    check_cluster_options,
    make_executor,
)
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
#: Lines of a failed job's pytest output kept in its result.
LOG_TAIL = 15


def _args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=1, help="number of seeds (default 1)")
    ap.add_argument("--first-seed", type=int, default=1, help="first seed (default 1)")
    ap.add_argument("--sims", default=",".join(SIMULATORS),
                    help=f"comma separated simulators (default {','.join(SIMULATORS)})")
    ap.add_argument("--jobs", type=int, default=2,
                    help="runs at a time: local processes, or the workers of "
                         "--scheduler local (default 2; a tcp:// scheduler has its own)")
    add_cluster_options(ap, "the regressions")
    ap.add_argument("--timeout", type=float, default=0,
                    help="seconds after which a job (a regression, seed and simulator) is "
                         "stopped and its runs fail (default 0: none)")
    ap.add_argument("--only", default=",".join(REGRESSIONS),
                    help=f"comma separated regressions (default {','.join(REGRESSIONS)})")
    ap.add_argument("--out", default=str(ROOT / "build" / "regress"),
                    help="folder of records and summaries (default build/regress)")
    args = ap.parse_args(argv)
    if args.seeds < 1:
        ap.error(f"--seeds must be at least 1, not {args.seeds}")
    if args.jobs < 1:
        ap.error(f"--jobs must be at least 1, not {args.jobs}")
    check_cluster_options(ap, args)
    if args.timeout < 0:
        ap.error(f"--timeout must be 0 (none) or positive, not {args.timeout}")
    args.sims = [s.strip() for s in args.sims.split(",") if s.strip()]
    bad = [s for s in args.sims if s not in SIMULATORS]
    if bad or not args.sims:
        ap.error(f"--sims: unknown simulator(s) {bad}; use {', '.join(SIMULATORS)}")
    args.only = [r.strip() for r in args.only.split(",") if r.strip()]
    bad = [r for r in args.only if r not in REGRESSIONS]
    if bad or not args.only:
        ap.error(f"--only: unknown regression(s) {bad}; use {', '.join(REGRESSIONS)}")
    return args


def run_job(job):
    """One (regression, seed, simulator) job, on this machine (a local process or a Dask
    worker); never raises for a failed run.

    ``job`` is a dict: ``regression``, ``seed``, ``sim``, ``out`` (the folder of records,
    or ``None`` for this checkout's ``build/regress``) and ``timeout`` (seconds, 0 for
    none). Returns the job with ``rc`` (pytest's exit code, ``None`` when it did not
    finish), ``records`` (each passing one with its run's merged coverage under
    ``coverage_report``), ``seconds``, ``host``, ``log`` and, when it failed, ``error``
    and ``log_tail``.
    """
    name, seed, sim = job["regression"], job["seed"], job["sim"]
    t0 = time.monotonic()
    out = Path(job["out"]) if job.get("out") else ROOT / "build" / "regress"
    folder = out / "records" / name / f"{sim}-seed{seed}"
    res = dict(job, rc=None, records=[], host=socket.gethostname(),
               log=str(folder / "pytest.log"))
    try:
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        toolchain_path()
        env = dict(os.environ, UVM_SEEDS=str(seed), COSIM_SIMS=sim, REGRESS_DIR=str(folder),
                   PYTHONPATH=os.pathsep.join(
                       p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               REGRESSIONS[name], f"--junitxml={folder / 'junit.xml'}"]
        with open(folder / "pytest.log", "w") as log:
            log.write("$ " + " ".join(cmd) + "\n")
            log.flush()
            # Its own process group: a timeout stops the simulator it started too.
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            try:
                res["rc"] = proc.wait(timeout=job.get("timeout") or None)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                res["error"] = f"stopped after --timeout {job['timeout']:g} s"
        for p in sorted(folder.glob("*.json")):
            rec = json.loads(p.read_text())
            cov = Path(rec.get("run_dir", "")) / COVERAGE_FILE
            if rec.get("status") == "pass" and rec.get("run_dir") and cov.exists():
                rec["coverage_report"] = json.loads(cov.read_text())["merged"]
            res["records"].append(rec)
        if res["rc"] not in (0, None) and "error" not in res:
            res["error"] = f"pytest exit code {res['rc']}"
    except Exception as exc:          # a job is a row with its error, never a crash
        res["error"] = f"{type(exc).__name__}: {exc}"
    if "error" in res:
        try:
            lines = (folder / "pytest.log").read_text(errors="replace").splitlines()
            res["log_tail"] = lines[-LOG_TAIL:]
        except OSError:
            res["log_tail"] = []
    res["seconds"] = round(time.monotonic() - t0, 1)
    return res


def _jobs(args, seeds):
    """The jobs in the order they are submitted: regression by regression, seed by seed,
    the simulators of a seed side by side."""
    # A remote worker writes into its own checkout's build/regress (None), not our --out.
    remote = args.scheduler not in (None, "local")
    return [{"regression": name, "seed": seed, "sim": sim,
             "out": None if remote else str(Path(args.out).resolve()),
             "timeout": args.timeout}
            for name in args.only for seed in seeds for sim in args.sims]


def _where(args):
    if args.scheduler is None:
        return f"{args.jobs} local process{'es' if args.jobs > 1 else ''}"
    if args.scheduler == "local":
        return f"a Dask LocalCluster of {args.jobs} worker{'s' if args.jobs > 1 else ''}"
    return f"the Dask scheduler {args.scheduler}"


def _say(line):
    print(line, flush=True)


def run_jobs(args, seeds, log=_say):
    """Every job of ``args`` on its executor; one line per finished job. Returns the
    results in job order (a job whose worker failed becomes a result with ``error``)."""
    jobs = _jobs(args, seeds)
    t0 = time.monotonic()
    done = [0]

    def tick(res):
        if isinstance(res, ItemFailed):
            res = dict(res.item, rc=None, records=[], error=str(res))
        done[0] += 1
        runs = ", ".join(f"{r.get('framing', '-')} {r.get('status')}" if "framing" in r
                         else str(r.get("status")) for r in res["records"]) or "no record"
        log(f"[regress] {done[0]}/{len(jobs)} {res['regression']} seed {res['seed']} "
            f"{res['sim']}: {runs}"
            + (f" ({res['error']})" if res.get("error") else "")
            + (f" in {res['seconds']:.0f} s" if res.get("seconds") is not None else "")
            + (f" on {res['host']}" if args.scheduler and res.get("host") else "")
            + f" [{time.monotonic() - t0:.0f} s]")

    # By module name, so that a Dask worker imports it from its own checkout (not the
    # __main__ of this script, pickled with our paths).
    job_fn = importlib.import_module("scripts.regress").run_job
    # Entering the executor reaches the scheduler (ExecutorError if it cannot).
    with make_executor(args.jobs, args.scheduler, args.connect_timeout) as ex:
        log(f"[regress] {len(jobs)} job{'s' if len(jobs) > 1 else ''} "
            f"({', '.join(args.only)} x {len(seeds)} seed{'s' if len(seeds) > 1 else ''} "
            f"x {', '.join(args.sims)}) on {_where(args)}")
        results = ex.map(job_fn, jobs, progress=tick, errors="return")
    return [dict(r.item, rc=None, records=[], error=str(r)) if isinstance(r, ItemFailed)
            else r for r in results]


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
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    t0 = time.monotonic()
    try:
        results = run_jobs(args, seeds)
    except ExecutorError as exc:     # a bad --scheduler: raised before any job runs
        print(f"regress.py: error: {exc}", file=sys.stderr)
        return 2
    rows, reports, job_errors = [], {name: [] for name in args.only}, []
    for name in args.only:
        for res in (r for r in results if r["regression"] == name):
            got = _rows(name, [res["seed"]], [res["sim"]], res["records"])
            for r in got:
                cov = r.pop("coverage_report", None)
                if r["status"] == "pass" and cov is not None:
                    reports[name].append(cov)
                if r["status"] == "missing" and res.get("error"):
                    r["error"] = res["error"]
            rows += got
            if res.get("error") or res.get("rc"):
                job_errors.append(res)
    print()
    print(_table(rows))
    failed = [r for r in rows if r["status"] != "pass"]
    for r in failed:
        if r.get("error"):
            print(f"  {r['regression']} seed {r['seed']} {r['sim']} {r.get('framing', '-')}: "
                  f"{r['error']}")
    for res in job_errors:
        print(f"\n{res['regression']} seed {res['seed']} {res['sim']}: "
              f"{res.get('error', 'pytest exit code ' + str(res.get('rc')))}"
              + (f"; log {res.get('host', '?')}:{res['log']}" if res.get("log") else ""))
        for line in res.get("log_tail", [])[-LOG_TAIL:]:
            print(f"  | {line}")
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
    (out / "summary.json").write_text(json.dumps({
        "seeds": seeds, "sims": args.sims, "scheduler": args.scheduler, "runs": rows,
        "jobs": [{k: res.get(k) for k in ("regression", "seed", "sim", "rc", "seconds",
                                          "host", "log", "error")} for res in results],
        "coverage": merged or None}, indent=1))
    ok = not failed and not job_errors
    print(f"\n{len(rows) - len(failed)}/{len(rows)} runs passed in "
          f"{time.monotonic() - t0:.0f} s" + ("" if ok else " -- REGRESSION FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
