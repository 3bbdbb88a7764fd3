"""Soak the designs on Verilator over faulty links: nothing lost, nothing corrupted, and
every chunk equal to the golden model cycle for cycle.

Usage::

    python scripts/soak.py                         # 1,000,000 messages per design, as `make soak`
    python scripts/soak.py --messages 100000 --rdma-messages 5000
    python scripts/soak.py --scheduler tcp://head:8786   # the designs on a Dask cluster
    make soak MESSAGES=200000
    python scripts/soak.py --only ephemeral       # the ephemeral receiver alone
    python scripts/soak.py --only ephemeral --ephemeral drop_rate=0.02 --ephemeral idle=512

The NIC runs with link-level retry on all 8 wires of its 4-node top (W = 64 bytes,
compact framing, all-to-all stores of 64 to 256 bytes with random gaps); the RDMA
engine runs with go-back-N over faulty data and ACK links. Both see a corruption rate
of 1e-3 per frame per wire by default (plus drops and duplicates at ``--drop-rate`` and
``--dup-rate``, on the RDMA engine's data and ACK links alike); the NIC's wires also
damage the retry's sequence tags and drop and damage its ACK/NAKs (``--tag-rate``,
``--ack-drop-rate``, ``--ack-corrupt-rate``, by default at the frames' corruption and
drop rates). ``--nic-switch-drops K`` gives the NIC the per-peer retry too and has its
switch drop K frames at each egress per chunk, recovered end to end
(tb/soak/cocotb_nic_soak.py; soak.json's ``switch_dropped``).

Chunks, every one compared with the golden model:

- NIC: one Verilator simulation (``-O2``); each chunk (64 stores per node, then
  ``--nic-chunk`` per node) resets the design but keeps its memories. The model runs
  each chunk from the memories its own run of the previous chunk left (chunked with
  carried state) and must equal the design on every receiver and link counter, every
  memory write (address, byte enables, cycle) and the whole memories
  (tb/soak/cocotb_nic_soak.py).
- RDMA: chunks of ``--rdma-chunk`` WRITEs (fresh QPs and memories; up to 25 in one
  simulation, a reset each), each compared with the model on every wire beat and its
  cycle, every mark, counter and memory word (tb/soak/rdma.py, cocotb_rdma_soak.py).
- Ephemeral: genuine traffic of 12 go-back-N senders through a lossy path (drops,
  duplicates, late copies, lost ACKs and CLOSEs) into the receiver block
  (EphemeralReceiverTop, 8 contexts), closed loop on its twin; one simulation, a reset
  per ``--ephemeral-chunk`` messages; every outcome, delivery, ACK, idle close and
  counter RTL = twin, and every message delivered once (tb/soak/ephemeral.py,
  analysis/scenarios/soak_ephemeral.py). Its knobs
  (``--ephemeral NAME=VALUE``, :data:`analysis.scenarios.soak_ephemeral.SOAK_DEFAULTS`,
  its own fault rates) are checked against the design's assumptions before any
  simulation: a refused one is an error naming it (exit code 2).

``--mix W:R:A`` (or a preset, ``mixed`` = 70:20:10, a test mix; default ``writes``,
the WRITE-only soak above) shares the messages among writes, loads/READs and atomics
(exact shares, :mod:`analysis.scenarios.mix`):

- NIC: the writes are the stores above (link retry over faulty wires); the loads and
  atomics run on NicMemTop with ``link_retry``, **over faulty reliable links at the same
  rates** (all 8 wires): chunks of up to 256 commands per node (``tb.soak.nic_mem``),
  fresh random memories each, every chunk compared with the model on every beat, memory
  write, landed response, counter (the links' included) and memory word and checked
  without it (each load's bytes, each atomic's old value and its
  word executed once, every command answered OK, no other byte changed;
  tb/soak/cocotb_nic_mem_soak.py). soak.json's ``nic_mem`` entry.
- RDMA: each chunk posts the mix on the same QPs (kind ``mixed`` of
  tb/rdma/cocotb_rdma.py on RdmaTop with ``reads`` and ``read_words``), faults on both
  links at the soak's rates (B->A carries the READ RESPONSEs: node A drops a corrupted
  one by its FCS/ICRC and a repeated one by its PSN, and the READ is answered again after
  a rewind or the transport timeout), checked without the model too (each READ's
  bytes, each atomic's old value and word, each WRITE's bytes, one successful CQE per
  operation per QP in order).

`--selective` runs the mixed workload with selective repeat at both ends too: a QP
with a READ or atomic in its window recovers by going back N (docs/recovery.md, "READs
and atomics under selective repeat").

soak.json adds per design the operations and how many passed those checks
(``writes``, ``loads``, ``reads``, ``atomics`` and ``<op>_ok``, which must be equal).

The designs are jobs of :func:`scripts.executor.make_executor`: ``--jobs`` local
processes (default 2), or a Dask cluster with ``--scheduler`` (``local`` or an
address); a bad ``--jobs`` or ``--scheduler`` is an error (exit code 2) before any
simulation.

Prints, per design: messages, recovered (frames the wires damaged, all of which then
arrived once and whole), lost (must be 0), corrupted memory bytes (must be 0), hangs
(must be 0), retransmissions, cycles lost to recovery, chunks, chunks compared with the
model (must be all), model mismatches (must be 0) and the wall time (ephemeral: also
duplicates delivered and the model-free checks' violations, both must be 0); writes the same
figures to ``build/soak/soak.json`` (``{design: {messages, recovered, lost,
corrupted_bytes, hangs, retransmissions, recovery_cycles,
recovery_cycles_per_damaged_frame, chunks, chunks_compared, mismatches, per_chunk:
[{chunk, messages, compared, mismatches, recovered, recovery_cycles}], wall_s, ...}}``)
and exits 1 if any must-be figure is not.

``recovery_cycles`` has one definition for both designs (:mod:`tb.soak.recovery`): how
many cycles later each chunk's last payload write into a receiver's memory lands than in
the golden model's run of the same chunk without faults, summed over chunks;
``recovery_cycles_per_damaged_frame`` is that over ``recovered``. The NIC's
``replay_cycles`` (its links' cycles spent resending) and the RDMA engine's
``cqe_delay_cycles`` (the same delay at the last CQE) are kept beside it.
"""

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analysis.scenarios.mix import PRESETS, parse_mix  # noqa: E402
from analysis.scenarios.soak_ephemeral import SOAK_DEFAULTS  # noqa: E402
from scripts.executor import (  # noqa: E402
    ExecutorError,
    add_cluster_options,
    check_cluster_options,
    make_executor,
)
from spec.fabric import SWITCH_DROPS  # noqa: E402
from tb.soak.ephemeral import CHUNK as EPHEMERAL_CHUNK  # noqa: E402
from tb.soak.ephemeral import TOP as EPHEMERAL_TOP  # noqa: E402
from tb.soak.ephemeral import knobs_of  # noqa: E402
from tb.soak.nic import NIC_CHUNK, soak_nic  # noqa: E402
from tb.soak.rdma import CHUNK as RDMA_CHUNK  # noqa: E402
from tb.soak.recovery import per_damaged_frame  # noqa: E402

OUT = ROOT / "build" / "soak"
KEYS = ("messages", "recovered", "switch_dropped", "peer_resent", "lost", "corrupted_bytes",
        "duplicates_delivered", "hangs", "retransmissions",
        "recovery_cycles", "recovery_cycles_per_damaged_frame", "replay_cycles",
        "cqe_delay_cycles", "chunks", "chunks_compared", "mismatches", "violations", "wall_s",
        *(f"{op}{ok}" for op in ("writes", "loads", "reads", "atomics") for ok in ("", "_ok")))
#: Per operation: how many ran, and how many passed the model-free checks (``<op>_ok``,
#: which must equal ``<op>``; the NIC's stores are checked as a whole, by ``lost`` and
#: ``corrupted_bytes``).
OPS_CHECKED = ("writes", "loads", "reads", "atomics")
#: RDMA chunks per job by default (about 4 minutes of a core): the workers share the RDMA
#: soak, the longest part, once the NIC's job is done (the groups' figures add up).
RDMA_GROUP = 50
MUST_BE_ZERO = ("lost", "corrupted_bytes", "duplicates_delivered", "hangs", "mismatches",
                "violations")


def _rate(text):
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"a rate is a probability from 0 to 1, not {text}")
    return value


def _positive(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text}")
    return value


def _chunk(most):
    def check(text):
        value = int(text)
        if not 1 <= value <= most:
            raise argparse.ArgumentTypeError(f"must be 1 to {most}, not {text}")
        return value
    return check


def _mix(text):
    try:
        return parse_mix(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=_positive, default=1_000_000,
                    help="messages of each design (default 1000000)")
    ap.add_argument("--rdma-messages", type=_positive, default=None,
                    help="RDMA WRITEs, when not --messages")
    ap.add_argument("--corrupt-rate", type=_rate, default=1e-3,
                    help="probability that a frame gets a flipped bit, per wire "
                         "(default 1e-3)")
    ap.add_argument("--drop-rate", type=_rate, default=1e-4,
                    help="probability that a frame is dropped, per wire (default 1e-4)")
    ap.add_argument("--dup-rate", type=_rate, default=1e-4,
                    help="probability that a frame is sent twice, per wire (default 1e-4)")
    ap.add_argument("--tag-rate", type=_rate, default=None,
                    help="NIC: probability that a frame's sequence tag gets a flipped bit, "
                         "per wire (default: --corrupt-rate)")
    ap.add_argument("--ack-drop-rate", type=_rate, default=None,
                    help="NIC: probability that an ACK/NAK is lost, per wire (default: "
                         "--drop-rate)")
    ap.add_argument("--ack-corrupt-rate", type=_rate, default=None,
                    help="NIC: probability that an ACK/NAK gets a flipped bit, per wire "
                         "(default: --corrupt-rate)")
    ap.add_argument("--stall-rate", type=int, default=64, choices=range(0, 256),
                    metavar="0..255",
                    help="NIC: gaps in every command stream, out of 256 cycles (default 64; "
                         "the RDMA host posts its doorbells as fast as the engine takes "
                         "them)")
    ap.add_argument("--mix", type=_mix, default=PRESETS["writes"], metavar="W:R:A",
                    help="weights of writes, loads/READs and atomics, or a preset: "
                         + ", ".join(f"{k} ({':'.join(map(str, v))})"
                                     for k, v in PRESETS.items())
                         + " (default writes: the WRITE-only soak)")
    ap.add_argument("--seed", type=int, default=1, help="seed of traffic and faults")
    ap.add_argument("--selective", action="store_true",
                    help="RDMA: selective repeat at both ends instead of go-back-N (the "
                         "engines' run-time port; docs/recovery.md, 'Selective repeat')")
    ap.add_argument("--only", choices=("nic", "rdma", "ephemeral"), default=None,
                    help="soak one design only")
    ap.add_argument("--ephemeral-messages", type=_positive, default=None,
                    help="ephemeral messages, when not --messages")
    ap.add_argument("--ephemeral-chunk", type=_chunk(EPHEMERAL_TOP["depth"]),
                    default=EPHEMERAL_CHUNK,
                    help=f"ephemeral messages per chunk (1 to {EPHEMERAL_TOP['depth']}, "
                         f"default {EPHEMERAL_CHUNK}; a chunk whose packets overflow the "
                         f"top's {EPHEMERAL_TOP['depth']} fails)")
    ap.add_argument("--ephemeral", action="append", default=[], metavar="NAME=VALUE",
                    help="an ephemeral soak knob (" + ", ".join(
                        f"{k}={v}" for k, v in SOAK_DEFAULTS.items() if k != "entries")
                    + "), repeatable")
    ap.add_argument("--out", default=str(OUT), help="folder of soak.json (build/soak)")
    ap.add_argument("--nic-chunk", type=_chunk(NIC_CHUNK), default=NIC_CHUNK,
                    help=f"NIC stores per node per chunk (1 to {NIC_CHUNK}, default "
                         f"{NIC_CHUNK})")
    ap.add_argument("--nic-switch-drops", type=int, default=0, metavar="K",
                    choices=range(SWITCH_DROPS + 1),
                    help=f"NIC: per-peer retry, and K frames dropped inside the switch at "
                         f"each egress per chunk of stores (0 to {SWITCH_DROPS}; default 0: "
                         f"off; a --mix's loads and atomics run on NicMemTop without them)")
    ap.add_argument("--rdma-chunk", type=_chunk(RDMA_CHUNK), default=RDMA_CHUNK,
                    help=f"RDMA WRITEs per chunk (1 to {RDMA_CHUNK}, default "
                         f"{RDMA_CHUNK})")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("JOBS", "2")),
                    help="jobs at a time: the two designs, or the NIC and the RDMA "
                         "groups (local processes, or Dask workers of --scheduler local; "
                         "default $JOBS or 2)")
    add_cluster_options(ap, "the designs")
    ap.add_argument("--rdma-group", type=_chunk(1 << 30), default=RDMA_GROUP, metavar="N",
                    help=f"RDMA chunks per job (default {RDMA_GROUP}); the groups spread "
                         "the RDMA soak over the --jobs workers or the cluster")
    ap.add_argument("--break-model-chunk", type=int, default=None, metavar="K",
                    help="test hook: feed the model of chunk K a wrong stimulus (the NIC: "
                         "node 0's stall seed; RDMA: MMIO words a cycle late; ephemeral: the "
                         "RTL gets a 32nd of the idle time), so that "
                         "chunk must show mismatches and the soak fail")
    args = ap.parse_args(argv)
    check_cluster_options(ap, args)
    _ephemeral_knobs(ap, args)
    # The retry's signalling is damaged at the rates of the frames by default.
    for name, like in (("tag_rate", "corrupt_rate"), ("ack_drop_rate", "drop_rate"),
                       ("ack_corrupt_rate", "corrupt_rate")):
        if getattr(args, name) is None:
            setattr(args, name, getattr(args, like))
    return args


def _ephemeral_knobs(ap, args):
    """``--ephemeral NAME=VALUE`` into ``args.ephemeral_NAME``, every knob checked against
    the design's assumptions (:func:`tb.soak.ephemeral.knobs_of`): an error naming it."""
    for item in args.ephemeral:
        name, sep, text = item.partition("=")
        if not sep or name not in SOAK_DEFAULTS or name == "entries":
            ap.error(f"--ephemeral {item!r}: want NAME=VALUE with NAME one of "
                     f"{[k for k in SOAK_DEFAULTS if k != 'entries']}")
        try:
            value = type(SOAK_DEFAULTS[name])(text)
        except ValueError:
            ap.error(f"--ephemeral {name}: not a {type(SOAK_DEFAULTS[name]).__name__}: {text}")
        setattr(args, f"ephemeral_{name}", value)
    try:
        knobs_of(args)
    except ValueError as exc:
        ap.error(f"--ephemeral: {exc}")


def run_design(job):
    """One job of a design's soak (:func:`scripts.executor.make_executor`): ``job`` is
    ``(name, args, messages, span)`` (``span``: RDMA chunks ``(first, stop)``, or None
    for all); returns ``(name, figures)`` with the job's wall time."""
    name, args, count, span = job
    sys.path.insert(0, str(ROOT))
    start = time.perf_counter()
    if name == "nic":
        figures = soak_nic(args, count)
        figures.update(writes=figures.get("messages", 0))
    elif name == "nic_mem":
        from tb.soak.nic_mem import soak_nic_mem
        figures = soak_nic_mem(args, count)
    elif name == "ephemeral":
        from tb.soak.ephemeral import soak_ephemeral
        figures = soak_ephemeral(args, count)
    else:
        from tb.soak.rdma import soak_rdma
        figures = soak_rdma(args, count, span)
    figures["wall_s"] = round(time.perf_counter() - start, 1)
    return name, figures


def merge(parts):
    """One design's figures from those of its jobs (in chunk order): counts add up,
    ``per_chunk`` lists join, ``wall_s`` is the jobs' wall time summed;
    ``recovery_cycles_per_damaged_frame`` is derived from the sums."""
    out = {}
    for part in parts:
        for key, value in part.items():
            if key == "per_chunk":
                out[key] = out.get(key, []) + value
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                out[key] = round(out.get(key, 0) + value, 1)
            else:
                out[key] = value
    out["recovery_cycles_per_damaged_frame"] = per_damaged_frame(out)
    return out


def jobs_of(args):
    """The jobs of a soak: the NIC's (one: its chunks carry state), the RDMA engine's
    (one per ``--rdma-group`` chunks, :data:`RDMA_GROUP` by default: its chunks are
    independent); the ephemeral receiver's (one simulation)."""
    rdma = args.messages if args.rdma_messages is None else args.rdma_messages
    jobs = []
    w, r, a = args.mix
    loads = args.messages - args.messages * w // (w + r + a)
    if args.only in (None, "nic") and w:
        jobs.append(("nic", args, args.messages - loads, None))
    if args.only in (None, "nic") and loads:
        jobs.append(("nic_mem", args, loads, None))
    if args.only in (None, "rdma"):
        chunks = math.ceil(rdma / args.rdma_chunk)
        jobs += [("rdma", args, rdma, (first, min(first + args.rdma_group, chunks)))
                 for first in range(0, max(chunks, 1), args.rdma_group)]
    if args.only in (None, "ephemeral"):
        count = args.messages if args.ephemeral_messages is None else args.ephemeral_messages
        jobs.append(("ephemeral", args, count, None))
    return jobs


def main(argv=None):
    args = _args(argv)
    try:
        make_executor(args.jobs, args.scheduler, args.connect_timeout)   # checks the options
    except ExecutorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # By reference, also when this file runs as a script: Dask workers import it.
    from scripts.soak import run_design as job

    t0 = time.perf_counter()
    try:
        with make_executor(args.jobs, args.scheduler, args.connect_timeout) as ex:
            parts = ex.map(job, jobs_of(args))
    except ExecutorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    results = {}
    for name, figures in parts:
        results.setdefault(name, []).append(figures)
    results = {name: merge(figures) for name, figures in results.items()}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    settings = {k: getattr(args, k) for k in ("corrupt_rate", "drop_rate", "dup_rate",
                                                "tag_rate", "ack_drop_rate",
                                                "ack_corrupt_rate", "stall_rate", "seed",
                                                "selective", "nic_switch_drops")}
    settings["mix"] = list(args.mix)
    if "ephemeral" in results:       # its own knobs and fault rates; no recovery cycles
        results["ephemeral"]["knobs"] = knobs_of(args)
        results["ephemeral"].pop("recovery_cycles_per_damaged_frame", None)
    path = out / "soak.json"
    if args.only and path.exists():
        # One design re-soaked: keep the other's figures if they came from the same
        # settings (each design's entry records how many messages it ran).
        old = json.loads(path.read_text())
        if old.get("settings") == settings:
            results = {**{k: v for k, v in old.items() if k != "settings"}, **results}
    path.write_text(json.dumps(dict(results, settings=settings), indent=2))
    print(f"\n{'':<34}" + "".join(f"{d:>14}" for d in results))
    for key in KEYS:
        print(f"{key:<34}" + "".join(f"{results[d].get(key, '-'):>14}" for d in results))
    print(f"\nwrote {path} in {time.perf_counter() - t0:.0f} s")
    failed = failures(results)
    if failed:
        print("FAILED: " + ", ".join(failed))
        return 1
    return 0


def failures(results):
    """The figures of ``results`` (``{design: figures}``) that fail the soak: a must-be-0
    figure that is not, a chunk not compared with the model, a model mismatch."""
    failed = [f"{d}.{k}" for d in results for k in MUST_BE_ZERO if results[d].get(k)]
    for d, r in results.items():
        failed += [f"{d}.{op}_ok ({r[op + '_ok']} of {r[op]})" for op in OPS_CHECKED
                   if op + "_ok" in r and r[op + "_ok"] != r.get(op)]
        if r.get("chunks_compared") != r.get("chunks") or not r.get("chunks"):
            failed.append(f"{d}.chunks_compared ({r.get('chunks_compared')} of "
                          f"{r.get('chunks')} chunks)")
    return failed


if __name__ == "__main__":
    sys.exit(main())
