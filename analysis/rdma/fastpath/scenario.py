"""The run the verbs model would post, laid out without building memory images.

:func:`_scenario` gives a :class:`_Run`: the MMIO writes (items) in order, the messages
in sending order, and per message whether it is signalled, asks for an ACK
(:func:`_ack_requests`, the engine's coalescing rules) and misses or evicts a context
at either node, plus the WQE reads with their addresses; it raises ``ValueError`` where
the verbs model would (a host memory is full). :func:`_window` is the part of a run
whose sends the steady-state ii is measured over.
"""

import dataclasses

from analysis.rdma.fastpath.frames import _frames
from analysis.rdma.fastpath.params import _W, _cdiv
from pymodel.rdma.verbs import table_qps
from spec.rdma_engine import MAX_PREFETCH, SIM_TIMEOUT
from spec.rdma_stages import ACK_FRAMES_BITS, ACK_MSGS_BITS

#: Host-memory layout of the verbs model (:mod:`pymodel.rdma.verbs`): contexts of QPs
#: below ``_MAX_QPS`` at word 0, then the CQ (``2**_CQ_LOG2`` words), then the send
#: queues, then the payload buffers, in that order, at node A; the MR at node B.
_MAX_QPS, _CQ_LOG2 = 4096, 10
_DEPTH = 1 << 22                             # analysis.rdma.point's model-only depth
_ACK_MSGS_MASK, _ACK_FRAMES_MASK = (1 << ACK_MSGS_BITS) - 1, (1 << ACK_FRAMES_BITS) - 1


@dataclasses.dataclass
class _Run:
    """One run's messages in sending order and what each control step does.

    ``items``: the MMIO writes in order, each ``(qp, [message indices])``; ``order``: the
    messages in sending order; per message (by index): ``signalled``, ``ack`` (its last
    frame asks for an ACK), ``miss_a``/``wb_a`` (its item's lookup missed / evicted a
    context at node A; on the item's first message), ``miss_b``/``wb_b`` (its first
    frame at node B); ``wqe_reads``: ``(addr, words)`` per WQE read, in order, with the
    index of the item's first message.
    """
    n: int
    items: list
    order: list
    signalled: list
    ack: list
    miss_a: list
    wb_a: list
    miss_b: list
    wb_b: list
    wqe_reads: list
    sq_log2: int
    pay_base: int


def _scenario(s, n, warmup=True):
    """The run of ``n`` messages (the first a warm-up, posted alone) that
    :func:`analysis.rdma.point.build` makes, without building memory images. Raises
    ``ValueError`` where the verbs model would: the host memories are full."""
    qps, r, se = s.qps, s.ring_every, s.signal_every
    per_qp = _cdiv(n, qps)
    sq_log2 = max(0, (per_qp - 1).bit_length())
    slot_words = 1 << s.stride
    table = table_qps(_MAX_QPS, _DEPTH, s.qpc_words) * s.qpc_words   # as Verbs lays it
    sq_base0 = table + (1 << _CQ_LOG2)
    pay_base = sq_base0 + qps * ((1 << sq_log2) << s.stride)
    if pay_base + (0 if s.inline else n * s.words) > _DEPTH:
        raise ValueError(f"host memory A of {_DEPTH} words is full")
    if table + _cdiv(n * s.msg_bytes + _W * n, _W) > _DEPTH:
        raise ValueError(f"host memory B of {_DEPTH} words is full")
    items, pending, posted = [], [[] for _ in range(qps)], [0] * qps
    signalled = [False] * n
    for j in range(n):
        q = j % qps
        last = j + qps >= n
        alone = warmup and j == 0
        signalled[j] = alone or last or (j // qps) % se == se - 1
        pending[q].append(j)
        posted[q] += 1
        if alone:
            items.append((q, pending[q]))
            pending[q], posted[q] = [], 0
        elif s.bf or posted[q] % r == 0 or last:
            items.append((q, pending[q]))
            pending[q] = []
    order = [j for _, msgs in items for j in msgs]
    ack = _ack_requests(s, n, signalled, order)
    # Context caches: direct mapped, QP q in entry q % entries (node A, per item) and
    # the responder's QP (7q + 3) % 4096 in its entry (node B, per frame).
    miss_a, wb_a, miss_b, wb_b = ([False] * n for _ in range(4))
    tag_a, tag_b = {}, {}
    wqe_reads, head = [], [0] * qps
    size = 1 << sq_log2
    for q, msgs in items:
        e = q % s.cache
        if tag_a.get(e) != q:
            miss_a[msgs[0]], wb_a[msgs[0]] = True, e in tag_a
            tag_a[e] = q
        if not s.bf:
            count = len(msgs)
            while count:
                slot = head[q] & (size - 1)
                k = min(count, MAX_PREFETCH, size - slot)
                wqe_reads.append((sq_base0 + q * (size << s.stride) + slot * slot_words,
                                  k * slot_words, msgs[0]))
                head[q] += k
                count -= k
    for j in order:
        qb = (7 * (j % qps) + 3) % _MAX_QPS
        e = qb % s.cache
        if tag_b.get(e) != qb:
            miss_b[j], wb_b[j] = True, e in tag_b
            tag_b[e] = qb
    return _Run(n, items, order, signalled, ack, miss_a, wb_a, miss_b, wb_b, wqe_reads,
                sq_log2, pay_base)


def _ack_requests(s, n, signalled, order):
    """Per message: whether the engine asks for its ACK. Without coalescing every
    message asks. With it the engine counts per QP (in the QP's order) and asks on the
    message that ends ``ack_every`` messages (or ``ack_frames`` frames) since the QP's
    last request, on signalled ones, and where the host set ``WQE_ACK_REQ``
    (:func:`analysis.scenarios.rdma.coalesced_ack_requests`): on each QP's last
    message; on every message when the QPs share cache entries (``qps`` above
    ``cache_entries``); and on a message after which more than a quarter of the
    transport timeout in wire beats (``timeout // 4``) would pass, in the engine's
    order, from the QP's oldest message that has not asked to the end of its next."""
    if not (s.ack_every > 1 or s.ack_frames > 0):
        return [True] * n
    if s.qps > s.cache:
        return [True] * n
    frames = _frames(s.msg_bytes, s.pmtu, s.header)
    beats, nf = sum(f.beats for f in frames), len(frames)
    span = SIM_TIMEOUT // 4
    # Wire beats before each message (engine order) and each one's next on its QP.
    pos, nxt, last = {}, {}, {}
    for x, j in enumerate(order):
        pos[j] = x
        q = j % s.qps
        if q in last:
            nxt[last[q]] = j
        last[q] = j
    ack = [False] * n
    start, msgs, fsum = {}, [0] * s.qps, [0] * s.qps
    for j in order:
        q = j % s.qps
        start.setdefault(q, pos[j] * beats)
        m, f = msgs[q] + 1, fsum[q] + nf
        k = nxt.get(j)
        host = k is None or (pos[k] + 1) * beats - start[q] > span
        ack[j] = (host or signalled[j] or s.ack_every <= 1 or m >= s.ack_every
                  or (s.ack_frames != 0 and f >= s.ack_frames))
        if ack[j]:
            del start[q]
            msgs[q], fsum[q] = 0, 0
        else:
            msgs[q], fsum[q] = m & _ACK_MSGS_MASK, f & _ACK_FRAMES_MASK
    return ack


def _window(n):
    """``(lo, hi)``: the message positions whose sends span the steady-state window of
    :func:`pymodel.rdma.metrics.steady_ii` for ``n`` messages."""
    lo, hi = n // 4, max(n // 4 + 1, (3 * n) // 4)
    return lo, min(hi, n - 1)
