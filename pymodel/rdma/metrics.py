"""Reduce one run (RTL records or model predictions, same shapes) to SPEC.md metrics.

``ctrl_bytes`` counts a doorbell as :data:`spec.rdma.DOORBELL_BYTES` and a WQE, a CQE
and a QP-context fill or write-back as one host word
(:data:`spec.formats.roce.HOST_WORD_BYTES`).
"""

import statistics

from pymodel.rdma.frames import ETH_OVERHEAD
from spec.formats.roce import HOST_WORD_BYTES
from spec.rdma import DOORBELL_BYTES

__all__ = ["summarize"]


def summarize(messages, doorbells, written, completed, frames_ab, frames_ba, req, resp):
    """Per-message metrics.

    ``doorbells``: doorbell accept cycles; ``written``/``completed``: cycles of the
    remote write of the last byte and of the CQE write, in message order; ``frames_*``:
    frames with FCS on each link; ``req``/``resp``: the counters of both engines.
    """
    lat = [w - d for w, d in zip(written, doorbells, strict=True)]
    comp = [c - d for c, d in zip(completed, doorbells, strict=True)]
    gaps = [b - a for a, b in zip(doorbells, doorbells[1:], strict=False)]
    wire = sum(len(f) + ETH_OVERHEAD for f in frames_ab) \
        + sum(len(f) + ETH_OVERHEAD for f in frames_ba)
    ops = {
        "doorbells": req["doorbells"], "wqe_reads": req["wqe_reads"],
        "ctx_lookups": req["lookups"] + resp["lookups"],
        "ctx_misses": req["misses"] + resp["misses"],
        "ctx_writebacks": req["writebacks"] + resp["writebacks"],
        "acks_sent": resp["acks"], "acks_received": req["acks"],
        "cqe_writes": req["cqe_writes"],
        "credit_updates": 0,             # no link-level credits on the RoCEv2 path
    }
    ctrl_bytes = DOORBELL_BYTES * ops["doorbells"] + HOST_WORD_BYTES * (
        ops["wqe_reads"] + ops["cqe_writes"] + ops["ctx_misses"] + ops["ctx_writebacks"])
    return {
        "latency_cycles": statistics.median(lat) if lat else None,
        "completion_cycles": statistics.median(comp) if comp else None,
        "ii_cycles": statistics.median(gaps) if gaps else None,
        "wire_bytes": wire / messages,
        "ctrl_ops": {k: v / messages for k, v in ops.items()},
        "ctrl_bytes": ctrl_bytes / messages,
    }
