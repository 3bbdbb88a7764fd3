"""The report's "Loads and atomics" section: the NIC's remote loads and fetch-and-adds
(:mod:`tb.nic.mem_point`, ``NicMemTop``) and the RDMA engine's READs and FETCH & ADDs
(:mod:`tb.rdma.read_point`, ``RdmaTop`` with ``reads``), 128-byte loads and READs, at
the ``board`` and ``pod`` profiles, each point co-simulated (RTL = model) as
``make sim ARGS="--design nic --op load|atomic"`` and ``--design rdma --op
read|atomic`` run it."""

from tb.nic.mem_point import run_mem_point
from tb.rdma.read_point import run_read_point

__all__ = ["PROFILES", "MSG_BYTES", "mem_ops_jobs", "mem_ops_section"]

#: The fabric profiles and the load/READ size of the section (the issue's 128 B point).
PROFILES = ("board", "pod")
MSG_BYTES = 128
#: ``(design, op, runner)`` of each point of a profile.
_POINTS = (("nic", "load", run_mem_point), ("nic", "atomic", run_mem_point),
           ("rdma", "read", run_read_point), ("rdma", "atomic", run_read_point))


def mem_ops_jobs(sim, messages):
    """The section's co-simulations as :func:`scripts.sim.run_jobs` takes them
    (``[(label, function, kwargs)]``), ``messages`` operations each."""
    return [(f"{design} {op} {fabric}", fn,
             dict(sim=sim, op=op, msg_bytes=MSG_BYTES, messages=messages, fabric=fabric))
            for fabric in PROFILES for design, op, fn in _POINTS]


def _num(value, digits=0):
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def mem_ops_section(rows, messages, sim):
    """Markdown of the section from the rows of :func:`mem_ops_jobs`' runs (in their
    order)."""
    lines = [
        "## Loads and atomics",
        "",
        f"{messages} operations back to back from one requester to one target, "
        f"{MSG_BYTES}-byte loads and READs, 8-byte fetch-and-adds, co-simulated on {sim} "
        "(`make sim ARGS=\"--design nic --op load|atomic --fabric <profile>\"`, "
        "`--design rdma --op read|atomic`). NIC: `NicMemTop`, compact header, integrated "
        "attachment, credit completion; latency from the first request's issue to its "
        "response landed (docs/nic.md, Loads and atomics). RDMA: `RdmaTop` with the "
        "requester's READs (16 slots, ORD 16), one QP, `pcie` host; latency from the "
        "doorbell taken to the first CQE in host memory (docs/rdma.md, RDMA READ and "
        "atomics at the requester). ii: cycles per operation between the first and the "
        "last completion. State: the requester's bits per outstanding operation (a "
        "tag-table entry; a slot of the response intake). **Not a level-field comparison "
        "yet**: the NIC's rows are integrated and cross the switch, the engine's are behind "
        "PCIe on `RdmaTop`'s direct link, and the engine's responder keeps few host reads "
        "in flight; read the rows per design, not the gap between them.",
        "",
        "| design | op | fabric | latency (cycles) | ii (cycles) | operations/s "
        "| state per outstanding op (bits) | RTL/model mismatches |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        bits = row.get("tag_entry_bits", row.get("read_op_bits"))
        ops = row.get("ops_per_s_rtl")
        lines.append(
            f"| {row['design']} | {row['op']} | {row['fabric']} "
            f"| {_num(row.get('latency_cycles_rtl'))} | {_num(row.get('ii_cycles_rtl'), 1)} "
            f"| {_num(ops / 1e6 if ops else None, 2)} M | {_num(bits)} "
            f"| {row['mismatches']} |")
    return "\n".join(lines)
