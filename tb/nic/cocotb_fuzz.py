"""cocotb fuzz of the NIC receiver on NicRxTop: chunks of mutated frames, then a tail.

Each chunk (:func:`analysis.scenarios.fuzz.nic_chunk`) is a fresh load and reset of the
same simulation: the window table is written for all 256 sources (``win`` player,
cycles 0..255: the fuzzed sources and the sentinel get a window each, every other
source none), then the frames are played from cycle :data:`START` with seeded gaps
between frames (``raw`` player, timed). The golden model
(:func:`pymodel.nic.rx_top.nic_rx_run`) plays the same, and the chunk is checked twice:

* RTL = model: the cycle of every beat taken, every local-memory write (word, byte
  enables) and its cycle, every counter, the whole local memory;
* without the model (:mod:`tb.fuzz_checks`): no recorded write touches a byte outside
  the windows the table grants, no byte outside them changed; the counters of
  :data:`spec.nic.COUNTERS` add up to the frames injected (each counted once: accepted
  or one drop reason); the run ended within a budget computed from the beats injected
  (no hang); the sentinel tail landed byte for byte.

Parameters (``COSIM_PARAMS``): ``seed``, ``chunks``, ``frames`` (fuzz frames per chunk),
``top`` (NicRxTop's parameters), ``out`` (one JSON line per chunk), ``sabotage`` (for
the tests of the checks themselves: ``"model"`` adds one to the model's ``frames_ok``,
``"windows"`` leaves the sentinel's window out of the allowed ones; both must be
reported). The test fails if any chunk has a mismatch or a violation.
"""

import random
import time

import cocotb
from cocotb.triggers import ClockCycles

from analysis.scenarios.fuzz import NIC_NODE, NIC_SENTINEL, nic_chunk
from pymodel.fields import pack, unpack
from pymodel.nic.rx_top import nic_rx_run
from pymodel.packet import frame_to_beats
from rtl.nic.window_table import window_write_layout
from rtl.tops.nic_top import write_event_layout
from spec.nic import COUNTERS
from tb.cosim import cosim_params
from tb.fuzz_checks import (
    chunk_record,
    counted_once,
    outside_windows,
    read_bytes,
    report_chunk,
    tail_missing,
    writes_outside,
)
from tb.harness import Harness, HarnessTimeout, dump_memory, load_memory
from tb.rdma.testbench import value_of
from tb.scoreboard import Scoreboard

#: The cycle from which frames may enter: after the 256 window-table writes.
START = 260
#: Idle cycles drawn between two frames (seeded).
GAPS = (0, 0, 0, 0, 1, 2, 3, 7)
#: The no-hang budget, independent of the model: cycles per beat plus a constant.
BUDGET_PER_BEAT, BUDGET_CYCLES = 12, 2000
SETTLE = 50


def releases(frames, width, seed):
    """Release cycle of every beat: frame ``j`` may start ``gap_j`` cycles after the
    previous one could have ended; its beats follow it."""
    rng = random.Random(seed)
    out, t = [], START
    for fr in frames:
        n = -(-len(fr) // width)
        t += rng.choice(GAPS)
        out += [t] * n
        t += n
    return out


def chunk_invariants(mem, writes, counters, chunk, injected, width, skip_src=None):
    """The model-free checks of one chunk: a list of violations. ``skip_src``: a source
    whose window is left out of the allowed ones (a sabotage: its writes must be
    reported)."""
    windows = [(base * width, size * width) for src, base, size in chunk.windows
               if size and src != skip_src]
    bad = writes_outside(writes, windows, width)
    bad += outside_windows(mem, {}, windows, width)
    bad += counted_once(counters, COUNTERS, injected)
    bad += tail_missing(read_bytes(mem, width), chunk.tail)
    return bad


@cocotb.test()
async def nic_fuzz(dut):
    p = cosim_params()
    top = p["top"]
    width, words = top["width"], top["mem_words"]
    h = Harness(dut)
    wlay, elay = window_write_layout(words), write_event_layout(words)
    failures = 0
    for k in p["chunks"]:
        t0 = time.perf_counter()
        chunk = nic_chunk(p["seed"], k, p["frames"], top["framing"], width, words,
                          top["max_payload"])
        frames = [m.frame for m in chunk.frames]
        beats = [b for fr in frames for b in frame_to_beats(fr, width)]
        if len(beats) > len(dut.raw.items):
            raise ValueError(f"chunk {k}: {len(beats)} beats do not fit the raw player "
                             f"({len(dut.raw.items)}); use a smaller --chunk")
        release = releases(frames, width, f"nic-gaps-{p['seed']}-{k}")
        model = nic_rx_run(width, top["framing"], top["max_payload"], words, frames,
                           release, NIC_NODE, chunk.windows)
        sabotage = p.get("sabotage", [])
        if "model" in sabotage:                   # the comparison must catch this
            model["counters"]["frames_ok"] += 1
        load_memory(dut.local.mem, [0] * words)
        h.load_player("raw", beats, (1, 0), release=release)
        h.load_player("win", [pack(wlay, src=s, base=b, size=z) for s, b, z in chunk.windows])
        h.set("node_id", NIC_NODE)
        h.arm_recorder("wr", len(model["wr"][0]))
        await h.reset()
        hang = None
        try:
            await h.wait_done(["raw__done", "win__done", "wr__done"],
                              BUDGET_PER_BEAT * len(beats) + START + BUDGET_CYCLES)
        except HarnessTimeout as exc:
            hang = str(exc)
        await ClockCycles(dut.clk, SETTLE)
        sb = Scoreboard(dut._log)
        sb.compare("raw beat cycles", h.played_stamps("raw", len(beats)),
                   model["raw_stamps"], fmt=str)
        items, cycles = h.recorded("wr")
        writes = [(u["addr"], u["be"]) for u in (unpack(elay, x) for x in items)]
        sb.compare("writes (word, byte enables)", writes, list(model["wr"][0]), fmt=str)
        sb.compare("write cycles", cycles, list(model["wr"][1]), fmt=str)
        counters = {c: value_of(getattr(dut, f"counters__{c}")) for c in COUNTERS}
        for c in COUNTERS:
            sb.equal(f"counter {c}", counters[c], model["counters"][c])
        mem = dump_memory(dut.local.mem, words)
        diff = [a for a in range(words) if mem[a] != model["mem"][a]]
        sb.equal("memory words that differ (first 8)", diff[:8], [])
        violations = chunk_invariants(mem, writes, counters, chunk, len(frames), width,
                                      NIC_SENTINEL[0] if "windows" in sabotage else None)
        record = chunk_record(
            k, chunk, len(frames), value_of(dut.now), model["cycles"],
            {c: counters[c] for c in COUNTERS if isinstance(counters[c], int)},
            violations, hang, sb.mismatches, t0, kind_of=lambda fr: "store")
        failures += report_chunk(dut, record, sb.mismatches, p.get("out"))
    assert p["chunks"], "no chunk to run"
    assert failures == 0, f"{failures} of {len(p['chunks'])} chunks failed (see the log)"
