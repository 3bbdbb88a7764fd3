"""Shared pieces of the "Inference" section (:mod:`scripts.reporting.inference`): the
designs it shows, the markdown table format and the picks of grid rows."""

from analysis.workloads.grid import PAIRING, PAIRINGS, fastest_rdma
from spec.rdma_engine import LADDER

#: The designs the tables and plots compare: ``(grid key, label)``.
#: ``rdma fastest`` is, per (pairing, scenario, batch), the covered rung with the least
#: communication time (:func:`analysis.workloads.grid.fastest_rdma`; its ``rung`` names it).
FASTEST = "rdma fastest"
SHOWN = (("nic", "NIC"), (f"rdma {LADDER[1][0]}", "RDMA pipelined"),
         (FASTEST, "RDMA fastest"))
_STYLE = {"nic": "-", f"rdma {LADDER[1][0]}": "--", FASTEST: ":"}


def _fmt(v, digits=2):
    if isinstance(v, str):
        return v
    if isinstance(v, int) or abs(v) >= 100:
        return f"{int(round(v)):,}"
    return f"{v:,.{digits}f}"


def _table(head, rows):
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_fmt(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)




def _fastest_rows(grid, scenarios, batches):
    """One ``rdma fastest`` row per (pairing, scenario, batch): a copy of the fastest
    covered rung's row with ``rung`` naming it (none where no rung covers the step)."""
    out = []
    for pairing in PAIRINGS:
        for sc in scenarios:
            for b in batches:
                r = fastest_rdma(grid, sc.label, b, pairing)
                if r is not None:
                    rung = r["design"][len("rdma "):] if r["messages"] else "-"
                    out.append(dict(r, design=FASTEST, rung=rung))
    return out


def _pick(grid, label, batch, design, pairing=PAIRING):
    """The grid row of (pairing, scenario, batch, design); ``None`` where the fast path
    did not cover it."""
    row = next((r for r in grid if r["scenario"] == label and r["batch"] == batch
                and r["design"] == design and r.get("pairing", PAIRING) == pairing), None)
    return row if row is not None and row.get("covered", True) else None


def _v(row, key, scale=1.0):
    return "n/c" if row is None else row[key] * scale
