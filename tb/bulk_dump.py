"""Whole memories out of the simulator in one step: ``$writememh`` files instead of VPI.

Reading a memory word by word through VPI costs a handle per word: the two 32,768-word
host memories of RdmaTop took about 1 s of a 1.5 s test (cProfile, 1,000 messages,
Verilator). :func:`add_dump_hooks` gives every memory of the exported Verilog that the
benches read (:data:`DUMPED`) a trigger register, ``bulk_dump_<name>``; a change of that
register makes the simulator write the whole memory to ``<module>.<name>.hex`` in its
working folder (the run's folder) at the next falling clock edge. :func:`snapshot`
changes the triggers of the memories asked for, waits for that edge, and records the
files; :func:`tb.harness.dump_memory` then reads a memory from its file while the
simulation is still at that time, and through VPI otherwise. The values are the
simulator's own (``$writememh`` prints each word in hexadecimal; a word with X or Z
bits is an error naming it, as through VPI), so every comparison stays as strict as
before.

Timing: :func:`snapshot` moves simulation time on to the next falling clock edge, half
a cycle. The designs have rising-edge logic only, so every register, counter and memory
reads there what it read before the snapshot: a bench may take the snapshot first and
read everything else afterwards. A bench that drives the design again afterwards asks
for the snapshot to end at the next rising edge instead (``read_only=False``): runs
start in that phase, as they did before (Icarus gives different cycle counts to a run
whose stimulus is written half a cycle earlier), and the files then stand for the state
before that edge, which is the same for a design that has drained.
"""

import re
from pathlib import Path

__all__ = ["DUMPED", "add_dump_hooks", "snapshot", "snapshot_words", "trigger_name",
           "hook_names"]

#: The memories that get a dump trigger: host memories, player and recorder contents.
DUMPED = ("mem", "items", "stamps")

_MODULE = re.compile(r"^module (\\?[^\s(]+)\s*\(", re.M)
_DECL = re.compile(r"^([ \t]*)reg \[\d+:0\] (\w+) \[\d+:0\];\n", re.M)

#: ``{memory path: (simulation step, file)}`` of the last snapshot of each memory.
_snapshots = {}


def trigger_name(memory):
    """The trigger register of the memory named ``memory``."""
    return f"bulk_dump_{memory}"


def hook_names():
    """The registers that the testbench writes: triggers and word counts."""
    return [name for m in DUMPED for name in (trigger_name(m), trigger_name(m) + "_words")]


def _file_name(module, memory):
    return f"{module}.{memory}.hex"


def add_dump_hooks(text):
    """``text`` (Verilog of one exported top) with a dump trigger for every memory of
    :data:`DUMPED` in every clocked module: a 32-bit register ``bulk_dump_<name>``
    that starts at 0, and a block that writes the memory with ``$writememh`` at the
    first falling clock edge after the register changed: the whole memory, or its
    first ``bulk_dump_<name>_words`` words when that register is not 0. The design's logic is
    untouched, and it only has rising-edge logic: at the falling edge every memory
    holds what it held since the rising edge before, the value that a VPI read in
    that half cycle returns. (A trigger that is not the clock, ``always @(reg)``,
    made Verilator keep every write of the host memories for a separate commit step:
    384 delay variables in RdmaTop's model, none with the falling edge.)"""
    out, last = [], 0
    starts = [(m.start(), m.group(1).lstrip("\\")) for m in _MODULE.finditer(text)]
    for k, (start, module) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(text)
        body = text[start:end]
        header = body[:body.index(";")]
        if not re.search(r"[(,]\s*clk\s*[,)]", header):
            out.append(text[last:end])
            last = end
            continue

        def hook(match, module=module):
            indent, memory = match.group(1), match.group(2)
            if memory not in DUMPED:
                return match.group(0)
            trig, file = trigger_name(memory), _file_name(module, memory)
            return (f"{match.group(0)}"
                    f"{indent}reg [31:0] {trig} = 32'd0;\n"
                    f"{indent}reg [31:0] {trig}_done = 32'd0;\n"
                    f"{indent}reg [31:0] {trig}_words = 32'd0;\n"
                    f"{indent}always @(negedge clk) if ({trig} != {trig}_done) begin\n"
                    f"{indent}  if ({trig}_words == 32'd0) $writememh(\"{file}\", {memory});\n"
                    f"{indent}  else $writememh(\"{file}\", {memory}, 0, {trig}_words - 1);\n"
                    f"{indent}  {trig}_done <= {trig};\n"
                    f"{indent}end\n")

        out.append(text[last:start])
        out.append(_DECL.sub(hook, body))
        last = end
    out.append(text[last:])
    return "".join(out)


def _trigger(top, memory, suffix=""):
    """The trigger handle (or with ``suffix`` ``"_words"``, the word count) next to
    ``memory`` (a cocotb handle), or None (a top built without hooks)."""
    parts = memory._path.split(".")
    scope = top
    for part in parts[1:-1]:
        scope = getattr(scope, part)
    try:
        return getattr(scope, trigger_name(parts[-1]) + suffix)
    except AttributeError:
        return None


async def snapshot(top, memories, read_only=True):
    """Write every memory of ``memories`` (``(handle, words)``: a cocotb handle under
    ``top`` and how many of its first words to write, None for all) to its file at
    the next falling clock edge. Afterwards, at the same simulation time, ``dump_memory`` reads
    these memories from their files. With ``read_only`` the coroutine returns in the
    ``ReadOnly`` phase of the falling edge (no write may follow in this time step), as
    a bench that has finished expects; otherwise at the next rising edge, the phase in
    which the benches start a run, so that the bench may drive the design again (the
    files then stand for the state before that edge: for a bench whose design has
    drained, the same). Call it right after a rising clock edge (it checks that the
    clock is high). Memories without a trigger keep being read through VPI."""
    from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge, Timer
    from cocotb.utils import get_sim_time

    todo = [(memory, words, _trigger(top, memory)) for memory, words in memories
            if words != 0]
    todo = [(memory, words, trig) for memory, words, trig in todo if trig is not None]
    if not todo:
        return
    await Timer(1, "step")
    if not int(top.clk.value):
        raise RuntimeError("snapshot: the clock is low; take a snapshot right after a "
                           "rising edge (the next falling edge must come before the next "
                           "rising one)")
    fired = []
    for memory, words, trig in todo:
        _trigger(top, memory, "_words").value = words or 0
        trig.value = (int(trig.value) + 1) & 0xFFFFFFFF
        parts = memory._path.split(".")
        file = Path(_file_name(".".join(parts[:-1]), parts[-1]))
        file.unlink(missing_ok=True)
        fired.append((memory._path, file))
    await FallingEdge(top.clk)
    await ReadOnly()                            # the dump blocks have run
    files = [(path, file, file.exists()) for path, file in fired]
    if not read_only:
        await RisingEdge(top.clk)
    now = get_sim_time("step")
    for path, file, written in files:
        if not written:
            raise RuntimeError(f"the simulator wrote no {file} for {path} (a top exported "
                               f"without tb.bulk_dump.add_dump_hooks?)")
        _snapshots[path] = (now, file)


def snapshot_words(memory, count, start):
    """Words ``start`` to ``start + count - 1`` of ``memory`` from its snapshot file,
    or None when there is no snapshot of it at the current simulation time."""
    from cocotb.utils import get_sim_time

    entry = _snapshots.get(memory._path)
    if entry is None or entry[0] != get_sim_time("step"):
        return None
    data = entry[1].read_bytes()
    if not any(c in data for c in (b"/", b"@", b" ", b"\t", b"\r")):    # a word a line
        lines = data.split(b"\n")
        if lines[-1] == b"":
            lines.pop()
        if len(lines) < start + count:
            raise RuntimeError(f"{entry[1]} holds {len(lines)} words; {start + count} "
                               f"asked of {memory._path}")
        lines = lines[start:start + count]
        zero = b"0" * len(lines[0]) if lines and lines[0] else None
        try:            # most words of a host memory are 0: one compare instead of int()
            return [0 if t == zero else int(t, 16) for t in lines]
        except ValueError:
            pass                        # name the bad word below
    words, address = [], 0
    for line in entry[1].read_text().splitlines():
        for token in line.split("//", 1)[0].split():
            if token.startswith("@"):
                address = int(token[1:], 16)
                continue
            if start <= address < start + count:
                try:
                    words.append(int(token, 16))
                except ValueError:
                    raise ValueError(f"{memory._path}[{address}] holds {token!r}, "
                                     f"not a number") from None
            address += 1
    if len(words) != count:
        raise RuntimeError(f"{entry[1]} holds {address} words; {start + count} asked of "
                           f"{memory._path}")
    return words
