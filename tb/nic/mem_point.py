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

from pymodel.nic.mem_fanout import MAX_PEERS, NicMemFanoutModel
from rtl.tops.nic_mem_top import NicMemTop
from spec.checks import silence
from spec.fabric_profiles import fabric_profile
from spec.formats.nic_mem import MemOp
from spec.nic_mem import (
    MEM_OPS,
    MEM_TOP_DEFAULTS,
    OP_NAMES,
    TARGET_LEVEL_LATENCY,
    TARGET_LEVEL_READS,
    check_target,
    default_tags,
    tag_entry_bits,
)
from tb.cosim import run_cosim
from tb.nic.headline import comparison_keys

__all__ = ["run_mem_point", "mem_commands", "landing_order", "peak_busy", "model_load_rate",
           "entry_bits_for_peers"]

#: The fields of a command list of :func:`mem_commands` (``mem_cmd_layout``'s, in order).
CMD_FIELDS = ("op", "dst", "addr", "length", "laddr", "a", "b")


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
                  link_retry=False, test_id=None, check_only=False):
    """Co-simulate the point; return its row (``check_only``: check, build nothing, return
    None). ``target_latency`` and ``target_reads``: the targets' memory reads
    (:class:`rtl.nic.mem_responder.MemResponder`; ``target_reads`` None: 2,
    :data:`spec.nic_mem.TARGET_LEVEL_READS`). ``link_retry``: every link of the top a
    :class:`rtl.fabric.reliable_link.ReliableLink` over a wire without faults (NicMemTop
    ``link_retry``; the row's ``reliability`` is ``"link-retry"``). ``ValueError`` names
    a bad parameter."""
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
    if not isinstance(link_retry, bool):
        raise ValueError(f"link_retry must be True or False, not {link_retry!r}")
    params = dict(nodes=peers + 1, framing=framing, fabric=profile.name,
                  tags=default_tags(profile.name), mem_words=mem_words,
                  max_payload=max_payload)
    if target_latency:
        # Only with a latency: the default top's parameters (and its build) as without.
        params.update(target_latency=target_latency, target_reads=reads)
    if link_retry:
        params["link_retry"] = True
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
           "peers": peers, **comparison_keys(framing, fabric=profile.name, retry=link_retry),
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


def entry_bits_for_peers(mem_words, peers):
    """A tag-table entry's bits (:func:`spec.nic_mem.tag_entry_bits`, an 8-bit node
    field) with the node field wide enough to name ``peers`` targets besides the
    requester (ids 0 to ``peers``): as built up to 255, then ``bits(peers)``."""
    return tag_entry_bits(mem_words) + max(0, peers.bit_length() - 8)


def model_load_rate(op, msg_bytes, messages, peers, fabric="pod", framing="l2",
                    target_latency=TARGET_LEVEL_LATENCY, target_reads=TARGET_LEVEL_READS):
    """The NIC's loads (``op`` ``load``, ``msg_bytes`` 1 to the top's max payload) or
    fetch-and-adds (``atomic``) per second from the golden model alone: node 0 issues
    ``messages`` (at least 2) of them as :func:`mem_commands` does, round robin over
    ``peers`` targets (1 to 4,096), each target's memory read in ``target_latency``
    cycles, ``target_reads`` in flight (default: the level field's, as the report's
    co-simulated rows), on ``fabric``'s links, switch hop and credits
    (:class:`pymodel.nic.mem_fanout.NicMemFanoutModel`: what it models and what not;
    up to 15 targets its run is :func:`run_mem_point`'s model side, cycle for cycle).

    Returns ``{"design", "op", "peers", "messages", "msg_bytes", "fabric", "framing",
    "target_latency", "target_reads", "tags", "ii_cycles", "ops_per_s",
    "latency_cycles", "peak_outstanding", "tag_entry_bits", "entry_bits", "cycles"}``:
    cycles per operation between the first and the last landing and its rate at 1 GHz
    (as :func:`run_mem_point`'s ``ii_cycles`` and ``ops_per_s``), the first request's
    issue to its landing, the most tags busy at once, the entry's bits as built (8-bit
    node field) and with its node field naming the peers
    (:func:`entry_bits_for_peers`), the run's cycles. ``ValueError`` names a bad
    parameter; ``AssertionError`` if a response does not land."""
    if op not in OP_NAMES:
        raise ValueError(f"op must be one of {list(OP_NAMES)}, not {op!r}")
    max_payload, mem_words = MEM_TOP_DEFAULTS["max_payload"], MEM_TOP_DEFAULTS["mem_words"]
    if op == "load" and not (isinstance(msg_bytes, int) and 1 <= msg_bytes <= max_payload):
        raise ValueError(f"msg_bytes must be 1 to max_payload ({max_payload}) for op "
                         f"'load', not {msg_bytes!r}")
    if not isinstance(messages, int) or messages < 2:
        raise ValueError(f"messages must be an integer of at least 2 (a rate needs two "
                         f"landings), not {messages!r}")
    if not isinstance(peers, int) or isinstance(peers, bool) or not 1 <= peers <= MAX_PEERS:
        raise ValueError(f"peers must be an integer from 1 to {MAX_PEERS}, not {peers!r}")
    model = NicMemFanoutModel(peers, framing, fabric, mem_words=mem_words,
                              max_payload=max_payload, target_latency=target_latency,
                              target_reads=target_reads)
    cmds = [dict(zip(CMD_FIELDS, c, strict=True))
            for c in mem_commands(op, msg_bytes, messages, peers, mem_words)[0]]
    run = model.run(cmds)
    land = [c for c, *_ in run["rsp"]]
    if len(land) != messages or any(s != 0 for _, _, s, _ in run["rsp"]):
        raise AssertionError(f"{len(land)} responses landed of {messages} operations")
    pairs = landing_order(run["issued"], [{"tag": t} for _, t, _, _ in run["rsp"]])
    first = next(i for i, k in pairs if k == 0)
    ii = (land[-1] - land[0]) / (messages - 1)
    return {"design": "nic", "op": op, "peers": peers, "messages": messages,
            "msg_bytes": msg_bytes if op == "load" else 8, "fabric": model.fabric,
            "framing": framing, "target_latency": target_latency,
            "target_reads": target_reads, "tags": model.tags, "ii_cycles": ii,
            "ops_per_s": 1e9 / ii, "latency_cycles": land[first] - run["cmd_stamps"][0],
            "peak_outstanding": run["peak"], "tag_entry_bits": tag_entry_bits(mem_words),
            "entry_bits": entry_bits_for_peers(mem_words, peers), "cycles": run["cycles"]}
