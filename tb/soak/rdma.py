"""Soak of the RDMA engine's go-back-N: chunks of RDMA WRITEs over faulty links.

Each chunk is one run of :class:`rtl.tops.rdma_top.RdmaTop` (Verilator, ``-O2``) as
``tb.rdma.cocotb_rdma`` makes it, and up to :data:`CHUNKS_PER_SIM` chunks run one after
another in one simulation (``tb.soak.cocotb_rdma_soak``: a reset per chunk, every chunk's
cycles, stamps and counters those of a run alone): fresh QPs and memories, ``CHUNK`` WRITEs over
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

Each chunk's entry in ``per_chunk`` says whether it was compared with the model (its
run wrote this soak's figures: the scoreboard compared every item) and its mismatches;
``chunks``, ``chunks_compared`` and ``mismatches`` sum them. A chunk whose run left no
figures (stopped by an exception, or its simulation by a crash) counts as not compared,
its WRITEs as lost, and as a hang; ``failed_chunks`` counts the chunks that failed
(mismatches, a hang, no figures). A progress line is printed per chunk as its
simulation finishes it.
``args.selective``: selective repeat at both ends (the top's ``selective`` port, in
the RTL and the model alike) instead of go-back-N. ``args.break_model_chunk`` (a test
hook) gives the model of that chunk the MMIO words a
cycle late: a broken model that must be caught there.
"""

import json
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor

from pymodel.fabric.faulty_link import rate_per_65535
from tb.cosim import CosimFailure
from tb.rdma.runner import run_rdma
from tb.run_dirs import run_dir_name

__all__ = ["soak_rdma", "check_group_params", "chunk_params", "chunk_file", "chunk_stem", "CHUNK",
           "CHUNKS_PER_SIM", "OP_FIGURES", "MIXED_TOP", "link_faults"]

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
#: Chunks per simulator process (``args.rdma_per_sim`` overrides it). Starting one costs
#: about 1.7 s (Python, cocotb, the Verilated model's start) beside about 3.6 s of a
#: 1,000-WRITE chunk's own work: 25 chunks share that start (under 0.1 s per chunk left),
#: while a crashed simulation loses at most 25 chunks, a simulator's log stays a few
#: megabytes, and a soak of a few groups still spreads over the ``--rdma-group`` jobs.
CHUNKS_PER_SIM = 25
#: The C++ optimisation of the soak's Verilated model (its run is long: -O2 pays).
OPT = "-O2"
#: Seconds between two looks for the chunks a running simulation has finished.
POLL_S = 0.5


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


def chunk_params(args, index, count, token):
    """The run parameters of chunk ``index`` (``count`` operations) of the soak ``args``
    (those of :mod:`tb.rdma.cocotb_rdma`, without ``top``; ``out_json``
    ``soak_chunk<index>.json``): its stimulus and faults depend on ``index`` only."""
    selective = int(getattr(args, "selective", False))
    params = dict(kind="writes", messages=count, sizes=SIZES, qps=QPS, pmtu_log2=10,
                  seed=args.seed * 1000 + index, ack_timeout=ACK_TIMEOUT,
                  out_json=f"soak_chunk{index}.json", clean_baseline=True, token=token,
                  model_limit=MODEL_CYCLES_PER_WRITE * count + MODEL_SLACK,
                  selective=selective, **link_faults(args, index))
    if mixed(args):
        params.update(kind="mixed", mix=":".join(map(str, args.mix)),
                      ack_timeout=MIXED_ACK_TIMEOUT,
                      model_limit=MODEL_CYCLES_PER_OP * count + MODEL_SLACK)
    if index == getattr(args, "break_model_chunk", None):
        params["model_mmio_delay"] = 1
    return params


def check_group_params(params):
    """Refuse the parameters of ``tb.soak.cocotb_rdma_soak`` (``ValueError`` naming what):
    keys other than ``top`` and ``chunks``, no chunk, a chunk that
    :func:`tb.rdma.cocotb_rdma.check_params` refuses (with the group's ``top``) or that
    has a ``top`` of its own, two chunks with the same ``out_json``, or none."""
    from tb.rdma.cocotb_rdma import check_params

    extra = sorted(set(params) - {"top", "chunks"})
    if extra:
        raise ValueError(f"tb.soak.cocotb_rdma_soak: unknown parameter(s) {extra} "
                         "(accepted: ['chunks', 'top'])")
    chunks = params.get("chunks")
    if not isinstance(chunks, list) or not chunks:
        raise ValueError(f"tb.soak.cocotb_rdma_soak: chunks must be a non-empty list of "
                         f"run parameters, not {chunks!r}")
    names = []
    for k, chunk in enumerate(chunks):
        if not isinstance(chunk, dict) or "top" in chunk or not chunk.get("out_json"):
            raise ValueError(f"tb.soak.cocotb_rdma_soak: chunk {k} must be run parameters "
                             f"with an out_json and without a top of its own")
        try:
            check_params(dict(chunk, top=params.get("top", {})))
        except ValueError as exc:
            raise ValueError(f"tb.soak.cocotb_rdma_soak: chunk {k}: {exc}") from None
        names.append(chunk["out_json"])
    if len(set(names)) != len(names):
        raise ValueError("tb.soak.cocotb_rdma_soak: two chunks with the same out_json")


def soak_rdma(args, messages, span=None):
    """Run ``messages`` WRITEs in chunks; returns the soak figures (scripts/soak.py).

    ``span`` ``(first, stop)``: only the chunks ``first .. stop - 1`` of the soak (each
    chunk's stimulus and faults depend on its index only, so the figures of the spans of
    a soak add up to the whole soak's, whatever the chunks that share a simulation);
    default all. The chunks run in groups of ``args.rdma_per_sim`` (default
    :data:`CHUNKS_PER_SIM`), one simulation each."""
    size = getattr(args, "rdma_chunk", CHUNK)
    per_sim = getattr(args, "rdma_per_sim", None) or CHUNKS_PER_SIM
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
    print(f"rdma: {messages} {what} in {chunks} chunks of up to {size}{part}, each "
          f"compared with the model, up to {per_sim} in one simulation (Verilator -O2)",
          flush=True)
    t0 = time.perf_counter()
    suffix = (("_sr" if getattr(args, "selective", False) else "")
              + ("_mix" + "_".join(map(str, args.mix)) if mix else ""))
    for start in range(first, stop, per_sim):
        group = range(start, min(start + per_sim, stop))
        counts = {index: min(size, messages - index * size) for index in group}
        runs = {index: chunk_params(args, index, counts[index], token) for index in group}
        test_id = f"soak_seed{args.seed}_chunks{group[0]}-{group[-1]}{suffix}"
        for index, out, failed in _group(MIXED_TOP if mix else TOP, runs, test_id, token):
            _add(totals, per_chunk, index, counts[index], out, failed, mix)
            if out is None:
                continue
            elapsed = time.perf_counter() - t0
            ops = (f"{totals['writes']} WRITEs, {totals['reads']} READs, "
                   f"{totals['atomics']} atomics" if mix else f"{totals['messages']} WRITEs")
            print(f"  chunk {index + 1}/{chunks}: {ops}, "
                  f"{totals['retransmissions']} frames sent again, {totals['lost']} lost, "
                  f"{totals['corrupted_bytes']} bad bytes, {totals['mismatches']} "
                  f"model mismatches ({elapsed:.0f} s)", flush=True)
    return dict(totals, per_chunk=per_chunk)


def _add(totals, per_chunk, index, count, out, failed, mix):
    """Add chunk ``index``'s figures ``out`` (None: it left none) to ``totals`` and
    ``per_chunk``; ``failed``: the chunk failed (``failed_chunks``)."""
    totals["failed_chunks"] += failed
    if out is None:                      # no figures at all: count the chunk as lost
        totals["lost"] += count
        totals["hangs"] += 1
        per_chunk.append(dict(chunk=index, messages=count, compared=False,
                              mismatches=None, recovered=None, recovery_cycles=None))
        return
    c = out["counters"]
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
    if not mix:                          # a WRITE-only chunk: the bench's WRITE checks
        out = dict(out, writes=out["messages"],
                   writes_ok=0 if out["corrupted_bytes"] else out["messages"] - out["lost"])
    for key in OP_FIGURES:
        totals[key] += out.get(key, 0)
    per_chunk.append(dict(chunk=index, messages=out["messages"], compared=True,
                          mismatches=out["mismatches"], recovered=damaged,
                          recovery_cycles=out.get("recovery_cycles", 0)))


def _group(top, runs, test_id, token):
    """Run the chunks ``runs`` (``{index: run parameters}``) in one simulation of ``top``
    (run folder ``test_id``); yields ``(index, out, failed)`` per chunk in order as the
    simulation finishes it: ``out`` its figures (None if it left none), ``failed``
    whether it failed, after a line saying why."""
    order = sorted(runs)
    params = {"chunks": [runs[index] for index in order]}
    with ThreadPoolExecutor(1) as pool:
        job = pool.submit(run_rdma, top, test_module="tb.soak.cocotb_rdma_soak",
                          params=params, sim="verilator", test_id=test_id, opt=OPT)
        k = 0
        while k < len(order):
            done = job.done()
            status = chunk_file(test_id, runs[order[k]], "status.json", token)
            if status is None and not done:
                time.sleep(POLL_S)
                continue
            if status is None:          # the simulation ended without this chunk
                break
            if status["failed"]:
                print(f"  chunk {order[k]}: FAILED ({status['failed']})", flush=True)
            out = chunk_file(test_id, runs[order[k]], "json", token)
            yield order[k], out, out is None or bool(status["failed"])
            k += 1
        try:
            job.result()
            stopped = "the simulation finished without it"
        except CosimFailure as exc:
            stopped = str(exc)
        for index in order[k:]:         # chunks the simulation never finished
            print(f"  chunk {index}: FAILED ({stopped})", flush=True)
            yield index, chunk_file(test_id, runs[index], "json", token), True


def chunk_file(test_id, run, kind, token):
    """This soak's file ``kind`` (``json``: the figures, ``status.json``) of the chunk
    ``run`` in the run folder ``test_id``, as a dict; None when there is none yet (a
    file of an older soak has another ``token``)."""
    from tb.cosim import BUILD
    for path in sorted(BUILD.glob(f"cosim/verilator/rdma_top*/{run_dir_name(test_id)}/"
                                  f"{chunk_stem(run)}.{kind}")):
        try:
            out = json.loads(path.read_text())
        except (OSError, ValueError):   # being written
            continue
        if out.get("token") == token:
            return out
    return None


def chunk_stem(run):
    """The name of a chunk's files in the run folder: its ``out_json`` without the
    suffix (``soak_chunk3``: ``.json``, ``.status.json``, ``.mismatches.txt``)."""
    return run["out_json"].rsplit(".", 1)[0]
