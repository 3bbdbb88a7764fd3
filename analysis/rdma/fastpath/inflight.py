"""State in flight: the estimated high-water marks of a back-to-back run, in bits.

:func:`_inflight` gives the read tags at both nodes, the completion records, the WQE
and payload words, the context fills and the responder's receive beats that a run holds
at its peak, per regime (``serial``, ``pinned`` or ``free``), and their bits
(:data:`pymodel.rdma.metrics.READ_BITS`, :data:`~pymodel.rdma.metrics.RECORD_BITS`,
host words). Within :data:`analysis.rdma.fastpath.TOLERANCES` of the cycle model.
"""

import math

from analysis.rdma.fastpath.frames import _frames
from analysis.rdma.fastpath.host_timing import _read_shape
from analysis.rdma.fastpath.params import _W, _cdiv, _tlp
from analysis.rdma.fastpath.scenario import _MAX_QPS
from pymodel.rdma.metrics import READ_BITS, RECORD_BITS
from spec.formats.roce import HOST_WORD_BITS
from spec.rdma import MAX_FRAME_BEATS
from spec.rdma_engine import FIFO_DEPTHS, MAX_PREFETCH, REQUESTER_DEFAULTS
from spec.rdma_responder import RX_BEATS


def _inflight(s, run, ii, regime, hold_rec, rtt_b):
    """Estimated high-water marks of a back-to-back run and their bits.

    ``regime``: ``"serial"``, ``"pinned"`` (entries shared, held or pinned: at most
    ``cache_entries`` QPs in flight) or ``"free"``. In the free regime the host has
    posted every WQE at once, so every FIFO and reserve upstream of the slowest resource
    fills to its capacity; what is downstream holds what Little's law gives (rate times
    hold).
    Returns ``(bits, marks)``.
    """
    p = s.prof
    frames = _frames(s.msg_bytes, s.pmtu, s.header)
    nf = len(frames)
    words = 0 if s.inline else s.words
    slot = 1 << s.stride
    per_read = 0 if s.bf else slot * min(s.ring_every, MAX_PREFETCH)
    mrrs = p.max_read_request // _W
    chunks_w = 0 if s.bf else len(_read_shape(p, 0, max(per_read, 1)))
    chunks_p = 0 if s.inline else sum(len(_read_shape(p, (run.pay_base + k * s.pmtu // _W)
                                                      % mrrs, f.words))
                                      for k, f in enumerate(frames))
    # The receive beats of a message's frames, at most the responder's receive buffer
    # (a message of several frames is written to host B frame by frame).
    rest = min(RX_BEATS, sum(max(0, min(f.beats, MAX_FRAME_BEATS) - 2) for f in frames))
    body = run.n - 1
    k_ack = max(1, round(body / max(1, sum(run.ack[1:]))))
    cold_b = len({(7 * q + 3) % _MAX_QPS % s.cache for q in range(s.qps)}) - 1
    m = dict(tags_a=1, tags_b=1, records=1, wqe_words=0 if s.bf else slot,
             payload_words=max(1, s.words), fills_a=1, fills_b=1, rx=rest)
    if regime == "serial":
        m["tags_a"] = max(1, chunks_w, chunks_p)
    elif regime == "pinned":
        # A message in flight per cache entry, each stage's share no more than its
        # buffer holds: the WQE and payload FIFOs (:data:`REQUESTER_DEFAULTS`) and the
        # responder's receive beats (:data:`spec.rdma_responder.RX_BEATS`).
        e = s.cache
        m.update(tags_a=min(p.tags, e * max(1, chunks_w, chunks_p)), tags_b=e, records=e,
                 wqe_words=0 if s.bf else min(REQUESTER_DEFAULTS["wqe_words"], e * slot),
                 payload_words=min(REQUESTER_DEFAULTS["payload_words"], e * max(1, s.words)),
                 fills_a=e, fills_b=e, rx=min(RX_BEATS, max(rest, e * rest // nf)))
    else:
        wqe_words = 0 if s.bf else min(REQUESTER_DEFAULTS["wqe_words"],
                                       FIFO_DEPTHS["batch"] * per_read, slot * body)
        # Payload words held or reserved: one frame's worth per descriptor in ``segs``
        # and the one being framed. Read payloads: a descriptor per outstanding payload
        # read, at most the ``segs`` entries and at most the payload reads' share of the
        # read tags (the WQE reads hold the rest; once the tags are the bound, the
        # descriptors wait on them). Inline payloads: the messages the MMIO writes
        # bring ahead of their frames; while the writes (``src`` cycles a message) outrun
        # the frames (``ii``), the backlog grows by ``1 - src / ii`` a message over the
        # ``body`` messages, none when the writes are the slowest part.
        if words:
            per_msg_w = chunks_w / max(1, per_read // slot)
            tags_p = p.tags * chunks_p / (chunks_p + per_msg_w)
            held = min(FIFO_DEPTHS["segs"], math.ceil(tags_p - 1e-9))
            per_desc = max(1, _cdiv(words, nf))
        else:
            src = _inline_source(s)
            backlog = body * (1 - src / ii) if ii > src + 1e-9 else 0
            held = min(FIFO_DEPTHS["segs"], math.ceil(backlog - 1e-9))
            per_desc = max(1, s.n_inline)
        payload = min(REQUESTER_DEFAULTS["payload_words"], (held + 1) * per_desc)
        reads_w = 0 if s.bf else min(FIFO_DEPTHS["batch"],
                                     REQUESTER_DEFAULTS["wqe_words"] // max(1, per_read),
                                     body)
        reads_p = 0 if s.inline else min(FIFO_DEPTHS["segs"],
                                         REQUESTER_DEFAULTS["payload_words"]
                                         // max(1, _cdiv(words, nf)), body * nf)
        cold_a = min(FIFO_DEPTHS["fetch"], max(0, min(s.qps, s.cache) - 1))
        m.update(tags_a=max(1, min(p.tags, reads_w * chunks_w + reads_p * chunks_p // nf,
                                   p.tags)),
                 tags_b=max(1, min(cold_b, math.ceil(rtt_b / ii))),
                 records=math.ceil(hold_rec / ii) + k_ack,
                 wqe_words=wqe_words, payload_words=payload,
                 fills_a=max(1, cold_a), fills_b=max(1, min(cold_b, math.ceil(rtt_b / ii))),
                 rx=max(rest, (rest // nf) * (math.ceil(rtt_b / ii) if cold_b else 1)))
    bits = (READ_BITS * (m["tags_a"] + m["tags_b"]) + RECORD_BITS * m["records"]
            + HOST_WORD_BITS * (m["wqe_words"] + m["payload_words"] + m["fills_a"] + m["fills_b"]
                        + m["rx"]))
    return bits, m


def _inline_source(s):
    """Cycles per message of the MMIO writes that bring a WQE with its inline data (the
    host interface's down direction and the intake's word a cycle)."""
    p = s.prof
    nbytes = _W * (1 + s.n_inline)
    return max(_tlp(nbytes, p.mmio_overhead, p.bytes_per_cycle, 1 + s.n_inline),
               1 + s.n_inline)
