"""The names of what every run measures: the metric keys of the results rows and the
control-action kinds counted per message.

# Ref: SPEC.md, "What every run measures" (definitions) and "results.json" (the row
# format: each metric with the suffixes ``_rtl`` and ``_model``); docs/results.md.
"""

__all__ = ["METRICS", "HOST_METRICS", "CTRL_KINDS", "NIC_PENDING", "STEADY_WINDOW",
           "row_metrics", "STATE_KINDS", "HEADER_CLASSES", "LEVEL_KEYS", "level_keys",
           "COMPLETION_AT"]

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


#: The three kinds of state a row counts apart (SPEC.md, "Comparisons on a level field"),
#: each in bits: ``endpoint_state_bits`` (what the NIC or the engine itself holds in
#: flight: the NIC's end-to-end completion state; the engine's window records,
#: outstanding reads, prefetched WQEs, held payload, context fills and receive buffer),
#: ``fabric_buffer_bits`` (the switch ingress buffer the endpoint's beats occupy until
#: their credit returns: the NIC's payload beats in flight) and ``replay_buffer_bits``
#: (the link-retry replay buffer the endpoint owns on its uplink, as sized for the
#: row's fabric: :func:`spec.fabric_profiles.replay_sizes`; a size, not a high-water
#: mark). ``inflight_bits`` is the endpoint state plus the fabric buffer (no replay
#: buffer).
STATE_KINDS = ("endpoint_state_bits", "fabric_buffer_bits", "replay_buffer_bits")

#: The class of each framing (``header`` key): ``scale-up`` for the short headers of a
#: scale-up link (the NIC's 8-byte compact header, the engine's 10-byte scale-up header
#: before its BTH), ``ethernet`` for Ethernet framing (the NIC's L2, the engine's
#: RoCEv2 behind Ethernet, IPv4 and UDP). Ref: spec.formats.nic.header_bytes,
#: spec.formats.scaleup.
HEADER_CLASSES = {"compact": "scale-up", "scaleup": "scale-up", "l2": "ethernet",
                  "roce": "ethernet"}

#: Where a row's message counts as complete (its ``completion_at`` key): ``link-credit``
#: (the NIC's last beat's link credit back at the sender), ``tracker`` (the NIC's
#: end-to-end completion accepted by the sender's tracker, in the NIC), ``host-memory``
#: (a record of the completion written into the sender's host memory through its host
#: interface: the RDMA engine's CQE, the NIC's completion record), ``answer-landed`` (a
#: read or atomic: its answer in the requester's memory and the requester told: the NIC's
#: load response landed and its tag freed; the engine's READ data, then its CQE, in host
#: memory).
COMPLETION_AT = ("link-credit", "tracker", "host-memory", "answer-landed")

#: The keys a comparison holds level (SPEC.md, "Comparisons on a level field"), as
#: :func:`level_keys` derives them from a row's comparison keys.
LEVEL_KEYS = ("topology", "fabric", "attachment", "completion", "link_reliability",
              "header_class")


def level_keys(row):
    """The level-field keys of a results row (a dict with the comparison keys
    ``topology``, ``fabric``, ``attachment``, ``completion``, ``reliability`` and
    ``header``), named alike for both designs: ``attachment`` ``pcie`` or
    ``integrated`` (the NIC's ``integrated`` and the engine's ``on_die``: on the
    accelerator's die), ``completion`` where the message counts as complete (the row's
    ``completion_at``, :data:`COMPLETION_AT`, where it carries one), ``link_reliability``
    ``link-retry`` or ``none`` (the link-level part of ``reliability``; the engine's
    go-back-N is its own transport, part of the design), ``header_class``
    (:data:`HEADER_CLASSES`), and ``target_latency`` (cycles of a read of the memory that
    answers a load or READ: the NIC's target memory, the engine's host) where the row
    carries one. ``ValueError`` names a row without one of the keys or with an unknown
    header."""
    missing = [k for k in ("topology", "fabric", "attachment", "completion", "reliability",
                           "header") if k not in row]
    if missing:
        raise ValueError(f"row lacks the comparison key(s) {missing}")
    if row["header"] not in HEADER_CLASSES:
        raise ValueError(f"header must be one of {list(HEADER_CLASSES)}, "
                         f"not {row['header']!r}")
    return {"topology": row["topology"], "fabric": row["fabric"],
            "attachment": "pcie" if row["attachment"] == "pcie" else "integrated",
            "completion": row.get("completion_at", row["completion"]),
            "link_reliability": ("link-retry" if str(row["reliability"]).startswith(
                "link-retry") else "none"),
            "header_class": HEADER_CLASSES[row["header"]],
            **({"target_latency": row["target_latency"]} if "target_latency" in row else {})}
