"""`make report`: sweeps of both designs, area proxies and plots into build/report/.

1. Model grid (:mod:`scripts.reporting.grid`; the golden model, every point): message
   sizes x framings x NIC peers, and message sizes x RDMA QPs x context-cache entries.
   Each point uses the fast path (analysis/fastpath.py, equal to the cycle-level model on
   the grid of tests/test_fastpath.py) and falls back to the cycle-level model where the
   fast path does not apply. Spread over ``--jobs`` processes.
2. RTL subset (:mod:`scripts.reporting.rtl_subset`; co-simulation, RTL against the
   cycle-level model, every metric): points that touch every axis of the grid. Each row
   says its mismatches (RTL against model: frames, writes, stamps, counters and every
   metric); the fast path's figures for the same point are compared too.
3. Area proxies (scripts/area.py, Yosys; cached) into area.json.
4. results.json / results.csv (SPEC.md row format; model-only rows have
   ``simulator: "model"`` and no ``_rtl`` values), report.md
   (:mod:`scripts.reporting.tables`), PNG plots (:mod:`scripts.reporting.plots`).
5. The "Under load" section (:mod:`scripts.reporting.load`: open-loop latency
   distributions, knees, issuers; an RTL subset compared exactly), appended to report.md.
6. The "Where the gap comes from" section (:mod:`scripts.reporting.gap`: the NIC as built,
   one factor per row, to the RDMA engine, at ``board`` and ``pod``; co-simulated, RTL
   against the model; gap.json; each row's area from area.json, :mod:`scripts.area_proxies.
   gap`), appended to report.md (not with --no-rtl or --no-gap).
7. The "State spectrum" section (:mod:`scripts.reporting.spectrum`: the NIC, the NIC
   with per-peer retry, ephemeral delivery contexts and the RC engine at 1 to 4,096
   peers, and the sizing for 10^9
   messages a second; the golden model; spectrum.json, its rows also in results.json),
   appended to report.md (not with --no-spectrum).
8. The "Inference" section (:mod:`scripts.reporting.inference`: LLM decode steps and KV
   transfers carried by both designs, the decode roofline; inference.json and its
   plots), appended to report.md.

Options: --sim, --jobs, --rtl-messages, --model-messages, --load-messages, --no-rtl, --no-gap,
--no-area, --no-load, --no-spectrum, --no-inference, --out, --scheduler.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.executor import add_cluster_options, check_cluster_options  # noqa: E402
from scripts.reporting.grid import run_model_grid  # noqa: E402
from scripts.reporting.inference import inference_section  # noqa: E402
from scripts.reporting.plots import plots  # noqa: E402
from scripts.reporting.rtl_subset import row_fails, run_rtl_subset  # noqa: E402
from scripts.reporting.tables import write_csv, write_report  # noqa: E402


def main(argv=None):
    from tb.cosim import SIMULATORS, selected_sim
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", default=None, help=f"one of {', '.join(SIMULATORS)}")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--rtl-messages", type=int, default=200)
    ap.add_argument("--model-messages", type=int, default=2000)
    ap.add_argument("--no-rtl", action="store_true", help="the model grid only")
    ap.add_argument("--no-area", action="store_true", help="skip Yosys (reuse area.json)")
    ap.add_argument("--load-messages", type=int, default=1000,
                    help="messages per point of the Under load section (default 1000)")
    ap.add_argument("--no-load", action="store_true",
                    help="leave out the Under load section")
    ap.add_argument("--no-gap", action="store_true",
                    help="leave out the 'Where the gap comes from' section (co-simulated)")
    ap.add_argument("--no-mem-ops", action="store_true",
                    help="leave out the 'Loads and atomics' section (co-simulated)")
    ap.add_argument("--no-spectrum", action="store_true",
                    help="leave out 'The state spectrum' section")
    ap.add_argument("--no-inference", action="store_true",
                    help="leave out the Inference section")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "report")
    add_cluster_options(ap, "the model grid and the RTL subset")
    args = ap.parse_args(argv)
    check_cluster_options(ap, args)
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
    if args.load_messages < 20:
        ap.error(f"--load-messages must be at least 20, not {args.load_messages}")
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()

    from scripts.executor import ExecutorError
    try:
        grid = run_model_grid(args.jobs, args.model_messages, args.scheduler,
                              args.connect_timeout)
        rtl = [] if args.no_rtl else run_rtl_subset(args.sim, args.jobs, args.rtl_messages,
                                                    args.scheduler, args.connect_timeout)
    except ExecutorError as exc:
        ap.error(str(exc))

    area = None
    area_path = out / "area.json"
    if not args.no_area:
        from scripts import area as area_script
        print("area proxies (Yosys, cached by Verilog text) ...", file=sys.stderr)
        area_script.main(["--out", str(area_path), "--jobs", str(args.jobs)])
    if area_path.exists():
        area = json.loads(area_path.read_text())

    rows = rtl + grid
    spectrum_md = None
    if not args.no_spectrum:
        from scripts.reporting.spectrum import spectrum_section
        print("the state spectrum (golden model) ...", file=sys.stderr)
        spectrum_md, spectrum = spectrum_section(out)
        rows = rows + spectrum
    (out / "results.json").write_text(json.dumps(rows, indent=1))
    write_csv(rows, out / "results.csv")
    pngs = plots(grid, area, out)
    write_report(grid, rtl, area, pngs, out, args, time.time() - t0)
    load_rtl = []
    if not args.no_load:
        from scripts.executor import make_executor
        from scripts.reporting.load import load_section, run_load_rtl
        try:
            with make_executor(args.jobs, args.scheduler, args.connect_timeout) as ex:
                if not args.no_rtl:
                    load_rtl = run_load_rtl(ex, args.sim, min(args.rtl_messages, 200))
                md = load_section(out, ex, args.load_messages, load_rtl)
        except ExecutorError as exc:
            ap.error(str(exc))
        with open(out / "report.md", "a") as f:
            f.write("\n" + md + "\n")
    gap_rows = []
    if not (args.no_gap or args.no_rtl):
        from scripts.reporting.gap import gap_section, run_gap
        from scripts.sim import run_jobs
        print("where the gap comes from (co-simulated) ...", file=sys.stderr)
        profiles = ("board", "pod")
        gap_rows = run_gap(args.sim, profiles, args.rtl_messages, 128, run_jobs, args.jobs)
        (out / "gap.json").write_text(json.dumps(gap_rows, indent=1))
        with open(out / "report.md", "a") as f:
            f.write("\n" + gap_section(gap_rows, profiles, args.rtl_messages, 128, args.sim,
                                        area)
                    + "\n")
    mem_rows = []
    if not (args.no_mem_ops or args.no_rtl):
        from scripts.reporting.mem_ops import (
            mem_ops_jobs,
            mem_ops_section,
            nic_rate_jobs,
            rate_jobs,
        )
        from scripts.sim import run_jobs
        print("loads and atomics (co-simulated) ...", file=sys.stderr)
        mem_rows = run_jobs(mem_ops_jobs(args.sim, args.load_messages), args.jobs)
        for row in mem_rows:            # the READ points' frames: `make sim`'s point.pcap
            row.pop("frames", None)
        rates = run_jobs(rate_jobs() + nic_rate_jobs(), args.jobs)
        (out / "mem_ops.json").write_text(json.dumps(dict(rows=mem_rows, rates=rates),
                                                     indent=1))
        with open(out / "report.md", "a") as f:
            f.write("\n" + mem_ops_section(mem_rows, args.load_messages, args.sim, rates)
                    + "\n")
    if spectrum_md is not None:
        with open(out / "report.md", "a") as f:
            f.write("\n" + spectrum_md + "\n")
    if not args.no_inference:
        print("inference grid (fast path) ...", file=sys.stderr)
        md = inference_section(out)
        with open(out / "report.md", "a") as f:
            f.write("\n" + md + "\n")
    bad = [r for r in load_rtl + gap_rows + mem_rows if r["mismatches"] != 0]
    if not args.no_inference:   # the fast path outside its tolerance at inference sizes
        doc = json.loads((out / "inference.json").read_text())
        bad += [r for r in doc.get("fastpath_check", []) if not r["within"]]
    bad += [r for r in rtl if row_fails(r)]        # as report.md's summary counts them
    print(f"report: {out / 'report.md'} ({len(grid)} model points, {len(rtl)} RTL points, "
          f"{len(bad)} with a mismatch)")
    return 1 if bad else 0


if __name__ == "__main__":
    os.environ.setdefault("COSIM_PROGRESS", "1")     # each co-simulation phase, timed
    sys.exit(main())
