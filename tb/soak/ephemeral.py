"""Soak of the ephemeral receiver: genuine traffic of go-back-N senders through a lossy path
(:mod:`analysis.scenarios.soak_ephemeral`) into :class:`rtl.tops.ephemeral_receiver_top.
EphemeralReceiverTop`, in chunks, every chunk compared with the twin
(:mod:`tb.soak.cocotb_ephemeral_soak`). Used by ``scripts/soak.py --only ephemeral``.

One simulation runs every chunk (a reset between them); its chunks' lines (a JSON file)
are read as they appear for the progress and summed into the soak's figures: messages,
``recovered`` (packets and ACKs the path dropped, duplicated or sent late, all of which the
senders and the receiver then got past), ``lost`` and ``duplicates_delivered`` (must be 0),
``hangs``, ``retransmissions`` (go-back-N's packets sent again), ``chunks``,
``chunks_compared``, ``mismatches`` and the receiver's outcomes. A chunk whose line never
appears counts as not compared, its messages as lost.
"""

import json
import math
import os
import threading
import time
from pathlib import Path

from analysis.scenarios.soak_ephemeral import SOAK_DEFAULTS, check_soak
from spec.ephemeral import RECV_OUTCOMES

__all__ = ["CHUNK", "TOP", "check_params", "soak_ephemeral", "knobs_of"]

#: The top: the one ``make test`` co-simulates (tests/test_unit_ephemeral_receiver.py)
#: and ``make fuzz`` uses (tb.fuzz_runner.EPHEMERAL_FUZZ_TOP): 8 contexts, 2,048 packets.
TOP = {"entries": 8, "depth": 2048}
#: Messages per chunk: with the default rates a chunk of 1,500 messages is about 1,750
#: packets (resends, copies, CLOSEs; ``soak_chunk(1, k, 1500)``), within the top's 2,048.
CHUNK = 1500


def check_params(params):
    """The cocotb module's parameters (tb.cosim_params): ``ValueError`` names a bad one."""
    accepted = {"seed", "chunks", "knobs", "depth", "out", "token", "break_chunk"}
    unknown = sorted(set(params) - accepted)
    if unknown:
        raise ValueError(f"tb.soak.cocotb_ephemeral_soak: unknown parameter(s) {unknown}")
    check_soak(dict(SOAK_DEFAULTS, **params.get("knobs", {})))
    chunks = params.get("chunks", [])
    if not chunks or any(len(c) != 2 or c[1] < 1 for c in chunks):
        raise ValueError("chunks must be [[index, messages], ...] with messages at least 1, "
                         f"not {chunks!r}")


def knobs_of(args):
    """The soak's knobs from ``scripts/soak.py``'s options (``--ephemeral-*``), checked:
    ``ValueError`` names a bad one (before any simulation)."""
    knobs = dict(SOAK_DEFAULTS, entries=TOP["entries"])
    for name in SOAK_DEFAULTS:
        value = getattr(args, f"ephemeral_{name}", None)
        if value is not None:
            knobs[name] = value
    if knobs["entries"] != TOP["entries"]:
        raise ValueError(f"entries must be the top's {TOP['entries']}, not "
                         f"{knobs['entries']}")
    return check_soak(knobs)


def soak_ephemeral(args, messages):
    """Run ``messages`` messages in chunks of ``args.ephemeral_chunk`` (default
    :data:`CHUNK`); returns the soak figures (scripts/soak.py)."""
    from rtl.tops.ephemeral_receiver_top import EphemeralReceiverTop
    from tb.cosim import BUILD, CosimFailure, run_cosim

    knobs = knobs_of(args)
    size = getattr(args, "ephemeral_chunk", None) or CHUNK
    chunks = [[k, min(size, messages - k * size)] for k in range(math.ceil(messages / size))]
    token = f"{os.getpid()}-{time.time_ns()}"
    out = Path(getattr(args, "out", BUILD / "soak")).resolve() / "soak_ephemeral_chunks.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    sim = getattr(args, "ephemeral_sim", None) or "verilator"
    hook = getattr(args, "break_model_chunk", None)
    print(f"ephemeral: {messages} messages of {knobs['sources']} senders in {len(chunks)} "
          f"chunks into a receiver of {knobs['entries']} contexts, each compared with the "
          f"twin ({sim})", flush=True)
    t0 = time.perf_counter()
    stop = threading.Event()
    seen = []
    thread = threading.Thread(target=_progress, args=(out, len(chunks), seen, stop, t0),
                              daemon=True)
    thread.start()
    failed = None
    try:
        run_cosim(EphemeralReceiverTop(**TOP), name=f"ephemeral_receiver_{TOP['entries']}",
                  test_module="tb.soak.cocotb_ephemeral_soak", sim=sim,
                  test_id=f"soak_seed{args.seed}",
                  params=dict(seed=args.seed, chunks=chunks, knobs=knobs,
                              depth=TOP["depth"], out=str(out), token=token,
                              break_chunk=hook))
    except CosimFailure as exc:
        failed = str(exc)
        print(f"ephemeral: FAILED ({exc})", flush=True)
    stop.set()
    thread.join()
    records = [r for r in _lines(out) if r.get("token") == token]
    return summarise(records, chunks, failed)


def summarise(records, chunks, failed=None):
    """The soak figures of the chunks' ``records`` (the cocotb module's lines) for the
    planned ``chunks`` (``[[index, messages], ...]``); a planned chunk without a record
    counts as not compared, its messages lost, a hang."""
    done = {r["chunk"] for r in records}
    missing = [c for c in chunks if c[0] not in done]
    fig = dict(messages=0, recovered=0, lost=sum(n for _, n in missing), corrupted_bytes=0,
               duplicates_delivered=0, hangs=len(missing), retransmissions=0,
               chunks=len(chunks), chunks_compared=0, mismatches=0, violations=0,
               dropped=0, duplicated=0, late_copies=0, acks_dropped=0, idle_closes=0,
               closes=0, packets=0, cycles=0,
               by_outcome=dict.fromkeys(RECV_OUTCOMES, 0), per_chunk=[])
    for r in records:
        fig["messages"] += r["messages"]
        fig["lost"] += r.get("lost", r["messages"])
        fig["duplicates_delivered"] += r.get("duplicates_delivered", 0)
        fig["hangs"] += int(bool(r.get("hang")))
        fig["retransmissions"] += r.get("resent", 0)
        fig["chunks_compared"] += int(r["compared"])
        fig["mismatches"] += r["mismatches"]
        fig["violations"] += len(r["violations"])
        for key in ("dropped", "duplicated", "late_copies", "acks_dropped", "idle_closes",
                    "closes", "packets", "cycles"):
            fig[key] += r.get(key, 0)
        for name, n in r["by_outcome"].items():
            fig["by_outcome"][name] += n
        fig["per_chunk"].append(dict(chunk=r["chunk"], messages=r["messages"],
                                     compared=r["compared"], mismatches=r["mismatches"],
                                     recovered=_recovered(r), lost=r.get("lost"),
                                     violations=r["violations"][:3]))
    fig["recovered"] = sum(_recovered(r) for r in records)
    if failed and not records:
        fig["failure"] = failed
    return fig


def _recovered(r):
    return sum(r.get(k, 0) for k in ("dropped", "duplicated", "late_copies", "acks_dropped"))


def _lines(path):
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            break                        # being written: read it next time
    return out


def _progress(path, total, seen, stop, t0):
    """Print a line per chunk as its record appears."""
    while True:
        finished = stop.wait(2.0)
        for r in _lines(path)[len(seen):]:
            seen.append(r)
            el = time.perf_counter() - t0
            print(f"  ephemeral chunk {len(seen)}/{total}: {r['messages']} messages, "
                  f"{_recovered(r)} faults recovered, {r.get('lost')} lost, "
                  f"{r['mismatches']} mismatches, {len(r['violations'])} violations "
                  f"({el:.0f} s, about {el / len(seen) * (total - len(seen)):.0f} s left)",
                  flush=True)
        if finished:
            return
