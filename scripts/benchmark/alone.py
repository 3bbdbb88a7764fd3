"""The Verilated model of a co-simulation build, measured on its own.

``python -m scripts.benchmark.alone BUILD_DIR`` takes a Verilator build folder of
:func:`tb.cosim.run_cosim` (``build/cosim/verilator/<top>-<key>/``: the top's Verilog and
its control file of public signals) and builds the same model again, with the same
Verilator options (:data:`tb.cosim.VERILATOR_ARGS`) and the same C++ flags as the harness,
around a C++ ``main`` of its own instead of cocotb: ``rst`` high for three cycles, every
other input at 0, then ``--cycles`` clock cycles, two ``eval`` calls each, with no VPI
and no Python. It prints the wall and CPU time of those cycles and, with
``--callgrind``, the instructions the model executes per cycle (Valgrind's callgrind: a
run of ``--callgrind-cycles`` cycles less a run of none), a figure that the load of a
shared machine does not move. The build goes to ``alone<opt><args>/`` inside BUILD_DIR.

Only the free-running parts of the design move in such a run; Verilator evaluates every
clocked block and the logic behind it at every edge, busy or not, so the figure is the
model's cost per cycle without the testbench (docs/bench.md, "What bounds the speed").
"""

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.benchmark import OPT_LEVELS, positive_int  # noqa: E402

__all__ = ["MAIN_CPP", "parse_args", "build", "run", "instructions_per_cycle", "main"]

#: The clock loop (written for this script).
MAIN_CPP = r"""#include "Vtop.h"
#include "verilated.h"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

int main(int argc, char** argv) {
    long n = argc > 1 ? atol(argv[1]) : 0;
    VerilatedContext* ctx = new VerilatedContext;
    Vtop* top = new Vtop{ctx};
    top->clk = 0;
    top->rst = 1;
    top->eval();
    for (int i = 0; i < 3; i++) { top->clk = 1; top->eval(); top->clk = 0; top->eval(); }
    top->rst = 0;
    auto t0 = std::chrono::steady_clock::now();
    std::clock_t c0 = std::clock();
    for (long i = 0; i < n; i++) { top->clk = 1; top->eval(); top->clk = 0; top->eval(); }
    double cpu = double(std::clock() - c0) / CLOCKS_PER_SEC;
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("cycles %ld wall_s %.6f cpu_s %.6f\n", n, wall, cpu);
    top->final();
    delete top;
    return 0;
}
"""


def _opt(text):
    text = text if text.startswith("-") else "-" + text
    if text not in OPT_LEVELS:
        raise argparse.ArgumentTypeError(f"must be one of {' '.join(OPT_LEVELS)}, not {text!r}")
    return text


def _cxx_flags(text):
    words = text.split()
    bad = [w for w in words if not w.startswith("-") or "'" in w or '"' in w or "\\" in w]
    if bad:
        raise argparse.ArgumentTypeError(
            f"expected C++ options separated by spaces, each starting with '-', not {bad!r}")
    return " ".join(words)


def _build_dir(text):
    path = Path(text)
    names = [p.stem for p in path.glob("*.v")] if path.is_dir() else []
    if not (path / "public.vlt").exists() or len(names) != 1:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a Verilator build folder of run_cosim (one <top>.v and "
            f"public.vlt)")
    return path.resolve()


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build_dir", type=_build_dir,
                    help="a Verilator build folder of run_cosim (build/cosim/verilator/...)")
    ap.add_argument("--opt", type=_opt, default=None,
                    help="C++ optimisation, O0|O1|O2|O3|Os (default: the harness's, "
                         "$VERILATOR_OPT or tb.cosim.DEFAULT_OPT)")
    ap.add_argument("--cycles", type=positive_int, default=200_000,
                    help="cycles of the timed run (default 200,000)")
    ap.add_argument("--repeats", type=positive_int, default=1,
                    help="timed runs, each printed (default 1)")
    ap.add_argument("--callgrind", action="store_true",
                    help="also count the instructions per cycle with valgrind")
    ap.add_argument("--callgrind-cycles", type=positive_int, default=3000,
                    help="cycles of the counted run (default 3,000)")
    ap.add_argument("--no-split", action="store_true",
                    help="without the harness's own Verilator options (VERILATOR_ARGS)")
    ap.add_argument("--cxx-flags", type=_cxx_flags, default="", metavar="FLAGS",
                    help="more C++ flags for the model's files, after --opt (for example "
                         "--cxx-flags=-fstrict-aliasing)")
    return ap.parse_args(argv)


def build(build_dir, opt, verilator_args, cxx_flags=""):
    """The stand-alone binary of the model in ``build_dir`` (built once per options)."""
    from tb.cosim import toolchain_path

    name = next(build_dir.glob("*.v")).stem
    tag = hashlib.sha1(" ".join([opt, *verilator_args, cxx_flags]).encode()).hexdigest()[:6]
    out = build_dir / f"alone{opt}-{tag}"
    binary = out / "alone"
    source, config = build_dir / f"{name}.v", build_dir / "public.vlt"
    if binary.exists() and binary.stat().st_mtime >= source.stat().st_mtime:
        return binary
    out.mkdir(exist_ok=True)
    (out / "main.cpp").write_text(MAIN_CPP)
    toolchain_path()
    env = dict(os.environ)
    # The same C++ flags as tb.cosim.run_cosim gives the harness's builds.
    fast = f"{opt} {cxx_flags}".strip().replace(" ", "\\ ")
    env["MAKEFLAGS"] = (f"CFG_CXXFLAGS_PCH_I=-include OPT_FAST={fast} OPT_GLOBAL={opt} "
                        f"OPT_SLOW=-O0")
    if shutil.which("ccache"):
        env.setdefault("OBJCACHE", "ccache")
    cmd = ["verilator", "--cc", "--exe", "--build", "-j", "2", "-Mdir", str(out),
           "--top-module", name, "--vpi", "--prefix", "Vtop", "-o", "alone", "-Wno-fatal",
           "-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "--timescale", "1ns/1ps",
           *verilator_args, str(config), str(source), str(out / "main.cpp")]
    with open(out / "build.log", "w") as log:
        subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT, env=env)
    return binary


def run(binary, cycles):
    """``{"cycles", "wall_s", "cpu_s", "cycles_per_s", "cpu_cycles_per_s"}`` of one run."""
    out = subprocess.run([str(binary), str(cycles)], check=True, capture_output=True,
                         text=True, cwd=binary.parent).stdout
    fields = dict(zip(*[iter(out.split())] * 2, strict=True))
    wall, cpu = float(fields["wall_s"]), float(fields["cpu_s"])
    return {"cycles": cycles, "wall_s": wall, "cpu_s": cpu,
            "cycles_per_s": cycles / wall if wall > 0 else None,
            "cpu_cycles_per_s": cycles / cpu if cpu > 0 else None}


def instructions_per_cycle(binary, cycles):
    """Instructions per cycle (callgrind): a run of ``cycles`` less a run of none."""
    def count(n):
        out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                              str(binary), str(n)], check=True, capture_output=True,
                             text=True, cwd=binary.parent).stderr
        return int(re.search(r"Collected : (\d+)", out).group(1))
    return (count(cycles) - count(0)) / cycles


def main(argv=None):
    args = parse_args(argv)
    from tb.cosim import DEFAULT_OPT, VERILATOR_ARGS

    opt = args.opt or os.environ.get("VERILATOR_OPT") or DEFAULT_OPT
    binary = build(args.build_dir, opt, () if args.no_split else VERILATOR_ARGS,
                   args.cxx_flags)
    print(f"{binary}")
    for _ in range(args.repeats):
        r = run(binary, args.cycles)
        print(f"{r['cycles']:,} cycles: {r['wall_s']:.3f} s, {r['cycles_per_s']:,.0f} cycles/s; "
              f"cpu {r['cpu_s']:.3f} s, {r['cpu_cycles_per_s']:,.0f} cycles/s of cpu")
    if args.callgrind:
        if not shutil.which("valgrind"):
            sys.exit("--callgrind needs valgrind on PATH")
        ipc = instructions_per_cycle(binary, args.callgrind_cycles)
        print(f"{ipc:,.0f} instructions per cycle (callgrind, {args.callgrind_cycles:,} cycles)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
