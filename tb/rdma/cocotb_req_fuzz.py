"""cocotb fuzz of the requester's response path on ReadRequesterTop: chunks of hostile
READ RESPONSEs and ATOMIC ACKNOWLEDGEs among honest ones.

Each chunk (:func:`analysis.scenarios.fuzz_req.req_chunk`) is a fresh load and reset of
the same simulation: its frames are played on ``frames``, its operations on ``issue``
(no request descriptors), the twin (:func:`pymodel.rdma.req.read_top.run_read_top`)
plays the same, and the chunk is checked twice:

* RTL = twin: every host write, completion and re-request with its cycle, the cycles the
  issues were taken, every intake counter and the receive stage's ``overflow``;
* without the twin (:func:`chunk_invariants`, from the operations and the frames sent):
  every frame counted once (the intake's outcome counters and ``overflow`` add up to the
  frames played); every honest response accepted once (``responses``); every operation
  completed once, in order, with its data (the host memory the writes leave is exactly
  the operations' bytes, so nothing written outside them); the run ended within a budget
  computed from the beats played (no hang).

Parameters (``COSIM_PARAMS``): ``seed``, ``chunks`` (chunk numbers), ``frames`` (fuzz
frames per chunk), ``timeout`` (the intake's re-request timer, default
:data:`TIMEOUT`), ``out`` (a file that gets one JSON line per chunk). The test fails if
any chunk has a mismatch, a violation or a hang.
"""

import time

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge

from analysis.scenarios.fuzz_req import frame_kind, req_chunk
from pymodel.fields import pack, unpack
from pymodel.packet import frame_to_beats
from pymodel.rdma.req.read_top import run_read_top
from rtl.tops.read_requester_top import FIFO_DEPTHS
from spec.host import wr_layout
from spec.rdma_read_req import INTAKE_COUNTERS, done_layout, issue_layout, rewind_layout
from tb.cosim import cosim_params
from tb.fuzz_checks import chunk_record, counted_once, report_chunk
from tb.harness import Harness, HarnessTimeout
from tb.rdma.intake_bench import memory
from tb.scoreboard import Scoreboard

__all__ = ["OUTCOMES", "EFFECTS", "chunk_invariants"]

#: The top's parameters (the build of tests/test_cosim_rdma_read_requester.py).
SLOTS, ORD, DEPTH, ITEMS = 16, 16, 1 << 12, 1024
#: Outcome counters of a frame: the intake's classes and the receive stage's overflow.
OUTCOMES = ("responses", "duplicates", "gaps", "malformed", "unmatched", "bad", "other",
            "overflow")
#: Counters of what the frames did beyond their class.
EFFECTS = ("rewinds", "timeouts", "words")
#: The intake's re-request timer (cycles without progress) in the fuzz: short, so that it
#: fires among the fuzz frames (a re-request asked for is recorded and compared).
TIMEOUT = 16
#: The no-hang budget, independent of the twin: cycles per beat played plus a constant.
BUDGET_PER_BEAT, BUDGET_CYCLES = 8, 4000
_LAYOUTS = {"wr": wr_layout(DEPTH), "ops_done": done_layout(), "rewind": rewind_layout()}


async def counted(dut, injected, budget):
    """Run until the outcome counters add up to ``injected`` (the last frames are
    decided after the recorders are done), at most ``budget`` cycles (then
    :class:`HarnessTimeout`)."""
    for _ in range(0, budget, 16):
        got = sum(int(getattr(dut, f"intake__{o}").value) for o in OUTCOMES[:-1])
        if got + int(dut.rx_overflow.value) >= injected:
            return
        await ClockCycles(dut.clk, 16)
    raise HarnessTimeout(f"outcome counters below {injected} frames after {budget} cycles")


def chunk_invariants(chunk, count, overflow, writes, done):
    """The model-free checks of one chunk: the RTL's intake counters ``count``, its
    ``overflow``, its host ``writes`` and completions ``done`` (dicts) against the
    chunk's operations. Returns a list of violations."""
    bad = counted_once(dict(count, overflow=overflow), OUTCOMES, len(chunk.frames))
    if count["responses"] != chunk.honest:
        bad.append(f"{count['responses']} responses accepted, {chunk.honest} honest ones "
                   f"sent (each must be accepted once, nothing else)")
    mem = memory(writes)
    if mem != chunk.expect:
        diff = sorted(a for a in set(mem) | set(chunk.expect)
                      if mem.get(a) != chunk.expect.get(a))
        bad.append(f"host memory differs from the operations' bytes at {len(diff)} bytes, "
                   f"first {diff[0]:#x}: {mem.get(diff[0])} written, "
                   f"{chunk.expect.get(diff[0])} expected")
    got = [(d["qpn"], d["psn"], d["atomic"]) for d in done]
    if got != chunk.last:
        first = next((k for k, (a, b) in enumerate(zip(got, chunk.last, strict=False))
                      if a != b), min(len(got), len(chunk.last)))
        bad.append(f"{len(got)} completions differ from the {len(chunk.last)} operations' "
                   f"(first difference at operation {first})")
    return bad


@cocotb.test()
async def req_fuzz(dut):
    p = cosim_params()
    timeout = p.get("timeout", TIMEOUT)
    harness = Harness(dut)
    failures = 0
    for n, k in enumerate(p["chunks"]):
        t0 = time.perf_counter()
        if n:
            await FallingEdge(dut.clk)          # out of the last chunk's read-only phase
        chunk = req_chunk(p["seed"], k, p["frames"], max_beats=ITEMS)
        frames = [m.frame for m in chunk.frames]
        beats = [b for f in frames for b in frame_to_beats(f, 64)]
        want = run_read_top(beats, chunk.issues, [], timeout=timeout, slots=SLOTS, ord=ORD,
                            depth=DEPTH, fifo_depths=FIFO_DEPTHS)
        want["wr"], want["ops_done"] = want.pop("o"), want.pop("done")
        harness.set("timeout", timeout)
        harness.load_player("frames", beats)
        harness.load_player("issue", [pack(issue_layout(DEPTH), i) for i in chunk.issues])
        harness.set("req__count", 0)
        for name in _LAYOUTS:
            harness.arm_recorder(name, len(want[name]))
        harness.arm_recorder("req_frames", 0)
        await harness.reset()
        hang = None
        try:
            end = await harness.wait_done(
                [f"{n}__done" for n in _LAYOUTS] + ["frames__done", "issue__done"],
                timeout_cycles=BUDGET_PER_BEAT * len(beats) + BUDGET_CYCLES)
            await counted(dut, len(frames), BUDGET_CYCLES)
        except HarnessTimeout as exc:
            hang, end = str(exc), int(dut.now.value)
        sb = Scoreboard(dut._log)
        got = {}
        for name, lay in _LAYOUTS.items():
            items, stamps = harness.recorded(name)
            got[name] = [unpack(lay, v) for v in items]
            sb.compare(f"{name} items", items, [pack(lay, v) for _, v in want[name]])
            sb.compare(f"{name} cycles", stamps, [c for c, _ in want[name]], fmt=str)
        sb.compare("issue cycles", harness.played_stamps("issue", len(chunk.issues)),
                   want["issue_taken"], fmt=str)
        count = {n: int(getattr(dut, f"intake__{n}").value) for n in INTAKE_COUNTERS}
        overflow = int(dut.rx_overflow.value)
        for name in INTAKE_COUNTERS:
            sb.equal(f"intake {name}", count[name], want["count"][name])
        sb.equal("rx overflow", overflow, want["overflow"])
        violations = chunk_invariants(chunk, count, overflow, got["wr"], got["ops_done"])
        record = chunk_record(
            k, chunk, len(frames), end, want["cycles"],
            {o: count.get(o, overflow) for o in OUTCOMES}, violations, hang,
            sb.mismatches, t0, by_effect={e: count[e] for e in EFFECTS},
            kind_of=frame_kind)
        failures += report_chunk(dut, record, sb.mismatches, p.get("out"))
    assert p["chunks"], "no chunk to run"
    assert failures == 0, f"{failures} of {len(p['chunks'])} chunks failed (see the log)"
