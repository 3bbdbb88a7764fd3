"""The golden-model grid of the report: message sizes x framings x NIC peers, the NIC's
``pcie`` attachment (L2, one peer) at every size, message sizes x RDMA QPs x
context-cache entries, and the RDMA optimisation ladder at 128 B, every point on the
golden model.

Each point uses the fast path (analysis/fastpath.py, equal to the cycle-level model on
the grid of tests/test_fastpath.py) and falls back to the cycle-level model where the
fast path does not apply; the points are spread over ``jobs`` processes.
"""

import time

from scripts.executor import CONNECT_TIMEOUT_S
from spec.metrics import row_metrics

from .progress import Progress

__all__ = ["SIZES", "QPS", "CACHES", "PEERS", "FRAMINGS", "model_points", "model_knobs",
           "model_row", "run_model_grid", "rung_points"]

SIZES = (8, 64, 128, 256, 512, 1024, 4096)
QPS = (1, 16, 256, 1024, 4096)
CACHES = (16, 64, 256)
PEERS = (1, 2, 4, 8, 16, 32, 64)
FRAMINGS = ("compact", "l2")


def model_points():
    pts = []
    for f in FRAMINGS:
        for s in SIZES:
            for p in PEERS:
                pts.append(("nic", dict(framing=f, msg_bytes=s, peers=p)))
    for s in SIZES:
        for q in QPS:
            for c in CACHES:
                pts.append(("rdma", dict(msg_bytes=s, qps=q, cache_entries=c)))
    # After the integrated NIC rows and the default rung, so that a lookup without
    # ``attachment`` or ``rung`` finds those first (tables.find also checks).
    pts += [("nic", dict(framing="l2", msg_bytes=s, peers=1, attachment="pcie"))
            for s in SIZES]
    pts += rung_points()
    return pts


def rung_points(msg_bytes=128):
    """The RDMA optimisation ladder (spec.rdma_engine.LADDER) at one size, 1 QP."""
    from spec.rdma_engine import LADDER
    return [("rdma", dict(msg_bytes=msg_bytes, qps=1, cache_entries=16, rung=name))
            for name, _ in LADDER if name != "pipelined"]


def model_knobs(design, point):
    """Knobs of analysis.points/fastpath for a report point (all but the size)."""
    knobs = dict(point)
    knobs.pop("msg_bytes")
    return knobs


def model_row(task):
    design, point, messages = task
    from analysis.fastpath import fast_point
    from analysis.points import cycle_point
    knobs = model_knobs(design, point)
    t0 = time.perf_counter()
    try:
        res, source = fast_point(design, msg_bytes=point["msg_bytes"], messages=messages,
                                 **knobs), "fast"
    except ValueError:
        res, source = cycle_point(design, msg_bytes=point["msg_bytes"],
                                  messages=min(messages, 400), **knobs), "cycle"
    row = {"design": design, "framing": point.get("framing", "rocev2"),
           "simulator": "model", "msg_bytes": point["msg_bytes"],
           "messages": res.get("messages", messages), "model_source": source}
    row.update({k: point[k] for k in ("qps", "cache_entries", "peers", "attachment", "rung")
                if k in point})
    for key in row_metrics(design, host=point.get("attachment") == "pcie"):
        row[f"{key}_model"] = res[key]
    row["model_s"] = round(time.perf_counter() - t0, 3)
    return row


def run_model_grid(jobs, messages, scheduler=None, connect_timeout=CONNECT_TIMEOUT_S):
    """The grid's rows in :func:`model_points` order, ``jobs`` local processes at a time
    or on the Dask cluster ``scheduler`` (:func:`scripts.executor.make_executor`)."""
    from scripts.executor import make_executor

    pts = model_points()
    prog = Progress(len(pts), "model grid")
    tasks = [(d, p, max(messages, 3 * p.get("qps", 1))) for d, p in pts]
    with make_executor(jobs, scheduler, connect_timeout) as ex:
        return ex.map(model_row, tasks,
                      progress=lambda row: prog.step(f"{row['design']} {row['msg_bytes']} B"))

