"""cocotb fuzz of the RDMA responder on RdmaTop: chunks of mutated frames, then a tail.

Each chunk (:func:`analysis.scenarios.fuzz.rdma_chunk`) is a fresh load and reset of the
same simulation (:class:`tb.rdma.testbench.RdmaTestbench`, ``clear``): its frames are
played on the A->B link by the ``inject`` player with seeded gaps (``inject_stall``),
the golden model (:func:`pymodel.rdma.system.simulate`) plays the same, and the chunk
is checked twice:

* RTL = model: every beat on both links with its cycle, every counter of both engines,
  host interfaces and links, both whole host memories (:meth:`RdmaTestbench.compare`);
* without the model (:mod:`tb.fuzz_checks`): no byte of host memory B outside the
  writable MRs' windows and the created QPs' context words changed; the responder's
  outcome counters add up to the frames injected (each counted once); the run ended
  within a budget computed from the beats injected (no hang); the sentinel tail landed
  byte for byte.

Parameters (``COSIM_PARAMS``): ``seed``, ``chunks`` (chunk numbers), ``frames`` (fuzz
frames per chunk), ``fillers`` (bad-FCS frames before the tail, default 256),
``inject_stall``, ``out`` (a file that gets one JSON line per chunk), ``read_mix``
(with a top of ``read_words``: the shares of READs, atomics and stray responses,
default :data:`analysis.scenarios.fuzz.RDMA_READ_MIX`).
The test fails if any chunk has a mismatch or a violation.
"""

import time

import cocotb
from cocotb.triggers import ClockCycles

from analysis.scenarios.fuzz import RDMA_QPN, atomic_psns, frame_kind, rdma_chunk
from spec.rdma import DROP_REASONS, LINKS, SEQUENCE_COUNTERS
from spec.rdma_responder import READ_COUNTERS
from tb.cosim import cosim_params
from tb.fuzz_checks import (
    chunk_record,
    counted_once,
    executed_at_most,
    outside_windows,
    read_bytes,
    report_chunk,
    tail_missing,
)
from tb.harness import HarnessTimeout
from tb.rdma.cocotb_rdma import SETTLE, config, run_model, with_cq
from tb.rdma.testbench import RdmaTestbench, member_port, value_of
from tb.scoreboard import Scoreboard

#: Responder counters of a frame's outcome: accepted, or one reason of being dropped.
OUTCOMES = ("frames_ok",) + DROP_REASONS + SEQUENCE_COUNTERS
#: The no-hang budget, independent of the model: cycles per injected beat (the inject
#: player's gaps included) plus a constant (context fills, the last ACKs).
BUDGET_PER_BEAT, BUDGET_CYCLES = 16, 20000
#: Cycles between two looks at the outcome counters while waiting for every frame
#: injected to be counted.
POLL = 64


def all_counted(dut, injected, budget):
    """An async callable: run until the responder's outcome counters add up to
    ``injected`` (frames a READ or atomic backlog still holds count late, after the
    recorders are done), at most ``budget`` cycles (then :class:`HarnessTimeout`)."""
    async def wait():
        for _ in range(0, budget, POLL):
            got = [value_of(getattr(dut, member_port("resp", o))) for o in OUTCOMES]
            if all(isinstance(g, int) for g in got) and sum(got) >= injected:
                return
            await ClockCycles(dut.clk, POLL)
        raise HarnessTimeout(f"outcome counters below {injected} frames after {budget} "
                             f"cycles")
    return wait


def chunk_invariants(got, chunk, injected):
    """The model-free checks of one chunk on the RTL's results ``got`` (the dict of
    :meth:`RdmaTestbench.compare`): a list of violations."""
    v = chunk.verbs
    allowed = [(base, n) for base, n in chunk.writable]
    allowed += [(word * 64, 64) for word in chunk.contexts]
    bad = outside_windows(got["mem_b"], v.mem_b, allowed, 64)
    bad += counted_once(got["resp"], OUTCOMES, injected)
    bad += tail_missing(read_bytes(got["mem_b"], 64), chunk.tail)
    if "atomics" in got["resp"]:
        bad += executed_at_most("atomics", got["resp"]["atomics"],
                                len(atomic_psns([m.frame for m in chunk.frames], RDMA_QPN)))
    return bad


@cocotb.test()
async def rdma_fuzz(dut):
    p = cosim_params()
    cfg, _ = config(p["top"], {})
    stall = tuple(p.get("inject_stall", (7, 192)))
    tb = RdmaTestbench(dut, cfg.depth, read_words=cfg.read_words)
    failures = 0
    for n, k in enumerate(p["chunks"]):
        t0 = time.perf_counter()
        chunk = rdma_chunk(p["seed"], k, p["frames"], depth=cfg.depth,
                           mr_entries=cfg.mr_entries, fillers=p.get("fillers", 256),
                           qpc_words=cfg.qpc_words, reads=bool(cfg.read_words),
                           read_mix=p.get("read_mix"))
        frames = [m.frame for m in chunk.frames]
        beats = sum(-(-len(f) // 64) for f in frames)
        if beats > tb_capacity(dut):
            raise ValueError(f"chunk {k}: {beats} beats do not fit the inject player "
                             f"({tb_capacity(dut)}); use a smaller --chunk")
        v = chunk.verbs
        cfg = with_cq(cfg, v)
        model = run_model(cfg, v, frames, stall)
        ports = {name: getattr(cfg, name) for name in ("qpc_base_a", "qpc_base_b", "cq_base",
                                                       "cq_log2", "serial", "ack_every",
                                                       "ack_frames")}
        ports["ack_timeout"] = 0
        ports["cache_log2"] = cfg.cache_entries.bit_length() - 1
        ports["qpc_log2"] = cfg.qpc_log2
        tb.load(mem_a=v.mem_a, mem_b=v.mem_b, mr_table=v.mr_table, mmio=[], release=[],
                inject=frames, inject_stall=stall, ports=ports, clear=n > 0,
                links=dict(zip(LINKS, (cfg.faults_ab, cfg.faults_ba), strict=True)))
        tb.arm_for(model)
        budget = BUDGET_PER_BEAT * beats + BUDGET_CYCLES
        await tb.run(timeout_cycles=budget, settle=SETTLE, read_only=False,
                     until=all_counted(dut, len(frames), budget))
        sb = Scoreboard(dut._log)
        got = tb.compare(sb, model, 0)
        violations = chunk_invariants(got, chunk, len(frames))
        resp = got["resp"]
        record = chunk_record(
            k, chunk, len(frames), tb.end, model["cycles"],
            {o: resp[o] for o in OUTCOMES if isinstance(resp[o], int)},
            violations, tb.hang, sb.mismatches, t0,
            by_effect={c: resp[c] for c in READ_COUNTERS if isinstance(resp.get(c), int)},
            kind_of=frame_kind)
        failures += report_chunk(dut, record, sb.mismatches, p.get("out"))
    assert p["chunks"], "no chunk to run"
    assert failures == 0, f"{failures} of {len(p['chunks'])} chunks failed (see the log)"


def tb_capacity(dut):
    """Beats the inject player holds."""
    return len(dut.inject.items)
