"""Fast path of the golden models: a point's metrics from formulas, never stepping cycles.

:func:`fast_point` takes the same arguments as :func:`pymodel.points.cycle_point` and
returns the same dict with the same numbers (exact, not approximated: the tests check
equality on a grid, message by message). :func:`fast_run` and :func:`fast_messages`
also give the per-message cycles, numpy arrays built from closed forms. Cost: numpy
work linear in ``messages`` plus a short Python loop over one period of the traffic
pattern; more than a million messages per second on one core.

Traffic (the scenarios of :mod:`pymodel.points`): back to back, no command or doorbell
stalls, no faults. Every parameter range that :func:`pymodel.points.resolve` accepts is
covered; the fast path raises ``ValueError`` for a bad parameter and, as a guard, if an
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

RDMA (one WRITE per doorbell, QPs round robin)
    Each step costs what the engines document (``pymodel.rdma.engine``,
    ``rtl/rdma/requester.py``, ``rtl/rdma/responder.py``): the offsets of one message
    from its doorbell are computed once per message shape (segments of the path MTU),
    plus ``mem_latency`` for a context miss at the requester (it delays everything of
    the message) and at the responder (it delays the write and the ACK). The context
    caches are direct mapped and written back: with distinct QPs round robin, period
    ``qps``, every lookup of the first period misses (with a write-back when the entry
    already holds another QP), and later a QP hits exactly when no other QP of the set
    shares its entry. The requester writes the CQEs of the ACKs that are back when it
    is done with a message, before the next doorbell; those bursts (one ACK a burst in
    the headline, several with long links) are the fixed point of a causal recurrence,
    solved with whole-array numpy rounds (see :func:`_requester`). Guard: the responder
    must be idle when a message's first frame arrives (the requester's per-message
    work, two memory reads, is always longer than the responder's, one). The host
    memory is not modelled: unlike the cycle model, which builds the whole scenario in
    ``depth`` words, the fast path has no limit on ``messages * msg_bytes``.
"""

import bisect

import numpy as np

from pymodel.fcs import IFG_BYTES, PREAMBLE_SFD_BYTES
from pymodel.points import normalise, resolve
from spec.formats.nic import header_bytes as nic_header_bytes
from spec.formats.nic import padded_bytes
from spec.formats.roce import (
    ACK_HEADER,
    HOST_WORD_BYTES,
    ICRC_BYTES,
    WRITE_HEADER,
    WRITE_RETH_HEADER,
)
from spec.formats.roce import header_bytes as roce_header_bytes
from spec.metrics import CTRL_KINDS
from spec.rdma import DOORBELL_BYTES

__all__ = ["fast_point", "fast_run", "fast_messages"]

_PHY = PREAMBLE_SFD_BYTES + IFG_BYTES
_FCS = 4
#: Beat of the RDMA datapath (bytes): one host word.
_RDMA_W = HOST_WORD_BYTES
_RETH_HDR = roce_header_bytes(WRITE_RETH_HEADER)
_PLAIN_HDR = roce_header_bytes(WRITE_HEADER)
_ACK_BYTES = roce_header_bytes(ACK_HEADER) + ICRC_BYTES + _FCS


def _cdiv(a, b):
    return -(-a // b)


def _not_covered(why):
    return ValueError(f"outside the fast path ({why}); use pymodel.points.cycle_point")


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
    extra = {"ctrl_ops": ctrl, "ctrl_bytes": 0, "ii_empty": 0,
             "cycles": int(times[-1, 3]) + 4 * lat + 6,
             "wire_per_message": sum(frames) + len(frames) * _PHY}
    return arrays, extra


# -- RDMA ---------------------------------------------------------------------------------

def _qp_sequence(qps, entries, n, qpn_of):
    """Misses and write-backs of ``n`` lookups, QP ``k % qps`` at step ``k`` (QPN
    ``qpn_of(q)``, all distinct), in a direct-mapped cache of ``entries`` entries that
    marks every looked-up context dirty."""
    qpn = qpn_of(np.arange(qps, dtype=np.int64))
    slot = qpn % entries
    shared = np.bincount(slot, minlength=entries)[slot] > 1     # per QP of the period
    first = np.zeros(qps, dtype=bool)
    first[np.unique(slot, return_index=True)[1]] = True          # first user of its entry
    k = np.arange(n, dtype=np.int64)
    pos = k % qps
    warm = k >= qps
    miss = ~warm | shared[pos]
    writeback = np.where(warm, miss, ~first[pos])
    return miss, writeback


def _rdma_shape(msg_bytes, p):
    """Cycle offsets of one message from its doorbell when the requester's context
    lookup hits (a miss shifts them all by ``mem_latency``), for a responder hit and
    miss; see the module doc."""
    L, LL = p["mem_latency"], p["link_latency"]
    pmtu = 1 << p["pmtu_log2"]
    segs = [min(pmtu, msg_bytes - k) for k in range(0, msg_bytes, pmtu)]
    frames = []
    s = 2 + L + 1                    # IDLE + LOOKUP (hit), WQE read and wait: first SEG
    for i, seg in enumerate(segs):
        nw = _cdiv(seg, _RDMA_W)
        reth = i == 0                # FIRST or ONLY: the RETH, and the responder's MR
        flen = (_RETH_HDR if reth else _PLAIN_HDR) + seg + (-seg % 4)
        full = flen + ICRC_BYTES + _FCS
        d = s + nw + L + 1           # PAY_RD (a word a cycle), PAY_WAIT: SEND in cycle d
        # Beats the responder pops while it writes the payload (its realigner).
        popped = min(_cdiv(full, _RDMA_W), 2)
        skip = 58 if reth else 10
        popped += sum(1 for j in range(nw)
                      if seg - _RDMA_W * j > skip and (reth or j > 0))
        frames.append({"last_beat": d + _cdiv(full, _RDMA_W), "nw": nw,
                       "rest": _cdiv(full, _RDMA_W) - popped, "bytes": full})
        s = d + _cdiv(flen, _RDMA_W) + 2             # TXWAIT: the next SEG or DONE
    done = s + 2                     # DONE, UPDATE: then the next doorbell or a CQE
    resp = {}
    for miss in (0, 1):
        free = None
        for i, fr in enumerate(frames):
            arrived = fr["last_beat"] + LL          # whole in the receive FIFO
            t0 = arrived + 1 if free is None else max(free, arrived + 1)
            # IDLE, HDR, CHECK, LOOKUP (1, or 1 + L on a miss), VERIFY in cycle v.
            v = t0 + 4 + (L if miss and i == 0 else 0)
            # WRITE (a word a cycle), DRAIN (the rest, at least 1): the ACK in cycle nxt.
            nxt = v + fr["nw"] + 1 + max(1, fr["rest"])
            free = nxt + 1                          # UPDATE (no ACK but on the last)
        resp[miss] = {"written": v + frames[-1]["nw"], "ack_back": nxt + 2 + LL,
                      "free": free + 1}
    wire = sum(fr["bytes"] + _PHY for fr in frames) + _ACK_BYTES + _PHY
    return {"done": done, "first_arrival": frames[0]["last_beat"] + LL, "resp": resp,
            "wire": wire, "frames": len(frames)}


#: Rounds of the fixed-point solution of the ACK retirement (see :func:`_requester`).
_MAX_ROUNDS = 200


def _retired(dur, ack_off, R):
    """Solve the fixed point of :func:`_requester` from the guess ``R``; returns ``R``
    and the doorbell cycles."""
    n = len(dur)
    k = np.arange(n, dtype=np.int64)
    P = np.cumsum(dur)
    P_prev = P - dur
    for _ in range(_MAX_ROUNDS):
        t = P_prev + np.concatenate(([0], R[:-1]))
        reach = np.maximum.accumulate(t + ack_off - k)
        R_new = np.minimum(k + 1, np.searchsorted(reach, P, side="right"))
        if np.array_equal(R_new, R):
            return R, t
        R = R_new
    raise _not_covered("the ACK retirement did not settle")


def _requester(dur, ack_off, period):
    """Doorbell and CQE cycles of the requester, from the doorbell-to-done cycles
    ``dur[k]`` of each message and the cycle ``ack_off[k]`` (from its doorbell) its ACK
    is back; both repeat with ``period`` messages after the first ``period``.

    The requester takes doorbell ``k`` and is busy until ``E_k = T_k + dur_k``; there it
    writes the CQE of every ACK already back, oldest first, one a cycle, then takes the
    next doorbell; after the last doorbell each CQE is written when its ACK is back.
    With ``P_k = dur_0 + ... + dur_k`` and ``R_k`` the CQEs written by the end of the
    burst at ``E_k``: ``T_k = P_{k-1} + R_{k-1}``, and the burst at ``E_k`` writes ACK
    ``j`` (in cycle ``P_k + j``) iff ``max_{i<=j}(A_i - i) <= P_k``, ``A`` the ACK cycles.
    ``R`` depends on earlier values only, so it is the unique fixed point of that map,
    found by iteration: first on a prefix of a few periods from the guess "each ACK is
    written after the next message", then on all messages from the prefix's solution
    repeated period by period (exact at once when the prefix reached the steady state).
    """
    n = len(dur)
    k = np.arange(n, dtype=np.int64)
    n0 = min(n, max(4 * period, 4096))
    R, _ = _retired(dur[:n0], ack_off[:n0], k[:n0].copy())
    if n0 < n:
        back = period * -(-(k[n0:] - n0 + 1) // period)         # whole periods back
        R = np.concatenate((R, R[k[n0:] - back] + back))
    R, t = _retired(dur, ack_off, R)
    P = np.cumsum(dur)
    cqe = np.empty(n, dtype=np.int64)
    j0 = int(R[-1])
    burst = np.repeat(k, np.diff(R, prepend=0))                # the burst of each CQE
    cqe[:j0] = P[burst] + k[:j0]
    if j0 < n:                 # after the last doorbell: each CQE when its ACK is back
        tail = k[j0:]
        t_end = int(P[-1]) + j0
        cqe[j0:] = tail + np.maximum(t_end - j0,
                                     np.maximum.accumulate(t[j0:] + ack_off[j0:] - tail))
    return t, cqe


def _rdma(msg_bytes, n, p):
    L = p["mem_latency"]
    sh = _rdma_shape(msg_bytes, p)
    qps, entries = p["qps"], p["cache_entries"]
    m, wb = _qp_sequence(qps, entries, n, lambda q: q)
    # The responder's QP of requester QP q (pymodel.scenarios.rdma.writes_scenario).
    mr, wbr = _qp_sequence(qps, entries, n, lambda q: (q * 7 + 3) % 4096)
    shift = L * m.astype(np.int64)                       # the requester's miss
    r0, r1 = sh["resp"][0], sh["resp"][1]
    ack_off = shift + np.where(mr, r1["ack_back"], r0["ack_back"])
    t, cqe = _requester(sh["done"] + shift, ack_off, qps)
    base = t + shift
    written = base + np.where(mr, r1["written"], r0["written"])
    if n > 1:
        free = base[:-1] + np.where(mr[:-1], r1["free"], r0["free"])
        if np.any(free > base[1:] + sh["first_arrival"] + 1):
            raise _not_covered("the responder is still busy when the next message "
                               "arrives")
    arrays = {"accept": t, "remote_write": written, "completion": cqe,
              "wire_bytes": np.full(n, sh["wire"], dtype=np.int64)}
    misses = int(m.sum()) + int(mr.sum())
    writebacks = int(wb.sum()) + int(wbr.sum())
    ops = {"doorbells": n, "wqe_reads": n, "ctx_lookups": n + n * sh["frames"],
           "ctx_misses": misses, "ctx_writebacks": writebacks, "acks_sent": n,
           "acks_received": n, "cqe_writes": n}
    ctrl_bytes = DOORBELL_BYTES * n + HOST_WORD_BYTES * (2 * n + misses + writebacks)
    ctrl = {k: v / n for k, v in ops.items()}
    ctrl["credit_updates"] = 0
    extra = {"ctrl_ops": ctrl, "ctrl_bytes": ctrl_bytes / n, "ii_empty": None,
             "cycles": int(cqe[-1]) + 1, "wire_per_message": sh["wire"]}
    return arrays, extra


# -- API ----------------------------------------------------------------------------------

def _median(a):
    return float(np.median(a))


def fast_run(design, *, msg_bytes, messages, **knobs):
    """``(point, per_message)`` as :func:`pymodel.points.cycle_run` returns them, from
    closed forms (see the module doc for what is covered). Raises ``ValueError`` for a
    bad parameter (the same checks as ``cycle_run``) and for a point outside the fast
    path's coverage."""
    design, p = resolve(design, msg_bytes, messages, knobs)
    a, x = (_nic if design == "nic" else _rdma)(msg_bytes, messages, p)
    gaps = np.diff(a["accept"])
    point = {
        "latency_cycles": _median(a["remote_write"] - a["accept"]),
        "completion_cycles": _median(a["completion"] - a["accept"]),
        "ii_cycles": _median(gaps) if len(gaps) else x["ii_empty"],
        "wire_bytes": x["wire_per_message"], "ctrl_ops": x["ctrl_ops"],
        "ctrl_bytes": x["ctrl_bytes"], "messages": messages, "cycles": x["cycles"],
    }
    return normalise(point), a


def fast_point(design, *, msg_bytes, messages, **knobs):
    """The metrics dict of :func:`fast_run`: equal to :func:`pymodel.points.cycle_point`
    for the same arguments wherever the fast path covers them."""
    return fast_run(design, msg_bytes=msg_bytes, messages=messages, **knobs)[0]


def fast_messages(design, *, msg_bytes, messages, **knobs):
    """The per-message arrays of :func:`fast_run` (keys
    :data:`pymodel.points.MESSAGE_KEYS`, int64, absolute cycles from 0)."""
    return fast_run(design, msg_bytes=msg_bytes, messages=messages, **knobs)[1]
