"""Soak of the NIC's loads and atomics on NicMemTop with link retry: chunks of commands
over faulty wires.

Each chunk resets the design and loads every node's memory with random words of the
chunk (:func:`tb.soak.nic_mem.chunk_memories`) and its command player with ``per_chunk``
loads and atomics (:func:`tb.soak.nic_mem.chunk_commands`, by the mix's weights ``mix``
``[R, A]``), and sets the wires' fault settings (``faults``: the rates, per 65,535
frames, of :class:`pymodel.fabric.faulty_link.FaultSettings`; the chunk's own seed, so
every chunk damages other frames); the simulation runs until every recorder is done or
the chunk's budget runs out (a hang). Every chunk is compared with the golden model
(:class:`pymodel.nic.mem_system.NicMemSystemModel`, the same memories and commands) on
every uplink beat, memory write, landed response and its cycle, command stamp, counter
(the reliable links' included), busy tag and memory word
(:func:`tb.nic.cocotb_nic_mem.compare_nodes`), and checked without the model
(:func:`tb.soak.nic_mem.chunk_checks`: each load's bytes, each atomic's old value and
its slot executed once, every command answered OK, no other byte changed).

``recovered`` counts the frames the wires damaged (dropped, corrupted, duplicated, or a
flipped sequence tag; all delivered once and whole by the retry, else the checks fail),
``retransmissions`` the frames the links sent again, ``replay_cycles`` their cycles spent
resending, and ``recovery_cycles`` the soak's one definition (:mod:`tb.soak.recovery`,
:func:`~tb.soak.recovery.nic_mem_chunk_recovery`: the chunk's last memory write in the
model's run against its run without faults, model only).

Writes ``soak_nic_mem.json`` in the run folder (read by ``scripts/soak.py``): the totals
and ``per_chunk`` (``[{chunk, messages, compared, mismatches, loads, atomics, recovered,
recovery_cycles}]``).
"""

import json
import random
import time
from pathlib import Path

import cocotb

from pymodel.fabric.faulty_link import FaultSettings
from pymodel.nic.mem_system import NicMemSystemModel
from tb.cosim import cosim_params
from tb.harness import Harness, HarnessTimeout, dump_memory
from tb.nic.cocotb_nic_mem import TOP_KEYS, compare_nodes, load_nodes, set_faults, settle
from tb.scoreboard import Scoreboard
from tb.soak.nic_mem import chunk_checks, chunk_commands, chunk_memories
from tb.soak.recovery import nic_mem_chunk_recovery

#: The no-hang budget, independent of the model: cycles per command plus a constant.
BUDGET_PER_COMMAND, BUDGET_CYCLES = 64, 20_000


@cocotb.test()
async def nic_mem_soak(dut):
    p = cosim_params()
    top = p["top"]
    model = NicMemSystemModel(**{k: top[k] for k in TOP_KEYS if k in top})
    n, words = model.nodes, model.mem_words
    h = Harness(dut)
    rng = random.Random(f"nic-mem-soak-cmds-{p['seed']}")
    totals = dict(messages=0, loads=0, atomics=0, loads_ok=0, atomics_ok=0, lost=0,
                  corrupted_bytes=0, hangs=0, cycles=0, chunks=len(p["plan"]),
                  chunks_compared=0, mismatches=0, violations=0, model_seconds=0.0,
                  recovered=0, retransmissions=0, replay_cycles=0, recovery_cycles=0,
                  wire_dropped=0, wire_corrupted=0, wire_duplicated=0,
                  wire_tags_corrupted=0, wire_acks_dropped=0, wire_acks_corrupted=0)
    per_chunk = []
    t_start = time.perf_counter()
    for index, count in enumerate(p["plan"]):
        mem = chunk_memories(n, words, p["seed"], index)
        cmds, expect = chunk_commands(rng, tuple(p["mix"]), n, words, count, mem)
        settings = FaultSettings(seed=(p["seed"] * 991 + 16 * index) & 0xFFFF or 1,
                                 **p.get("faults", {}))
        t_model = time.perf_counter()
        want = model.run(cmds, mem={q: list(v) for q, v in mem.items()},
                         link_settings=settings)
        recovery = (nic_mem_chunk_recovery(model, cmds, settings, mem, want)
                    if model.link_retry else 0)
        totals["model_seconds"] += time.perf_counter() - t_model
        done = load_nodes(dut, h, n, cmds, {}, mem, want)
        if model.link_retry:
            set_faults(h, settings)
        await h.reset()
        hang = 0
        try:
            await h.wait_done(done, BUDGET_PER_COMMAND * count * n + BUDGET_CYCLES)
        except HarnessTimeout as exc:
            hang = 1
            dut._log.error("chunk %d: hang: %s", index, exc)
        await settle(dut, model, want)
        sb = Scoreboard(dut._log)
        nodes = compare_nodes(dut, h, sb, model, cmds, want)
        sb.equal("credit errors", int(dut.credit_errors.value), int(want["credit_errors"]))
        mems = {q: dump_memory(getattr(dut, f"mem{q}").mem, words) for q in range(n)}
        landed = {q: nodes[q]["landed"] for q in range(n)}
        fig, bad = chunk_checks(
            cmds, expect, mem, mems, {q: len(landed[q]) for q in range(n)},
            {q: [ev["status"] for ev in landed[q]] for q in range(n)},
            {q: int(getattr(dut, f"outstanding__{q}").value) for q in range(n)})
        for v in bad:
            dut._log.error("chunk %d: %s", index, v)
        for k, v in fig.items():
            totals[k] += v
        totals["messages"] += fig["loads"] + fig["atomics"]
        totals["hangs"] += hang
        totals["violations"] += len(bad)
        totals["mismatches"] += len(sb.mismatches)
        totals["chunks_compared"] += 1
        totals["cycles"] += int(want["cycles"])
        damaged = _links(dut, n, totals) if model.link_retry else 0
        totals["recovery_cycles"] += recovery
        per_chunk.append(dict(chunk=index, messages=fig["loads"] + fig["atomics"],
                              compared=True, mismatches=len(sb.mismatches),
                              loads=fig["loads"], atomics=fig["atomics"], recovered=damaged,
                              recovery_cycles=recovery))
        dut._log.info("chunk %d/%d: %d loads, %d atomics so far, %d damaged frames, "
                      "%d sent again, %d lost, %d bad bytes, %d model mismatches, %.0f s",
                      index + 1, len(p["plan"]), totals["loads"], totals["atomics"],
                      totals["recovered"], totals["retransmissions"], totals["lost"],
                      totals["corrupted_bytes"], totals["mismatches"],
                      time.perf_counter() - t_start)
        if hang:
            break
    totals["seconds"] = round(time.perf_counter() - t_start, 1)
    totals["model_seconds"] = round(totals["model_seconds"], 1)
    Path("soak_nic_mem.json").write_text(json.dumps(dict(totals, per_chunk=per_chunk,
                                                         token=p.get("token"))))
    assert totals["lost"] == 0 and totals["corrupted_bytes"] == 0 and not totals["hangs"]
    assert totals["mismatches"] == 0 and totals["violations"] == 0
    assert totals["chunks_compared"] == totals["chunks"]


def _links(dut, n, totals):
    """Add the RTL's link counters of a chunk (ports ``up``/``down``, compared with the
    model's already) to ``totals``; returns the frames the wires damaged."""
    got = {k: 0 for k in ("dropped", "corrupted", "duplicated", "tag_corrupted",
                          "acks_dropped", "acks_corrupted", "resent", "replay")}
    for q in range(n):
        for side in ("up", "down"):
            for k in got:
                name = {"resent": "tx__resent_frames", "replay": "tx__replay_cycles"}.get(
                    k, f"link__{k}")
                got[k] += int(getattr(dut, f"{side}__{q}__{name}").value)
    damaged = got["dropped"] + got["corrupted"] + got["duplicated"] + got["tag_corrupted"]
    totals["recovered"] += damaged
    totals["retransmissions"] += got["resent"]
    totals["replay_cycles"] += got["replay"]
    for k in ("dropped", "corrupted", "duplicated"):
        totals[f"wire_{k}"] += got[k]
    totals["wire_tags_corrupted"] += got["tag_corrupted"]
    totals["wire_acks_dropped"] += got["acks_dropped"]
    totals["wire_acks_corrupted"] += got["acks_corrupted"]
    return damaged
