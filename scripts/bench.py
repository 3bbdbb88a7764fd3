"""`make bench`: how fast the golden models and the RTL co-simulations run.

A benchmark, not a test: it prints figures and writes them to build/bench/bench.json;
it asserts nothing about speed. See docs/bench.md for what each figure covers.

Options: --only model|rtl|all, --sims verilator,icarus, --designs nic,rdma, --messages N
(cycle-level model and Verilator runs, default 1000), --icarus-messages N (default 200),
--fast-messages N (fast path, default 1000 x --messages), --repeats N (model runs, best
of N, default 3), --verilator-opt O0|O1|O2|O3|Os (default $VERILATOR_OPT or -O0, as the
harness), --no-waves, --run-tests (run and time `make test` first), --out PATH.
"""

import argparse
import datetime
import json
import logging
import math
import os
import platform
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BENCH_DIR = ROOT / "build" / "bench"
MAKE_TEST_RECORD = BENCH_DIR / "make_test_wall_s.json"
DESIGNS = ("nic", "rdma")
SIMULATORS = ("verilator", "icarus")
SIM_KEYS = ("verilator", "icarus", "verilator_waves", "icarus_waves")
OPT_LEVELS = ("-O0", "-O1", "-O2", "-O3", "-Os")
MSG_BYTES = 128
#: Knobs of the headline point of each design on the golden models.
MODEL_KNOBS = {"nic": {"framing": "compact", "peers": 1}, "rdma": {"qps": 1}}
#: Messages of the throw-away run that builds a top before it is measured.
WARMUP_MESSAGES = 2


# -- options -------------------------------------------------------------------------------

def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


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
    ap.add_argument("--messages", type=_positive_int, default=1000,
                    help="messages per cycle-level model run and per Verilator run")
    ap.add_argument("--icarus-messages", type=_positive_int, default=200,
                    help="messages per Icarus run (default 200: Icarus is slow)")
    ap.add_argument("--fast-messages", type=_positive_int, default=None,
                    help="messages per fast-path run (default 1000 x --messages)")
    ap.add_argument("--repeats", type=_positive_int, default=3,
                    help="golden-model runs per figure; the best is kept (default 3)")
    ap.add_argument("--verilator-opt", type=_opt_level, default=None, metavar="LEVEL",
                    help="C++ optimisation of the Verilator model: O0, O1, O2, O3 or Os "
                         "(or --verilator-opt=-O2; default $VERILATOR_OPT or -O0, the "
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
        env_opt = os.environ.get("VERILATOR_OPT") or "-O0"
        if env_opt not in OPT_LEVELS:
            ap.error(f"VERILATOR_OPT must be one of {' '.join(OPT_LEVELS)}, not {env_opt!r}")
        args.verilator_opt = env_opt
    return args


# -- golden models -------------------------------------------------------------------------

def _model_function(kind):
    """``cycle_point`` or ``fast_point``, imported only when the model figures are wanted."""
    if kind == "cycle":
        from pymodel.points import cycle_point
        return cycle_point
    from pymodel.fastpath import fast_point
    return fast_point


def measure_model(kind, design, messages, repeats):
    """Messages per second of the golden model ``kind`` ("cycle" or "fast") on the
    headline point of ``design``: best (shortest) wall time of ``repeats`` runs."""
    point = _model_function(kind)
    best, result = math.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = point(design, msg_bytes=MSG_BYTES, messages=messages, **MODEL_KNOBS[design])
        best = min(best, time.perf_counter() - t0)
    done = int(result.get("messages", messages))
    return {"kind": kind, "design": design, "messages": done, "repeats": repeats,
            "best_s": best, "msgs_per_s": done / best if best > 0 else None,
            "model_cycles": result.get("cycles")}


# -- RTL co-simulation ---------------------------------------------------------------------

def nic_top_and_params(messages):
    """The NIC headline top (compact framing) sized for ``messages`` stores of 128 B, and
    its cocotb parameters: the same top and scenario as :mod:`tb.nic.headline`, so a run
    of 1000 messages shares its build with ``make sim``."""
    from rtl.tops.nic_top import NicTop
    from spec.nic import HEADLINE_TOP

    width = HEADLINE_TOP["width"]
    cmd_beats = messages * -(-MSG_BYTES // width)
    wire_beats = messages * -(-(20 + MSG_BYTES + 4) // width)
    depth = 1 << max(4, (max(cmd_beats, wire_beats) - 1).bit_length())
    top = NicTop(framing="compact", items=[depth, 16, 16, 16],
                 events=[depth, depth, 16, 16], **HEADLINE_TOP)
    params = dict(HEADLINE_TOP, framing="compact", credits=top.credits, scenario="pair",
                  seed=1, msg_bytes=MSG_BYTES, messages=messages)
    return top, params


def _run_design(design, sim, messages, top_messages, opt, test_id):
    """One co-simulation of ``design``'s headline with ``messages`` messages, on the top
    built for ``top_messages``; returns the run folder."""
    if design == "nic":
        from tb.cosim import run_cosim

        top, params = nic_top_and_params(top_messages)
        params["messages"] = messages
        return Path(run_cosim(top, name="nic_headline_compact",
                              test_module="tb.nic.cocotb_nic", params=params, sim=sim,
                              test_id=test_id, opt=opt))
    from tb.rdma.runner import run_rdma

    params = dict(kind="writes", messages=messages, sizes=[MSG_BYTES], qps=1,
                  out_json="measurements.json")
    return run_rdma({}, params=params, sim=sim, test_id=test_id, opt=opt)


def read_results_xml(path):
    """``(wall_s, sim_time_ns)`` of the single cocotb test in ``results.xml``: cocotb's
    wall time of the test (from the start of the test coroutine to its end) and the
    simulated time it covered."""
    case = ET.parse(path).getroot().find(".//testcase")
    if case is None:
        raise ValueError(f"{path}: no testcase")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    unit = props.get("sim_time_unit", "ns")
    scale = {"fs": 1e-6, "ps": 1e-3, "ns": 1.0, "us": 1e3, "ms": 1e6, "sec": 1e9, "s": 1e9}
    if unit not in scale:
        raise ValueError(f"{path}: unknown sim_time_unit {unit!r}")
    return float(case.get("time")), float(props["sim_time_duration"]) * scale[unit]


def _nic_run_phase(run_dir):
    """``(design cycles, run-phase seconds)`` the NIC cocotb module reports: the cycle
    count when every recorder was done, and the wall time from reset release to the end
    of the run (its "simulator in X s" log line), or ``None`` each."""
    cycles = seconds = None
    results = run_dir / "nic_results.json"
    if results.exists():
        cycles = json.loads(results.read_text()).get("cycles")
    log = run_dir / "sim.log"
    if log.exists():
        for line in log.read_text(errors="replace").splitlines():
            if "simulator in" in line:
                try:
                    seconds = float(line.rsplit("simulator in", 1)[1].split()[0])
                except (IndexError, ValueError):
                    pass
    return cycles, seconds


def measure_rtl(design, sim, waves, messages, opt):
    """Co-simulate the headline of ``design`` on ``sim``; return the run's figures.

    A first run of :data:`WARMUP_MESSAGES` messages on the same top exports and builds it
    if needed (not counted); the measured run then reuses the build.
    """
    from tb.harness import CLOCK_NS

    _quiet_runners()
    saved = os.environ.get("WAVES")
    os.environ["WAVES"] = "1" if waves else "0"
    try:
        t0 = time.perf_counter()
        _run_design(design, sim, WARMUP_MESSAGES, messages, opt, "bench-warmup")
        warmup = time.perf_counter() - t0
        t0 = time.perf_counter()
        run_dir = _run_design(design, sim, messages, messages, opt,
                              f"bench-{messages}x{MSG_BYTES}")
        process = time.perf_counter() - t0
    finally:
        if saved is None:
            os.environ.pop("WAVES", None)
        else:
            os.environ["WAVES"] = saved
    wall, sim_ns = read_results_xml(run_dir / "results.xml")
    cycles = sim_ns / CLOCK_NS
    rec = {"design": design, "sim": sim, "waves": waves, "messages": messages,
           "verilator_opt": opt if sim == "verilator" else None,
           "cycles": cycles, "test_wall_s": wall, "process_wall_s": process,
           "warmup_s": warmup, "cycles_per_s": cycles / wall if wall > 0 else None,
           "msgs_per_s": messages / wall if wall > 0 else None,
           "run_dir": _rel(run_dir)}
    if design == "nic":
        rec["design_cycles"], rec["run_phase_s"] = _nic_run_phase(run_dir)
        if rec["design_cycles"] and rec["run_phase_s"]:
            rec["run_phase_cycles_per_s"] = rec["design_cycles"] / rec["run_phase_s"]
    if waves:
        fst = [p for p in (run_dir / "dump.fst", run_dir / "waves.fst") if p.exists()]
        rec["waves_bytes"] = fst[0].stat().st_size if fst else None
    return rec


def _skip_notice(record):
    return not record.getMessage().startswith("Skipping compilation")


def _quiet_runners():
    """Drop the "Skipping compilation of ..." warning of cocotb's runners (one per run of
    a built top), which would break the progress lines."""
    for name in ("Verilator", "Icarus"):
        logger = logging.getLogger(name)
        if _skip_notice not in logger.filters:
            logger.addFilter(_skip_notice)


def _rel(path):
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


# -- make test -----------------------------------------------------------------------------

def read_make_test(path=MAKE_TEST_RECORD):
    """The record `make test` leaves in ``path`` (a dict), or ``None``."""
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("make_test_wall_s"),
                                                      (int, float)):
        return None
    return record


def run_make_test(command=("make", "test"), record_path=MAKE_TEST_RECORD):
    """Run ``command`` (``make test``) in the repository, timed; return its record.

    The Makefile records the wall time of ``make test`` in ``record_path`` itself; when
    that record is missing or older than this run (a Makefile that does not record), the
    wall time measured here is written there in the same format.
    """
    start = time.time()
    print(f"running `{' '.join(command)}` (this takes minutes) ...", flush=True)
    rc = subprocess.run(list(command), cwd=ROOT).returncode
    wall = time.time() - start
    if rc:
        print(f"warning: `{' '.join(command)}` exited with {rc}; its wall time is kept",
              flush=True)
    record = read_make_test(record_path)
    if record is None or _finished_before(record, start):
        record = {"make_test_wall_s": round(wall, 1), "passed": rc == 0,
                  "commit": git_head(),
                  "finished": datetime.datetime.now(datetime.UTC).isoformat(
                      timespec="seconds")}
        write_report(record, record_path)
    return record


def _finished_before(record, epoch):
    try:
        finished = datetime.datetime.fromisoformat(record["finished"])
    except (KeyError, TypeError, ValueError):
        return True
    if finished.tzinfo is None:
        finished = finished.replace(tzinfo=datetime.UTC)
    return finished.timestamp() < math.floor(epoch)     # records keep whole seconds


def git_head(root=ROOT):
    """The commit checked out in ``root``, read from ``.git`` without running git, or
    ``None``."""
    try:
        git = root / ".git"
        if git.is_file():                                  # a worktree: "gitdir: <path>"
            git = (root / git.read_text().split(":", 1)[1].strip()).resolve()
        common = git
        if (git / "commondir").is_file():
            common = (git / (git / "commondir").read_text().strip()).resolve()
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref:"):
            return head or None
        ref = head[4:].strip()
        for base in (git, common):
            if (base / ref).is_file():
                return (base / ref).read_text().strip()
        packed = common / "packed-refs"
        if packed.is_file():
            for line in packed.read_text().splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[1] == ref:
                    return parts[0]
    except (OSError, IndexError):
        pass
    return None


# -- report --------------------------------------------------------------------------------

def empty_report():
    """bench.json with every figure ``null``: model figures keyed by design, RTL figures
    keyed by simulator key and then design."""
    return {
        "model_cycle_msgs_per_s": dict.fromkeys(DESIGNS),
        "model_fast_msgs_per_s": dict.fromkeys(DESIGNS),
        "rtl_cycles_per_s": {k: dict.fromkeys(DESIGNS) for k in SIM_KEYS},
        "rtl_msgs_per_s": {k: dict.fromkeys(DESIGNS) for k in SIM_KEYS},
        "make_test_wall_s": None,
    }


def _fmt(value, digits=0):
    if value is None:
        return "-"
    if digits == 0:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def print_tables(report, runs, designs):
    if any(r.get("kind") == "model" for r in runs):
        print()
        print("golden models, messages per second (best of repeats)")
        print(f"  {'':<12}" + "".join(f"{d:>14}" for d in designs))
        for key, title in (("model_cycle_msgs_per_s", "cycle-level"),
                           ("model_fast_msgs_per_s", "fast path")):
            print(f"  {title:<12}"
                  + "".join(f"{_fmt(report[key][d]):>14}" for d in designs))
    rtl = [r for r in runs if r.get("kind") == "rtl"]
    if rtl:
        print()
        print("RTL co-simulation, per cocotb test (wall time of the test in results.xml)")
        head = ("sim", "design", "msgs", "cycles", "test s", "cycles/s", "msgs/s",
                "run-phase cyc/s")
        rows = [head]
        for r in rtl:
            if r.get("error"):
                rows.append((r["key"], r["design"], str(r["messages"]), "error", "-", "-",
                             "-", "-"))
                continue
            rows.append((r["key"], r["design"], str(r["messages"]), _fmt(r["cycles"]),
                         _fmt(r["test_wall_s"], 1), _fmt(r["cycles_per_s"]),
                         _fmt(r["msgs_per_s"], 1), _fmt(r.get("run_phase_cycles_per_s"))))
        widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
        for k, row in enumerate(rows):
            print("  " + "  ".join(c.rjust(w) if i > 1 else c.ljust(w)
                                   for i, (c, w) in enumerate(zip(row, widths, strict=True))))
            if k == 0:
                print("  " + "  ".join("-" * w for w in widths))
    print()
    wall = report["make_test_wall_s"]
    if wall is None:
        print("make test wall time: unknown (run `make test`, or `scripts/bench.py "
              "--run-tests`, which runs and times it)")
    else:
        print(f"make test wall time: {wall:.0f} s")


def write_report(report, path):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(report, indent=1) + "\n")
    tmp.replace(path)


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
        print(f"[{n}/{len(steps)}] {label}, {messages} messages ...", end=" ", flush=True)
        t0 = time.perf_counter()
        try:
            if what == "model":
                rec = measure_model(how, design, messages, args.repeats)
                field = "model_cycle_msgs_per_s" if how == "cycle" else "model_fast_msgs_per_s"
                report[field][design] = rec["msgs_per_s"]
                note = f"{_fmt(rec['msgs_per_s'])} msgs/s"
            else:
                rec = measure_rtl(design, sim, waves, messages, args.verilator_opt)
                report["rtl_cycles_per_s"][key][design] = rec["cycles_per_s"]
                report["rtl_msgs_per_s"][key][design] = rec["msgs_per_s"]
                note = (f"build/warm-up {rec['warmup_s']:.1f} s; test {rec['test_wall_s']:.1f} "
                        f"s, {_fmt(rec['cycles_per_s'])} cycles/s, "
                        f"{_fmt(rec['msgs_per_s'], 1)} msgs/s")
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
    print(f"wrote {_rel(args.out)}")
    return 1 if failed else 0


def _loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


if __name__ == "__main__":
    sys.exit(main())
