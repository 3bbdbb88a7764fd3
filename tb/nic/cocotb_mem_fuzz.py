"""cocotb fuzz of the NIC's memory receiver on NicMemTop: chunks of mutated load, atomic
and response frames from every node's raw player, beside a few valid commands per node.

Each chunk (:func:`analysis.scenarios.fuzz_mem.nic_mem_chunk`) is a fresh load and reset
of the same simulation: every local memory gets random words (seeded by the chunk), the
raw players their frames, the command players their commands; the golden model
(:class:`pymodel.nic.mem_system.NicMemSystemModel`) plays the same, and the chunk is
checked twice:

* RTL = model (:func:`tb.nic.cocotb_nic_mem.compare_nodes`): every uplink beat (the
  responses sent included), memory write, landed response and its cycle, every counter,
  the busy tags and every memory word of every node;
* without the model (:func:`mem_chunk_invariants`): no write outside the bytes a node's
  own commands may land in and the 8 bytes of the atomics addressed to it, no such byte
  changed either; every frame that reached a receiver counted once (a drop reason, a
  landed response or a request answered or dropped: the raw frames, the commands and
  one response per request answered); no more requests answered than were sent; every
  command's response landed and no tag left busy (nothing lost); no hang.

Parameters (``COSIM_PARAMS``): ``seed``, ``chunks``, ``frames`` (fuzz frames per chunk),
``top`` (NicMemTop's parameters), ``out`` (one JSON line per chunk). The test fails if
any chunk has a mismatch, a violation or a hang.
"""

import random
import time

import cocotb
from cocotb.triggers import ClockCycles

from analysis.scenarios.fuzz_mem import mem_frame_kind, nic_mem_chunk
from pymodel.nic.mem_frames import parse_mem_header
from pymodel.nic.mem_system import NicMemSystemModel
from spec.fabric_profiles import fabric_profile, round_trip
from spec.formats.nic_mem import MEM_WIDTH, MemOp, mem_header_bytes
from spec.nic_mem import MEM_COUNTERS
from tb.cosim import cosim_params
from tb.fuzz_checks import (
    chunk_record,
    counted_once,
    executed_at_most,
    outside_windows,
    report_chunk,
    writes_outside,
)
from tb.harness import Harness, HarnessTimeout, dump_memory
from tb.nic.cocotb_nic_mem import TOP_KEYS, compare_nodes, load_nodes
from tb.scoreboard import Scoreboard

#: The no-hang budget, independent of the model: cycles per frame sent plus a constant.
BUDGET_PER_FRAME, BUDGET_CYCLES = 16, 5000
_ATOMICS = (MemOp.FETCH_ADD.value, MemOp.CMP_SWAP.value)
_REQUESTS = (MemOp.LOAD.value, *_ATOMICS)


def chunk_memories(nodes, words, seed, chunk):
    """Every node's memory at the start of a chunk: random words of ``(seed, chunk)``."""
    rng = random.Random(f"nic-mem-fuzz-mem-{seed}-{chunk}")
    return {p: [rng.getrandbits(8 * MEM_WIDTH) for _ in range(words)] for p in range(nodes)}


def _headers(chunk, framing):
    h = mem_header_bytes(framing)
    return [parse_mem_header(framing, m.frame[:-4]) for m in chunk.frames
            if len(m.frame) - 4 >= h]


def allowed_windows(chunk, framing, nodes):
    """``{node: [(first byte, bytes)]}`` a node's memory may be written in: where its
    commands' responses land, the 8 bytes at the address of every atomic command to it,
    and those of every atomic frame (as sent, mutants included) that the switch delivers
    to it (``dst`` modulo the nodes, the switch's power-up routes)."""
    out = {p: list(chunk.landing[p]) for p in range(nodes)}
    for cmds in chunk.cmds.values():
        for c in cmds:
            if c["op"] in _ATOMICS:
                out[c["dst"]].append((c["addr"], 8))
    for f in _headers(chunk, framing):
        if f["mem"]["op"] in _ATOMICS:
            out[f["dst"] % nodes].append((f["mem"]["addr"], 8))
    return out


def mem_chunk_invariants(chunk, framing, nodes, initial, mems, writes, counters, landed,
                         outstanding, credit_errors=0):
    """The model-free checks of one chunk on the RTL's results: ``mems`` and
    ``initial`` (``{node: words}`` after and before), ``writes`` (``{node: [(word,
    byte enables)]}``), ``counters`` (``{node: {name: value}}``), ``landed``
    (``{node: responses landed}``), ``outstanding`` (``{node: busy tags}``),
    ``credit_errors`` (the top's flag: a frame sent without a credit, lost at the
    switch). Returns the violations."""
    windows = allowed_windows(chunk, framing, nodes)
    bad = [f"credit errors flagged ({credit_errors!r}): a frame sent without a credit"
           ] if credit_errors else []
    for p in range(nodes):
        bad += [f"node {p}: {v}" for v in writes_outside(writes[p], windows[p], MEM_WIDTH)]
        bad += [f"node {p}: {v}" for v in outside_windows(
            mems[p], dict(enumerate(initial[p])), windows[p], MEM_WIDTH)]
        want = len(chunk.cmds.get(p, []))
        if landed[p] != want or outstanding[p] != 0:
            bad.append(f"node {p}: {landed[p]} of its {want} commands' responses landed, "
                       f"{outstanding[p]} tags still busy")
    total = {c: sum(counters[p][c] if isinstance(counters[p][c], int) else 0
                    for p in range(nodes)) for c in MEM_COUNTERS}
    answered = total["req_ok"] + total["req_err"]
    cmds = sum(len(v) for v in chunk.cmds.values())
    bad += counted_once(total, MEM_COUNTERS, len(chunk.frames) + cmds + answered)
    requests = sum(f["mem"]["op"] in _REQUESTS for f in _headers(chunk, framing))
    bad += executed_at_most("requests answered or dropped at a full queue",
                            answered + total["drop_full"], requests + cmds)
    return bad


@cocotb.test()
async def nic_mem_fuzz(dut):
    p = cosim_params()
    top = p["top"]
    model = NicMemSystemModel(**{k: top[k] for k in TOP_KEYS if k in top})
    n, words, framing = model.nodes, model.mem_words, model.framing
    abits = (words - 1).bit_length()
    h = Harness(dut)
    failures = 0
    for k in p["chunks"]:
        t0 = time.perf_counter()
        chunk = nic_mem_chunk(p["seed"], k, p["frames"], framing, n, words,
                              model.max_payload, model.tags)
        raws = chunk.raws()
        for q, lst in raws.items():
            if len(lst) > len(getattr(dut, f"raw{q}").items):
                raise ValueError(f"chunk {k}: {len(lst)} frames from node {q} do not fit "
                                 f"its raw player; use a smaller --chunk")
        mem = chunk_memories(n, words, p["seed"], k)
        want = model.run(chunk.cmds, raws=raws, mem={q: list(v) for q, v in mem.items()})
        done = load_nodes(dut, h, n, chunk.cmds, raws, mem, want)
        await h.reset()
        hang = None
        try:
            await h.wait_done(done, BUDGET_PER_FRAME * (len(chunk.frames) + 4 * n)
                              + BUDGET_CYCLES)
        except HarnessTimeout as exc:
            hang = str(exc)
        await ClockCycles(dut.clk, round_trip(fabric_profile(model.fabric)) + 64)
        sb = Scoreboard(dut._log)
        nodes = compare_nodes(dut, h, sb, model, chunk.cmds, want)
        sb.equal("credit errors", int(dut.credit_errors.value), int(want["credit_errors"]))
        counters = {q: {c: int(getattr(dut, f"{port}__{q}__{c}").value)
                        for port in ("cnt_rx", "cnt_resp") for c in MEM_COUNTERS
                        if hasattr(dut, f"{port}__{q}__{c}")} for q in range(n)}
        writes = {}
        for q in range(n):
            items, _ = h.recorded(f"wr{q}")
            writes[q] = [(v & ((1 << abits) - 1), v >> abits) for v in items]
        mems = {q: dump_memory(getattr(dut, f"mem{q}").mem, words) for q in range(n)}
        violations = mem_chunk_invariants(
            chunk, framing, n, mem, mems, writes, counters,
            {q: len(nodes[q]["landed"]) for q in range(n)},
            {q: int(getattr(dut, f"outstanding__{q}").value) for q in range(n)},
            int(dut.credit_errors.value))
        # Named apart from the store receiver's counters (both are the NIC's by_outcome).
        total = {f"mem.{c}": sum(counters[q][c] for q in range(n)) for c in MEM_COUNTERS}
        record = chunk_record(k, chunk, len(chunk.frames), int(dut.now.value),
                              want["cycles"], total, violations, hang, sb.mismatches, t0,
                              kind_of=lambda fr: mem_frame_kind(framing, fr[:-4]))
        record["target"] = "nic-mem"
        failures += report_chunk(dut, record, sb.mismatches, p.get("out"))
    assert p["chunks"], "no chunk to run"
    assert failures == 0, f"{failures} of {len(p['chunks'])} chunks failed (see the log)"
