"""One message on an idle engine: the chain of its steps through both nodes.

:func:`_chain` times a message from the cycle the QP front takes its work item: the
context fill at node A, the WQE read (or the WQE by MMIO), the sequencer, the payload
reads, the framer's frames on the wire, the responder's header check, context fill and
verify at node B, its writer and host interface B's posted writes (:class:`_Writer`),
the ACK back over the link, the completion unit's retire and the CQE write. The host
interfaces passed in (:class:`~analysis.rdma.fastpath.host_timing._Host`) are updated, so
successive calls see each other's TLPs. :func:`_mmio` is the host's MMIO write that
announces a message; :func:`_isolated` gives a message's latency and completion from
its MMIO write.
"""

from analysis.rdma.fastpath.frames import _ack_beats, _frames
from analysis.rdma.fastpath.host_timing import _fill, _wr_tlps
from analysis.rdma.fastpath.params import _W, _cdiv, _tlp
from spec.rdma import DOORBELL_BYTES
from spec.rdma_responder import ResponderSizes

#: Verified frames the responder holds for its payload writer (``write_jobs``).
_WRITE_JOBS = ResponderSizes().write_jobs


def _chain(s, t_f, ha, hb, miss_a, wb_a, miss_b, wb_b, wqe_addr, laddr, signalled, ack,
           bf_vis=None):
    """Times of one message whose work item the front takes in cycle ``t_f``, with the
    host interfaces ``ha``/``hb`` in their current state (updated). ``bf_vis``: with
    WQEs by MMIO, the cycles from which the WQE's words are in the intake's FIFO.

    Returns a dict: ``frames`` (per frame: PayloadFetch issue, framer take, first and
    last beat on the wire, responder verify), ``written`` (the message's last payload
    word in host memory B), ``retire`` (the completion unit retires it; None without an
    ACK), ``cqe`` (the CQE's write; None), ``wqe_issue``/``wqe_seq`` (WQE read issued,
    header taken by the sequencer).
    """
    p = s.prof
    bpc = p.bytes_per_cycle
    one_word_wr = _tlp(_W, p.req_overhead, bpc, 1)
    out = {"front": t_f}
    # Node A: context, WQE, sequencer.
    t_w = t_f + 1
    if miss_a:
        t_w = max(t_w, _fill(ha, t_f, wb_a, one_word_wr, s.qpc_words) + 1)
    out["wqe_issue"] = t_w
    if s.bf:
        vis = list(bf_vis)
        t_s = max(t_w + 1, vis[0])
    else:
        arrive, _ = ha.read(t_w + 1, wqe_addr, 1 << s.stride)
        vis = [c + 1 for c in arrive]
        t_s = vis[0]
    out["wqe_seq"] = t_s
    t_p = t_s + 1
    frames = _frames(s.msg_bytes, s.pmtu, s.header)
    rows = []
    end = free_at = take = -1
    if s.inline:
        x = t_s
        c = t_p - 1
        for j in range(1, s.n_inline + 1):
            x = max(x + 1, vis[j])            # the sequencer moves inline word j
            c = max(c + 1, x + 1)             # PayloadFetch copies it
        take = c + 1 if s.n_inline else t_p + 1
        issues, takes = [c], [take]
    else:
        issues, accepts, last_starts, arrivals = [], [], [], []
        for k, f in enumerate(frames):
            i = t_p + k if k == 0 else issues[-1] + 1
            if k >= 4:
                i = max(i, accepts[k - 4] + 1)            # the payload read FIFO
            a = i + 1 if k == 0 else max(i + 1, accepts[-1] + 1)
            if k >= p.rd_queue:
                a = max(a, last_starts[k - p.rd_queue] + 1)
            words, ls = ha.read(a, laddr + k * (s.pmtu // _W), f.words)
            issues.append(i)
            accepts.append(a)
            last_starts.append(ls)
            arrivals.append(words[-1])
        takes = []
        for k in range(len(frames)):
            take = max(issues[k] + 1, arrivals[k] + 1, take + 1)
            takes.append(take)
    for k, f in enumerate(frames):
        take = max(takes[k], free_at)
        first = max(take + 1, end + 1)
        end = first + f.beats - 1
        free_at = first + f.own - 1
        rows.append(dict(issue=issues[k], take=take, first=first, end=end))
    # Node B: header check, verify, ACK, the writer and host interface B's writes. A
    # verified frame waits in ``write_jobs`` until the writer has written its words, so
    # a frame is verified only once the writer is done with the frame ``write_jobs``
    # before it (behind a context fill at node B, the frames of a long message queue).
    h = v = -1
    writer = _Writer(s, hb)
    done = []                                   # per frame: the writer's last word
    for k, row in enumerate(rows):
        h = max(row["end"] + s.link + 1, h + 1)
        v = max(h + 1, v + 1)
        if k == 0 and miss_b:
            v = max(v, _fill(hb, h, wb_b, one_word_wr, s.qpc_words) + 1)
        if k >= _WRITE_JOBS:
            v = max(v, done[k - _WRITE_JOBS] + 1)
        row["verify"] = v
        done.append(writer.frame(v, frames[k]))
    out["written"] = writer.written[-1]
    out["frames"] = rows
    out["retire"] = out["cqe"] = None
    if ack:
        out["retire"] = rows[-1]["verify"] + _ack_beats(s.header) + s.link + 1
        if signalled:
            out["cqe"] = ha.up.start(out["retire"] + 3, one_word_wr, "wr")
    return out


class _Writer:
    """The responder's writer, write arbiter and host interface B, frame by frame:
    :meth:`frame` takes a frame verified in cycle ``verify`` and returns the cycle the
    writer writes its last word (its job then leaves ``write_jobs``); ``written`` holds
    the cycle each word reaches host memory."""

    def __init__(self, s, hb):
        self.p, self.hb = s.prof, hb
        self.wrote, self.acc, self.written = [], [], []  # per word: writer, arbiter, memory
        self.free = -1

    def frame(self, verify, f):
        p, wrote, acc, written = self.p, self.wrote, self.acc, self.written
        x = max(verify + 1, self.free) - 1
        for words, nbytes in _wr_tlps(p, f.seg):
            for _ in range(words):
                g = len(wrote)
                x = max(x + 1, acc[g - 4] + 1 if g >= 4 else x + 1)
                a = x + 1
                if g >= p.wr_fifo_words:
                    a = max(a, written[g - p.wr_fifo_words] + 1)
                wrote.append(x)
                acc.append(a)
            st = self.hb.up.start(acc[-1] + 1, _tlp(nbytes, p.req_overhead,
                                                    p.bytes_per_cycle, words), "wr")
            written += [st + j for j in range(words)]
        self.free = x + 1 + (f.steps - f.words)
        return x


def _mmio(s, ha, t0):
    """The host's MMIO write that announces a message, started in cycle ``t0``: the
    cycle the front takes its work item and the cycles its words are in the intake's
    FIFO (for a WQE by MMIO)."""
    p = s.prof
    nbytes = _W * (1 + s.n_inline) if s.bf else DOORBELL_BYTES
    m = _cdiv(nbytes, _W)
    d = _tlp(nbytes, p.mmio_overhead, p.bytes_per_cycle, m)
    st = ha.dn.start(t0, d, "mmio")
    item = st + d - m + 2                    # the intake takes the first word
    return item + 1, [st + d - m + 3 + j for j in range(m)]


def _isolated(s, run, j, ha, hb, t0=0):
    """Latency and completion of message ``j`` of ``run`` posted into an idle engine
    in cycle ``t0`` (its MMIO write starts then)."""
    t_f, bf_vis = _mmio(s, ha, t0)
    wqe_addr = next((a for a, _, first in run.wqe_reads if first == j), 0)  # short runs
    c = _chain(s, t_f, ha, hb, run.miss_a[j], run.wb_a[j], run.miss_b[j], run.wb_b[j],
               wqe_addr, run.pay_base + j * s.words, run.signalled[j], run.ack[j], bf_vis)
    return c["written"] - t0, (None if c["cqe"] is None else c["cqe"] - t0), c
