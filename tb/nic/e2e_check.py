"""The end-to-end completion's part of a NicTop co-simulation: arm and read the ``cp<p>``
recorders, compare every completion and the trackers' ports with the model, and work out
each store's end-to-end completion from the RTL's own stamps."""

from rtl.nic.outstanding_tracker import cpl_event_layout
from spec.formats.nic import COMPLETION_COUNT_BITS
from spec.nic import CPL_COUNTERS, CPL_GEN_COUNTERS, CPL_PEER_PORTS

__all__ = ["arm_completions", "read_completions", "compare_completions",
           "store_completions", "cpl_counters", "peer_counters"]


def arm_completions(tb, want):
    """Arm each node's ``cp<p>`` recorder with the completions the model predicts."""
    for q in range(tb.nodes):
        tb.harness.arm_recorder(f"cp{q}", len(want["e2e"][q]["cp"][0]))


async def read_completions(tb):
    """Snapshot the ``cp<p>`` recorders (after :meth:`NicTestbench.run`); returns
    ``{p: ([(src, known, status, count, dropped)], cycles)}``."""
    h = tb.harness
    await h.snapshot(recorders=[f"cp{q}" for q in range(tb.nodes)])
    out = {}
    for q in range(tb.nodes):
        items, stamps = h.recorded(f"cp{q}")
        events = []
        for raw in items:
            v = cpl_event_layout.from_bits(raw)
            events.append((int(v.src), int(v.known), int(v.status), int(v.count),
                           int(v.dropped)))
        out[q] = (events, list(stamps))
    return out


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


def compare_completions(sb, tb, want, cp):
    """Every completion at each tracker (``cp`` from :func:`read_completions`) and its
    cycle, the CPL counters and the per-destination ports against the model's ``want``.
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
        ports[q] = peer_counters(tb, q)
        seen = [t for t, _ in e["timeout_cycles"]]
        sb.equal(f"timeouts{q} away from the end", any(end - 3 <= t <= end + 3 for t in seen),
                 False)
        want_ports = dict(e["ports"])
        want_ports["timeouts"] = [sum(1 for t, d in e["timeout_cycles"] if d == dd and t < end)
                                  for dd in range(nodes)]
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
