"""Open-loop load on the RDMA engine (the two-node :class:`RdmaTop`), on the golden model.

One sender (node A's host) posts ``messages`` RDMA WRITEs of ``msg_bytes``. Each message
*arrives* (the application hands it over) at a cycle of
:func:`analysis.load.traffic.arrival_cycles`, goes to a QP drawn by
:func:`analysis.load.traffic.qp_sequence`, and is *posted* by one serial issuer whose
costs come from an issuer profile (:data:`analysis.workloads.carriers.ISSUERS`: ``none``,
``cpu``, ``gpu``, ``controller``, ...): it builds the WQE in host memory
(``wqe_cycles``), rings the QP's doorbell (``doorbell_cycles``; the doorbell's MMIO
write is released the cycle the WQE is complete) and polls one CQE per signalled
message (``cqe_cycles``, charged to its timeline). Doorbell batching is opportunistic,
as a good issuer does it: the issuer rings after ``doorbell_batch`` WQEs or as soon as
no further message is waiting, one doorbell per QP with unannounced WQEs. Every
``signal_every``-th message of a QP (by the issuer's count) asks for a CQE, and the
last one of each QP.

The model plays the MMIO player's words at their release cycles exactly as the RTL's
timed player does, so a co-simulation of the same scenario (:func:`build_load`) is
compared cycle for cycle (tests/test_cosim_rdma_load.py).

Latency under load counts from *arrival*: the remote write of the message's last byte
minus its arrival (queueing at the issuer, the engine and the host interface included);
completion likewise (the CQE that tells the host, the next one of its QP for an
unsignalled message). Before the measured messages, a warm-up posts one WRITE to
each of the most used QPs that the context caches hold (:func:`load_scenario`), so
that the measurement starts from the steady state, not from cold caches; it is not
measured. ``service_cycles`` (for the offered load) is the saturated
sender's cycles per message: the same scenario with every message arriving at once
after the warm-up (:func:`saturation`), as ``ib_write_bw`` would measure it with this
issuer, over the steady part of the run (:func:`steady_saturation` doubles the run until
the rate is stable to 1 %).

**The rung.** Each issuer posts with the best rung of the optimisation ladder
(:data:`spec.rdma_engine.LADDER`) it can use (:func:`best_rung`, the ``rung`` knob
``"best"``; any ladder rung may be named instead):

- the engine alone (``none``), the hardware ``controller`` and the ``cpu``: the last
  rung, ``+ACK coalescing`` (each WQE written by MMIO into the BlueFlame buffer with
  its payload inline, one signalled WQE per 64 of a QP, AckReq every 16 messages or 64
  frames) for messages of at most :func:`pymodel.rdma.verbs.inline_limit` bytes (192);
  above that ``+doorbell batching 16``, the best rung without inline data (the issuer
  rings after up to 16 WQEs, as soon as no further message is waiting);
- the GPU (``gpu``, IBGDA as NVSHMEM and DeepEP use it): its WQEs are in GPU memory,
  which the engine reads over PCIe peer to peer, so no BlueFlame and no inline data:
  ``+doorbell batching 16``, the WQEs of a batch filled in parallel by the lanes of a
  warp (NVSHMEM's parallel submission: one WQE per lane, then one doorbell), every WQE
  signalled (DeepEP sets ``MLX5_WQE_CTRL_CQ_UPDATE`` on each). The host-interface
  profile has one read latency for every read, so the peer-to-peer WQE read is the
  profile's WQE read: 560 cycles with ``pcie``, pcie-bench's median 64-byte DMA read
  (:mod:`spec.host`, [pcie-bench]). No published latency of a NIC's read of GPU memory
  across a PCIe switch was found; the host-memory figure stands for it (its path is no
  shorter: NIC, switch, GPU BAR, HBM).

With ACK coalescing the host asks for an ACK (``WQE_ACK_REQ``) on a QP's last message,
on every message when QPs share cache entries (more QPs than entries: a message that
does not ask keeps its entry pinned), and before a QP's un-acknowledged span would reach
:data:`analysis.scenarios.rdma.ACK_SPAN_BEATS` wire beats or a quarter of the transport
timeout in cycles (the timer's guard, :func:`ack_requests`).

The point's pieces are split by concern: its knobs and rung (:mod:`.rdma_knobs`), its
scenario (:mod:`.rdma_scenario`), the measures of a run (:mod:`.rdma_measure`) and the
saturated rate (:mod:`.rdma_saturation`); this module runs one point
(:func:`rdma_load_run`) and re-exports their names.
"""

from analysis.load.rdma_knobs import (
    BLUEFLAME_ISSUERS,  # noqa: F401  (re-exported for callers of this module)
    LOAD_ISSUERS,
    LOAD_KNOBS,
    PARALLEL_ISSUERS,
    RDMA_LOAD_DEFAULTS,
    SATURATION_TOLERANCE,
    best_rung,
    check_load_knobs,
    rung_knobs,
)
from analysis.load.rdma_measure import load_per_message, load_row
from analysis.load.rdma_saturation import rate_bound, saturation, steady_saturation
from analysis.load.rdma_scenario import (
    ack_requests,
    build_load,
    load_scenario,
    warm_qps,
    wire_beats,
)
from analysis.rdma.point import run_model
from spec.load import check_load

__all__ = ["build_load", "rdma_load_run", "saturation", "load_row", "load_per_message",
           "check_load_knobs", "load_scenario", "warm_qps", "RDMA_LOAD_DEFAULTS",
           "LOAD_ISSUERS", "LOAD_KNOBS", "best_rung", "rung_knobs", "ack_requests",
           "steady_saturation", "rate_bound", "wire_beats", "PARALLEL_ISSUERS",
           "SATURATION_TOLERANCE"]


def rdma_load_run(msg_bytes, messages, load, seed=1, service_cycles=None, **knobs):
    """One open-loop point. Returns ``(row, per)``: ``per`` the measured messages'
    arrays (``arrival``, ``accept``, ``remote_write``, ``completion``, absolute cycles)
    and ``row`` the offered load, ``service_cycles``, offered and achieved messages per
    cycle, and the latency/completion distributions (:data:`spec.load.DISTRIBUTION_KEYS`,
    from arrival). ``service_cycles`` defaults to :func:`saturation` of the same point
    (pass it to reuse one measurement across loads)."""
    p = check_load_knobs(msg_bytes, messages, knobs)
    load = check_load(load)
    if service_cycles is None:
        service_cycles = saturation(msg_bytes, messages, seed, **knobs)
    cfg, v, arrivals, warm = load_scenario(msg_bytes, messages, load, service_cycles, p,
                                           seed)
    run = run_model(cfg, v)
    per = load_per_message(v, run, arrivals, warm)
    row = load_row(per, load, service_cycles, run, v.warm_counts)
    row["rung"] = v.rung
    return row, per
