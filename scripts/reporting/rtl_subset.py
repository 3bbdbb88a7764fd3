"""The co-simulated subset of the report: the points of :data:`RTL_POINTS`, which touch
every axis of the grid, each run on the RTL against the cycle-level model (every metric
and mismatch), and the fast path's figures for the same point compared too."""


from scripts.executor import CONNECT_TIMEOUT_S
from spec.metrics import row_metrics

from .grid import FRAMINGS, model_knobs
from .progress import Progress

__all__ = ["RTL_POINTS", "rtl_messages", "fast_path_differs", "row_fails", "run_rtl_subset"]

#: The co-simulated subset: every size on both framings and on RDMA, every QP count,
#: every cache size, more than one NIC peer, and the NIC's ``pcie`` attachment.
RTL_POINTS = (
    [("nic", dict(framing=f, msg_bytes=s, peers=1)) for f in FRAMINGS
     for s in (8, 128, 1024, 4096)]
    + [("nic", dict(framing="compact", msg_bytes=128, peers=3))]
    + [("nic", dict(framing="l2", msg_bytes=128, peers=1, attachment="pcie"))]
    + [("rdma", dict(msg_bytes=s, qps=1, cache_entries=16)) for s in (8, 128, 4096)]
    + [("rdma", dict(msg_bytes=128, qps=q, cache_entries=16)) for q in (16, 256, 4096)]
    + [("rdma", dict(msg_bytes=128, qps=256, cache_entries=c)) for c in (64, 256)]
)


def _nonzero(value):
    """A metric for comparison: a ctrl_ops dict without its zero counts."""
    return {k: v for k, v in value.items() if v} if isinstance(value, dict) else value


def _differs(design, key, fast, model):
    """Whether the fast path's ``fast`` differs from the cycle-level model's ``model``:
    exactly for the NIC and for the RDMA counts, within the RDMA fast path's stated
    tolerance for its timing figures (analysis/rdma/fastpath/, ``TOLERANCES``)."""
    if design == "rdma":
        from analysis.rdma.fastpath import TOLERANCES
        if key in TOLERANCES and fast is not None and model is not None:
            return abs(fast - model) > TOLERANCES[key] * abs(model) + 1e-9
    return _nonzero(fast) != _nonzero(model)


def rtl_messages(design, point, messages):
    """Messages the RTL subset runs at ``point`` when the report asks for ``messages``:
    at least two passes of round robin over 256 to 4095 QPs (``2 * qps + 88``), so
    that the second pass shows whether the cache holds the QP set (4096 QPs miss on
    every lookup from the start); a quarter (at least 40) for NIC stores of 4096 bytes
    and more; for the RDMA engine, no more than both ends' buffers fit in the host
    memories of the top (:data:`spec.rdma_engine.TOP_DEFAULTS`)."""
    n = messages
    if 256 <= point.get("qps", 1) < 4096:
        n = max(messages, 2 * point["qps"] + 88)
    if design == "nic":
        return n if point["msg_bytes"] < 4096 else max(40, n // 4)
    from spec.rdma_engine import TOP_DEFAULTS
    return min(n, TOP_DEFAULTS["depth"] * 64 // 4 // point["msg_bytes"])


def fast_path_differs(design, point, messages, model):
    """The metrics whose fast-path figure at ``point`` (``messages`` messages) differs
    from the cycle-level model's ``model`` (``{metric: value}``, the ``_model`` values
    of a row) by :func:`_differs`, sorted; or ``"not covered: ..."`` where the fast
    path raises ``ValueError`` (the report then relies on the cycle-level model)."""
    from analysis.fastpath import fast_point
    try:
        fast = fast_point(design, msg_bytes=point["msg_bytes"], messages=messages,
                          **model_knobs(design, point))
    except ValueError as exc:
        return f"not covered: {exc}"
    return sorted(k for k in row_metrics(design, host=point.get("attachment") == "pcie")
                  if _differs(design, k, fast[k], model[k]))


def row_fails(row):
    """Whether an RTL-subset row counts as failed, in report.md's summary and in
    `make report`'s exit status alike: an error (``mismatches`` None), a mismatch
    between RTL and model, or a fast-path figure beyond its tolerance (a list of
    metrics in ``fast_path_differs``; a point the fast path does not cover is not a
    failure)."""
    fp = row.get("fast_path_differs")
    return row["mismatches"] != 0 or (isinstance(fp, list) and bool(fp))


def _rtl_group(args):
    """Run the RTL points of one top, in order (a top is built once, by one process)."""
    sim, points, messages = args
    out = []
    for design, point in points:
        n = rtl_messages(design, point, messages)
        try:
            if design == "nic":
                from tb.nic.headline import run_point
                row = run_point(sim, point["framing"], point["msg_bytes"], n,
                                point["peers"],
                                attachment=point.get("attachment", "integrated"))
            else:
                from tb.rdma.headline import run_point
                row = run_point(sim, point["msg_bytes"], n, qps=point["qps"],
                                cache_entries=point["cache_entries"],
                                rung=point.get("rung"))
        except Exception as exc:       # keep going; the report shows the failed point
            out.append({"design": design, "framing": point.get("framing", "rocev2"),
                        "simulator": sim, "msg_bytes": point["msg_bytes"], "messages": n,
                        **{k: point[k] for k in ("qps", "cache_entries", "peers",
                                                 "attachment") if k in point},
                        "mismatches": None, "error": f"{type(exc).__name__}: {exc}"})
            continue
        row.pop("frames", None)
        metrics = row_metrics(design, host=point.get("attachment") == "pcie")
        row["fast_path_differs"] = fast_path_differs(
            design, point, n, {k: row[f"{k}_model"] for k in metrics})
        out.append(row)
    return out


def run_rtl_subset(sim, jobs, messages, scheduler=None, connect_timeout=CONNECT_TIMEOUT_S):
    """The subset's rows, group by group (one top per group), ``jobs`` groups at a time
    in local processes or on the Dask cluster ``scheduler``."""
    from scripts.executor import make_executor

    groups = {}
    for design, point in RTL_POINTS:
        key = (design, point.get("framing"), point.get("cache_entries"),
               point.get("peers", 1) + 1 > 4, point.get("attachment"))
        groups.setdefault(key, []).append((design, point))
    prog = Progress(len(RTL_POINTS), f"RTL ({sim})")

    def step(group_rows):
        for row in group_rows:
            prog.step(f"{row['design']} {row['msg_bytes']} B mismatches {row['mismatches']}")

    with make_executor(jobs, scheduler, connect_timeout) as ex:
        done = ex.map(_rtl_group, [(sim, pts, messages) for pts in groups.values()],
                      progress=step)
    return [row for group_rows in done for row in group_rows]

