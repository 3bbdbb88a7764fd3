"""The report's "Where the gap comes from" section: :mod:`tb.gap_table` co-simulated at
each profile, one markdown table per profile (RTL figures; RTL = model where the
mismatch column is 0), with each row's area: the parts of one endpoint at the row's
settings (:mod:`scripts.area_proxies.gap`) summed from area.json (``make area``)."""

from scripts.area_proxies.gap import figures_of, gap_parts, parts_figures
from tb.gap_table import finish_gap, gap_jobs

__all__ = ["run_gap", "gap_section", "AREA_COLUMNS"]

#: (title, key, format); ``None`` format: a dict of kinds summed.
_COLUMNS = (
    ("latency cycles", "latency_cycles_rtl", "{:g}"),
    ("completion cycles", "completion_cycles_rtl", "{:g}"),
    ("ii", "ii_cycles_rtl", "{:.2f}"), ("wire B", "wire_bytes_rtl", "{:.1f}"),
    ("host B", "host_bytes_rtl", "{:.0f}"), ("ctrl ops", "ctrl_ops_rtl", None),
    ("in flight bits", "inflight_bits_rtl", "{:,}"), ("mismatch", "mismatches", "{}"),
)


#: The area columns: (title, key of :func:`scripts.area_proxies.gap.parts_figures`).
AREA_COLUMNS = (("LUT4", "lut4"), ("FF bits", "ff_bits"), ("mem bits", "mem_bits"))


def run_gap(sim, profiles, messages, msg_bytes, run_jobs, workers):
    """The table's rows (:func:`tb.gap_table.finish_gap`), its co-simulations run by
    ``run_jobs(jobs, workers)`` (:func:`scripts.sim.run_jobs`)."""
    jobs = gap_jobs(sim, profiles, messages, msg_bytes)
    return finish_gap(run_jobs(jobs, workers), profiles, messages, msg_bytes)


def _cell(row, key, fmt):
    value = row.get(key)
    if value is None:
        return "-"
    if fmt is None:
        return f"{sum(value.values()) if isinstance(value, dict) else value:.2f}"
    return fmt.format(value)


def _area_cells(parts, figures):
    fig = parts_figures(parts, figures)
    return ["-" if fig is None else f"{round(fig[key]):,}" for _, key in AREA_COLUMNS]


def _parts_line(k, parts, above):
    """Row ``k``'s parts, as the change from the row above (all of them on row 0)."""
    if above is None:
        return f"{k}: " + ", ".join(sorted(parts))
    gone = [f"-{n}" for n in sorted(above) if n not in parts]
    new = [f"+{n}" for n in sorted(parts) if n not in above]
    return f"{k}: " + (", ".join(gone + new) or "the same parts")


def gap_section(rows, profiles, messages, msg_bytes, sim, area=None):
    """Markdown of the section for :func:`run_gap`'s ``rows``; ``area``: the contents of
    area.json (None: none), whose components give the area columns (``-`` for a row
    with a part that area.json lacks)."""
    figures = figures_of(area)
    out = ["## Where the gap comes from", "",
           f"Each row is the row above with one factor changed (tb/gap_table.py), "
           f"co-simulated on {sim} against the golden model: {messages} messages of "
           f"{msg_bytes} B back to back for ii, wire, host and control figures, 16 one at a "
           f"time for latency and completion. Reproduce with `make sim` (or `make sim "
           f"ARGS=\"--gap {','.join(profiles)}\"`); docs/findings.md reads the tables.", "",
           "The area columns are one endpoint's hardware at the row's settings "
           "(scripts/area_proxies/gap.py; figures from area.json, `make area`, CRC cores "
           "included; `-` where area.json lacks a part): the NIC endpoint or the RDMA "
           "engine, the host interface, the NIC's completion blocks, and the endpoint's "
           "own two link-retry ends sized for the row's fabric. The fabric (switch, links, "
           "the delay lines that stand for wires, the far ends of the links) is common to "
           "every row and counted on none. docs/area.md, \"Per gap row\".", ""]
    for profile in profiles:
        mine = [r for r in rows if r["gap_profile"] == profile]
        parts = gap_parts(profile)
        out += [f"### At `{profile}`", "",
                "| # | factor | design | attachment | completion | reliability | header | "
                + " | ".join(t for t, _, _ in _COLUMNS) + " | "
                + " | ".join(t for t, _ in AREA_COLUMNS) + " |",
                "|" + "---|" * (7 + len(_COLUMNS) + len(AREA_COLUMNS))]
        for r in mine:
            out.append(f"| {r['gap_row']} | {r['gap_factor']} | {r['design']} | "
                       f"{r.get('attachment', '-')} | {r.get('completion', '-')} | "
                       f"{r.get('reliability', '-')} | {r.get('header', '-')} | "
                       + " | ".join(_cell(r, k, f) for _, k, f in _COLUMNS) + " | "
                       + " | ".join(_area_cells(parts[r["gap_row"]][2], figures)) + " |")
        out += ["", "Parts per row (one endpoint): "
                + "; ".join(_parts_line(k, p, parts[k - 1][2] if k else None)
                            for k, (_, _, p) in enumerate(parts)) + ".", ""]
    return "\n".join(out)
