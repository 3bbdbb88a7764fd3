"""Fast path of the golden models: a point's metrics from formulas, never stepping cycles.

:func:`fast_point` takes the same arguments as :func:`analysis.points.cycle_point` and
returns the same dict with the same numbers (exact, not approximated: the tests check
equality on a grid, message by message). :func:`fast_run` and :func:`fast_messages`
also give the per-message cycles, numpy arrays built from closed forms. Cost: numpy
work linear in ``messages`` plus a short Python loop over one period of the traffic
pattern; more than a million messages per second on one core.

Traffic (the scenarios of :mod:`analysis.points`): back to back, no command or doorbell
stalls, no faults. Every parameter range that :func:`analysis.points.resolve` accepts is
covered except the NIC's ``pcie`` attachment (its timing runs through the host
interface's queues; :func:`analysis.points.cycle_point` covers it, and the report's grid
falls back to it); the fast path raises ``ValueError`` for a bad parameter and, as a guard, if an
assumption below fails (it has not on any point tried): use ``cycle_point`` there.

NIC (node 0 sends, round robin to nodes ``1..peers``)
    A store is cut into frames of ``max_payload`` bytes (the last one the rest); a
    frame is ``ceil(F / W)`` wire beats, ``F`` its bytes with FCS (an L2 frame padded
    to 64). One sender meets no contention in the switch (a frame's first beat is
    granted the cycle after it is buffered), so a started frame sends a beat a cycle
    and reaches the receiver ``2 * link_latency + 2`` cycles later; a beat's credit is
    back at the sender ``2 * link_latency + 1`` cycles after it left (the completion,
    for the store's last beat). A frame starts when the previous one has ended and the
    credits not yet back leave room for it: that recurrence is solved store by store
    until the sender's state repeats (at once without credit stalls, after a few stores
    with them), then repeated. The accept is the first command beat, ``H // W`` cycles
    (header-only beats) after the store's first wire beat. The receiver writes a
    frame's words from two cycles after its last beat, or when its writer is free;
    segments of one store may queue for the writer (worked out per store), a store
    never queues behind the previous one (its first segment is its longest frame).

RDMA
    :mod:`analysis.rdma.fastpath`: the pipelined engine's steady state from closed forms
    (the slowest resource a message uses, the chain of steps of an isolated message,
    exact counts of every transaction). The counts (wire, host and control bytes,
    TLPs, control operations) and, on the test grid, the latency and completion equal
    the cycle model's; ``ii_cycles``, ``host_util`` and ``inflight_bits`` are within the
    measured tolerances of :data:`analysis.rdma.fastpath.TOLERANCES`. Regimes it does not
    cover raise ``ValueError`` (see that module). :func:`fast_point` only: there are no
    per-message arrays for RDMA (:func:`fast_run` and :func:`fast_messages` refuse it).
    :data:`EXACT` says which designs' fast-path figures are all exact.
"""

import bisect

import numpy as np

from analysis.points import normalise, resolve
from pymodel.fcs import IFG_BYTES, PREAMBLE_SFD_BYTES
from pymodel.throughput import steady_ii
from spec.formats.nic import header_bytes as nic_header_bytes
from spec.formats.nic import padded_bytes
from spec.metrics import CTRL_KINDS

__all__ = ["fast_point", "fast_run", "fast_messages", "EXACT"]

#: Whether every figure of a design's fast path equals the cycle-level model's (the NIC)
#: or some are closed-form estimates within measured tolerances (the RDMA engine).
EXACT = {"nic": True, "rdma": False}

_PHY = PREAMBLE_SFD_BYTES + IFG_BYTES
_FCS = 4


def _cdiv(a, b):
    return -(-a // b)


def _not_covered(why):
    return ValueError(f"outside the fast path ({why}); use analysis.points.cycle_point")


# -- NIC ----------------------------------------------------------------------------------

def _nic_frames(msg_bytes, p):
    """Payload bytes, frame bytes (FCS included) and wire beats of a store's frames."""
    w, mp = p["width"], p["max_payload"]
    segs = [min(mp, msg_bytes - k) for k in range(0, msg_bytes, mp)]
    frames = [padded_bytes(p["framing"], s) + _FCS for s in segs]
    return segs, frames, [_cdiv(f, w) for f in frames]


def _nic_sender(beats, window, credits, n):
    """Start cycles of the frames of the first stores, until the pattern repeats.

    Frame ``f`` of ``b`` beats starts when the previous one has ended and at most
    ``credits - b`` beats were sent in the last ``window`` cycles (their credits are
    still out); a started frame sends one beat a cycle. Returns ``(starts, ends, k1,
    period)``: ``starts[k]`` the frame start cycles of store ``k`` for the stores
    simulated, ``ends[k]`` the cycle after store ``k - 1`` ended (``ends[0] = 0``), and
    the stores from ``k1`` on repeat every ``period`` stores, shifted by
    ``ends[k1 + period] - ends[k1]`` cycles.
    """
    f_start, f_beats, f_cum = [], [], [0]        # every frame sent, beats before it
    starts, ends, seen = [], [0], {}
    end = 0
    for k in range(n):
        # The state that decides what follows: the last ``credits`` beats' send cycles.
        g = bisect.bisect_right(f_cum, f_cum[-1] - credits) - 1
        key = tuple(c - end for c in f_start[max(g, 0):])
        if key in seen:
            return starts, ends, seen[key], k - seen[key]
        seen[key] = k
        row = []
        for b in beats:
            total = f_cum[-1]
            t = end
            target = total - (credits - b)       # beats whose credits must be back
            if target > 0:
                i = target - 1
                g = bisect.bisect_right(f_cum, i) - 1
                t = max(t, f_start[g] + (i - f_cum[g]) + 1 + window)
            f_start.append(t)
            f_beats.append(b)
            f_cum.append(total + b)
            row.append(t)
            end = t + b
        starts.append(row)
        ends.append(end)
    return starts, ends, n, 1


def _nic_store(row, segs, frames, beats, p):
    """Accept, last remote write, completion and last wire beat of one store whose
    frames start in the cycles ``row``."""
    w, lat = p["width"], p["link_latency"]
    q, r = divmod(nic_header_bytes(p["framing"]), w)
    max_push = _cdiv(p["max_payload"] + 4, w)
    free = None
    last_write = None
    for t, seg, f, b in zip(row, segs, frames, beats, strict=True):
        arrive = t + b - 1 + 2 * lat + 2          # the frame's last beat at the receiver
        start = arrive + 2 if free is None else max(arrive + 2, free)
        # Receiver beat accounting (NicRx): beats after the header beats are pushed,
        # up to max_push; the last beat adds one if it holds bytes past the header.
        pushed = min(max(b - q - 1, 0), max_push)
        pushed_before_last = min(max(b - q - 2, 0), max_push)
        k_last = min(b - 1, q + 1)
        nb_last = f - (b - 1) * w
        tail = int(k_last >= q and nb_last > r and pushed_before_last < max_push)
        nbeats = pushed + tail
        free = start + max(nbeats, 1)
        writes = min(nbeats, _cdiv(seg, w))
        if writes < 1:
            raise _not_covered("a frame that writes nothing")
        last_write = start + writes - 1
    last_beat = row[-1] + beats[-1] - 1
    return row[0] + q, last_write, last_beat + 2 * lat + 1, last_beat


def _nic(msg_bytes, n, p):
    segs, frames, beats = _nic_frames(msg_bytes, p)
    lat = p["link_latency"]
    starts, ends, k1, period = _nic_sender(beats, 2 * lat + 1, p["credits"], n)
    # Per simulated store: its times minus the cycle its previous store ended.
    rel = np.array([[x - ends[k] for x in _nic_store(row, segs, frames, beats, p)]
                    for k, row in enumerate(starts)], dtype=np.int64).reshape(-1, 4)
    idx = np.arange(n, dtype=np.int64)
    warm = idx >= k1
    turns = np.where(warm, (idx - k1) // period, 0)
    phase = np.where(warm, k1 + (idx - k1) % period, idx)
    ends = np.asarray(ends, dtype=np.int64)
    origin = ends[phase] + turns * (ends[k1 + period] - ends[k1]) if n > k1 else ends[phase]
    times = rel[phase] + origin[:, None]
    arrays = {"accept": times[:, 0], "remote_write": times[:, 1],
              "completion": times[:, 2], "wire_bytes": np.full(n, sum(frames) + len(frames)
                                                                 * _PHY, dtype=np.int64)}
    ctrl = dict.fromkeys(CTRL_KINDS, 0)
    ctrl["credit_updates"] = sum(beats)
    # The model stops 2 * link_latency + 5 cycles after the last credit came back.
    # Stores in flight (accepted, last credit not back), each holding its beats in the
    # switch's ingress buffer: completions come in order, so at the k-th acceptance
    # k + 1 stores have started and those completed by then have ended.
    done = np.searchsorted(np.sort(times[:, 2]), times[:, 0], side="right")
    inflight = int((idx + 1 - done).max()) * sum(beats) * 8 * p["width"] if n else 0
    # Each store's first wire beat: its accept less the header-only beats (_nic_store).
    first_beat = times[:, 0] - nic_header_bytes(p["framing"]) // p["width"]
    extra = {"ctrl_ops": ctrl, "ctrl_bytes": 0, "ii_empty": 0, "inflight": inflight,
             "wire_start": first_beat,
             "cycles": int(times[-1, 3]) + 4 * lat + 6,
             "wire_per_message": sum(frames) + len(frames) * _PHY}
    return arrays, extra


# -- API ----------------------------------------------------------------------------------

def _median(a):
    return float(np.median(a))


def fast_run(design, *, msg_bytes, messages, **knobs):
    """``(point, per_message)`` as :func:`analysis.points.cycle_run` returns them, from
    closed forms (see the module doc for what is covered). Raises ``ValueError`` for a
    bad parameter (the same checks as ``cycle_run``) and for a point outside the fast
    path's coverage."""
    design, p = resolve(design, msg_bytes, messages, knobs)
    if design != "nic":
        raise ValueError("per-message cycles of the RDMA engine are not in the fast path "
                         "(fast_point gives its steady-state metrics; per-message cycles: "
                         "analysis.points.cycle_run)")
    if p["attachment"] != "integrated":
        raise _not_covered(f"the NIC's {p['attachment']!r} attachment")
    a, x = _nic(msg_bytes, messages, p)
    ii = steady_ii(x["wire_start"].tolist())        # at first wire beats, as cycle_run
    point = {
        "latency_cycles": _median(a["remote_write"] - a["accept"]),
        "completion_cycles": _median(a["completion"] - a["accept"]),
        "ii_cycles": x["ii_empty"] if ii is None else ii,
        "wire_bytes": x["wire_per_message"], "ctrl_ops": x["ctrl_ops"],
        "ctrl_bytes": x["ctrl_bytes"], "host_bytes": None, "host_tlps": None,
        "host_util": None, "inflight_bits": x["inflight"], "messages": messages,
        "cycles": x["cycles"],
    }
    return normalise(point), a


def fast_point(design, *, msg_bytes, messages, **knobs):
    """The metrics dict of :func:`analysis.points.cycle_point` for the same arguments,
    from closed forms: for the NIC that of :func:`fast_run` (equal to the cycle model);
    for the RDMA engine :func:`analysis.rdma.fastpath.rdma_fast_point` (exact counts,
    steady-state rate within measured tolerances). Raises ``ValueError`` for a bad
    parameter (the checks of :func:`analysis.points.resolve`) and for a point outside
    the fast path's coverage."""
    design, p = resolve(design, msg_bytes, messages, knobs)
    if design == "nic":
        return fast_run(design, msg_bytes=msg_bytes, messages=messages, **knobs)[0]
    from analysis.rdma.fastpath import rdma_fast_point
    return normalise(rdma_fast_point(msg_bytes, messages, p))


def fast_messages(design, *, msg_bytes, messages, **knobs):
    """The per-message arrays of :func:`fast_run` (keys
    :data:`analysis.points.MESSAGE_KEYS`, int64, absolute cycles from 0)."""
    return fast_run(design, msg_bytes=msg_bytes, messages=messages, **knobs)[1]
