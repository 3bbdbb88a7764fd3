"""`make bench`: how fast the golden models and the RTL co-simulations run.

A benchmark, not a test: it prints figures and writes them to build/bench/bench.json;
it asserts nothing about speed. See docs/bench.md for what each figure covers; the
measurements are :mod:`scripts.benchmark`'s modules.

Options: --only model|rtl|all, --sims verilator,icarus, --designs nic,rdma, --messages N
(cycle-level model and Verilator runs, default 1000), --icarus-messages N (default 200),
--fast-messages N (fast path, default 1000 x --messages), --repeats N (model runs, best
of N, default 3), --verilator-opt O0|O1|O2|O3|Os (default $VERILATOR_OPT or -O1, as the
harness), --no-waves, --run-tests (run and time `make test` first), --out PATH.
"""

import argparse
import datetime
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.benchmark import (  # noqa: E402
    BENCH_DIR,
    DESIGNS,
    MAKE_SIM_RECORD,
    MODEL_KNOBS,
    MSG_BYTES,
    OPT_LEVELS,
    SIM_KEYS,
    SIMULATORS,
    positive_int,
)
from scripts.benchmark.cosim import measure_rtl, rdma_capacity, relative  # noqa: E402
from scripts.benchmark.make_test import read_make_test, run_make_test  # noqa: E402
from scripts.benchmark.models import measure_model  # noqa: E402
from scripts.benchmark.output import (  # noqa: E402
    empty_report,
    fmt,
    print_tables,
    write_report,
)

__all__ = ["parse_args", "main", "SIM_KEYS"]


def _name_list(allowed):
    def parse(text):
        names = [n.strip().lower() for n in text.split(",") if n.strip()]
        bad = [n for n in names if n not in allowed]
        if bad or not names:
            raise argparse.ArgumentTypeError(
                f"expected a comma-separated list of {', '.join(allowed)}, not {text!r}")
        return tuple(dict.fromkeys(names))
    return parse


def _opt_level(text):
    """A C++ optimisation level: ``-O2``, ``O2`` or ``2`` (argparse takes a value that
    starts with a dash only as ``--verilator-opt=-O2``)."""
    level = text.strip()
    level = level if level.startswith("-") else "-" + (
        level if level[:1] in ("O", "o") else "O" + level)
    level = "-O" + level[2:]
    if level not in OPT_LEVELS:
        raise argparse.ArgumentTypeError(
            f"expected one of {', '.join(OPT_LEVELS)} (or O2, 2), not {text!r}")
    return level


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        prog="bench.py", description=__doc__.splitlines()[0],
        epilog="Writes build/bench/bench.json; details in docs/bench.md.")
    ap.add_argument("--only", choices=("model", "rtl", "all"), default="all",
                    help="which figures to measure (default all)")
    ap.add_argument("--sims", type=_name_list(SIMULATORS), default=SIMULATORS,
                    help="simulators of the RTL runs, comma separated (default both)")
    ap.add_argument("--designs", type=_name_list(DESIGNS), default=DESIGNS,
                    help="designs to measure, comma separated (default nic,rdma)")
    ap.add_argument("--messages", type=positive_int, default=1000,
                    help="messages per cycle-level model run and per Verilator run")
    ap.add_argument("--icarus-messages", type=positive_int, default=200,
                    help="messages per Icarus run (default 200: Icarus is slow)")
    ap.add_argument("--fast-messages", type=positive_int, default=None,
                    help="messages per fast-path run (default 1000 x --messages)")
    ap.add_argument("--repeats", type=positive_int, default=3,
                    help="golden-model runs per figure; the best is kept (default 3)")
    ap.add_argument("--verilator-opt", type=_opt_level, default=None, metavar="LEVEL",
                    help="C++ optimisation of the Verilator model: O0, O1, O2, O3 or Os "
                         "(or --verilator-opt=-O2; default $VERILATOR_OPT or -O1, the "
                         "harness default)")
    ap.add_argument("--no-waves", action="store_true",
                    help="skip the runs with waveforms (WAVES=1)")
    ap.add_argument("--run-tests", action="store_true",
                    help="run `make test` first and record its wall time")
    ap.add_argument("--out", type=Path, default=BENCH_DIR / "bench.json",
                    help="where to write the JSON (default build/bench/bench.json)")
    args = ap.parse_args(argv)
    if args.fast_messages is None:
        args.fast_messages = 1000 * args.messages
    if args.verilator_opt is None:
        from tb.cosim import DEFAULT_OPT
        env_opt = os.environ.get("VERILATOR_OPT") or DEFAULT_OPT
        if env_opt not in OPT_LEVELS:
            ap.error(f"VERILATOR_OPT must be one of {' '.join(OPT_LEVELS)}, not {env_opt!r}")
        args.verilator_opt = env_opt
    return args



def _steps(args):
    steps = []
    if args.only in ("model", "all"):
        for kind in ("cycle", "fast"):
            for design in args.designs:
                steps.append(("model", kind, design))
    if args.only in ("rtl", "all"):
        for sim in args.sims:
            for waves in (False,) if args.no_waves else (False, True):
                for design in args.designs:
                    steps.append(("rtl", (sim, waves), design))
    return steps



def main(argv=None):
    args = parse_args(argv)
    report = empty_report()
    runs, failed = [], 0
    started = time.perf_counter()

    if args.run_tests:
        record = run_make_test()
    else:
        record = read_make_test()
    if record is not None:
        report["make_test_wall_s"] = float(record["make_test_wall_s"])
    record = read_make_test(MAKE_SIM_RECORD, "make_sim_wall_s")
    if record is not None:
        report["make_sim_wall_s"] = float(record["make_sim_wall_s"])

    steps = _steps(args)
    for n, (what, how, design) in enumerate(steps, 1):
        if what == "model":
            messages = args.messages if how == "cycle" else args.fast_messages
            label = f"model {how} {design}"
        else:
            sim, waves = how
            messages = args.messages if sim == "verilator" else args.icarus_messages
            key = sim + ("_waves" if waves else "")
            label = f"{key} {design}"
            if design == "rdma":
                cap = rdma_capacity()
                if messages > cap:
                    print(f"(RDMA co-simulations: {cap} messages, the most RdmaTop holds "
                          f"(recorders, host memories), not {messages})")
                    messages = cap
        print(f"[{n}/{len(steps)}] {label}, {messages} messages ...", end=" ", flush=True)
        t0 = time.perf_counter()
        try:
            if what == "model":
                rec = measure_model(how, design, messages, args.repeats)
                field = "model_cycle_msgs_per_s" if how == "cycle" else "model_fast_msgs_per_s"
                report[field][design] = rec["msgs_per_s"]
                note = f"{fmt(rec['msgs_per_s'])} msgs/s"
            else:
                rec = measure_rtl(design, sim, waves, messages, args.verilator_opt)
                report["rtl_cycles_per_s"][key][design] = rec["cycles_per_s"]
                report["rtl_msgs_per_s"][key][design] = rec["msgs_per_s"]
                report["run_phase_cycles_per_s"][key][design] = rec.get(
                    "run_phase_cycles_per_s")
                report["clock_only_cycles_per_s"][key][design] = rec.get(
                    "clock_only_cycles_per_s")
                note = (f"build/warm-up {rec['warmup_s']:.1f} s; test {rec['test_wall_s']:.1f} "
                        f"s, {fmt(rec['cycles_per_s'])} cycles/s, "
                        f"{fmt(rec['msgs_per_s'], 1)} msgs/s")
        except ImportError as exc:
            rec = {"design": design, "messages": messages, "error": f"not available: {exc}"}
            note = rec["error"]
        except Exception as exc:            # recorded and reported; main then returns 1
            rec = {"design": design, "messages": messages,
                   "error": f"{type(exc).__name__}: {exc}"}
            note = "FAILED: " + rec["error"]
            failed += 1
        rec["kind"] = what
        if what == "rtl":
            rec.setdefault("key", key)
            rec.setdefault("sim", sim)
            rec.setdefault("waves", waves)
        print(f"{time.perf_counter() - t0:.1f} s ({note})", flush=True)
        runs.append(rec)

    report["meta"] = {
        "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "wall_s": round(time.perf_counter() - started, 1),
        "msg_bytes": MSG_BYTES, "model_knobs": MODEL_KNOBS, "repeats": args.repeats,
        "verilator_opt": args.verilator_opt, "host": platform.node(),
        "cpus": os.cpu_count(), "load_average": _loadavg(), "python": platform.python_version(),
        "make_test": record,
    }
    report["runs"] = runs
    print_tables(report, runs, args.designs)
    write_report(report, args.out)
    print(f"wrote {relative(args.out)}")
    return 1 if failed else 0


def _loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


if __name__ == "__main__":
    sys.exit(main())

