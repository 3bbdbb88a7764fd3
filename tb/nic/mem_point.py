"""One `make sim` point of the NIC's memory operations (``--op load`` or ``--op
atomic``): node 0 issues ``messages`` loads of ``msg_bytes`` (or 8-byte fetch-and-adds)
round robin to ``peers`` nodes of a :class:`rtl.tops.nic_mem_top.NicMemTop`, in
co-simulation with its model (:mod:`tb.nic.cocotb_nic_mem`), and returns the results row.

Row keys: the NIC's comparison keys (:func:`tb.nic.headline.comparison_keys`; a load or
atomic completes end to end when its response lands: ``completion`` ``e2e``,
``completion_at`` ``answer-landed``, :data:`spec.metrics.COMPLETION_AT`) and ``op``;
per side (``_rtl``, ``_model``): ``latency_cycles`` (cycles from the first request's
issue, its tag taken, to its response landed, its tag freed: it meets an idle NIC and
fabric), ``burst_latency_cycles`` (the median over all ``messages``, issued back
to back: the queueing behind the responses' link is in it), ``ii_cycles``
(cycles per operation between the first and the last landing), ``ops_per_s`` (at the
1 GHz clock of SPEC.md, Units), ``peak_outstanding`` (tags busy at once) and
``inflight_bits`` (those tags' entry bits); ``tags``, ``tag_entry_bits``
(:func:`spec.nic_mem.tag_entry_bits`) and ``mismatches`` (the co-simulation's, and
each metric whose RTL and model values differ).
"""

import json
import statistics
from pathlib import Path

from rtl.tops.nic_mem_top import NicMemTop
from spec.checks import silence
from spec.fabric_profiles import fabric_profile
from spec.formats.nic_mem import MemOp
from spec.nic_mem import (
    MEM_OPS,
    MEM_TOP_DEFAULTS,
    OP_NAMES,
    TARGET_LEVEL_READS,
    check_target,
    default_tags,
    tag_entry_bits,
)
from tb.cosim import run_cosim
from tb.nic.headline import comparison_keys

__all__ = ["run_mem_point", "mem_commands", "landing_order", "peak_busy"]


def mem_commands(op, msg_bytes, messages, peers, mem_words):
    """Node 0's commands: target ``1 + k % peers``, target addresses and landing
    addresses stepping through the memories (wrapping)."""
    size = mem_words * 64
    words = -(-msg_bytes // 64) if op == "load" else 1
    cmds = []
    for k in range(messages):
        at = (64 * words * k) % (size - 64 * words + 64)
        if op == "load":
            cmds.append([MemOp.LOAD.value, 1 + k % peers, at, msg_bytes, at, 0, 0])
        else:
            cmds.append([MemOp.FETCH_ADD.value, 1 + k % peers, 8 * (k % 8), 0, at, 1, 0])
    return {0: cmds}


def run_mem_point(sim, op, msg_bytes, messages, peers=1, framing="compact",
                  fabric="board", max_payload=None, target_latency=0, target_reads=None,
                  test_id=None, check_only=False):
    """Co-simulate the point; return its row (``check_only``: check, build nothing, return
    None). ``target_latency`` and ``target_reads``: the targets' memory reads
    (:class:`rtl.nic.mem_responder.MemResponder`; ``target_reads`` None: 2,
    :data:`spec.nic_mem.TARGET_LEVEL_READS`). ``ValueError`` names a bad parameter."""
    if op not in OP_NAMES:
        raise ValueError(f"op must be one of {list(MEM_OPS)} (write: the store points), "
                         f"not {op!r}")
    profile = fabric_profile(fabric)
    max_payload = MEM_TOP_DEFAULTS["max_payload"] if max_payload is None else max_payload
    if op == "load" and not 1 <= msg_bytes <= max_payload:
        raise ValueError(f"msg_bytes must be 1 to max_payload ({max_payload}) for op "
                         f"'load' (a load is one response frame), not {msg_bytes}")
    if not 1 <= peers <= 15:
        raise ValueError(f"peers must be 1 to 15 for the RTL top (16 nodes), not {peers}")
    if messages > 1024:
        raise ValueError(f"messages must be at most 1024 for op {op!r} (the command "
                         f"player's depth), not {messages}")
    mem_words = MEM_TOP_DEFAULTS["mem_words"]
    reads = TARGET_LEVEL_READS if target_reads is None else target_reads
    check_target(target_latency, reads)
    params = dict(nodes=peers + 1, framing=framing, fabric=profile.name,
                  tags=default_tags(profile.name), mem_words=mem_words,
                  max_payload=max_payload)
    if target_latency:
        # Only with a latency: the default top's parameters (and its build) as without.
        params.update(target_latency=target_latency, target_reads=reads)
    # Recorder depth: every uplink beat of a node, a response of ``max_payload`` bytes
    # being its payload's beats and at most two more (header, tail), per operation.
    events = (-(-max_payload // 64) + 2) * messages + 64
    top = NicMemTop(**params, items=1024, raws=1, events=events)
    if check_only:
        silence(top)
        return None
    cmds = mem_commands(op, msg_bytes, messages, peers, mem_words)
    run_dir = run_cosim(top, name="nic_mem_top", test_module="tb.nic.cocotb_nic_mem",
                        sim=sim, test_id=test_id or f"{op}-{peers}-{messages}x{msg_bytes}",
                        params=dict(params, cmds=cmds, raws={}, mem_seed=1))
    res = json.loads((Path(run_dir) / "nic_mem_results.json").read_text())
    nd = res["nodes"]["0"]
    entry = tag_entry_bits(mem_words)
    row = {"design": "nic", "op": op, "framing": framing, "simulator": sim,
           "msg_bytes": msg_bytes if op == "load" else 8, "messages": messages,
           "peers": peers, **comparison_keys(framing, fabric=profile.name),
           "completion": "e2e", "completion_at": "answer-landed",
           "tags": params["tags"], "tag_entry_bits": entry,
           "target_latency": target_latency, "target_reads": reads if target_latency else 0}
    pairs = landing_order(nd["issued"], nd["landed"])
    for side, issue, land in (("rtl", nd["cmd_rtl"], nd["rsp_rtl"]),
                              ("model", nd["cmd"], nd["rsp"])):
        ii = (land[-1] - land[0]) / (len(land) - 1) if len(land) > 1 else None
        lat = {k: land[i] - issue[k] for i, k in pairs}
        row[f"latency_cycles_{side}"] = lat[0]
        row[f"burst_latency_cycles_{side}"] = statistics.median(lat.values())
        row[f"ii_cycles_{side}"] = ii
        row[f"ops_per_s_{side}"] = 1e9 / ii if ii else None
        peak = peak_busy(issue, land, pairs)
        row[f"peak_outstanding_{side}"] = peak
        row[f"inflight_bits_{side}"] = peak * entry
    row["mismatches"] = res["mismatches"] + sum(
        row[f"{k}_rtl"] != row[f"{k}_model"]
        for k in ("latency_cycles", "burst_latency_cycles", "ii_cycles", "peak_outstanding"))
    return row


def peak_busy(issue, land, pairs):
    """Most tags busy at once: a tag is busy from the cycle after its request's issue to
    its response's landing cycle (spec: rtl.nic.tag_table.TagTable, Timing)."""
    events = sorted([(issue[k] + 1, 1) for _, k in pairs] + [(land[i] + 1, -1)
                                                             for i, _ in pairs])
    peak = now = 0
    for _, d in events:
        now += d
        peak = max(peak, now)
    return peak


def landing_order(issued, landed):
    """``[(landing index, request index)]``: each landed response (``landed``, in landing
    order, with its tag) belongs to the oldest request of its tag not yet answered
    (``issued``: the request frames in order, ``(tag, dst, op)``)."""
    open_, out = {}, []
    for k, (tag, _, _) in enumerate(issued):
        open_.setdefault(tag, []).append(k)
    for i, ev in enumerate(landed):
        out.append((i, open_[ev["tag"]].pop(0)))
    return out
