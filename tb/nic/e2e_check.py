"""The end-to-end completion's part of a NicTop co-simulation: arm and read the ``cp<p>``
(and with records the ``cq<p>``) recorders, compare every completion, record and the
trackers' ports with the model, and work out each store's end-to-end completion and the
completion frames' share of the figures from the RTL's own stamps and frames; each
store's first wire beat (:func:`pymodel.nic.frames.wire_starts`, where
``ii_cycles`` is taken)."""

from pymodel.fcs import phy_bytes
from pymodel.fields import unpack
from pymodel.nic.frames import parse_header
from rtl.nic.completion_record import record_event_layout
from rtl.nic.outstanding_tracker import cpl_event_layout
from rtl.nic.tracker_memory import wide_cpl_layout
from spec.formats.nic import (
    COMPLETION_COUNT_BITS,
    PSN_BYTES,
    NicOp,
    completion_bytes,
    header_bytes,
)
from spec.nic import (
    CPL_COUNTERS,
    CPL_GEN_COUNTERS,
    CPL_PEER_PORTS,
    completion_state_bits,
    destination_state_bits,
    peer_retry_state_bits,
    record_state_bits,
)

__all__ = ["arm_completions", "read_completions", "compare_completions", "poll_counters",
           "store_completions", "cpl_counters", "peer_counters", "arm_records",
           "read_records", "compare_records", "e2e_model", "e2e_figures"]


def arm_completions(tb, want):
    """Arm each node's ``cp<p>`` recorder with the completions the model predicts."""
    for q in range(tb.nodes):
        tb.harness.arm_recorder(f"cp{q}", len(want["e2e"][q]["cp"][0]))


async def read_completions(tb, records=False):
    """Snapshot the ``cp<p>`` recorders (after :meth:`NicTestbench.run`; with
    ``records`` the ``cq<p>`` recorders in the same snapshot, for :func:`read_records`);
    returns ``{p: ([(src, known, status, count, dropped)], cycles)}`` (16-bit sources
    with ``destinations``)."""
    h = tb.harness
    layout = cpl_event_layout if tb.id_bits == 8 else wide_cpl_layout
    await h.snapshot(recorders=[f"{r}{q}" for q in range(tb.nodes)
                                for r in ("cp", "cq")[:1 + bool(records)]])
    out = {}
    for q in range(tb.nodes):
        items, stamps = h.recorded(f"cp{q}")
        events = []
        for raw in items:
            v = layout.from_bits(raw)
            events.append((int(v.src), int(v.known), int(v.status), int(v.count),
                           int(v.dropped)))
        out[q] = (events, list(stamps))
    return out


def arm_records(tb, want):
    """``records``: arm each node's ``cq<p>`` recorder with the records the model
    predicts."""
    for q in range(tb.nodes):
        tb.harness.arm_recorder(f"cq{q}", len(want["records"][q]))


def read_records(tb):
    """The ``cq<p>`` recorders of :func:`read_completions`' snapshot; returns ``{p:
    ([(src, known, status, count, dropped)], cycles)}``, each record as a completion event of
    :func:`store_completions` (its destination and count from the tag, ``known`` 1,
    status and dropped 0), in the cycles the records reached memory. A top with
    ``destinations`` records :data:`rtl.nic.completion_record.record_event_layout`: the
    tag (the ring slot, checked by :func:`compare_records`) and the destination and
    count read from the record's word as it was written; ``{p: (events, cycles,
    slots)}``."""
    h = tb.harness
    out = {}
    for q in range(tb.nodes):
        items, stamps = h.recorded(f"cq{q}")
        if tb.id_bits == 8:
            out[q] = ([(int(t) & 0xFF, 1, 0, int(t) >> 8, 0) for t in items], list(stamps))
            continue
        ev = [unpack(record_event_layout, int(t)) for t in items]
        out[q] = ([(e["peer"], 1, 0, e["count"], 0) for e in ev], list(stamps),
                  [e["slot"] for e in ev])
    return out


def compare_records(sb, want, cq, records):
    """Every record (destination, count) and the cycle it reached memory against the
    model's; with ring-slot tags (:func:`read_records`) each the slot of its place in
    the ring of ``records`` slots."""
    for q, (events, stamps, *slots) in cq.items():
        sb.compare(f"cq{q} records", [(e[0], e[3]) for e in events],
                   [(d, k) for _, d, k in want["records"][q]])
        sb.compare(f"cq{q} cycles", stamps, [c for c, _, _ in want["records"][q]], fmt=str)
        if slots:                   # the tag is the ring slot: the k-th record's k mod slots
            sb.compare(f"cq{q} slots", slots[0],
                       [k % records for k in range(len(slots[0]))], fmt=str)


def cpl_counters(tb, q):
    """Node ``q``'s completion counters (:data:`spec.nic.CPL_COUNTERS`): the
    generator's of port ``cgen[q]``, the others of port ``otrk[q]``."""
    return {c: int(tb.harness.port(
        f"{'cgen' if c in CPL_GEN_COUNTERS else 'otrk'}__{q}__{c}").value)
        for c in CPL_COUNTERS}


def peer_counters(tb, q):
    """Node ``q``'s tracker counters per destination (:data:`spec.nic.CPL_PEER_PORTS`):
    ``{name: [value of destination d]}``, destination ``d`` in bits ``16d .. 16d + 15``
    of member ``name`` of port ``otrk[q]`` (an ``ArrayLayout(16, nodes)``)."""
    out = {}
    for n in CPL_PEER_PORTS:
        word = int(tb.harness.port(f"otrk__{q}__{n}").value)
        out[n] = [word >> (16 * d) & 0xFFFF for d in range(tb.nodes)]
    return out


async def poll_counters(tb, q, ids):
    """Node ``q``'s tracker entries of the destinations ``ids`` through the poll port
    of a top with ``destinations`` (``otrk__<q>__poll``, one id a clock cycle, read at
    the falling edge after it is set; after the run an entry changes only by a timeout,
    which :func:`compare_completions` requires to be far away): ``{name: [value of
    ids[k]]}`` as :func:`peer_counters`."""
    from cocotb.triggers import FallingEdge

    h, out = tb.harness, {n: [] for n in CPL_PEER_PORTS}
    await FallingEdge(tb.dut.clk)          # out of the read-only phase of the snapshot
    for d in ids:
        h.set(f"otrk__{q}__poll", d)
        await FallingEdge(tb.dut.clk)
        for n in CPL_PEER_PORTS:
            out[n].append(int(h.port(f"otrk__{q}__{n}").value))
    return out


async def compare_completions(sb, tb, want, cp):
    """Every completion at each tracker (``cp`` from :func:`read_completions`) and its
    cycle, the CPL counters and the per-destination ports (with ``destinations`` every
    entry through the poll port, :func:`poll_counters`) against the model's ``want``.
    Timeouts: the model's of the cycles before the RTL's ports were read (``tb.end``); none
    may fall within 3 cycles of it. Returns ``(ports, counters)`` as the RTL reads."""
    end, nodes = tb.end, tb.nodes
    ports, counters = {}, {}
    for q in range(nodes):
        e = want["e2e"][q]
        sb.compare(f"cp{q} completions", cp[q][0], [tuple(int(x) for x in ev)
                                                    for ev in e["cp"][0]])
        sb.compare(f"cp{q} cycles", cp[q][1], e["cp"][1], fmt=str)
        counters[q] = cpl_counters(tb, q)
        for c in CPL_COUNTERS:
            sb.equal(f"{c}{q}", counters[q][c], e[c])
        ids = range(len(e["ports"]["outstanding"]))
        ports[q] = (peer_counters(tb, q) if tb.id_bits == 8
                    else await poll_counters(tb, q, ids))
        seen = [t for t, _ in e["timeout_cycles"]]
        sb.equal(f"timeouts{q} away from the end", any(end - 3 <= t <= end + 3 for t in seen),
                 False)
        want_ports = dict(e["ports"])
        want_ports["timeouts"] = [sum(1 for t, d in e["timeout_cycles"] if d == dd and t < end)
                                  for dd in ids]
        for n in CPL_PEER_PORTS:
            sb.compare(f"{n}{q}", ports[q][n], want_ports[n], fmt=str)
    return ports, counters


def store_completions(events, stamps, frames):
    """Each store's end-to-end completion at its sender from the completions that reached
    the sender's tracker (``events``, ``stamps``: one node's :func:`read_completions`),
    by the tracker's contract: a completion from ``d`` is accepted when its count
    advances the completed count by 1 to the frames outstanding to ``d``; a store is
    complete at the first accepted completion that counts its last frame. ``frames``:
    ``(dst, frames)`` of the sender's stores in order. Returns cycles (None: never)."""
    mask = (1 << COMPLETION_COUNT_BITS) - 1
    sent, last = {}, []
    for dst, n in frames:
        sent[dst] = sent.get(dst, 0) + n
        last.append((dst, sent[dst]))
    done, when = {}, {}
    for (src, known, _st, count, _dr), cyc in zip(events, stamps, strict=True):
        old = done.get(src, 0)
        new = old + ((count - old) & mask)
        if known and old < new <= sent.get(src, 0):
            when.setdefault(src, []).append((new, cyc))
            done[src] = new
    out = []
    for dst, k in last:
        out.append(next((cyc for n, cyc in when.get(dst, []) if n >= k), None))
    return out


def e2e_model(p, want, stores, src):
    """The model's side of :func:`e2e_figures`: the completion frames' wire bytes per
    store and ``_metrics``' ``acks`` and ``state_bits``."""
    nodes, n = p["nodes"], len(stores[src])
    n_cpl = sum(len(want["e2e"][q]["sent"]) for q in range(nodes))
    extra = n_cpl * (8 + completion_bytes(p["framing"]) + 4 + 12) / n
    acks = {"acks_sent": n_cpl / n, "acks_received": want["e2e"][src]["cpl_ok"] / n}
    if p.get("records", 0):                  # the records, the NIC's CQE writes
        acks["cqe_writes"] = len(want["records"][src]) / n
    return extra, {"acks": acks, "state_bits": e2e_state_bits(p)}


def e2e_state_bits(p):
    """The end-to-end completion's state bits of a top of parameters ``p``: the
    generators', trackers' and record writers' (:func:`spec.nic.completion_state_bits`,
    :func:`spec.nic.record_state_bits`) of its nodes; with ``peer_retry``, each node's
    :func:`spec.nic.peer_retry_state_bits` (its replay buffer's slots of the longest
    frame without FCS included); with ``destinations``, those of
    the keyed generators and the tracker memory (:func:`spec.nic.
    destination_state_bits`)."""
    nodes, records = p["nodes"], p.get("records", 0)
    if p.get("destinations"):
        return sum(destination_state_bits(p["destinations"], nodes - 1, p["coalesce"],
                                          p["flush_idle"], p["timeout"], records))
    gen, trk = completion_state_bits(nodes, p["coalesce"], p["flush_idle"], p["timeout"])
    extra = 0
    if p.get("peer_retry"):            # per node: spec.nic.peer_retry_state_bits
        slot = header_bytes(p["framing"]) + PSN_BYTES + p["max_payload"]
        extra = nodes * sum(peer_retry_state_bits(nodes, p["peer_window"], slot))
    return gen + trk + record_state_bits(nodes, records) + extra


def e2e_figures(p, tb, want, cp, stores, src, sent, rtl_wire):
    """``e2e``, one sender ``src``, the RTL's side of :func:`e2e_model`: each store's
    completion from the RTL's completion stamps; the completion frames' wire bytes (the
    frames with the COMPLETION opcode on every uplink) spread over the stores; the
    sender's credits counted over its store beats only; the completions per store and
    the e2e state bits for ``_metrics``."""
    w, nodes, n = p["width"], p["nodes"], len(stores[src])
    frames = [(s.dst, len(s.segments(w, p["max_payload"]))) for s in stores[src]]
    rtl_comp = store_completions(cp[src][0], cp[src][1], frames)
    cpl_rtl = [f.data for q in range(nodes) for f in sent[q]
               if parse_header(p["framing"], f.data)["opcode"] == NicOp.COMPLETION.value]
    extra_rtl = sum(phy_bytes(f) for f in cpl_rtl) / n
    _, modelled = e2e_model(p, want, stores, src)
    rtl_wire = [x + extra_rtl for x in rtl_wire]
    rtl_cr = [len(tb.credit_stamps(src)) / n]
    acks_rtl = {"acks_sent": len(cpl_rtl) / n,
                "acks_received": cpl_counters(tb, src)["cpl_ok"] / n}
    if p.get("records", 0):         # cp: the records (tb.nic.e2e_check.read_records)
        acks_rtl["cqe_writes"] = len(cp[src][0]) / n
    return (rtl_comp, rtl_wire, rtl_cr,
            {"acks": acks_rtl, "state_bits": modelled["state_bits"]})
