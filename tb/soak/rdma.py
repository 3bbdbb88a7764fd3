"""Soak of the RDMA engine's go-back-N: chunks of RDMA WRITEs over faulty links.

Each chunk is one full co-simulation of :class:`rtl.tops.rdma_top.RdmaTop` (Verilator,
``-O2``) by ``tb.rdma.cocotb_rdma``: fresh QPs and memories, ``CHUNK`` WRITEs over
``QPS`` QPs with sizes around a 1 KiB path MTU, doorbells as fast as the engine takes
them (``--stall-rate`` is the NIC's), and the fault settings on both links (the data
link and the ACK link). Every chunk is compared with the golden model on every wire
beat, memory word, CQE and counter, and checked on its own (every CQE SUCCESS, the
remote buffers hold exactly the posted bytes, each payload word written once). The
cycles lost to recovery of a chunk (``recovery_cycles``) are the cycles by which its
last remote write lands later than in the same chunk without faults, the soak's one
definition for both designs (:mod:`tb.soak.recovery`); ``cqe_delay_cycles`` is the same
at its last CQE (the soak's ``recovery_cycles`` before the definition was shared). Both
come from the golden model, which the RTL matched. Used by ``scripts/soak.py``.

Each chunk's entry in ``per_chunk`` says whether it was compared with the model (the
co-simulation ran and wrote this run's figures: the scoreboard compared every item) and
its mismatches; ``chunks``, ``chunks_compared`` and ``mismatches`` sum them. A chunk
whose co-simulation left no figures counts as not compared, its WRITEs as lost.
``args.selective``: selective repeat at both ends (the top's ``selective`` port, in
the RTL and the model alike) instead of go-back-N. ``args.break_model_chunk`` (a test
hook) gives the model of that chunk the MMIO words a
cycle late: a broken model that must be caught there.
"""

import json
import math
import os
import time

from pymodel.fabric.faulty_link import rate_per_65535
from tb.cosim import CosimFailure
from tb.rdma.runner import run_rdma

__all__ = ["soak_rdma", "CHUNK", "OP_FIGURES", "MIXED_TOP", "link_faults"]

#: Per operation: how many ran, and how many passed the model-free checks (a WRITE's
#: bytes landed once, a READ's answer the bytes node B held, an atomic's original value
#: and its word executed once; each with its successful CQE).
OP_FIGURES = ("writes", "reads", "atomics", "writes_ok", "reads_ok", "atomics_ok")

#: WRITEs per co-simulation, and the top's recorder depth that holds their beats: a
#: chunk is about 12,000 beats on the data link (seed 1, chunks 0 and 1: 11,750 and
#: 12,218), and a chunk with heavy recovery sends many frames again (seed 1, chunk 305:
#: 17,053 beats, 24 timer rewinds), so the recorders hold 32,768 (a chunk that
#: overflows them fails its comparison with "wire_ab__done not done" and the beat counts).
CHUNK = 1000
TOP = {"wire_beats": 32768}
QPS = 8
SIZES = [64, 128, 128, 1024, 1025, 128, 300, 2048]
#: Transport timeout (cycles): above any ACK delay of these runs, and short enough that
#: a run whose last frames are lost does not idle for long.
ACK_TIMEOUT = 1024
#: Cycles the model may take per WRITE of a chunk (plus MODEL_SLACK) before the chunk
#: counts as a hang: a chunk of 1,000 takes 19,000 to 26,000 cycles with the default
#: faults, and a deadlocked engine would keep the model stepping for hours (the model's
#: own limit is 2**26 cycles).
MODEL_CYCLES_PER_WRITE = 200
MODEL_SLACK = 100_000
#: A mixed chunk's top: the soak's with node A's READ and atomic requester (``reads``,
#: its ORD of 16 as every READ top of tb/rdma) and node B's READ data FIFO
#: (``read_words``, two packets of the largest MTU, as :data:`tb.rdma.runner.FEATURES_TOP`).
MIXED_TOP = dict(TOP, reads=16, read_words=128)
#: Cycles the model may take per operation of a mixed chunk: node B serves one READ or
#: atomic at a time behind its host reads (about 400 cycles each at the top's ``pcie``
#: host profile, docs/rdma.md, "READ and atomics"), twice that for margin.
MODEL_CYCLES_PER_OP = 800
#: Transport timeout of a mixed chunk (cycles): a WRITE's ACK may wait behind the READs
#: and atomics node B serves one at a time, up to the ORD of 16 of each QP at about 400
#: cycles each (6,400 cycles); twice that, rounded up to a power of two, so that no
#: loss-free mixed chunk of the soak's size times out (the WRITE-only soak's 1,024 would
#: fire in loss-free chunks of 20 operations, the golden model alone).
MIXED_ACK_TIMEOUT = 16384


def mixed(args):
    """Whether the soak's ``--mix`` has READs or atomics (then each chunk is kind
    ``mixed`` on :data:`MIXED_TOP`)."""
    weights = getattr(args, "mix", (1, 0, 0))
    return bool(weights[1] or weights[2])


def link_faults(args, index):
    """The two links' fault settings of chunk ``index``: the soak's rates on both (with
    READs or atomics too: node A then takes the B->A link beat by beat, and drops a
    corrupted or repeated READ RESPONSE as the RTL does, docs/rdma.md)."""
    faults = {link: dict(seed=(args.seed * 7919 + 2 * index + k) & 0xFFFF or 1,
                         corrupt_rate=rate_per_65535(args.corrupt_rate),
                         drop_rate=rate_per_65535(args.drop_rate),
                         dup_rate=rate_per_65535(args.dup_rate))
              for k, link in enumerate(("faults_ab", "faults_ba"))}
    return faults


def soak_rdma(args, messages, span=None):
    """Run ``messages`` WRITEs in chunks; returns the soak figures (scripts/soak.py).

    ``span`` ``(first, stop)``: only the chunks ``first .. stop - 1`` of the soak (each
    chunk's stimulus and faults depend on its index only, so the figures of the spans of
    a soak add up to the whole soak's); default all."""
    size = getattr(args, "rdma_chunk", CHUNK)
    chunks = math.ceil(messages / size) if messages else 0
    first, stop = span or (0, chunks)
    stop = min(stop, chunks)
    totals = dict(messages=0, recovered=0, lost=0, corrupted_bytes=0, hangs=0,
                  retransmissions=0, recovery_cycles=0, cqe_delay_cycles=0, cycles=0,
                  timeouts=0, seq_naks=0,
                  rewinds=0, sr_placed=0,
                  duplicates_discarded=0, wire_dropped=0, wire_corrupted=0,
                  wire_duplicated=0, chunks=max(stop - first, 0), chunks_compared=0,
                  mismatches=0, failed_chunks=0, **{k: 0 for k in OP_FIGURES})
    per_chunk = []
    token = f"{os.getpid()}-{time.time_ns()}"
    part = f" (chunks {first + 1} to {stop})" if (first, stop) != (0, chunks) else ""
    mix = mixed(args)
    what = (f"operations (mix W:R:A {':'.join(map(str, args.mix))}; faults on both links)"
            if mix else "WRITEs")
    print(f"rdma: {messages} {what} in {chunks} co-simulations of up to {size}{part}, each "
          "compared with the model (Verilator -O2)", flush=True)
    t0 = time.perf_counter()
    for index in range(first, stop):
        count = min(size, messages - index * size)
        faults = link_faults(args, index)
        selective = int(getattr(args, "selective", False))
        test_id = (f"soak_seed{args.seed}_chunk{index}" + ("_sr" if selective else "")
                   + ("_mix" + "_".join(map(str, args.mix)) if mix else ""))
        params = dict(kind="writes", messages=count, sizes=SIZES, qps=QPS, pmtu_log2=10,
                      seed=args.seed * 1000 + index, ack_timeout=ACK_TIMEOUT,
                      out_json="soak.json",
                      clean_baseline=True, token=token,
                      model_limit=MODEL_CYCLES_PER_WRITE * count + MODEL_SLACK,
                      selective=selective, **faults)
        if mix:
            params.update(kind="mixed", mix=":".join(map(str, args.mix)),
                          ack_timeout=MIXED_ACK_TIMEOUT,
                          model_limit=MODEL_CYCLES_PER_OP * count + MODEL_SLACK)
        if index == getattr(args, "break_model_chunk", None):
            params["model_mmio_delay"] = 1
        try:
            run = run_rdma(MIXED_TOP if mix else TOP, params=params, sim="verilator",
                           test_id=test_id, opt="-O2")
            failed = False
        except CosimFailure as exc:
            print(f"  chunk {index}: FAILED ({exc}){_why(test_id)}", flush=True)
            run, failed = None, True
        out = _read(run, test_id, token)
        if out is None:                  # no figures at all: count the chunk as lost
            totals["failed_chunks"] += 1
            totals["lost"] += count
            totals["hangs"] += 1
            per_chunk.append(dict(chunk=index, messages=count, compared=False,
                                  mismatches=None, recovered=None, recovery_cycles=None))
            continue
        c = out["counters"]
        totals["failed_chunks"] += failed
        totals["messages"] += out["messages"]
        totals["lost"] += out["lost"]
        totals["corrupted_bytes"] += out["corrupted_bytes"]
        totals["hangs"] += bool(out["hang"])
        totals["mismatches"] += out["mismatches"]
        totals["chunks_compared"] += 1
        totals["retransmissions"] += c["req_retransmissions"]
        totals["timeouts"] += c["req_timeouts"]
        totals["seq_naks"] += c["req_seq_naks"]
        totals["rewinds"] += c["req_rewinds"]
        totals["sr_placed"] += c["resp_sr_placed"]
        totals["duplicates_discarded"] += c["resp_duplicates"]
        damaged = 0
        for kind in ("dropped", "corrupted", "duplicated"):
            hit = c[f"ab_{kind}"] + c[f"ba_{kind}"]
            totals[f"wire_{kind}"] += hit
            damaged += hit
        totals["recovered"] += damaged
        totals["cycles"] += out["cycles"]
        totals["recovery_cycles"] += out.get("recovery_cycles", 0)
        totals["cqe_delay_cycles"] += out.get("cqe_delay_cycles", 0)
        if not mix:                      # a WRITE-only chunk: the bench's WRITE checks
            out = dict(out, writes=out["messages"],
                       writes_ok=0 if out["corrupted_bytes"] else out["messages"] - out["lost"])
        for key in OP_FIGURES:
            totals[key] += out.get(key, 0)
        per_chunk.append(dict(chunk=index, messages=out["messages"], compared=True,
                              mismatches=out["mismatches"], recovered=damaged,
                              recovery_cycles=out.get("recovery_cycles", 0)))
        elapsed = time.perf_counter() - t0
        ops = (f"{totals['writes']} WRITEs, {totals['reads']} READs, {totals['atomics']} "
               "atomics" if mix else f"{totals['messages']} WRITEs")
        print(f"  chunk {index + 1}/{chunks}: {ops}, "
              f"{totals['retransmissions']} frames sent again, {totals['lost']} lost, "
              f"{totals['corrupted_bytes']} bad bytes, {totals['mismatches']} "
              f"model mismatches ({elapsed:.0f} s)", flush=True)
    return dict(totals, per_chunk=per_chunk)


def _why(test_id):
    """The model's own error of a chunk that stopped, from its simulator log (the first
    line naming one), e.g. the model's ``NoProgress``; empty if none."""
    from tb.cosim import BUILD
    for log in sorted(BUILD.glob(f"cosim/verilator/rdma_top*/{test_id}/sim.log")):
        for line in log.read_text(errors="replace").splitlines():
            if "NoProgress:" in line or "RuntimeError:" in line:
                return ":\n    " + line.strip()[:400]
    return ""


def _read(run, test_id, token):
    """This run's figures of a chunk (``token`` tells them from an older run's)."""
    from tb.cosim import BUILD
    paths = [run / "soak.json"] if run else []
    paths += sorted(BUILD.glob(f"cosim/verilator/rdma_top*/{test_id}*/soak.json"))
    for path in paths:
        if path.exists():
            out = json.loads(path.read_text())
            if out.get("token") == token:
                return out
    return None

