"""The measures of an open-loop RDMA load run (:mod:`analysis.load.rdma`): the measured
messages' arrival, accept, remote-write and completion cycles (:func:`load_per_message`)
and the row of a run (:func:`load_row`)."""

import numpy as np

from analysis.load.traffic import distribution
from pymodel.rdma.metrics import per_message


def load_per_message(verbs, run, arrivals, warm=0):
    """Per-message ``arrival``, ``accept``, ``remote_write``, ``completion`` arrays of a
    run (the model's or the RTL's records, same shapes), for the measured messages (the
    first ``warm`` are the warm-up); ``RuntimeError`` if a message was not written or
    not completed."""
    starts = verbs.write_starts()
    qpn_b = {q.qpn_a: q.qpn_b for q in verbs.qps.values()}
    lat, comp = per_message(verbs.messages, starts, run["mmio_stamps"], run["written"],
                            run["completed"], qpn_b)
    accept = [run["mmio_stamps"][starts[m.announce]] for m in verbs.messages]
    if any(x is None for x in lat) or any(x is None for x in comp):
        raise RuntimeError("RDMA model: a message was not written or not completed")
    accept, lat, comp = accept[warm:], lat[warm:], comp[warm:]
    if len(accept) != len(arrivals):
        raise ValueError(f"{len(arrivals)} arrivals for {len(accept)} measured messages")
    return {"arrival": np.asarray(arrivals, dtype=np.int64),
            "accept": np.asarray(accept, dtype=np.int64),
            "remote_write": np.asarray([a + x for a, x in zip(accept, lat, strict=True)],
                                       dtype=np.int64),
            "completion": np.asarray([a + x for a, x in zip(accept, comp, strict=True)],
                                     dtype=np.int64)}



def load_row(per, load, service_cycles, run=None, warm_counts=(0, 0)):
    """The row of a load run from its measured messages' arrays (the model's or the
    RTL's); ``achieved_per_cycle`` is the rate of their remote writes,
    ``(n - 1) / (last - first)``; with ``run``, context misses (both nodes) and
    doorbells per measured message (the warm-up's ``warm_counts`` taken off)."""
    n = len(per["arrival"])
    rw = per["remote_write"]
    steady = _steady_interval(rw) if n > 1 else 0
    row = {"load": load, "service_cycles": service_cycles,
           "offered_per_cycle": load / service_cycles,
           "achieved_per_cycle": 1 / steady if steady else None, "messages": n}
    row.update(distribution("latency", (rw - per["arrival"]).tolist()))
    row.update(distribution("completion", (per["completion"] - per["arrival"]).tolist()))
    if run is not None:
        misses = run["req"]["misses"] + run["resp"]["misses"] - warm_counts[0]
        row["ctx_misses"] = misses / n
        row["doorbells"] = (run["req"]["doorbells"] - warm_counts[1]) / n
    return row


def _steady_interval(remote_writes, drop=0, period=1):
    """Mean cycles between remote writes, the first ``drop`` (in time order) left out:
    ``(w[m] - w[0]) / m`` of the rest, ``m`` the most intervals that are a whole number
    of ``period`` messages (an issuer that announces batches of ``period`` messages
    makes the writes come in bursts; a window of whole bursts measures their rate, one
    cut inside a burst would not). Fewer than ``period + 1`` messages: all of them."""
    w = np.sort(np.asarray(remote_writes))[drop:]
    m = len(w) - 1
    if m >= period:
        m -= m % period
    return float(w[m] - w[0]) / m
