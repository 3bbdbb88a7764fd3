"""The report's "Where the gap comes from" section: :mod:`tb.gap_table` co-simulated at
each profile, one markdown table per profile (RTL figures; RTL = model where the
mismatch column is 0), with each row's area: the parts of one endpoint at the row's
settings (:mod:`scripts.area_proxies.gap`) summed from area.json (``make area``); and
each factor's share over all orders (:mod:`tb.gap_shares`, the golden model alone)."""

from scripts.area_proxies.gap import figures_of, gap_parts, parts_figures, side_parts
from tb.gap_shares import (
    DEST_POPULARITIES,
    FACTORS,
    GAMES,
    SHARE_METRICS,
    factor_shares,
    game_jobs,
    metric_value,
)
from tb.gap_table import SIDE_ROWS, WIDE_SETTING, finish_gap, gap_jobs

__all__ = ["run_gap", "gap_section", "shares_lines", "AREA_COLUMNS"]

#: (title, key, format); ``None`` format: a dict of kinds summed.
_COLUMNS = (
    ("latency cycles", "latency_cycles_rtl", "{:g}"),
    ("completion cycles", "completion_cycles_rtl", "{:g}"),
    ("ii", "ii_cycles_rtl", "{:.2f}"), ("wire B", "wire_bytes_rtl", "{:.1f}"),
    ("host B", "host_bytes_rtl", "{:.0f}"), ("ctrl ops", "ctrl_ops_rtl", None),
    ("in flight bits", "inflight_bits_rtl", "{:,}"),
    ("endpoint state bits", "endpoint_state_bits_rtl", "{:,}"),
    ("fabric buffer bits", "fabric_buffer_bits_rtl", "{:,}"),
    ("replay buffer bits", "replay_buffer_bits_rtl", "{:,}"), ("mismatch", "mismatches", "{}"),
)


#: The side rows of the NIC at many destinations (row 9), points of the shares' games.
#: ``{name: popularity}``; the point is the row it stands beside with ``4096 QPs``.
_WIDE_ROWS = {name: change["popularity"] for name, _, change in SIDE_ROWS
              if WIDE_SETTING in change}

#: The area columns: (title, key of :func:`scripts.area_proxies.gap.parts_figures`).
AREA_COLUMNS = (("LUT4", "lut4"), ("FF bits", "ff_bits"), ("mem bits", "mem_bits"))


def run_gap(sim, profiles, messages, msg_bytes, run_jobs, workers, shares=True):
    """The table's rows (:func:`tb.gap_table.finish_gap`), its co-simulations run by
    ``run_jobs(jobs, workers)`` (:func:`scripts.sim.run_jobs`). With ``shares`` each
    factor's row also carries, per metric of :data:`tb.gap_shares.SHARE_METRICS`, its
    ``shapley`` value, its ``range`` (``[least, most]`` over all orders) and its
    ``table_order`` figure, from the golden model's points of every subset of the factors
    (:func:`tb.gap_shares.game_jobs`, run by ``run_jobs`` too), for each game of
    :data:`tb.gap_shares.GAMES` with its suffix (``_1qp``: the walk to the engine at 1
    QP; ``_dest_round_robin``, ``_dest_zipf``: the NIC at 4,096 destinations as the
    engine at 4096 QPs); ``RuntimeError`` if a model point of the table's order, or of
    row 9 (the NIC at 4,096 destinations, a point of the round-robin game), differs from
    its co-simulated row's model side."""
    jobs = gap_jobs(sim, profiles, messages, msg_bytes)
    rows = finish_gap(run_jobs(jobs, workers), profiles, messages, msg_bytes)
    if not shares:
        return rows
    for profile in profiles:
        sjobs, indexes = game_jobs(profile, messages, msg_bytes, DEST_POPULARITIES)
        model = run_jobs(sjobs, workers)
        mine = [r for r in rows if r["gap_profile"] == profile and "gap_side_of" not in r]
        checked = [(r, indexes[None][frozenset(FACTORS[:k])]) for k, r in enumerate(mine)]
        for r in rows:
            if r["gap_profile"] == profile and r["gap_factor"] in _WIDE_ROWS:
                subset = FACTORS[:r["gap_side_of"]] + (FACTORS[-1],)
                pop = _WIDE_ROWS[r["gap_factor"]]
                checked.append((r, indexes[pop][frozenset(subset)]))
        for r, j in checked:
            for metric, _ in SHARE_METRICS:
                if f"{metric}_model" in r and metric_value(model[j], metric) != \
                        metric_value(r, metric):
                    raise RuntimeError(f"gap {profile} row {r['gap_row']}: the model alone "
                                       f"gives {metric} {metric_value(model[j], metric)}, "
                                       f"the co-simulation's model {metric_value(r, metric)}")
        for suffix, _, factors, pop in GAMES:
            got = factor_shares(model, indexes[pop], factors)
            for r in mine[1:]:
                f = got.get(r["gap_factor"])
                if f is None:
                    continue
                r["shapley" + suffix] = {m: f[m]["shapley"] for m, _ in SHARE_METRICS}
                r["range" + suffix] = {m: f[m]["range"] for m, _ in SHARE_METRICS}
                r["table_order" + suffix] = {m: f[m]["table"] for m, _ in SHARE_METRICS}
    return rows


def shares_lines(rows, profile):
    """Markdown lines of the shares of ``profile``'s rows (those :func:`run_gap` gave
    ``shapley``): for each game (the walk to 4096 QPs, the walk to 1 QP) one line per
    factor, each metric as ``share [least, most] (table)``; no lines when the rows carry
    none."""
    def num(x):
        return f"{x:,.2f}".rstrip("0").rstrip(".") if isinstance(x, float) else f"{x:,}"
    out = []
    for suffix, game, _, pop in GAMES:
        mine = [r for r in rows if r.get("gap_profile") == profile and "shapley" + suffix in r]
        if not mine:
            continue
        peers = ("" if pop is None else
                 f" (`4096 QPs` is 4,096 peers, {pop.replace('_', ' ')}: the engine's QPs "
                 "and the NIC's destinations where it has the Ethernet header and "
                 "end-to-end completion; the points at 4,096 peers are the model's only)")
        out += [f"Each factor's share over all orders at `{profile}`, {game}{peers}: "
                f"Shapley value [least, most] (in the table's order), from the golden "
                f"model (tb/gap_shares.py; `python -m tb.gap_shares {profile}`):", "",
                "| factor | " + " | ".join(t for _, t in SHARE_METRICS) + " |",
                "|---|" + "---|" * len(SHARE_METRICS)]
        for r in mine:
            sh, rg, tb = (r[k + suffix] for k in ("shapley", "range", "table_order"))
            cells = [f"{num(sh[m])} [{num(rg[m][0])}, {num(rg[m][1])}] ({num(tb[m])})"
                     for m, _ in SHARE_METRICS]
            out.append(f"| {r['gap_factor']} | " + " | ".join(cells) + " |")
        out.append("")
    return out


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
    extra = " --gap-destinations" if any(r["gap_factor"] in _WIDE_ROWS for r in rows) else ""
    out = ["## Where the gap comes from", "",
           f"Each row is the row above with one factor changed (tb/gap_table.py), "
           f"co-simulated on {sim} against the golden model: {messages} messages of "
           f"{msg_bytes} B back to back for ii, wire, host and control figures, 16 one at a "
           f"time for latency and completion. Reproduce with `make sim` (or `make sim "
           f"ARGS=\"--gap {','.join(profiles)}{extra}\"`); docs/findings.md reads the "
           f"tables.", "",
           "State in three kinds (spec/metrics.py STATE_KINDS): endpoint state (what the "
           "NIC or the engine itself holds in flight), fabric buffer (the switch ingress "
           "buffer the sender's beats hold until their credits return: both designs' rows "
           "run on the same switch, links and credit rule) and replay buffer (the link-retry "
           "buffer of the endpoint's uplink, as sized for the fabric). `in flight bits` "
           "is endpoint state plus fabric buffer.", "",
           "The area columns are one endpoint's hardware at the row's settings "
           "(scripts/area_proxies/gap.py; figures from area.json, `make area`, CRC cores "
           "included; `-` where area.json lacks a part): the NIC endpoint or the RDMA "
           "engine, the host interface, the NIC's completion blocks, and the endpoint's "
           "own two link-retry ends sized for the row's fabric. The fabric (switch, links, "
           "the delay lines that stand for wires, the far ends of the links) is common to "
           "every row and counted on none. docs/area.md, \"Per gap row\".", ""]
    for profile in profiles:
        mine = [r for r in rows if r["gap_profile"] == profile]
        parts = gap_parts(profile) + side_parts(profile)
        out += [f"### At `{profile}`", "",
                "| # | factor | design | attachment | completion | reliability | header | "
                + " | ".join(t for t, _, _ in _COLUMNS) + " | "
                + " | ".join(t for t, _ in AREA_COLUMNS) + " |",
                "|" + "---|" * (7 + len(_COLUMNS) + len(AREA_COLUMNS))]
        for r in mine:
            beside = f" (beside {r['gap_side_of']})" if "gap_side_of" in r else ""
            out.append(f"| {r['gap_row']}{beside} | {r['gap_factor']} | {r['design']} | "
                       f"{r.get('attachment', '-')} | {r.get('completion', '-')} | "
                       f"{r.get('reliability', '-')} | {r.get('header', '-')} | "
                       + " | ".join(_cell(r, k, f) for _, k, f in _COLUMNS) + " | "
                       + " | ".join(_area_cells(parts[r["gap_row"]][2], figures)) + " |")
        side_of = {r["gap_row"]: r["gap_side_of"] for r in mine if "gap_side_of" in r}
        out += ["", "Parts per row (one endpoint; a side row against the row it stands "
                "beside): "
                + "; ".join(_parts_line(k, p, parts[side_of.get(k, k - 1)][2] if k else None)
                            for k, (_, _, p) in enumerate(parts)) + ".", ""]
        out += shares_lines(rows, profile)
    return "\n".join(out)
