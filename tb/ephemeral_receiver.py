"""The twin's side and the model-free checks of the ephemeral receiver's tests (the
Amaranth simulator's, the co-simulation's and the fuzz's): the twin
(:class:`pymodel.ephemeral.receiver.ReceiverTwin`) run cycle by cycle on a packet stream
(:func:`analysis.scenarios.fuzz_ephemeral.hostile`), and the invariants that hold whatever
the rules say."""

from pymodel.ephemeral.receiver import ReceiverTwin
from spec.ephemeral import RECV_ACKS, RECV_DELIVERS, RECV_OUTCOMES

__all__ = ["model_events", "invariant_errors", "sentinel_errors", "run_end"]

def run_end(cycles, entries, idle):
    """The cycle a run stops at: ``idle + 2 * entries + 2`` after the last packet, so that
    every context has closed on idle (no arrival for ``idle``, then the scan's visit)."""
    return (cycles[-1] if cycles else 0) + idle + 2 * entries + 2


def model_events(pkts, cycles, entries, idle, now=0, end=None):
    """The twin, packet ``k`` arriving in cycle ``cycles[k]`` (strictly increasing), from
    cycle 0 up to ``end`` (default :func:`run_end`). Returns ``(outcomes, delivers, acks,
    closes, twin)``: per packet ``(cycle, outcome, entry)`` (entry 0 when it has none),
    per delivered packet ``(cycle, entry, src, psn)``, per ACK ``(cycle, src, psn)``, per
    idle close ``(cycle, src)``. ``now``: the pool's ``now`` in cycle 0."""
    twin = ReceiverTwin(entries, idle, now)
    at = dict(zip(cycles, pkts, strict=True))
    outs, delivers, acks, closes = [], [], [], []
    end = run_end(cycles, entries, idle) if end is None else end
    for t in range(end):
        pkt = at.get(t)
        out, entry, closed = twin.cycle(pkt)
        if out is not None:
            src, psn = pkt[0], pkt[1]
            outs.append((t, out, entry or 0))
            if out in RECV_DELIVERS:
                delivers.append((t, entry, src, psn))
            if out in RECV_ACKS:
                acks.append((t, src, psn))
        if closed is not None:
            closes.append((t, closed))
    return outs, delivers, acks, closes, twin


def invariant_errors(pkts, outs, delivers, counters):
    """Model-free checks of one run (RTL or twin): every packet has one outcome and the
    counters sum to the packets in, each per outcome; a context incarnation (a source from
    an ``opened`` or ``reopened`` to the next) has each PSN delivered at most once; only
    packets that arrived are delivered, as they arrived. Returns the failures' texts."""
    errors = []
    if len(outs) != len(pkts):
        errors.append(f"{len(outs)} outcomes for {len(pkts)} packets")
    tally = {name: 0 for name in RECV_OUTCOMES}
    for _, out, _ in outs:
        tally[out] += 1
    if sum(counters.values()) != len(pkts) or counters != tally:
        errors.append(f"counters {counters} are not the outcomes' tally {tally} of "
                      f"{len(pkts)} packets")
    incarnation, seen = {}, set()
    by_cycle = {d[0]: d for d in delivers}
    for (t, out, _), pkt in zip(outs, pkts, strict=False):
        src, psn = pkt[0], pkt[1]
        if out in ("opened", "reopened"):
            incarnation[src] = incarnation.get(src, 0) + 1
        if out in RECV_DELIVERS:
            d = by_cycle.get(t)
            if d is None or d[2:] != (src, psn):
                errors.append(f"cycle {t}: {out} {pkt} but delivered {d}")
            key = (src, incarnation.get(src, 0), psn)
            if key in seen:
                errors.append(f"cycle {t}: PSN {psn} of source {src} delivered twice in one "
                              f"context")
            seen.add(key)
    if len(delivers) != sum(tally[o] for o in RECV_DELIVERS):
        errors.append(f"{len(delivers)} deliveries for "
                      f"{sum(tally[o] for o in RECV_DELIVERS)} delivering outcomes")
    return errors


def sentinel_errors(pkts, outs, delivers, acks, sentinel):
    """The sentinel's packets (:mod:`analysis.scenarios.fuzz_ephemeral`: its context opens
    on an empty pool, never idles, and no other packet carries its source): the first
    ``opened``, every other ``delivered``; each delivered and acknowledged once, in the
    order sent, with its PSN. Returns the failures' texts."""
    mine = [p[1] for p in pkts if p[0] == sentinel]
    got = [o for (_, o, _), p in zip(outs, pkts, strict=False) if p[0] == sentinel]
    errors = []
    want = ["opened"] + ["delivered"] * (len(mine) - 1) if mine else []
    if got != want:
        bad = next((k for k, (g, w) in enumerate(zip(got, want, strict=False)) if g != w),
                   min(len(got), len(want)))
        errors.append(f"sentinel packet {bad}: outcomes {got[bad:bad + 3]}, want "
                      f"{want[bad:bad + 3]}")
    if [d[3] for d in delivers if d[2] == sentinel] != mine:
        errors.append("the sentinel's deliveries are not its packets once each in order")
    if [a[2] for a in acks if a[1] == sentinel] != mine:
        errors.append("the sentinel's ACKs are not its packets once each in order")
    return errors
