"""The report's "Where the gap comes from" section: :mod:`tb.gap_table` co-simulated at
each profile, one markdown table per profile (RTL figures; RTL = model where the
mismatch column is 0)."""

from tb.gap_table import finish_gap, gap_jobs

__all__ = ["run_gap", "gap_section"]

#: (title, key, format); ``None`` format: a dict of kinds summed.
_COLUMNS = (
    ("latency cycles", "latency_cycles_rtl", "{:g}"),
    ("completion cycles", "completion_cycles_rtl", "{:g}"),
    ("ii", "ii_cycles_rtl", "{:.2f}"), ("wire B", "wire_bytes_rtl", "{:.1f}"),
    ("host B", "host_bytes_rtl", "{:.0f}"), ("ctrl ops", "ctrl_ops_rtl", None),
    ("in flight bits", "inflight_bits_rtl", "{:,}"), ("mismatch", "mismatches", "{}"),
)


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


def gap_section(rows, profiles, messages, msg_bytes, sim):
    """Markdown of the section for :func:`run_gap`'s ``rows``."""
    out = ["## Where the gap comes from", "",
           f"Each row is the row above with one factor changed (tb/gap_table.py), "
           f"co-simulated on {sim} against the golden model: {messages} messages of "
           f"{msg_bytes} B back to back for ii, wire, host and control figures, 16 one at a "
           f"time for latency and completion. Reproduce with `make sim` (or `make sim "
           f"ARGS=\"--gap {','.join(profiles)}\"`); docs/findings.md reads the tables.", ""]
    for profile in profiles:
        mine = [r for r in rows if r["gap_profile"] == profile]
        out += [f"### At `{profile}`", "",
                "| # | factor | design | attachment | completion | reliability | header | "
                + " | ".join(t for t, _, _ in _COLUMNS) + " |",
                "|" + "---|" * (7 + len(_COLUMNS))]
        for r in mine:
            out.append(f"| {r['gap_row']} | {r['gap_factor']} | {r['design']} | "
                       f"{r.get('attachment', '-')} | {r.get('completion', '-')} | "
                       f"{r.get('reliability', '-')} | {r.get('header', '-')} | "
                       + " | ".join(_cell(r, k, f) for _, k, f in _COLUMNS) + " |")
        out.append("")
    return "\n".join(out)
