"""The steady-state rate as the slowest resource a message uses.

:func:`rdma_bounds` gives the per-message cycles of every resource over the
steady-state window of a run: the host-interface directions, the wires, each
requester and responder stage (from the exact counts of
:mod:`analysis.rdma.fastpath.totals`), and the FIFOs and read tags by Little's law
(what one message holds and for how long on an idle engine: :func:`_item_holds`,
:func:`_wqe_holds`, :func:`_frame_holds`). The free-running ii is their maximum.
"""

from collections import Counter

from analysis.rdma.fastpath.chain import _chain
from analysis.rdma.fastpath.frames import _ack_beats, _frames
from analysis.rdma.fastpath.host_timing import _Host
from analysis.rdma.fastpath.params import _W
from analysis.rdma.fastpath.scenario import _window
from analysis.rdma.fastpath.totals import _totals
from spec.rdma_engine import FIFO_DEPTHS, REQUESTER_DEFAULTS


def _item_holds(s, miss):
    """Cycles an item of one message stays in the front's FIFO (fetch), the WQE-read
    descriptor in ``batch``, and the WQE words (summed over words) in the WQE FIFO, on
    an idle engine; a WQE read of ``k`` WQEs is computed by :func:`_wqe_holds`."""
    ha, hb = _Host(s.prof), _Host(s.prof)
    c = _chain(s, 0, ha, hb, miss, miss, False, False, 0, 0, True, True,
               [0] * (1 + s.n_inline))
    return c


def _wqe_holds(s, t_w, k, addr):
    """For a WQE read of ``k`` WQEs issued in cycle ``t_w`` on an idle interface:
    ``(batch hold, sum of WQE word holds)`` (cycles)."""
    ha = _Host(s.prof)
    slot = 1 << s.stride
    arrive, _ = ha.read(t_w + 1, addr, k * slot)
    pop = t_w
    total = 0
    for c in arrive:
        pop = max(pop + 1, c + 1)
        total += pop + 1 - t_w
    return pop + 1 - t_w, total


def _frame_holds(s, k, f):
    """A frame's descriptor hold in ``segs`` and its words' holds (summed) in the payload
    FIFO, from its PayloadFetch issue to the framer's take and pops, read alone from an
    idle interface (inline frames: copied at one word a cycle)."""
    if s.inline:
        take = s.n_inline + 1
        return take, sum(take + 1 + f.head + i for i in range(f.words))
    ha = _Host(s.prof)
    words, _ = ha.read(1, k * (s.pmtu // _W), f.words)
    take = words[-1] + 1
    first = take + 1
    return take, sum(first + f.head + i for i in range(f.words))


def rdma_bounds(s, run, body=None):
    """The per-message cycles each resource needs in the steady state of ``run``
    (averages over the messages ``body``, default those sent in the window of
    :func:`_window`), as a dict ``{resource: cycles per message}``; the rate is their
    maximum."""
    if body is None:
        lo, hi = _window(run.n)
        body = run.order[lo:hi]
    m = len(body)
    p = s.prof
    t = _totals(s, run, body)
    nf = len(_frames(s.msg_bytes, s.pmtu, s.header))
    body = set(body)
    items = sum(1 for _, ms in run.items if ms[0] in body)
    out = {f"host {k[0].upper()} {'up' if k[2:] == 'up' else 'down'}": v / m
           for k, v in t.busy.items()}
    out["wire A->B"] = t.beats_ab / m
    out["wire B->A"] = _ack_beats(s.header) * t.ops["acks_sent"] / m
    out["doorbell intake"] = t.mmio_words / m
    out["QP front"] = items / m
    out["WQE fetch"] = (t.ops["wqe_reads"] + (items if s.bf else 0)) / m
    out["sequencer"] = t.seq_words / m
    out["payload fetch"] = nf if not s.inline else max(1, s.n_inline)
    out["completion unit"] = 2
    out["CQE writer"] = t.ops["cqe_writes"] / m
    out["responder checks"] = nf
    out["responder writer"] = t.writer_steps / m
    out["ACK sender"] = _ack_beats(s.header) * t.ops["acks_sent"] / m
    # Capacity (Little's law): what a message holds, and for how long, on an idle engine.
    hit = _item_holds(s, False)
    segs = pops = 0
    for k, f in enumerate(_frames(s.msg_bytes, s.pmtu, s.header)):
        seg, pop = _frame_holds(s, k, f)
        segs, pops = segs + seg, pops + pop
    out["frame descriptors (segs)"] = segs / FIFO_DEPTHS["segs"]
    if not s.inline:
        out["payload FIFO"] = pops / REQUESTER_DEFAULTS["payload_words"]
    out["read tags"] = t.tag_cycles / m / p.tags
    if not s.bf:
        mrrs = p.max_read_request // _W
        reads = Counter((a % mrrs, w) for a, w, first in run.wqe_reads if first in body)
        bh = wh = 0
        for (a, w), k in reads.items():
            b, x = _wqe_holds(s, hit["wqe_issue"], w >> s.stride, a)
            bh, wh = bh + k * b, wh + k * x
        out["WQE reads (batch)"] = bh / m / FIFO_DEPTHS["batch"]
        out["WQE FIFO"] = wh / m / REQUESTER_DEFAULTS["wqe_words"]
    miss_items = sum(1 for _, ms in run.items if ms[0] in body and run.miss_a[ms[0]])
    if miss_items:
        miss = _item_holds(s, True)
        fetch = (items - miss_items) * 1 + miss_items * miss["wqe_issue"]
        out["work items (fetch)"] = fetch / m / FIFO_DEPTHS["fetch"]
    return out
