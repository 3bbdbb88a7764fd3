"""Soak of the NIC's link-level retry: node stores over faulty links, in chunks on one
Verilator simulation of :class:`rtl.tops.nic_top.NicTop` (``retry``, compact framing, 4
nodes, ``-O2``) by ``tb.soak.cocotb_nic_soak``, every chunk compared with the golden model
(the module docstring of scripts/soak.py says how). With ``--nic-switch-drops K`` the top
also has the per-peer retry (``completion="e2e"``, ``peer_retry``, a window of
:data:`SOAK_WINDOW` slots) and ``switch_faults``: each chunk the switch drops ``K``
frames at each egress, recovered end to end. Used by ``scripts/soak.py``."""

import json
import math
import os
import time
from pathlib import Path

from pymodel.fabric.faulty_link import rate_per_65535

__all__ = ["NIC_CHUNK", "NIC_EVENTS", "SOAK_WINDOW", "soak_nic"]

#: NIC stores per node per chunk at most (the players' depth), and the depth of each
#: node's recorders (memory writes of a chunk).
NIC_CHUNK = 4096
NIC_EVENTS = 16384
#: The per-peer retry's window (slots) of the soak's top with ``--nic-switch-drops``.
SOAK_WINDOW = 64


def soak_nic(args, messages):
    """The NIC's figures of a soak of ``messages`` stores with the options ``args`` (of
    scripts/soak.py): this run's ``soak_nic.json``, or all lost when the run left none."""
    from rtl.tops.nic_top import NicTop
    from tb.cosim import CosimFailure, run_cosim

    top = dict(width=64, nodes=4, link_latency=2, mem_words=256, max_payload=256)
    per_chunk = args.nic_chunk
    chunks = max(math.ceil((messages - 4 * 64) / (4 * per_chunk)), 0)
    # One build for every chunk size: players of NIC_CHUNK stores per node (up to 4 beats
    # each), recorders deep enough for every memory write of a chunk (about 2.3 words per
    # store, from 3 senders); a chunk whose writes do not fit counts as a mismatch.
    drops = getattr(args, "nic_switch_drops", 0)
    pr = dict(completion="e2e", peer_retry=True, peer_window=SOAK_WINDOW,
              switch_faults=True) if drops else {}
    design = NicTop(framing="compact", items=NIC_CHUNK * 4, events=NIC_EVENTS, retry=True,
                    **top, **pr)
    token = _token()
    extra = dict(switch_drops=drops, peer_window=SOAK_WINDOW, coalesce=design.coalesce,
                 flush_idle=design.flush_idle, timeout=design.timeout) if drops else {}
    params = dict(top, **extra, framing="compact", credits=design.credits, seed=args.seed,
                  model_stores=64, per_chunk=per_chunk, chunks=chunks, token=token,
                  break_model_chunk=args.break_model_chunk,
                  corrupt_rate=rate_per_65535(args.corrupt_rate),
                  drop_rate=rate_per_65535(args.drop_rate),
                  dup_rate=rate_per_65535(args.dup_rate), stall_rate=args.stall_rate,
                  **{k: rate_per_65535(getattr(args, k))
                     for k in ("tag_rate", "ack_drop_rate", "ack_corrupt_rate")})
    print(f"nic: {4 * (64 + chunks * per_chunk)} stores in {chunks + 1} chunks, each "
          "compared with the model (Verilator -O2; progress in the simulator's log)",
          flush=True)
    test_id = f"seed{args.seed}"
    name = "nic_soak_top_pr" if drops else "nic_soak_top"
    try:
        run = run_cosim(design, name=name, test_module="tb.soak.cocotb_nic_soak",
                        sim="verilator", test_id=test_id, params=params, opt="-O2")
        paths = [Path(run) / "soak_nic.json"]
    except CosimFailure as exc:          # the figures say why (mismatches, lost, hangs)
        print(f"nic: FAILED ({exc})", flush=True)
        from tb.cosim import BUILD
        paths = sorted(BUILD.glob(f"cosim/verilator/{name}-*/{test_id}/soak_nic.json"))
    for path in paths:
        out = json.loads(path.read_text())
        if out.get("token") == token:    # this run's, not an older one's
            return out
    # No figures at all (a crash): nothing was compared, everything counts as lost.
    return dict(messages=0, lost=4 * (64 + chunks * per_chunk), corrupted_bytes=0, hangs=1,
                chunks=chunks + 1, chunks_compared=0, mismatches=0, per_chunk=[])


def _token():
    """A mark that tells this run's figures from an older run's in the same folder."""
    return f"{os.getpid()}-{time.time_ns()}"
