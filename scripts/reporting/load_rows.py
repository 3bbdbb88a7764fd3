"""The rows and tables of the "Under load" section (:mod:`scripts.reporting.load`): the
message size of every point, the rows in the results.json format, the saturation rows,
the knee of a curve, the markdown table of a curve and the loads kept for the CDF."""

from analysis.load.rdma import rate_bound
from analysis.load.rdma_knobs import LOAD_POINT_FIELDS, RDMA_LOAD_DEFAULTS
from spec.load import DISTRIBUTION_KEYS

#: Message size of every load point (the seed's 128-byte store).
MSG_BYTES = 128
#: Loads whose per-message latencies are kept for the CDF plot.
CDF_LOADS = (0.9,)


def results_rows(model_rows, rtl_rows):
    """The section's rows in the results.json format (SPEC.md): ``design``,
    ``framing``, ``simulator`` (``"model"`` for the model grid), ``msg_bytes``,
    ``messages``, the point's knobs and ``load``, and the distributions with the
    suffixes ``_model`` (and ``_rtl`` for the co-simulated points) plus ``mismatches``."""
    out = []
    for r in model_rows:
        row = {"design": r["design"], "framing": "rocev2" if r["design"] == "rdma"
               else "l2", "simulator": "model", "msg_bytes": MSG_BYTES,
               "messages": r["messages"], "curve": r["curve"], **r["knobs"],
               "load": r["load"]}
        if "rung" in r:
            row["rung"] = r["rung"]
        row.update({f"{k}_model": r[k] for k in DISTRIBUTION_KEYS
                    + ("offered_per_cycle", "achieved_per_cycle")})
        out.append(row)
    for r in rtl_rows:
        kind = "rdma" if r["point"].startswith("rdma") else "nic"
        row = {"design": kind, "framing": "rocev2" if kind == "rdma" else "l2",
               "simulator": r["simulator"], "msg_bytes": MSG_BYTES,
               "messages": r["messages"], "curve": r["point"], **r["knobs"],
               "load": r["load"]}
        row.update({k: v for k, v in r.items() if k.endswith(("_rtl", "_model"))})
        row["mismatches"] = r["mismatches"]
        out.append(row)
    return out


def saturation_rows(service, knobs_of_label):
    """The ``kind: "saturation"`` rows (docs/results.md) of the RDMA saturation
    measurements ``service`` (label -> :func:`analysis.load.rdma.steady_saturation`'s
    result) whose knobs ``knobs_of_label`` gives: one per point with the engine alone
    (issuer ``none``), messages per second at 1 cycle = 1 ns, and the bound the row is
    held against (:func:`analysis.load.rdma.rate_bound` with the run's steady-state
    context fills and write-backs: the wire, a host-interface direction, the host's read
    tags or the cache's entries, named in ``bound``), and the context misses per message
    of each node (``req_misses_per_msg``, ``resp_misses_per_msg``). A row carries every
    design field of its load point (:data:`analysis.load.rdma_knobs.LOAD_POINT_FIELDS`,
    at the default where the point leaves it) and its ``popularity``."""
    out = []
    for label, sat in service.items():
        knobs = knobs_of_label[label]
        if "issuer" in knobs:          # the issuer points: their own table
            continue
        ctx = sat.get("ctx")
        cycles, resource, _ = rate_bound(MSG_BYTES, ctx=ctx, **knobs)
        out.append({"kind": "saturation", "design": "rdma", "curve": label,
                    "msg_bytes": MSG_BYTES,
                    **{f: knobs.get(f, RDMA_LOAD_DEFAULTS[f])
                       for f in LOAD_POINT_FIELDS + ("popularity",)},
                    "issuer": "none", "rung": sat["rung"],
                    "msgs_per_s": 1e9 / sat["cycles"], "cycles_per_msg": sat["cycles"],
                    "messages": sat["messages"], "stable": sat["stable"],
                    "bound_msgs_per_s": 1e9 / cycles, "bound": resource,
                    "req_misses_per_msg": None if ctx is None else ctx["req_misses"],
                    "resp_misses_per_msg": None if ctx is None else ctx["resp_misses"]})
    return out


def knee(rows):
    """The lowest offered load whose p99 is at least twice the p99 at the lowest load
    (None if the curve never doubles)."""
    rows = sorted(rows, key=lambda r: r["load"])
    if not rows:
        return None
    base = rows[0]["latency_p99_cycles"]
    for r in rows:
        if r["latency_p99_cycles"] >= 2 * base:
            return r["load"]
    return None


def _fmt(v):
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    if isinstance(v, float):
        return f"{v:.2f}" if v < 100 else f"{v:,.0f}"
    return f"{v:,}"


def _curve_table(rows):
    head = ["curve", "load", "offered Mmsg/s", "achieved Mmsg/s", "p50", "p90", "p99",
            "p99.9", "max", "completion p99", "ctx misses/msg"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ach = r.get("achieved_per_cycle")
        lines.append("| " + " | ".join(_fmt(x) for x in (
            r["curve"], r["load"], 1e3 * r["offered_per_cycle"],
            None if ach is None else 1e3 * ach, r["latency_p50_cycles"],
            r["latency_p90_cycles"], r["latency_p99_cycles"], r["latency_p999_cycles"],
            r["latency_max_cycles"], r["completion_p99_cycles"], r.get("ctx_misses")))
            + " |")
    return "\n".join(lines)
