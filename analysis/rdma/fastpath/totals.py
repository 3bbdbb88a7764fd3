"""Exact counts: every transaction a run's messages cause.

:func:`_totals` counts, for all messages of a :class:`~analysis.rdma.fastpath.scenario._Run`
or a subset, the control actions, the TLPs and bytes by kind, the busy cycles of each
host-interface direction, the wire bytes and beats, the read-tag cycles and the words
each requester and responder stage moves (:class:`_Totals`). These give the exact
metrics (:data:`analysis.rdma.fastpath.EXACT_KEYS`) and the per-message resource loads of
:func:`analysis.rdma.fastpath.bounds.rdma_bounds`. :func:`_ctrl_bytes` is
:func:`pymodel.rdma.metrics.summarize`'s ``ctrl_bytes`` of the totals.
"""

import dataclasses
from collections import Counter
from functools import lru_cache

from analysis.rdma.fastpath.frames import _ack_bytes, _frames
from analysis.rdma.fastpath.host_timing import (
    _cpl_cycles,
    _read_shape,
    _rq_cycles,
    _tag_hold,
    _wr_tlps,
)
from analysis.rdma.fastpath.params import _PHY, _W, _cdiv, _tlp
from spec.metrics import CTRL_KINDS
from spec.rdma import DOORBELL_BYTES


@dataclasses.dataclass
class _Totals:
    """Totals of a run (or of a part of it): control actions, TLPs and bytes by node and
    direction, busy cycles by direction, wire bytes and beats."""
    ops: dict = dataclasses.field(default_factory=lambda: dict.fromkeys(CTRL_KINDS, 0))
    doorbell_writes: int = 0
    bf_writes: int = 0
    wqes: int = 0
    tlps: dict = dataclasses.field(default_factory=lambda: dict.fromkeys(
        ("read_req", "write", "completion", "mmio"), 0))
    bytes: int = 0
    busy: dict = dataclasses.field(default_factory=lambda: dict.fromkeys(
        ("a_up", "a_dn", "b_up", "b_dn"), 0))
    wire: int = 0
    beats_ab: int = 0
    chunks_a: int = 0
    tag_cycles: int = 0
    words_a: int = 0
    mmio_words: int = 0
    seq_words: int = 0
    wqe_words: int = 0
    writer_steps: int = 0
    frames: int = 0


def _totals(s, run, msgs=None):
    """Count everything the messages ``msgs`` (indices; default all) cause: their MMIO
    writes (with their items), WQE reads, payload reads, frames, ACKs, CQEs, context
    fills and write-backs. Messages that cost the same are counted as groups."""
    p = s.prof
    bpc = p.bytes_per_cycle
    t = _Totals()
    ops, tl, busy = t.ops, t.tlps, t.busy
    sel = set(range(run.n)) if msgs is None else set(msgs)
    frames = _frames(s.msg_bytes, s.pmtu, s.header)
    rq = _rq_cycles(p)
    mrrs = p.max_read_request // _W
    fill_shape = _read_shape(p, 0, s.qpc_words)       # see _Setup.qpc_words
    fill_req = len(fill_shape)
    fill_pieces = [n for chunk in fill_shape for n in chunk]
    fill_cpl = sum(_cpl_cycles(p, n) for n in fill_pieces)
    fill_tags = sum(_tag_hold(p, chunk) for chunk in fill_shape)
    one_word_wr = _tlp(_W, p.req_overhead, bpc, 1)
    # MMIO writes (node A, down) and the items they make: one lookup each.
    items = sum(1 for _, ms in run.items if ms[0] in sel)
    mmio_bytes = _W * (1 + s.n_inline) if s.bf else DOORBELL_BYTES
    mmio_words = _cdiv(mmio_bytes, _W)
    ops["doorbells"] += items
    ops["ctx_lookups"] += items
    t.doorbell_writes = 0 if s.bf else items
    t.bf_writes = items if s.bf else 0
    tl["mmio"] += items
    t.bytes += items * (mmio_bytes + p.mmio_overhead)
    busy["a_dn"] += items * _tlp(mmio_bytes, p.mmio_overhead, bpc, mmio_words)
    t.mmio_words += items * mmio_words
    # WQE reads (node A), grouped by size and offset in an MRRS block.
    for (offset, words), k in Counter((a % mrrs, w) for a, w, first in run.wqe_reads
                                      if first in sel).items():
        r = _read_cost(p, offset, words)
        ops["wqe_reads"] += k
        t.wqes += k * (words >> s.stride)
        t.wqe_words += k * words
        _add_reads(t, r, k, rq)
    # What every message's frames cost (the same for all messages).
    fixed = dict(wire=0, beats=0, steps=0, b_tlps=0, b_bytes=0, b_busy=0)
    for f in frames:
        fixed["wire"] += f.nbytes + _PHY
        fixed["beats"] += f.beats
        fixed["steps"] += f.steps
        for words, nbytes in _wr_tlps(p, f.seg):
            fixed["b_tlps"] += 1
            fixed["b_bytes"] += nbytes + p.req_overhead
            fixed["b_busy"] += _tlp(nbytes, p.req_overhead, bpc, words)
    m = len(sel)
    t.frames = m * len(frames)
    t.wire += m * fixed["wire"]
    t.beats_ab += m * fixed["beats"]
    t.writer_steps += m * fixed["steps"]
    ops["ctx_lookups"] += m * len(frames)
    tl["write"] += m * fixed["b_tlps"]
    t.bytes += m * fixed["b_bytes"]
    busy["b_up"] += m * fixed["b_busy"]
    t.seq_words = m * ((1 + s.n_inline) if s.bf else 1 << s.stride)
    # Per message: CQE, ACK, context fills and write-backs, payload reads.
    groups = Counter((run.signalled[j], run.ack[j], run.miss_a[j], run.wb_a[j],
                      run.miss_b[j], run.wb_b[j],
                      None if s.inline else (run.pay_base + j * s.words) % mrrs)
                     for j in sel)
    for (sig, ack, miss_a, wb_a, miss_b, wb_b, offset), k in groups.items():
        if sig:
            ops["cqe_writes"] += k
            tl["write"] += k
            t.bytes += k * (_W + p.req_overhead)
            busy["a_up"] += k * one_word_wr
        for miss, wb, up, dn in ((miss_a, wb_a, "a_up", "a_dn"),
                                 (miss_b, wb_b, "b_up", "b_dn")):
            if miss:
                ops["ctx_misses"] += k
                tl["read_req"] += k * fill_req
                tl["completion"] += k * len(fill_pieces)
                t.bytes += k * (fill_req * p.req_overhead + _W * s.qpc_words
                                + len(fill_pieces) * p.cpl_overhead)
                busy[up] += k * fill_req * rq
                busy[dn] += k * fill_cpl
                if up == "a_up":
                    t.tag_cycles += k * fill_tags
            if wb:
                ops["ctx_writebacks"] += k
                tl["write"] += k
                t.bytes += k * (_W + p.req_overhead)
                busy[up] += k * one_word_wr
        if ack:
            ops["acks_sent"] += k
            ops["acks_received"] += k
            t.wire += k * (_ack_bytes(s.header) + _PHY)
        if offset is not None:
            for i, f in enumerate(frames):
                t.words_a += k * f.words
                r = _read_cost(p, (offset + i * (s.pmtu // _W)) % mrrs, f.words)
                _add_reads(t, r, k, rq)
    return t


@lru_cache(maxsize=65536)
def _read_cost(prof, offset, words):
    """What a DMA read of ``words`` words ``offset`` words past an MRRS boundary costs:
    request TLPs, completions, bytes, down-direction busy cycles, tag-hold cycles."""
    out = dict(chunks=0, pieces=0, bytes=0, cpl_busy=0, tags=0)
    for chunk in _read_shape(prof, offset, words):
        out["chunks"] += 1
        out["tags"] += _tag_hold(prof, chunk)
        out["bytes"] += prof.req_overhead
        for n in chunk:
            out["pieces"] += 1
            out["cpl_busy"] += _cpl_cycles(prof, n)
            out["bytes"] += _W * n + prof.cpl_overhead
    return out


def _add_reads(t, r, k, rq):
    """Add ``k`` reads of cost ``r`` (:func:`_read_cost`) to the totals ``t``."""
    t.tlps["read_req"] += k * r["chunks"]
    t.chunks_a += k * r["chunks"]
    t.tag_cycles += k * r["tags"]
    t.busy["a_up"] += k * r["chunks"] * rq
    t.tlps["completion"] += k * r["pieces"]
    t.busy["a_dn"] += k * r["cpl_busy"]
    t.bytes += k * r["bytes"]


def _ctrl_bytes(t, qpc_words=1):
    """pymodel.rdma.metrics.summarize's ``ctrl_bytes`` of these totals."""
    o = t.ops
    return (DOORBELL_BYTES * t.doorbell_writes
            + _W * (t.bf_writes + t.wqes + o["cqe_writes"] + o["ctx_misses"] * qpc_words
                    + o["ctx_writebacks"]))
