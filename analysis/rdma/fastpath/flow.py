"""The rate of a short back-to-back run that starts with every doorbell posted.

:func:`_flow` follows a run message by message through host interface A's down
direction (doorbells, fills, WQE and payload completions), its read tags and the FIFOs
between the requester's stages, for runs of at most :data:`FLOW_MAX_MESSAGES`: such a
run ends before the steady state of :func:`~analysis.rdma.fastpath.bounds.rdma_bounds`,
and the window of its ii sees the phases before it. It also follows cache entries
shared by QPs (window state per QP): an item waits for its entry's previous QP, and
the fills of a pass over the entries queue on host interface A's down direction ahead
of that pass's WQE reads. A message's payload is read a frame at a time, each frame's
read waiting for room for its words in the payload FIFO (as the payload fetch stage
issues them). Returns None where it does not apply (WQEs by MMIO, inline data) and for
messages over half the payload FIFO: two such messages do not fit it, the FIFO then
drains at the framer's rate, and :func:`~analysis.rdma.fastpath.bounds.rdma_bounds` gives
the rate (the flow, which follows every read completion, takes about 10 s per thousand
64 KiB messages; at 32 and 64 KiB the bounds are within 0.4 % of the cycle model,
tests/test_fastpath.py).
:func:`~analysis.rdma.fastpath.checks._check_backlog`
refuses a run whose backlog at node B would overflow the receive buffers.
"""

import heapq
import math

from analysis.rdma.fastpath.frames import _frames
from analysis.rdma.fastpath.host_timing import _cpl_cycles, _read_shape, _rq_cycles
from analysis.rdma.fastpath.params import _W, _not_covered, _tlp
from analysis.rdma.fastpath.scenario import _window
from spec.rdma import DOORBELL_BYTES
from spec.rdma_engine import FIFO_DEPTHS, REQUESTER_DEFAULTS

#: Resources :func:`_flow` follows message by message (host interface A's down direction,
#: the read tags, the FIFOs between the requester's stages, the framer); the others enter
#: it as a least spacing between sends.
_FLOW_BOUNDS = ("host A down", "host A up", "read tags", "WQE reads (batch)", "WQE FIFO",
                "frame descriptors (segs)", "payload FIFO", "work items (fetch)",
                "doorbell intake", "QP front", "WQE fetch", "wire A->B")

#: Resources of node B and the way back (the responder's stages, host interface B, the
#: ACKs): they pace the sender only through the responder's receive buffers (a frame
#: that finds them full is dropped and resent), so :func:`_flow` leaves them out and
#: :func:`~analysis.rdma.fastpath.checks._check_backlog` refuses a run whose fills at
#: node B would leave a backlog that does not fit there.
_RESPONDER_BOUNDS = ("host B up", "host B down", "wire B->A", "responder checks",
                     "responder writer", "ACK sender")


#: Longest run whose ii :func:`_flow` follows. In a longer run the window of
#: :func:`pymodel.rdma.metrics.steady_ii` starts 5,000 messages after the first and ends
#: 5,000 before the last, far from the phases at either end (the engine's queues hold a
#: few hundred messages), and the largest bound of :func:`rdma_bounds` gives the ii: at
#: 20,000 messages the flow equals it within 2 % (8, 128, 1024 and 4096 B; 1 and 256
#: QPs; with and without doorbell batching), and following a million messages would
#: take minutes.
FLOW_MAX_MESSAGES = 20_000


def _flow(s, run, gap, cqe_after):
    """The steady-state rate of a back-to-back run as the cycle model measures it, from
    the order in which host interface A's down direction serves the run: the host posts
    every doorbell at once (the warm-up message done), and the direction carries the
    doorbells, the context fills and the WQE and payload completions, each completion
    from its due cycle (read latency after its request), a doorbell and a completion
    that both wait taken in turn (docs/host_interface.md, "Timing"). The stages between
    keep the delays of :func:`_chain` and wait for room in the host interface's
    doorbell buffer and in ``items``, ``fetch``, ``batch`` and the WQE FIFO
    (:data:`spec.rdma_engine.FIFO_DEPTHS`); the payload fetch issues a message's frame
    reads one a cycle from the cycle after the sequencer takes it, each waiting for a
    free read tag and for room for its descriptor in ``segs`` and for its words in the
    payload FIFO (words issued and not yet popped, as
    :class:`pymodel.rdma.req.payload_fetch.PayloadFetchModel`), and the sequencer takes
    the next message once the last frame of this one is issued;
    with window state per QP (``windows`` above 0) and more QPs than cache entries, the
    front takes an item whose entry holds another QP two cycles after that QP's last
    frame was taken (as :func:`~analysis.rdma.fastpath.regimes._pinned`); messages leave
    the framer at most one per ``gap`` cycles (the resources not followed here, not in
    :data:`_FLOW_BOUNDS`). Host interface A's up direction carries the
    read requests, the fills' write-backs and the CQE writes, these ``cqe_after``
    cycles after the first beat of the message's last frame (as on an idle engine).

    A short run does not reach the steady state of :func:`rdma_bounds`: the doorbells
    go first, the WQE reads of the first ``batch`` messages come back before any
    payload, and the gaps these leave recur a read latency later; the window of
    :func:`pymodel.rdma.metrics.steady_ii` sees those phases. Returns the cycles per
    message over :func:`_window`, or None where this does not apply (WQEs by MMIO or
    inline data: host interface A then carries no reads for the WQE or the payload;
    messages over half the payload FIFO, module doc).
    """
    p = s.prof
    if s.bf or s.inline or 2 * s.words > REQUESTER_DEFAULTS["payload_words"]:
        return None
    lat, mrrs, rq, n_tags = p.read_latency, p.max_read_request // _W, _rq_cycles(p), p.tags
    frames = _frames(s.msg_bytes, s.pmtu, s.header)
    nf = len(frames)
    order = run.order[1:]
    m = len(order)
    lo, hi = _window(run.n)
    pos = {j: x for x, j in enumerate(order)}
    items = [[pos[j] for j in msgs] for _, msgs in run.items[1:]]
    by_first = {}
    for a, w, first in run.wqe_reads:
        by_first.setdefault(first, []).append((a, w))
    # WQE reads in order: (item, request TLPs' pieces, first word of each message).
    reads, read_of, last_read = [], [None] * m, {}
    slot = 1 << s.stride
    for i, ps in enumerate(items):
        k0 = 0
        for a, w in by_first[order[ps[0]]]:
            k = w >> s.stride
            for y, x in enumerate(ps[k0:k0 + k]):
                read_of[x] = (len(reads), y * slot, y == k - 1)
            last_read[i] = len(reads)
            reads.append((i, _read_shape(p, a % mrrs, w), w))
            k0 += k
    msg_words = s.words
    pay = []                        # per message: request TLPs' pieces of each frame
    for j in order:
        base = run.pay_base + j * msg_words
        pay.append([_read_shape(p, (base + k * (s.pmtu // _W)) % mrrs, f.words)
                    for k, f in enumerate(frames)])
    cpl = {n: _cpl_cycles(p, n) for n in range(1, mrrs + 1)}
    d_mmio = _tlp(DOORBELL_BYTES, p.mmio_overhead, p.bytes_per_cycle, 1)
    cap_mmio = p.mmio_fifo_words + FIFO_DEPTHS["items"]
    d_fetch, d_batch, d_segs = FIFO_DEPTHS["fetch"], FIFO_DEPTHS["batch"], FIFO_DEPTHS["segs"]
    wqe_cap, pay_cap = REQUESTER_DEFAULTS["wqe_words"], REQUESTER_DEFAULTS["payload_words"]
    offsets = [sum(f.words for f in frames[:k]) for k in range(nf)]
    n_items, n_reads, n_frames = len(items), len(reads), m * nf
    # Per frame: the payload word that must have left the FIFO before its read is issued
    # (the words of the run up to the frame's last, less the FIFO's depth), below 0: none.
    room_of = [(f // nf) * msg_words + offsets[f % nf] + frames[f % nf].words - pay_cap - 1
               for f in range(n_frames)]
    miss = [run.miss_a[order[ps[0]]] for ps in items]
    # With window state per QP, an item whose cache entry holds another QP waits until
    # that QP's last frame was taken (its record reaches the completion unit the cycle
    # after; the front sees it the cycle after that): the frame it waits for, or None.
    pin, owner = [None] * len(items), {}
    if s.windows and s.qps > s.cache:
        for i, (q, _) in enumerate(run.items[1:]):
            e = q % s.cache
            if e in owner and owner[e][0] != q:
                pin[i] = owner[e][1]
            owner[e] = (q, items[i][-1] * nf + nf - 1)
    wb = [run.wb_a[order[ps[0]]] for ps in items]
    mmio_start, front, fill_at, leave = ([None] * n_items for _ in range(4))
    fill_shape = _read_shape(p, 0, s.qpc_words)         # a context fill's request TLPs
    fill_left = [sum(len(chunk) for chunk in fill_shape)] * n_items
    wqe_issue, batch_free = [None] * n_reads, [None] * n_reads
    wqe_words = [[] for _ in range(n_reads)]    # cycles each word is on rd_data
    seq = [None] * m
    pay_issue, pay_at, take, first_beat = ([None] * n_frames for _ in range(4))
    pay_left = [0] * n_frames                   # completions not yet served
    wqe_pop = []                                # per WQE word: popped
    pops = [None] * (m * msg_words)             # per payload word: popped
    tag_free = []                               # per request TLP: its tag is free
    heap, up = [], set()
    wr = _tlp(_W, p.req_overhead, p.bytes_per_cycle, 1)
    signalled = [run.signalled[j] for j in order]
    nxt = dict(item=0, read=0, msg=0, issue=0, frame=0, serial=0)
    end = free_at = -1

    def up_slot(ready, d):
        """The first cycle from ``ready`` at which the up direction is free for ``d``
        cycles (taken then): its TLPs are placed as they become known, not in time
        order, so each takes the first gap that fits."""
        c = math.ceil(ready)
        while any(c + k in up for k in range(d)):
            c += 1
        up.update(range(c, c + d))
        return c

    def request(start, shape, kind, ref):
        """Queue the completions of a read whose first request TLP is ready ``start``."""
        t = start
        if kind == "pay":
            pay_left[ref] += sum(len(chunk) for chunk in shape)
        for chunk in shape:
            if len(tag_free) >= n_tags:
                t = max(t, tag_free[len(tag_free) - n_tags] + 1)
            t = up_slot(t, rq)
            tag_free.append(None)
            last = len(chunk) - 1
            for k, n in enumerate(chunk):
                heapq.heappush(heap, (t + lat, nxt["serial"], kind, ref, n,
                                      len(tag_free) - 1 if k == last else None))
                nxt["serial"] += 1
            t += rq

    def tags_known(chunks):
        """Whether the tags the next ``chunks`` request TLPs wait for are known."""
        k = len(tag_free) + chunks - n_tags
        return k <= 0 or None not in tag_free[max(0, k - chunks):k]

    def propagate():
        nonlocal end, free_at
        moved = True
        while moved:
            moved = False
            i = nxt["item"]
            if (i < n_items and mmio_start[i] is not None
                    and (i < d_fetch or leave[i - d_fetch] is not None)
                    and (pin[i] is None or take[pin[i]] is not None)
                    and tags_known(len(fill_shape))):
                t = mmio_start[i] + d_mmio + 2
                if i:
                    t = max(t, front[i - 1] + 1)
                if pin[i] is not None:
                    t = max(t, take[pin[i]] + 2)
                if i >= d_fetch:
                    t = max(t, leave[i - d_fetch] + 1)
                front[i] = t
                if miss[i]:
                    if wb[i]:
                        up_slot(t + 2, wr)
                    request(t + 2, fill_shape, "fill", i)
                nxt["item"], moved = i + 1, True
            r = nxt["read"]
            if r < n_reads:
                i, shape, words = reads[r]
                room = len(wqe_pop) + words - wqe_cap - 1
                if (front[i] is not None and (not miss[i] or fill_at[i] is not None)
                        and (r < d_batch or batch_free[r - d_batch] is not None)
                        and room < len(wqe_pop) and tags_known(len(shape))):
                    t = max(front[i] + 1, fill_at[i] + 1 if miss[i] else 0)
                    if r:
                        t = max(t, wqe_issue[r - 1] + 1)
                    if r >= d_batch:
                        t = max(t, batch_free[r - d_batch])
                    if room >= 0:
                        t = max(t, wqe_pop[room] + 1)
                    wqe_issue[r] = t
                    request(t + 2, shape, "wqe", r)
                    if last_read[i] == r:
                        leave[i] = t
                    nxt["read"], moved = r + 1, True
            x = nxt["msg"]
            if x < m:
                r, k, last = read_of[x]
                f0 = x * nf
                segs, room = f0 - d_segs, room_of[f0]
                if (len(wqe_words[r]) > k and (segs < 0 or take[segs] is not None)
                        and (room < 0 or pops[room] is not None)
                        and (x == 0 or pay_issue[f0 - 1] is not None)
                        and tags_known(len(pay[x][0]))):
                    t = wqe_words[r][k] + 1
                    if x:
                        t = max(t, seq[x - 1] + slot, pay_issue[f0 - 1])
                    if segs >= 0:
                        t = max(t, take[segs])
                    if room >= 0:
                        t = max(t, pops[room])
                    seq[x] = t
                    wqe_pop.extend(t + j for j in range(slot))
                    if last:
                        batch_free[r] = t + slot
                    nxt["msg"], moved = x + 1, True
            # The payload reads, a frame at a time: a frame's read waits for room for its
            # words in the payload FIFO (words issued and not yet popped) and in ``segs``.
            f = nxt["issue"]
            while f < n_frames and seq[f // nf] is not None:
                x, kf = divmod(f, nf)
                segs, room, shape = f - d_segs, room_of[f], pay[x][kf]
                if not ((segs < 0 or take[segs] is not None)
                        and (room < 0 or pops[room] is not None) and tags_known(len(shape))):
                    break
                t = seq[x] + 1 + kf
                if kf:
                    t = max(t, pay_issue[f - 1] + 1)
                if segs >= 0:
                    t = max(t, take[segs] + 1)
                if room >= 0:
                    t = max(t, pops[room] + 1)
                pay_issue[f] = t
                request(t + 2, shape, "pay", f)
                f += 1
                nxt["issue"], moved = f, True
            f = nxt["frame"]
            if f < n_frames and pay_at[f] is not None:
                fr = frames[f % nf]
                t = max(pay_issue[f] + 1, pay_at[f] + 1, free_at)
                if f:
                    t = max(t, take[f - 1] + 1)
                first = max(t + 1, end + 1)
                if f % nf == 0 and f >= nf:
                    first = max(first, first_beat[f - nf] + gap)
                take[f], first_beat[f] = t, first
                if f % nf == nf - 1 and signalled[f // nf] and cqe_after is not None:
                    up_slot(first + cqe_after, wr)
                end, free_at = first + fr.beats - 1, first + fr.own - 1
                w0 = (f // nf) * msg_words + offsets[f % nf]
                pops[w0:w0 + fr.words] = [first + fr.head + j for j in range(fr.words)]
                nxt["frame"], moved = f + 1, True

    free, last, mi = 0, "cpl", 0
    done = hi * nf                      # the frames up to the window's last send
    moved = True                        # whether a stage may move (else skip the look)
    while nxt["frame"] < done:
        if moved:
            propagate()
            if nxt["frame"] >= done:
                break
        mm = None
        if mi < n_items:
            dep = mi - cap_mmio
            mm = 0 if dep < 0 else (None if front[dep] is None else front[dep] + 1)
        due = heap[0][0] if heap else None
        if mm is None and due is None:
            raise _not_covered("the flow of a back-to-back run stood still")
        t = max(free, due if mm is None else mm if due is None else min(mm, due))
        if mm is not None and mm <= t and (due is None or due > t or last == "cpl"):
            mmio_start[mi], free, last, moved = t, t + d_mmio, "mmio", True
            mi += 1
            continue
        _, _, kind, ref, n, tag = heapq.heappop(heap)
        d = cpl[n]
        free, last, moved = t + d, "cpl", tag is not None
        if tag is not None:
            tag_free[tag] = t
        if kind == "wqe":
            wqe_words[ref].extend(t + d - n + 1 + j for j in range(n))
            moved = True
        elif kind == "fill":
            fill_left[ref] -= 1
            if not fill_left[ref]:
                fill_at[ref], moved = t + d, True
        else:
            pay_left[ref] -= 1
            if not pay_left[ref]:
                pay_at[ref], moved = t + d, True
    # first_beat[] lacks the warm-up message (position 0 of the cycle model's list).
    return (first_beat[hi * nf - 1] - first_beat[lo * nf - 1]) / (hi - lo)

