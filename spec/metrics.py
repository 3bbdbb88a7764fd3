"""The names of what every run measures: the metric keys of the results rows and the
control-action kinds counted per message.

# Ref: SPEC.md, "What every run measures" (definitions) and "results.json" (the row
# format: each metric with the suffixes ``_rtl`` and ``_model``); docs/results.md.
"""

__all__ = ["METRICS", "HOST_METRICS", "CTRL_KINDS", "NIC_PENDING", "STEADY_WINDOW",
           "row_metrics"]

#: The per-message metrics, in the order of the results rows. ``host_bytes``: bytes over
#: the host interfaces (payload and TLP overhead, both directions, both nodes);
#: ``host_tlps``: their transactions, a dict by kind; ``host_util``: the busier
#: direction's busy fraction in the steady state; ``inflight_bits``: the state held in
#: flight (high-water marks of the buffers and windows that sustain the rate).
METRICS = ("latency_cycles", "completion_cycles", "ii_cycles", "wire_bytes", "ctrl_ops",
           "ctrl_bytes", "host_bytes", "host_tlps", "host_util", "inflight_bits")
#: The metrics that only a design with a host interface reports in its results rows: the
#: NIC's integrated rows leave them out (its stores come from the accelerator's fabric).
HOST_METRICS = ("ctrl_bytes", "host_bytes", "host_tlps", "host_util")
#: Control actions counted per message (the keys of ``ctrl_ops``), named as the RDMA
#: engine's counters name them; the NIC has only credit updates.
CTRL_KINDS = ("doorbells", "wqe_reads", "cqe_writes", "ctx_lookups", "ctx_misses",
              "ctx_writebacks", "acks_sent", "acks_received", "credit_updates")

#: ``ii_cycles``, one definition for both designs: the steady-state cycles per message of
#: a back-to-back run, a throughput: the span between the send (or accept) cycles of
#: messages ``floor(n * lo)`` and ``floor(n * hi)`` (in sending order) over the number of
#: messages between them. The window drops the pipeline filling (the first quarter) and
#: draining (the last quarter). A mean, never a median of gaps: a sender that sends a
#: burst and then waits for credits or a window reads as its real rate (gaps 3, 3, 3, 37
#: are 11.5 cycles per message, not 3). SPEC.md, "What every run measures".
STEADY_WINDOW = (1, 4), (3, 4)


#: Metrics the NIC rows do not carry (none: the NIC's ``inflight_bits`` are the beats its
#: stores hold in the switch's ingress buffer, from acceptance to the credit of their
#: last beat; docs/results.md).
NIC_PENDING = ()


def row_metrics(design, host=False):
    """The metrics of :data:`METRICS` that a results row of ``design`` (``"nic"`` or
    ``"rdma"``) carries; NIC rows carry the host metrics when the NIC is attached
    through a host interface (``host``)."""
    if design not in ("nic", "rdma"):
        raise ValueError(f"design must be 'nic' or 'rdma', not {design!r}")
    if design == "rdma":
        return METRICS
    return tuple(m for m in METRICS
                 if (host or m not in HOST_METRICS) and m not in NIC_PENDING)
