"""bench.json (every figure ``null`` until measured) and the tables printed at the end."""

import json
import os
from pathlib import Path

from . import DESIGNS, SIM_KEYS

__all__ = ["empty_report", "fmt", "print_tables", "write_report"]


def empty_report():
    """bench.json with every figure ``null``: model figures keyed by design, RTL figures
    keyed by simulator key and then design."""
    return {
        "model_cycle_msgs_per_s": dict.fromkeys(DESIGNS),
        "model_fast_msgs_per_s": dict.fromkeys(DESIGNS),
        "rtl_cycles_per_s": {k: dict.fromkeys(DESIGNS) for k in SIM_KEYS},
        "rtl_msgs_per_s": {k: dict.fromkeys(DESIGNS) for k in SIM_KEYS},
        "run_phase_cycles_per_s": {k: dict.fromkeys(DESIGNS) for k in SIM_KEYS},
        "clock_only_cycles_per_s": {k: dict.fromkeys(DESIGNS) for k in SIM_KEYS},
        "make_test_wall_s": None,
        "make_sim_wall_s": None,
    }


def fmt(value, digits=0):
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
                  + "".join(f"{fmt(report[key][d]):>14}" for d in designs))
    rtl = [r for r in runs if r.get("kind") == "rtl"]
    if rtl:
        print()
        print("RTL co-simulation, per cocotb test (wall time of the test in results.xml)")
        head = ("sim", "design", "msgs", "cycles", "test s", "cycles/s", "msgs/s",
                "run-phase cyc/s", "clock-only cyc/s")
        rows = [head]
        for r in rtl:
            if r.get("error"):
                rows.append((r["key"], r["design"], str(r["messages"]), "error")
                            + ("-",) * (len(head) - 4))
                continue
            rows.append((r["key"], r["design"], str(r["messages"]), fmt(r["cycles"]),
                         fmt(r["test_wall_s"], 1), fmt(r["cycles_per_s"]),
                         fmt(r["msgs_per_s"], 1), fmt(r.get("run_phase_cycles_per_s")),
                         fmt(r.get("clock_only_cycles_per_s"))))
        widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
        for k, row in enumerate(rows):
            print("  " + "  ".join(c.rjust(w) if i > 1 else c.ljust(w)
                                   for i, (c, w) in enumerate(zip(row, widths, strict=True))))
            if k == 0:
                print("  " + "  ".join("-" * w for w in widths))
        for r in rtl:
            if r.get("phases_s"):
                print(f"  {r['key']} {r['design']} test, wall time by phase (s): "
                      + ", ".join(f"{n} {v:.3f}" for n, v in r["phases_s"].items()))
                if r.get("cycles_per_s_without_model"):
                    print(f"    without the golden model's run: "
                          f"{fmt(r['cycles_per_s_without_model'])} cycles/s")
    print()
    wall = report["make_test_wall_s"]
    if wall is None:
        print("make test wall time: unknown (run `make test`, or `scripts/bench.py "
              "--run-tests`, which runs and times it)")
    else:
        print(f"make test wall time: {wall:.0f} s")
    wall = report.get("make_sim_wall_s")
    print("make sim wall time (headline): "
          + ("unknown (run `make sim`)" if wall is None else f"{wall:.0f} s"))


def write_report(report, path):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(report, indent=1) + "\n")
    tmp.replace(path)

