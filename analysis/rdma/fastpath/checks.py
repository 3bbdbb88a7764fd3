"""The regimes the fast path refuses (``ValueError`` from
:func:`~analysis.rdma.fastpath.params._not_covered`: use the cycle model).

:func:`_check_acks`: ACK coalescing that would meet the transport timeout (QPs sharing
cache entries, or a message too far from its ACK request). :func:`_check_receive`: a
responder receive buffer that would overflow behind a context miss at node B (frames
dropped and resent, go-back-N). :func:`_check_backlog`: the same buffers behind node B's
resources in a short run (compulsory context misses at node B).
"""

from analysis.rdma.fastpath.frames import _frames
from analysis.rdma.fastpath.params import _W, _cdiv, _not_covered, _tlp
from spec.rdma import DOORBELL_BYTES, MAX_FRAME_BEATS
from spec.rdma_engine import SIM_TIMEOUT
from spec.rdma_responder import JOBS, REST_MAX, RX_BEATS, RX_FRAMES


def _check_acks(s, run, ii, rtt):
    """Refuse ACK coalescing where the cycle model would see transport timeouts: a
    message that asks for no ACK keeps its QP's context pinned until a later message
    of the QP asks for one, so with QPs sharing an entry the front waits for a QP that
    can not progress, and a gap longer than the transport timeout expires the timer."""
    if all(run.ack):
        return
    if s.qps > s.cache:
        raise _not_covered(f"ACK coalescing with {s.qps} QPs sharing {s.cache} cache "
                           f"entries: contexts stay pinned until the transport timeout")
    pos = {j: x for x, j in enumerate(run.order)}
    nxt, gap = {}, 0
    for j in reversed(run.order):
        q = j % s.qps
        if run.ack[j]:
            nxt[q] = pos[j]
        elif q in nxt:
            gap = max(gap, nxt[q] - pos[j])
    if gap * ii + rtt >= SIM_TIMEOUT // 2:
        raise _not_covered(f"ACK coalescing leaves a message {gap} messages from its ACK "
                           f"request, near the {SIM_TIMEOUT}-cycle "
                           f"transport timeout")


def _check_receive(s, run, bounds, rtt_b, regime):
    """Refuse a run whose frames would overflow the responder's receive buffers: behind
    a context miss at node B (its fill takes ``rtt_b`` cycles) the frames that arrive
    wait in ``rx_frames`` header entries and ``jobs`` verify jobs, their payload beats
    in ``rx_beats`` (room for the largest frame is kept); a frame that finds no room is
    dropped and resent (go-back-N), which the fast path does not model. The first
    misses at node B meet the first misses at node A, whose waiting messages then leave
    at the rate of the resources after the front (the MMIO writes and the front do not
    pace them), so that rate counts; a margin of a tenth covers further bursts."""
    if regime != "free" or not any(run.miss_b[1:]):
        return
    p = s.prof
    nbytes = _W * (1 + s.n_inline) if s.bf else DOORBELL_BYTES
    mmio = _tlp(nbytes, p.mmio_overhead, p.bytes_per_cycle, _cdiv(nbytes, _W))
    after = [v for k, v in bounds.items() if k not in ("doorbell intake", "QP front",
                                                        "host A down")]
    ii = max(after + [bounds["host A down"] - mmio * bounds["QP front"]])
    frames = _frames(s.msg_bytes, s.pmtu, s.header)
    waiting = rtt_b / (ii / len(frames))                  # frames arriving meanwhile
    rest = sum(max(0, min(f.beats, MAX_FRAME_BEATS) - 2) for f in frames) / len(frames)
    if (waiting > 0.9 * (RX_FRAMES + JOBS)
            or waiting * rest > 0.9 * (RX_BEATS - REST_MAX)):
        raise _not_covered("the responder's receive buffers would overflow behind a "
                           "context miss (frames dropped and resent)")


def _check_backlog(s, run, whole, ii):
    """Refuse a short run of ``ii`` cycles per message whose context fills at node B
    would leave a backlog that overflows the responder's receive buffers. ``whole``:
    the per-message cycles of the resources
    (:func:`~analysis.rdma.fastpath.bounds.rdma_bounds`) over the whole run; node B's
    (:data:`~analysis.rdma.fastpath.flow._RESPONDER_BOUNDS`) are left out of the flow,
    and its fills (a whole context of completions a miss on host interface B's down
    direction) are the part of them driven by the run's misses. Where every QP has an
    entry of its own, the sends of a run of compulsory misses may come in a burst at
    the wire's rate (the fills at node A go before the WQE and payload reads), else
    they come at the run's rate; fills needing ``r`` cycles a message, above that
    spacing ``w``, fall behind by ``1 - w / r`` of the run's frames, which the
    responder holds in its ``rx_frames`` header entries and ``jobs`` verify jobs, their
    payload beats in ``rx_beats`` (room for the largest frame kept,
    :mod:`spec.rdma_responder`). Where that fits (with the margin of a tenth of
    :func:`_check_receive`) node B does not pace the sends; where it would not, frames
    are dropped and resent (go-back-N, or the transport timeout for a QP's last
    message), which the fast path does not model: ``ValueError``."""
    frames = _frames(s.msg_bytes, s.pmtu, s.header)
    rest = sum(max(0, min(f.beats, MAX_FRAME_BEATS) - 2) for f in frames) / len(frames)
    w = whole["wire A->B"] if s.qps <= s.cache else max(whole["wire A->B"], ii)
    r = whole["host B down"]
    if r <= w:
        return
    waiting = (run.n - 1) * len(frames) * (1 - w / r)
    if (waiting > 0.9 * (RX_FRAMES + JOBS)
            or waiting * rest > 0.9 * (RX_BEATS - REST_MAX)):
        raise _not_covered(f"the responder's receive buffers would overflow behind the "
                           f"context fills at node B, {r:.3g} cycles a message on host "
                           f"interface B's down direction (frames dropped and resent)")
