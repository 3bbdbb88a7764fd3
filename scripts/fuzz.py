"""`make fuzz FRAMES=N`: seeded mutation fuzzing of the receivers in co-simulation.

For each design, N fuzz frames (mutants of valid frames, :mod:`analysis.scenarios.fuzz`)
are cut into chunks of ``--chunk`` frames; each chunk is a fresh load and reset of the
co-simulation (:mod:`tb.rdma.cocotb_fuzz` on RdmaTop with READ and atomics at the
responder; the NIC's chunks alternate :data:`tb.fuzz_runner.NIC_TARGETS`: the store
receiver, :mod:`tb.nic.cocotb_fuzz` on NicRxTop, in the compact and L2 framings, and
the memory receiver, :mod:`tb.nic.cocotb_mem_fuzz` on NicMemTop; the RDMA requester's
response path, ``rdma-req``, :mod:`tb.rdma.cocotb_req_fuzz` on ReadRequesterTop, hostile
READ RESPONSEs and ATOMIC ACKNOWLEDGEs of :mod:`analysis.scenarios.fuzz_req`; the
ephemeral design's receiver, :mod:`tb.cocotb_ephemeral_fuzz` on EphemeralReceiverTop, N
packet headers of :mod:`analysis.scenarios.fuzz_ephemeral`), checked against the golden
model and against model-free invariants (:mod:`tb.fuzz_checks`, :mod:`tb.ephemeral_receiver`).
``--design`` picks ``nic``, ``rdma``, ``rdma-req``, ``ephemeral``, ``both`` (nic and rdma)
or ``all`` (the default: the four). Several
chunks run in one simulator process (``--per-run``); a progress line per chunk gives the
elapsed time and an estimate of the time left.

Writes ``build/fuzz/fuzz.json``: per design ``frames``, ``by_outcome`` (the receiver's
outcome counters summed), ``by_mutation`` (``kind+fix`` -> frames sent), ``by_field``
(header field -> rewrites), ``by_frame`` (frame kind by opcode -> frames sent:
WRITEs, READ requests and responses, atomics and their ACKs; NIC: stores, loads,
atomics and their responses), ``by_effect`` (READs and atomics executed, responses
sent), ``violations``, ``hangs``, ``mismatches``, ``chunks``,
``seconds``, ``outcomes_never_seen`` (coverage: outcome and effect counters that stayed 0), and the
first violations and mismatches found; and one line per chunk in
``build/fuzz/fuzz_<design>_chunks.jsonl`` (named after ``--out``). Exits 1 when violations,
hangs or mismatches are not all 0 (or a chunk did not report), 2 on a bad option.
"""

import argparse
import json
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tb.cosim import SIMULATORS, CosimFailure, selected_sim  # noqa: E402
from tb.fuzz_checks import add_counts  # noqa: E402
from tb.fuzz_runner import DESIGNS, NIC_TARGETS, max_chunk, run_fuzz  # noqa: E402

OUT = ROOT / "build" / "fuzz"
#: Frames per chunk unless --chunk says otherwise.
DEFAULT_CHUNK = {"rdma": 1500, "nic": 800, "rdma-req": 200, "ephemeral": 2000}
#: The designs each --design choice runs (``both``: the two receivers of the NIC and the
#: RDMA engine; ``all``, the default, adds the ephemeral design's receiver).
SELECTIONS = {**{d: (d,) for d in DESIGNS}, "both": ("nic", "rdma"), "all": DESIGNS}


def parse(argv=None):
    ap = argparse.ArgumentParser(prog="make fuzz", description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=100_000,
                    help="fuzz frames (ephemeral: packets) per design (default 100000)")
    ap.add_argument("--seed", type=int, default=1, help="fuzz seed (default 1)")
    ap.add_argument("--design", default="all", choices=tuple(SELECTIONS),
                    help="which receiver: nic, rdma, rdma-req (the RDMA requester's "
                         "responses), ephemeral, both (nic and rdma) or all (default)")
    ap.add_argument("--sim", default=None, choices=SIMULATORS,
                    help="simulator (default $SIM or verilator)")
    ap.add_argument("--chunk", type=int, default=None,
                    help=f"frames per chunk (default {DEFAULT_CHUNK})")
    ap.add_argument("--per-run", type=int, default=8,
                    help="chunks per simulator process (default 8)")
    ap.add_argument("--out", default=str(OUT / "fuzz.json"), help="the JSON written")
    a = ap.parse_args(argv)
    if a.frames < 1:
        ap.error(f"--frames must be at least 1, not {a.frames}")
    if a.seed < 0:
        ap.error(f"--seed must be 0 or more, not {a.seed}")
    if a.per_run < 1:
        ap.error(f"--per-run must be at least 1, not {a.per_run}")
    designs = SELECTIONS[a.design]
    for d in designs:
        if a.chunk is not None and not 1 <= a.chunk <= max_chunk(d):
            ap.error(f"--chunk must be 1 to {max_chunk(d)} for design {d}, not {a.chunk}")
    try:
        a.sim = selected_sim(a.sim)
    except ValueError as exc:
        ap.error(str(exc))
    a.designs = designs
    return a


def _plan(design, frames, chunk):
    """``[(chunk number, frames)]`` covering ``frames``."""
    out, k = [], 0
    while frames > 0:
        n = min(chunk, frames)
        out.append((k, n))
        frames -= n
        k += 1
    return out


class _Progress:
    """Prints a line for each chunk line that appears in the run's JSON-lines file."""

    def __init__(self, design, path, total, t0):
        self.design, self.path, self.total, self.t0 = design, path, total, t0
        self.seen = 0
        self.stop = threading.Event()

    def poll(self):
        if not self.path.exists():
            return
        lines = self.path.read_text().splitlines()
        for line in lines[self.seen:]:
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                return                       # being written: read it next time
            self.seen += 1
            el = time.monotonic() - self.t0
            left = el / self.seen * (self.total - self.seen)
            print(f"[fuzz] {self.design} chunk {self.seen}/{self.total} (#{r['chunk']}): "
                  f"{r['frames']} frames, {len(r['violations'])} violations, "
                  f"{r['mismatches']} mismatches, {r['hangs']} hangs; elapsed {el:.0f} s, "
                  f"about {left:.0f} s left", flush=True)

    def run(self):
        while not self.stop.wait(1.0):
            self.poll()
        self.poll()


def fuzz_design(design, a):
    chunk = a.chunk or DEFAULT_CHUNK[design]
    plan = _plan(design, a.frames, chunk)
    out = Path(a.out)
    lines = out.with_name(f"{out.stem}_{design}_chunks.jsonl")
    lines.parent.mkdir(parents=True, exist_ok=True)
    lines.unlink(missing_ok=True)
    t0 = time.monotonic()
    prog = _Progress(design, lines, len(plan), t0)
    thread = threading.Thread(target=prog.run, daemon=True)
    thread.start()
    failures = []
    groups = []
    if design == "nic":
        for f, target in enumerate(NIC_TARGETS):
            mine = [c for c in plan if c[0] % len(NIC_TARGETS) == f]
            groups += [(target, mine[i:i + a.per_run]) for i in range(0, len(mine),
                                                                        a.per_run)]
    else:
        groups = [((design, None), plan[i:i + a.per_run])
                  for i in range(0, len(plan), a.per_run)]
    for (target, framing), group in groups:
        sizes = {n for _, n in group}
        for size in sorted(sizes):                    # one size per process
            ks = [k for k, n in group if n == size]
            name = target if target != "nic" else f"nic_{framing}"
            try:
                run_fuzz(target, sim=a.sim, seed=a.seed, chunks=ks, frames=size, out=lines,
                         test_id=f"fuzz_{name}_{ks[0]}", framing=framing or "compact")
            except CosimFailure as exc:
                failures.append(str(exc))
                print(f"[fuzz] {design}: {exc}", file=sys.stderr, flush=True)
    prog.stop.set()
    thread.join()
    seconds = time.monotonic() - t0
    records = [json.loads(x) for x in lines.read_text().splitlines()] if lines.exists() else []
    got = {r["chunk"] for r in records}
    missing = [k for k, _ in plan if k not in got]
    res = {"frames": sum(r["frames"] for r in records),
           "injected": sum(r["injected"] for r in records),
           "by_outcome": {}, "by_mutation": {}, "by_field": {}, "by_frame": {},
           "by_effect": {},
           "violations": sum(len(r["violations"]) for r in records),
           "hangs": sum(r["hangs"] for r in records),
           "mismatches": sum(r["mismatches"] for r in records),
           "chunks": len(records), "missing_chunks": missing,
           "seconds": round(seconds, 1), "cycles": sum(r["cycles"] for r in records),
           "first_violations": [v for r in records for v in r["violations"]][:10],
           "first_mismatches": [v for r in records for v in r["first_mismatches"]][:10],
           "run_failures": failures[:5]}
    for r in records:
        add_counts(res["by_outcome"], r["by_outcome"])
        add_counts(res["by_mutation"], r["by_mutation"])
        add_counts(res["by_field"], r["by_field"])
        add_counts(res["by_frame"], r.get("by_frame", {}))
        add_counts(res["by_effect"], r.get("by_effect", {}))
    # Coverage, not a failure: outcomes the fuzz never produced (the receiver's checks
    # it did not reach).
    res["outcomes_never_seen"] = sorted(
        k for k, n in {**res["by_outcome"], **res["by_effect"]}.items() if n == 0)
    return res


def main(argv=None):
    a = parse(argv)
    report = {"run": {"seed": a.seed, "sim": a.sim, "frames_per_design": a.frames,
                      "chunk": a.chunk or DEFAULT_CHUNK}}
    bad = False
    for d in a.designs:
        r = report[d] = fuzz_design(d, a)
        print(f"[fuzz] {d}: {r['frames']} frames in {r['chunks']} chunks, {r['seconds']} s "
              f"({r['frames'] / max(r['seconds'], 1e-9):.0f} frames/s); violations "
              f"{r['violations']}, hangs {r['hangs']}, mismatches {r['mismatches']}; "
              f"outcomes {r['by_outcome']}; effects {r['by_effect']}; frames {r['by_frame']}; "
              f"never seen {r['outcomes_never_seen']}",
              flush=True)
        bad |= bool(r["violations"] or r["hangs"] or r["mismatches"] or r["missing_chunks"])
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    print(f"[fuzz] wrote {out}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
