"""The "Under load" section of the report: open-loop latency distributions of both
designs, on the golden models, with an RTL subset compared exactly.

Model grid (:func:`load_grid`, spread over the report's executor):

- **Load curves**: offered load :data:`LOADS` (fractions of each configuration's own
  saturated rate) for the RDMA engine at 1, 64 and 4096 QPs (Zipf 0.99 and uniform) over
  16 and 256 context-cache entries, and for the NIC (a pair, and incast where the NIC's
  load runner is built). Every RDMA issuer posts with the best rung it can use
  (:func:`analysis.load.rdma.best_rung`; rows name it). The saturated rate of a
  configuration is measured once on the same traffic with every message arriving at once,
  in the steady state (:func:`analysis.load.rdma.steady_saturation`: warm-up and the first
  quarter of the run dropped, the run doubled until the rate is stable to 1 %).
- **Saturation rows** (:func:`saturation_rows`, ``kind: "saturation"`` in results.json):
  the engine alone at each curve's configuration and :data:`SATURATION_POINTS`, with
  the wire or host-interface bound each is held against.
- **Incast** 3->1 and 7->1 (NIC, and RDMA through the multi-node top where built).
- **Issuers**: message rate and p99 per issuer profile (none, cpu, gpu, controller) at
  half load and at saturation.

Each row holds the offered and achieved message rates and the nearest-rank
``latency_p50/p90/p99/p999/max_cycles`` and ``completion_*`` (from *arrival*, queueing
included). The knee of a curve is the lowest offered load whose p99 is at least twice
the p99 at the lowest load (:func:`knee`). Plots: ``load_p99.png`` (p99 against offered
Mmsg/s, knee marked), ``load_percentiles.png`` (p50, p99 and p99.9 against offered
load, every curve) and ``load_cdf.png`` (latency CDFs at 90 % load).

RTL subset (:func:`run_load_rtl`): points co-simulated on ``--sim`` whose RTL rows must
equal the model's (the cocotb tests compare every record; a failed run is a row with a
mismatch).

The section is split by concern: the rows and tables (:mod:`.load_rows`), the RTL subset
(:mod:`.load_rtl`) and the plots (:mod:`.load_plots`); this module holds the model grid
(its constants are read here, where a caller may set them) and re-exports the rest.
"""

import json
import pathlib
import sys
import time
import tomllib

from analysis.load.rdma import best_rung, check_load_knobs, rdma_load_run, steady_saturation

from .load_rows import (
    CDF_LOADS,
    MSG_BYTES,
    _curve_table,
    _fmt,
    knee,
    results_rows,
    saturation_rows,
)
from .load_rtl import NIC_RTL_TOP, RTL_POINTS, run_load_rtl  # noqa: F401
from .progress import Progress

__all__ = ["load_section", "load_grid", "knee", "results_rows", "run_load_rtl",
           "saturation_rows", "RTL_POINTS", "LOADS", "RDMA_CURVES", "ISSUER_NAMES",
           "SATURATION_POINTS", "SATURATION_RUN"]

#: The saturation points' file: a label and a load point's knobs each
#: (:data:`SATURATION_POINTS`).
SATURATION_FILE = pathlib.Path(__file__).with_name("saturation_points.toml")


def _points(path):
    """``(label, knobs)`` of every ``[[point]]`` of the TOML file ``path``, each point's
    knobs checked as a load point's (``ValueError`` naming the file, the point and the
    knob, when the module is imported: before any run)."""
    with open(path, "rb") as f:
        points = tomllib.load(f).get("point", [])
    out = []
    for i, p in enumerate(points):
        where = f"{path.name}, point {i + 1}"
        if set(p) != {"label", "knobs"} or not isinstance(p["knobs"], dict):
            raise ValueError(f"{where}: a point is a label and a table of knobs, not "
                             f"{sorted(p)}")
        try:
            check_load_knobs(MSG_BYTES, 1, p["knobs"])
        except ValueError as exc:
            raise ValueError(f"{where} ({p['label']}): {exc}") from None
        out.append((p["label"], dict(p["knobs"])))
    return tuple(out)


#: Offered loads of the curves (fractions of the saturated rate; 1.0 is saturation).
LOADS = (0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 1.0)
#: The RDMA curves: ``(label, knobs)``.
RDMA_CURVES = tuple(
    (f"RDMA {q} QP{'s' if q > 1 else ''}{'' if q == 1 else ' ' + pop} / {c} entries",
     dict(qps=q, cache_entries=c, **({} if q == 1 else {"popularity": pop})))
    for c in (16, 256) for q in (1, 64, 4096)
    for pop in (("zipf", "uniform") if q > 1 else ("round_robin",)))
#: Issuer profiles compared (analysis/workloads/data/issuers.toml).
ISSUER_NAMES = ("none", "cpu", "gpu", "controller")


#: Saturation points measured besides the curves' (whose saturation is measured anyway):
#: ``(label, knobs)``, from :data:`SATURATION_FILE` (where each is explained).
SATURATION_POINTS = _points(SATURATION_FILE)
#: The steady-state saturation run (:func:`analysis.load.rdma.steady_saturation`): the
#: first run's messages, and the most messages a run may have. The cap keeps the
#: section to minutes on 2 cores (4096 QPs uniform over 16 entries, which misses on
#: every message, takes about 5 minutes up to 16,000); a row that did not settle within
#: 1 % by then says so (``stable`` false).
SATURATION_RUN = dict(start=500, cap=4000)


def _saturation(task):
    label, knobs, messages = task
    return label, steady_saturation(MSG_BYTES, start=min(messages, SATURATION_RUN["start"]),
                                    cap=max(SATURATION_RUN["cap"], messages), **knobs)


def _rdma_point(task):
    label, knobs, load, service, messages, group = task
    row, per = rdma_load_run(MSG_BYTES, messages, load, service_cycles=service, **knobs)
    row.update(design="rdma", curve=label, group=group, knobs=knobs)
    if load in CDF_LOADS:
        row["latencies"] = (per["remote_write"] - per["arrival"]).tolist()
    return row


#: Incast cases of both designs: ``(label, nodes)``.
INCASTS = (("incast 3->1", 4), ("incast 7->1", 8))
#: Loads of the incast table (fractions of the receiver's downlink).
INCAST_LOADS = (0.5, 0.9)


def _nic_point(task):
    from analysis.load.nic import nic_load_run
    from analysis.load.rdma import load_row
    label, pattern, nodes, load, messages, group = task
    senders = nodes - 1 if pattern == "incast" else 1
    # Incast: each sender offers load / senders of its link, so that the receiver's
    # downlink sees ``load`` (as the RDMA fabric's load is defined).
    arrays, nrow = nic_load_run(pattern, nodes, MSG_BYTES, messages, load / senders,
                                seed=1)
    # service_cycles: the receiver's cycles per store (a store's wire beats), so that
    # offered_per_cycle is what the receiver is offered in all.
    row = load_row(arrays, load, nrow["service_cycles"])
    row.update(design="nic", curve=label, group=group, knobs={"pattern": pattern,
                                                             "nodes": nodes})
    if group == "curve" and load in CDF_LOADS:
        row["latencies"] = (arrays["remote_write"] - arrays["arrival"]).tolist()
    return row


def _fabric_point(task):
    from analysis.rdma.fabric_point import fabric_run
    label, pattern, nodes, load, messages, group = task
    row = fabric_run(pattern, nodes, MSG_BYTES, messages, load, seed=1)["row"]
    row.update(design="rdma", curve=label, group=group, knobs={"pattern": pattern,
                                                              "nodes": nodes})
    return row


def _any_point(task):
    kind, rest = task
    return {"rdma": _rdma_point, "nic": _nic_point, "fabric": _fabric_point}[kind](rest)


def load_grid(messages):
    """The model tasks: ``(saturation tasks, point builder)``; the builder turns the
    measured saturation of each curve into its point tasks."""
    issuers = [(f"RDMA 1 QP, issuer {i} ({best_rung(i, MSG_BYTES)})",
                dict(qps=1, issuer=i)) for i in ISSUER_NAMES]
    sat = [(label, knobs, messages) for label, knobs in
           list(RDMA_CURVES) + issuers + list(SATURATION_POINTS)]

    def points(service):
        out = []
        for label, knobs in RDMA_CURVES:
            out += [(label, knobs, load, service[label], messages, "curve")
                    for load in LOADS]
        out += [(label, knobs, load, service[label], messages, "issuer")
                for label, knobs in issuers for load in (0.5, 1.0)]
        out = [("rdma", t) for t in out]
        out += [("nic", ("NIC L2 pair", "pair", 2, load, messages, "curve"))
                for load in LOADS]
        for label, nodes in INCASTS:
            out += [("nic", (f"NIC {label}", "incast", nodes, load, messages, "incast"))
                    for load in INCAST_LOADS]
            out += [("fabric", (f"RDMA {label}", "incast", nodes, load, messages,
                                "incast")) for load in INCAST_LOADS]
        return out

    return sat, points



def run_load_model(executor, messages):
    """Every model row of the section (saturation first, then the points) and the
    saturation rows (:func:`saturation_rows`)."""
    sat_tasks, points = load_grid(messages)
    bar = Progress(len(sat_tasks), "under load: saturation")
    sat = dict(executor.map(_saturation, sat_tasks, lambda r: bar.step(r[0])))
    tasks = points({label: r["cycles"] for label, r in sat.items()})
    bar = Progress(len(tasks), "under load: points")
    rows = executor.map(_any_point, tasks,
                        lambda r: bar.step(f"{r['curve']} @ {r['load']}"))
    return rows, saturation_rows(sat, {label: k for label, k, _ in sat_tasks})


def load_section(out, executor, messages=1000, rtl_rows=()):
    """Run the model grid, write ``load.json`` and the plots into ``out``; return the
    section's markdown. ``rtl_rows``: the RTL subset's rows (:func:`run_load_rtl`)."""
    t0 = time.time()
    rows, sat_rows = run_load_model(executor, messages)
    (out / "load.json").write_text(json.dumps(
        {"model": [{k: v for k, v in r.items() if k != "latencies"} for r in rows],
         "rtl": list(rtl_rows), "saturation": sat_rows}, indent=1))
    # results.json and results.csv gain the section's rows (the report wrote the grid's).
    res_path = out / "results.json"
    prior = json.loads(res_path.read_text()) if res_path.exists() else []
    prior = [r for r in prior if "load" not in r and r.get("kind") != "saturation"]
    rows_out = prior + results_rows(rows, rtl_rows) + sat_rows
    res_path.write_text(json.dumps(rows_out, indent=1))
    from .tables import write_csv
    write_csv(rows_out, out / "results.csv")
    from .load_plots import load_plots
    names = load_plots(out, rows)
    curves = [r for r in rows if r["group"] == "curve"]
    issuers = [r for r in rows if r["group"] == "issuer"]
    incast = [r for r in rows if r["group"] == "incast"]
    knees = {}
    for r in curves:
        knees.setdefault(r["curve"], []).append(r)
    md = ["## Under load", "",
          f"Open-loop traffic on the golden models ({messages} messages of {MSG_BYTES} B "
          "per point; latency and completion from each message's arrival, queueing "
          "included; nearest-rank percentiles; load as a fraction of each "
          "configuration's own saturated rate). Regenerate with `make report` or "
          "`scripts/report.py --no-rtl --no-area --no-inference`; docs/findings.md "
          "reads these numbers.", ""]
    md += [f"![{n[:-4]}]({n})" for n in names] + [""]
    md += ["### Saturation (steady state, engine alone, best rung)", "",
           "Every message arrives at once after the warm-up; the rate of the remote "
           "writes after the first quarter of the run, the run doubled from "
           f"{SATURATION_RUN['start']} messages until two estimates agree within 1 % "
           f"(at most {SATURATION_RUN['cap']:,}). The bound: the fewest cycles per "
           "message the wire, a host-interface direction, the host's read tags or the "
           "context cache's entries (Little's law) allow, with the context misses the "
           "run had in its steady state (`analysis.load.rdma.rate_bound`).", "",
           "| point | rung | messages | stable | Mmsg/s | bound Mmsg/s | bound by "
           "| ctx misses/msg (A, B) |",
           "|---|---|---|---|---|---|---|---|"]
    for r in sat_rows:
        miss = "-" if r.get("req_misses_per_msg") is None else \
            f"{r['req_misses_per_msg']:.2f}, {r['resp_misses_per_msg']:.2f}"
        md.append(f"| {r['curve']} | {r['rung']} | {r['messages']:,} | "
                  f"{'yes' if r['stable'] else 'no'} | {_fmt(r['msgs_per_s'] / 1e6)} | "
                  f"{_fmt(r['bound_msgs_per_s'] / 1e6)} | {r['bound']} | {miss} |")
    md += ["", "### Knees (lowest load whose p99 is at least twice the p99 at 10 %)", "",
           "| curve | saturated Mmsg/s | knee (load) |", "|---|---|---|"]
    for label, rs in knees.items():
        md.append(f"| {label} | {_fmt(1e3 / rs[0]['service_cycles'])} | "
                  f"{_fmt(knee(rs))} |")
    md += ["", "### Load curves", "", _curve_table(curves), "",
           "### Incast (load: a fraction of the receiver's downlink, each design's own "
           "frames; NIC: 128 B stores, L2 framing, integrated; RDMA: the multi-node top "
           "of docs/rdma_fabric.md, one QP per sender, pipelined engine)", "",
           _curve_table(sorted(incast, key=lambda r: (r["curve"], r["load"]))), "",
           "### Issuers (1 QP, each with the best rung it can use, named in the curve; "
           "the issuer's costs from analysis/workloads/data/issuers.toml)", "",
           _curve_table(issuers), ""]
    if rtl_rows:
        md += ["### RTL subset (co-simulated, compared with the model)", "",
               "| point | simulator | RTL p99 | model p99 | mismatches |",
               "|---|---|---|---|---|"]
        for r in rtl_rows:
            md.append(f"| {r['point']} | {r['simulator']} | "
                      f"{_fmt(r.get('latency_p99_cycles_rtl'))} | "
                      f"{_fmt(r.get('latency_p99_cycles_model'))} | {r['mismatches']} |")
        md.append("")
    md.append(f"_Section computed in {time.time() - t0:.0f} s._")
    print(f"under load: {len(rows)} model points in {time.time() - t0:.0f} s",
          file=sys.stderr)
    return "\n".join(md)
