"""Recovery cost of the soak: one definition for the NIC and the RDMA engine.

A chunk's *delivery* ends with its last payload write into a receiver's memory: for the
NIC the last memory write of any receiver (the ``wr`` recorders, ``(items, cycles)`` per
node, :class:`pymodel.nic.system.NicSystemModel`; for its loads and atomics the last
write of any node's memory, a landing answer or an atomic's update,
:class:`pymodel.nic.mem_system.NicMemSystemModel`), for the RDMA engine the last
remote-write mark at node B (``written``, ``(cycle, tag)``: the cycle the last payload
word of a message is written, :func:`pymodel.rdma.system.simulate`). Both designs record
these writes and the soak compares them with the golden model cycle for cycle; a
completion (the RDMA engine's CQE) exists in one design only.

``recovery_cycles`` of a chunk is how many cycles later its delivery ends than in the
golden model's run of the same stimulus with every fault rate 0; both times come from
the model, which the design matched in the same chunk: for the NIC
:func:`nic_chunk_recovery`, for the RDMA engine the chunk's co-simulation, which runs the
model without faults anyway (``clean_baseline`` of ``tb/rdma/cocotb_rdma.py``, also
giving ``cqe_delay_cycles``, the same at the last CQE). The soak sums it over chunks and
divides by ``recovered`` (the frames the wires damaged) for
``recovery_cycles_per_damaged_frame``. A damaged frame whose resend still lands before
the last write (or an ACK lost, whose frames had landed) costs nothing by this measure;
a damaged frame can also reorder the work and end the chunk earlier, so a chunk's figure
may be negative.
"""

import dataclasses

__all__ = ["last_nic_write", "nic_chunk_recovery", "nic_mem_chunk_recovery",
           "per_damaged_frame"]

#: The fault rates of :class:`pymodel.fabric.faulty_link.FaultSettings` (the rest of its
#: fields, the seed and burst lengths, do nothing at rate 0).
FAULT_RATES = ("drop_rate", "corrupt_rate", "dup_rate", "tag_rate", "ack_drop_rate",
               "ack_corrupt_rate")


def last_nic_write(wr):
    """The cycle of the last memory write of any receiver: ``wr`` is ``{node: (items,
    cycles)}``; 0 without writes."""
    return max((max(cycles, default=0) for _, cycles in wr.values()), default=0)


def nic_chunk_recovery(model, stores, stalls, settings, mem, run):
    """``recovery_cycles`` of a NIC chunk: ``run`` is the golden model's run (``model``,
    a :class:`pymodel.nic.system.NicSystemModel`) of ``stores`` with ``stalls`` and the
    link fault ``settings`` from the memories ``mem``; the baseline is ``model``'s run of
    the same with every rate of ``settings`` 0 (model only, no simulation)."""
    clean = dataclasses.replace(settings, **dict.fromkeys(FAULT_RATES, 0))
    base = model.run(stores, list(range(len(run["wr"]))), stalls, link_settings=clean,
                     mem=mem)
    return last_nic_write(run["wr"]) - last_nic_write(base["wr"])


def nic_mem_chunk_recovery(model, cmds, settings, mem, run):
    """``recovery_cycles`` of a chunk of the NIC's loads and atomics: ``run`` is the
    golden model's run (``model``, a :class:`pymodel.nic.mem_system.NicMemSystemModel`
    with ``link_retry``) of ``cmds`` with the link fault ``settings`` from the memories
    ``mem``; the baseline is the same with every rate of ``settings`` 0 (model only)."""
    clean = dataclasses.replace(settings, **dict.fromkeys(FAULT_RATES, 0))
    base = model.run(cmds, mem={q: list(v) for q, v in mem.items()}, link_settings=clean)

    def last(r):
        return max((c for ws in r["wr"].values() for c, _, _ in ws), default=0)

    return last(run) - last(base)


def per_damaged_frame(figures):
    """``recovery_cycles`` / ``recovered`` of a design's (summed) soak figures, to one
    decimal; 0.0 when no frame was damaged."""
    damaged = figures.get("recovered", 0)
    if not damaged:
        return 0.0
    return round(figures.get("recovery_cycles", 0) / damaged, 1)
