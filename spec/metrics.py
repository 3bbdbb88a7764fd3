"""The names of what every run measures: the metric keys of the results rows and the
control-action kinds counted per message.

# Ref: SPEC.md, "What every run measures" (definitions) and "results.json" (the row
# format: each metric with the suffixes ``_rtl`` and ``_model``); docs/results.md.
"""

__all__ = ["METRICS", "HOST_METRICS", "CTRL_KINDS", "row_metrics"]

#: The per-message metrics, in the order of the results rows.
METRICS = ("latency_cycles", "completion_cycles", "ii_cycles", "wire_bytes", "ctrl_ops",
           "ctrl_bytes")
#: The metrics that only a design with a host interface reports in its results rows: the
#: NIC rows leave them out (no host interface yet; the golden model's points give 0).
HOST_METRICS = ("ctrl_bytes",)
#: Control actions counted per message (the keys of ``ctrl_ops``), named as the RDMA
#: engine's counters name them; the NIC has only credit updates.
CTRL_KINDS = ("doorbells", "wqe_reads", "cqe_writes", "ctx_lookups", "ctx_misses",
              "ctx_writebacks", "acks_sent", "acks_received", "credit_updates")


def row_metrics(design):
    """The metrics of :data:`METRICS` that a results row of ``design`` (``"nic"`` or
    ``"rdma"``) carries."""
    if design not in ("nic", "rdma"):
        raise ValueError(f"design must be 'nic' or 'rdma', not {design!r}")
    return METRICS if design == "rdma" else tuple(m for m in METRICS
                                                  if m not in HOST_METRICS)
