"""The report's "Loads and atomics" section: the NIC's remote loads and fetch-and-adds
(:mod:`tb.nic.mem_point`, ``NicMemTop``, L2 framing) and the RDMA engine's READs and
FETCH & ADDs (:mod:`tb.rdma.read_point`, two nodes of ``RdmaFabricTop`` with ``reads``,
``on_die`` host) on a level field: the same fabric profile (links, switch hop, credits),
the integrated attachment, no link-level retry, an Ethernet-class header and the same
completion (the answer in the requester's memory, the requester told); loads and READs
of 64, 128 and 256 bytes, at ``board`` and ``pod``, each point co-simulated (RTL =
model) as ``make sim ARGS="--design nic --op load|atomic --framing l2"`` and
``--design rdma --op read|atomic`` run it, the NIC's targets reading their memory in the
engine's ``on_die`` host read latency (``--target-latency``). Each pair of rows is
checked level by its level-field keys (:func:`spec.metrics.level_keys`), and the section
says which are."""

from spec.metrics import level_keys
from spec.nic_mem import (
    MEM_TOP_DEFAULTS,
    TARGET_LEVEL_LATENCY,
    TARGET_LEVEL_READS,
    tag_entry_bits,
)
from spec.rdma_read_req import slot_bits
from spec.rdma_responder import ATOMIC_QPS, IRD, saved_atomic_bits
from tb.nic.mem_point import entry_bits_for_peers, model_load_rate, run_mem_point
from tb.rdma.read_point import READ_DEPTH, READ_TOP, model_read_rate, run_read_point

__all__ = ["PROFILES", "SIZES", "NIC_FRAMING", "RATE_QPS", "mem_ops_jobs", "rate_jobs",
           "nic_rate_jobs", "mem_ops_section", "state_lines", "rate_lines"]

#: The fabric profiles and the load/READ sizes of the section (the issue's 64, 128 and
#: 256-byte points; 256 is the NIC's largest load payload, MEM_TOP_DEFAULTS).
PROFILES = ("board", "pod")
SIZES = (64, 128, 256)
#: The NIC's framing of the section: L2, the Ethernet header class of the engine's RoCEv2
#: (spec.metrics.HEADER_CLASSES), so that the header is level too.
NIC_FRAMING = "l2"
#: The QPs of the engine's READ rates (the issue's 1 to 4,096), golden model alone, at
#: ``pod``, 128-byte READs, at least 1,024 of them and one per QP.
RATE_QPS = (1, 64, 1024, 4096)
#: The NIC's ops of its rates over peers (loads of 128 bytes, 8-byte fetch-and-adds).
RATE_NIC_OPS = (("load", 128), ("atomic", 8))


def nic_rate_messages(peers):
    """Operations of a NIC rate run: 1,024 toward one peer (its target's reads bind from
    the first), else 4,096, four times ``pod``'s 1,024 tags, so that a run does not fit
    in the tags as a burst and the tag table's steady state shows."""
    return 1024 if peers == 1 else max(4096, peers)
#: Each design's op of a pair: (NIC op, engine op).
_PAIRS = (("load", "read"), ("atomic", "atomic"))


def mem_ops_jobs(sim, messages):
    """The section's co-simulations as :func:`scripts.sim.run_jobs` takes them
    (``[(label, function, kwargs)]``), ``messages`` operations each: per profile, each
    size's load and READ, then one fetch-and-add and one FETCH & ADD point."""
    jobs = []
    for fabric in PROFILES:
        for nic_op, rdma_op in _PAIRS:
            for size in (SIZES if nic_op == "load" else (8,)):
                common = dict(sim=sim, msg_bytes=size, messages=messages, fabric=fabric)
                jobs.append((f"nic {nic_op} {size} B {fabric}", run_mem_point,
                             dict(common, op=nic_op, framing=NIC_FRAMING,
                                  target_latency=TARGET_LEVEL_LATENCY)))
                jobs.append((f"rdma {rdma_op} {size} B {fabric}", run_read_point,
                             dict(common, op=rdma_op)))
    return jobs


def rate_jobs():
    """The engine's READ rates over :data:`RATE_QPS` (:func:`tb.rdma.read_point.
    model_read_rate`, the model alone) as :func:`scripts.sim.run_jobs` takes them."""
    return [(f"rdma read rate {q} QPs pod (model)", model_read_rate,
             dict(op="read", msg_bytes=128, messages=max(1024, q), qps=q, fabric="pod"))
            for q in RATE_QPS]


def nic_rate_jobs():
    """The NIC's load and fetch-and-add rates over :data:`RATE_QPS` peers, round robin, at
    ``pod`` (:func:`tb.nic.mem_point.model_load_rate`, the model alone: L2 framing, the
    level field's target memory as the co-simulated rows), as :func:`scripts.sim.
    run_jobs` takes them."""
    return [(f"nic {op} rate {p} peers pod (model)", model_load_rate,
             dict(op=op, msg_bytes=size, messages=nic_rate_messages(p), peers=p, fabric="pod",
                  framing=NIC_FRAMING))
            for op, size in RATE_NIC_OPS for p in RATE_QPS]


def rate_lines(rates):
    """The rate table of the results of :func:`rate_jobs` and :func:`nic_rate_jobs`
    (a result with ``peers`` is the NIC's), NIC rows first: operations a second and the
    requester's bits per outstanding operation at a 16-bit word address (the NIC's entry
    with its node field naming the peers, :func:`tb.nic.mem_point.entry_bits_for_peers`;
    the engine's intake slot, :func:`spec.rdma_read_req.slot_bits`)."""
    eng = slot_bits(READ_DEPTH, READ_TOP["reads"])
    out = ["| design | op | peers / QPs | nodes answering | operations | ii (cycles) "
           "| operations/s | bits per outstanding op | tags busy at most |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rates, key=lambda r: "peers" not in r):
        nic = "peers" in r
        n = r["peers"] if nic else r["qps"]
        bits = entry_bits_for_peers(READ_DEPTH, n) if nic else eng
        out.append(f"| {'nic' if nic else 'rdma'} | {r.get('op', 'read')} | {n:,} "
                   f"| {n if nic else 1:,} | {r['messages']:,} | {_num(r['ii_cycles'], 1)} "
                   f"| {_num(r['ops_per_s'] / 1e6, 2)} M | {bits} "
                   f"| {_num(r.get('peak_outstanding'))} |")
    return out


def _num(value, digits=0):
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def _level(row, other):
    """``"yes"`` when the two rows' level-field keys agree, else the keys that differ."""
    if other is None:
        return "-"
    try:
        a, b = level_keys(row), level_keys(other)
    except ValueError as error:
        return f"no ({error})"
    diff = sorted(k for k in {**a, **b} if a.get(k) != b.get(k))
    return "yes" if not diff else "no: " + ", ".join(diff)


def state_lines():
    """The state-per-read table: each design's requester bits per outstanding read as
    built in the section's tops, and at one address width (a 16-bit word address, the
    engine's host memory of :data:`tb.rdma.read_point.READ_DEPTH` words)."""
    mem_words = MEM_TOP_DEFAULTS["mem_words"]
    width = (READ_DEPTH - 1).bit_length()
    nic_built, nic_wide = tag_entry_bits(mem_words), tag_entry_bits(READ_DEPTH)
    eng = slot_bits(READ_DEPTH, READ_TOP["reads"])
    return [
        "| design | what the requester keeps per read in flight | bits as built "
        f"| bits at a {width}-bit word address |",
        "|---|---|---|---|",
        f"| nic | a tag-table entry (`spec.nic_mem.tag_entry_bits`; NicMemTop's {mem_words}-word "
        f"memory) | {nic_built} | {nic_wide} |",
        f"| rdma | a slot of the response intake and its row of the age matrix "
        f"(`spec.rdma_read_req.slot_bits`, {READ_TOP['reads']} slots), plus the READ's "
        f"window record (not counted) | {eng} | {eng} |",
    ]


def mem_ops_section(rows, messages, sim, rates=()):
    """Markdown of the section from the rows of :func:`mem_ops_jobs`' runs (in their
    order: each NIC row followed by the engine's row of the same op, size and
    profile) and the results of :func:`rate_jobs` (``rates``)."""
    lines = [
        "## Loads and atomics",
        "",
        f"{messages} operations back to back from one requester to one target, loads and "
        "READs of 64, 128 and 256 bytes, 8-byte fetch-and-adds, co-simulated on "
        f"{sim}. NIC: `make sim ARGS=\"--design nic --op load|atomic --framing l2 "
        f"--msg-bytes <n> --fabric <profile> --target-latency {TARGET_LEVEL_LATENCY}\"` "
        "(`NicMemTop`, its target's memory on the accelerator's die read in "
        f"{TARGET_LEVEL_LATENCY} cycles, the engine's `on_die` host read, "
        f"{TARGET_LEVEL_READS} reads in flight, what the engine's responder keeps in flight "
        "at its host, an atomic fencing them as the engine's does; latency from the first "
        "request's issue to its response landed, docs/nic.md, Loads and atomics). RDMA: "
        "`make sim ARGS=\"--design rdma --op "
        "read|atomic --msg-bytes <n> --fabric <profile>\"` (two nodes of `RdmaFabricTop` "
        "with the requester's READs, 16 slots, ORD 16, one QP, `on_die` host; latency from "
        "the doorbell taken to the first CQE in host memory, docs/rdma.md, RDMA READ and "
        "atomics at the requester). Level field: the same fabric profile (links, switch "
        "hop, credits), integrated attachment, no link-level retry, an Ethernet-class "
        "header (NIC L2, engine RoCEv2), completion when the answer is in the "
        "requester's memory and the requester is told (`answer-landed`), the same read "
        "latency of the memory that answers (`target_latency`); the `level` "
        "column compares each pair's level-field keys (`spec.metrics.level_keys`). ii: "
        "cycles per operation between the first and the last completion. State: the "
        "requester's bits per outstanding operation. In flight at the rate: Little's law, "
        "operations/s x latency (latency / ii), what the row's rate needs outstanding (the "
        "NIC's tags or the engine's ORD of 16 limit the rate only when it exceeds them); "
        "times the state, the requester's bits that rate keeps busy.",
        "",
        "| design | op | bytes | fabric | latency (cycles) | ii (cycles) | operations/s "
        "| state per outstanding op (bits) | in flight at the rate | their bits "
        "| level with the other design | RTL/model mismatches |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for k, row in enumerate(rows):
        other = rows[k + 1] if k % 2 == 0 and k + 1 < len(rows) else (
            rows[k - 1] if k % 2 else None)
        bits = row.get("tag_entry_bits", row.get("read_op_bits"))
        ops = row.get("ops_per_s_rtl")
        lat, ii = row.get("latency_cycles_rtl"), row.get("ii_cycles_rtl")
        flight = lat / ii if lat is not None and ii else None
        lines.append(
            f"| {row['design']} | {row['op']} | {row.get('msg_bytes', '-')} "
            f"| {row['fabric']} | {_num(row.get('latency_cycles_rtl'))} "
            f"| {_num(row.get('ii_cycles_rtl'), 1)} "
            f"| {_num(ops / 1e6 if ops else None, 2)} M | {_num(bits)} "
            f"| {_num(flight, 1)} | {_num(flight * bits if flight and bits else None)} "
            f"| {_level(row, other)} | {row['mismatches']} |")
    lines += ["", "Requester state per read in flight:", "", *state_lines()]
    lines += ["", f"Responder state besides: the engine's node B keeps each QP's saved atomic "
              f"results, {IRD} of them, to answer a repeated atomic without executing it "
              f"again (IBTA's responder resources; `spec.rdma_responder.saved_atomic_bits`): "
              f"{saved_atomic_bits():,} bits per QP, {saved_atomic_bits() * ATOMIC_QPS:,} "
              f"for its {ATOMIC_QPS:,} QPs. The NIC's target keeps none: the NIC never "
              f"resends a load or atomic end to end, and link retry (NicMemTop's "
              f"`link_retry`) delivers each request once, so no atomic arrives twice."]
    if rates:
        lines += ["", "Rates over peers and QPs at `pod`, the golden model alone, operations "
                  "back to back. NIC: node 0's 128-byte loads and fetch-and-adds round robin "
                  "over N targets, each a node of its own with the co-simulated rows' target "
                  "memory (`tb.nic.mem_point.model_load_rate`, `pymodel.nic.mem_fanout`: the "
                  "top's twins stepped as in `NicMemTop`'s model, which it equals cycle for "
                  "cycle up to 15 targets, tests/test_nic_mem_fanout.py; beyond 255 targets "
                  "the model's 8-bit node ids repeat, and the bits column widens the "
                  "entry's node field to name them). Engine: 128-byte READs round robin over "
                  "N QPs, all to the one responder node of the two-node top "
                  "(`tb.rdma.read_point.model_read_rate`; the same scenario as the "
                  "co-simulated points, all READs posted before their doorbells, 16 intake "
                  "slots shared by all QPs, 16 context-cache entries): the NIC's rows at more "
                  "than one peer have more memories answering than the engine's, so only "
                  "the rows at one peer and one QP are level. Bits per outstanding op at a "
                  "16-bit word address.", "", *rate_lines(rates)]
    lines += ["", "Not run: the NIC's loads over more than 15 peers co-simulated "
              "(`NicMemTop` has at most 16 nodes; its rates above are the model's), and "
              "the engine's READs toward more than one responder node."]
    return "\n".join(lines)
