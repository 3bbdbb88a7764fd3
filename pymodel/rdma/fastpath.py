"""Fast path of the pipelined RDMA engine: a point's metrics from closed forms.

:func:`rdma_fast_point` gives the metrics of :func:`pymodel.rdma.point.rdma_point` (the
cycle-level model of the engine) without stepping cycles: it lays out the run the verbs
model would post (items, doorbells, signalled WQEs, ACK requests, context hits, misses
and write-backs at both ends), counts every host-interface transaction, wire beat and
control action of it exactly (:data:`EXACT_KEYS`), takes latency and completion from the
chain of one message through the stages on an idle engine, and the steady-state ii as
the largest of the resources' per-message cycles (host-interface directions, read tags,
framer, responder writer), or, when contexts are pinned, from the recurrence of messages
waiting for their cache entry (Little's law on the entries), or, when the engine reads
WQEs and payloads from host memory, from the order in which host interface A serves the
run's doorbells and completions (:func:`_flow`: a run of a few hundred messages ends
before the steady state, and the window of its ii sees the phases before it). Timing
figures stay within
:data:`TOLERANCES` of the cycle model (tests/test_fastpath.py). Regimes it does not cover
raise ``ValueError`` (use the cycle model): fewer than :data:`MIN_MESSAGES` messages,
ACK coalescing that would meet transport timeouts, a responder receive buffer that would
overflow behind a context miss.

The module stays whole (over 400 lines): every formula reads the same run layout
(``_Run``) and resource counts (``_Totals``), and the chain of one message is shared by
the latency, the bounds and the in-flight state; split, each part would need all of it.
"""

import dataclasses
import heapq
import math
import statistics
from collections import Counter
from functools import lru_cache

from pymodel.rdma.metrics import READ_BITS, RECORD_BITS
from spec.formats.roce import HOST_WORD_BYTES, ICRC_BYTES
from spec.formats.scaleup import Header, framing
from spec.host import PROFILES
from spec.metrics import CTRL_KINDS
from spec.rdma import DOORBELL_BYTES, MAX_FRAME_BEATS
from spec.rdma_engine import (
    FIFO_DEPTHS,
    LADDER,
    MAX_INLINE_WORDS,
    MAX_PREFETCH,
    REQUESTER_DEFAULTS,
    RUNG_KNOBS,
)
from spec.rdma_responder import JOBS, REST_MAX, RX_BEATS, RX_FRAMES

__all__ = ["rdma_fast_point", "rdma_bounds", "EXACT_KEYS", "TOLERANCES"]

_W = HOST_WORD_BYTES
_FCS = 4
_PHY = 8 + 12                              # preamble + SFD, inter-frame gap (IEEE 802.3)



def _ack_bytes(header):
    """Bytes of an ACKNOWLEDGE frame with ICRC and FCS (66 RoCEv2, 34 scale-up)."""
    return framing(header).ack_bytes + ICRC_BYTES + _FCS


def _ack_beats(header):
    return -(-_ack_bytes(header) // _W)
#: Host-memory layout of the verbs model (:mod:`pymodel.rdma.verbs`): contexts of QPs
#: below ``_MAX_QPS`` at word 0, then the CQ (``2**_CQ_LOG2`` words), then the send
#: queues, then the payload buffers, in that order, at node A; the MR at node B.
_MAX_QPS, _CQ_LOG2 = 4096, 10
_DEPTH = 1 << 22                             # pymodel.rdma.point's model-only depth

#: Metrics the fast path gives exactly (equal to the cycle model's on the test grid).
EXACT_KEYS = ("wire_bytes", "ctrl_ops", "ctrl_bytes", "host_bytes", "host_tlps")
#: The largest relative deviation from the cycle model allowed for the timing figures,
#: above the worst measured on a 25-point grid at 600 messages (every rung; 8, 128 and
#: 1024 B; pcie and on_die; 1, 16, 64 and 256 QPs over 16 and 256 entries): ii 0.054
#: (64 QPs over 256 entries), and at 200 messages where the messages are at least the
#: QPs 0.036 (8 B with doorbell batching); in-flight state 0.49 at 600 messages
#: (high-water marks that depend on the order of arrivals); host_util as ii (busy cycles
#: over ii); latency and completion equal on every point. tests/test_fastpath.py asserts
#: these on a subset, tests/test_fastpath_report.py on the points the report
#: co-simulates.
TOLERANCES = {"ii_cycles": 0.25, "inflight_bits": 0.5, "host_util": 0.25,
              "latency_cycles": 0.0, "completion_cycles": 0.0}


def _cdiv(a, b):
    return -(-a // b)


def _tlp(payload, overhead, bpc, words=0):
    """Cycles a TLP holds its direction (docs/host_interface.md, "Timing")."""
    return max(1, words, _cdiv(payload + overhead, bpc))


def _not_covered(why):
    return ValueError(f"outside the RDMA fast path ({why}); use pymodel.points.cycle_point")


# -- The point's parameters ---------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Setup:
    """What the formulas need of a point: the message, the host profile, the knobs."""
    msg_bytes: int
    qps: int
    cache: int
    prof: object
    link: int
    pmtu: int
    serial: int
    ring_every: int
    bf: int
    inline: int
    signal_every: int
    ack_every: int
    ack_frames: int
    header: str = "roce"

    @property
    def words(self):
        """Payload words of a message (``ceil(L / 64)``)."""
        return _cdiv(self.msg_bytes, _W)

    @property
    def stride(self):
        """log2 of the send-queue slot in words (a slot holds inline data)."""
        return 2 if self.inline else 0

    @property
    def n_inline(self):
        return self.words if self.inline else 0


def _setup(msg_bytes, p):
    """A :class:`_Setup` from :func:`pymodel.points.resolve`'s params (the rung's knobs
    with the explicit ones on top), and the checks the verbs model makes."""
    knobs = dict(RUNG_KNOBS)
    knobs.update(dict(LADDER)[p["rung"]])
    knobs.update({k: p[k] for k in RUNG_KNOBS if p.get(k) is not None})
    s = _Setup(msg_bytes=msg_bytes, qps=p["qps"], cache=p["cache_entries"],
               prof=PROFILES[p["host"]], link=p["link_latency"], pmtu=1 << p["pmtu_log2"],
               header=framing(p.get("header", "roce")).header.value, **knobs)
    if s.inline and s.words > min(MAX_INLINE_WORDS, (1 << s.stride) - 1):
        raise ValueError(f"inline payload of {msg_bytes} bytes does not fit a WQE slot of "
                         f"{_W << s.stride} bytes")
    return s


# -- Frames ---------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Frame:
    """One frame of a message: payload bytes, RETH, wire beats (with ICRC and FCS), the
    framer's own beats, bytes with FCS, and the responder writer's words and steps;
    ``head``: 1 if the framer's first beat is made of headers only (a RoCEv2 RETH frame:
    its payload words are taken one cycle later), else 0."""
    seg: int
    reth: bool
    beats: int
    own: int
    nbytes: int
    words: int
    steps: int
    head: int


@lru_cache(maxsize=4096)
def _frames(msg_bytes, pmtu, header="roce"):
    """The frames of a message of ``msg_bytes`` at path MTU ``pmtu``, in order, with the
    headers of ``header`` (:mod:`spec.formats.scaleup`)."""
    fr = framing(header)
    # Bytes of frame beats 0 and 1 that reach the responder's writer with the header
    # entry, from the payload of a frame without RETH on; a RETH takes 16 of them.
    head_bytes = fr.head_bytes
    out = []
    nf = max(1, _cdiv(msg_bytes, pmtu))
    for k in range(nf):
        seg = min(pmtu, msg_bytes - k * pmtu)
        reth = k == 0
        body = (fr.reth_bytes if reth else fr.plain_bytes) + seg + (-seg % 4)
        beats, own = _cdiv(body + ICRC_BYTES + _FCS, _W), _cdiv(body, _W)
        words = _cdiv(seg, _W)
        # The responder's writer (rtl/rdma/resp/writer.py): a word per step, popping a
        # payload beat when the word needs bytes past those in hand, then one step per
        # beat left over (the ICRC/FCS tail).
        rest = max(0, min(beats, MAX_FRAME_BEATS) - 2)
        have = head_bytes - (16 if reth else 0)
        pops = 0
        for j in range(words):
            if min(_W * (j + 1), seg) > have + _W * pops:
                pops += 1
        steps = max(1, words + max(0, rest - pops))
        head = int(reth and fr.header is Header.ROCE)
        out.append(_Frame(seg, reth, beats, own, body + ICRC_BYTES + _FCS, words, steps,
                          head))
    return tuple(out)


# -- Host-interface transactions ------------------------------------------------------------

@lru_cache(maxsize=65536)
def _read_shape(prof, offset, words):
    """A DMA read of ``words`` words starting ``offset`` words past an MRRS boundary:
    ``((piece words, ...), ...)``, one tuple per read request TLP (MRRS chunk), one entry
    per completion (RCB piece)."""
    mrrs, rcb = prof.max_read_request // _W, prof.rcb // _W
    chunks, a, left = [], offset, words
    while left:
        n = min(left, mrrs - a % mrrs)
        pieces, b, k = [], a, n
        while k:
            m = min(k, rcb - b % rcb)
            pieces.append(m)
            b += m
            k -= m
        chunks.append(tuple(pieces))
        a += n
        left -= n
    return tuple(chunks)


def _cpl_cycles(prof, n):
    return _tlp(_W * n, prof.cpl_overhead, prof.bytes_per_cycle, n)


def _rq_cycles(prof):
    return _tlp(0, prof.req_overhead, prof.bytes_per_cycle)


def _wr_tlps(prof, nbytes):
    """Posted write TLPs of one responder frame of ``nbytes`` payload bytes (one write,
    cut at MPS): ``[(words, payload bytes), ...]``."""
    limit = min(prof.max_payload // _W, prof.wr_fifo_words)
    words = _cdiv(nbytes, _W)
    out = []
    for first in range(0, words, limit):
        k = min(limit, words - first)
        tail = nbytes - _W * (first + k - 1)         # bytes of the TLP's last word
        out.append((k, _W * (k - 1) + 4 * _cdiv(min(tail, _W), 4)))
    return out


# -- The scenario (pymodel.scenarios.rdma.writes_scenario, with its warm-up) --------------

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
    :func:`pymodel.rdma.point.build` makes, without building memory images. Raises
    ``ValueError`` where the verbs model would: the host memories are full."""
    qps, r, se = s.qps, s.ring_every, s.signal_every
    per_qp = _cdiv(n, qps)
    sq_log2 = max(0, (per_qp - 1).bit_length())
    slot_words = 1 << s.stride
    sq_base0 = _MAX_QPS + (1 << _CQ_LOG2)
    pay_base = sq_base0 + qps * ((1 << sq_log2) << s.stride)
    if pay_base + (0 if s.inline else n * s.words) > _DEPTH:
        raise ValueError(f"host memory A of {_DEPTH} words is full")
    if _MAX_QPS + _cdiv(n * s.msg_bytes + _W * n, _W) > _DEPTH:
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
    (:func:`pymodel.scenarios.rdma.coalesced_ack_requests`): on each QP's last
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
    span = REQUESTER_DEFAULTS["timeout"] // 4
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
            msgs[q], fsum[q] = m & 0xFF, f & 0xFFFF
    return ack


# -- Counts: every transaction of a run, exactly ---------------------------------------------

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
    fill_cpl = _cpl_cycles(p, 1)
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
                tl["read_req"] += k
                tl["completion"] += k
                t.bytes += k * (p.req_overhead + _W + p.cpl_overhead)
                busy[up] += k * rq
                busy[dn] += k * fill_cpl
                if up == "a_up":
                    t.tag_cycles += k * _tag_hold(p, (1,))
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


def _ctrl_bytes(t):
    """pymodel.rdma.metrics.summarize's ``ctrl_bytes`` of these totals."""
    o = t.ops
    return (DOORBELL_BYTES * t.doorbell_writes
            + _W * (t.bf_writes + t.wqes + o["cqe_writes"] + o["ctx_misses"]
                    + o["ctx_writebacks"]))


# -- One message on an idle engine: the chain of its steps ----------------------------------

class _Dir:
    """One direction of a host interface: its first free cycle and the kind of TLP that
    started last (the schedulers alternate when both kinds wait)."""

    def __init__(self, last):
        self.free, self.last = 0, last

    def start(self, ready, d, kind):
        s = max(ready, self.free)
        self.free, self.last = s + d, kind
        return s

    def pair(self, ready_rd, d_rd, ready_wr, d_wr):
        """A read request and a posted write that both wait: ``(read start, write
        start)``, in the order the round robin gives them."""
        if max(ready_rd, self.free) == max(ready_wr, self.free) and self.last == "rd":
            w = self.start(ready_wr, d_wr, "wr")
            return self.start(ready_rd, d_rd, "rd"), w
        r = self.start(ready_rd, d_rd, "rd")
        return r, self.start(ready_wr, d_wr, "wr")


class _Host:
    """A host interface seen by one message at a time: ``up`` and ``dn``."""

    def __init__(self, prof):
        self.p = prof
        self.up, self.dn = _Dir("wr"), _Dir("mmio")
        self.tags = []                       # per request TLP: cycles its tag is held

    def read(self, a, addr, words, first_start=None):
        """A read accepted in cycle ``a``: the cycles its words are on ``rd_data``, and
        the start of its last request TLP. ``first_start`` forces the first TLP's start
        (when :meth:`_Dir.pair` placed it)."""
        p = self.p
        out, last = [], None
        mrrs = p.max_read_request // _W
        for i, chunk in enumerate(_read_shape(p, addr % mrrs, words)):
            if i == 0 and first_start is not None:
                s = first_start
            else:
                s = self.up.start(a + 1, _rq_cycles(p), "rd")
            last = s
            due = s + p.read_latency
            for n in chunk:
                d = _cpl_cycles(p, n)
                c = self.dn.start(due, d, "cpl")
                out += [c + d - n + 1 + j for j in range(n)]
            self.tags.append(c + 1 - s)          # free from the cycle after its last
        return out, last


def _fill(host, t, wb, one_word_wr):
    """A context miss whose fill read and (with ``wb``) write-back are pushed in cycle
    ``t``: the cycle the fill word is on ``rd_data``."""
    p = host.p
    if wb:
        s_rd, _ = host.up.pair(t + 2, _rq_cycles(p), t + 2, one_word_wr)
    else:
        s_rd = host.up.start(t + 2, _rq_cycles(p), "rd")
    words, _ = host.read(t + 1, 0, 1, first_start=s_rd)
    return words[0]


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
        t_w = max(t_w, _fill(ha, t_f, wb_a, one_word_wr) + 1)
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
    # Node B: header check, verify, ACK, the writer and host interface B's writes.
    h = v = -1
    for k, row in enumerate(rows):
        h = max(row["end"] + s.link + 1, h + 1)
        v = max(h + 1, v + 1)
        if k == 0 and miss_b:
            v = max(v, _fill(hb, h, wb_b, one_word_wr) + 1)
        row["verify"] = v
    out["written"] = _writes(s, hb, rows, frames)
    out["frames"] = rows
    out["retire"] = out["cqe"] = None
    if ack:
        out["retire"] = rows[-1]["verify"] + _ack_beats(s.header) + s.link + 1
        if signalled:
            out["cqe"] = ha.up.start(out["retire"] + 3, one_word_wr, "wr")
    return out


def _writes(s, hb, rows, frames):
    """The responder's writer, write arbiter and host interface B for the frames
    verified in ``rows[k]["verify"]``: the cycle the last word reaches host memory."""
    p = s.prof
    wrote, acc, written = [], [], []         # per word: writer, arbiter, memory cycles
    free = -1
    for k, f in enumerate(frames):
        start = max(rows[k]["verify"] + 1, free)
        x = start - 1
        tlps = _wr_tlps(p, f.seg)
        for words, nbytes in tlps:
            for _ in range(words):
                g = len(wrote)
                x = max(x + 1, acc[g - 4] + 1 if g >= 4 else x + 1)
                a = x + 1
                if g >= p.wr_fifo_words:
                    a = max(a, written[g - p.wr_fifo_words] + 1)
                wrote.append(x)
                acc.append(a)
            st = hb.up.start(acc[-1] + 1, _tlp(nbytes, p.req_overhead, p.bytes_per_cycle,
                                               words), "wr")
            written += [st + j for j in range(words)]
        free = x + 1 + (f.steps - f.words)
    return written[-1]


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


# -- The rate: the slowest resource a message uses --------------------------------------------

def _tag_hold(prof, chunk):
    """Cycles a read request TLP of ``chunk`` (its pieces' words) holds its tag on an
    idle interface: the latency, its completions but the last, one more cycle."""
    return prof.read_latency + sum(_cpl_cycles(prof, n) for n in chunk[:-1]) + 1


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


def _window(n):
    """``(lo, hi)``: the message positions whose sends span the steady-state window of
    :func:`pymodel.rdma.metrics.steady_ii` for ``n`` messages."""
    lo, hi = n // 4, max(n // 4 + 1, (3 * n) // 4)
    return lo, min(hi, n - 1)


def _pinned(s, run, ii):
    """The rate when context-cache entries are shared: the front takes an item whose
    entry holds another QP only after that QP's last message in flight retired (the
    entry is pinned), so at most ``cache_entries`` QPs are in flight. Items are taken
    in order, each at least ``ii`` cycles per message after the one before; returns
    the steady-state cycles per message over :func:`_window` of the sending order, or
    ``ii`` when no item waits."""
    p = s.prof
    if s.qps <= s.cache:
        return ii                           # every QP has an entry of its own
    chains = {}

    def chain(j):
        key = (run.miss_a[j], run.wb_a[j], run.miss_b[j], run.wb_b[j])
        if key not in chains:
            c = _chain(s, 0, _Host(p), _Host(p), *key, 0, 0, True, True,
                       [0] * (1 + s.n_inline))
            chains[key] = (c["retire"], c["frames"][-1]["first"])
        return chains[key]

    owner, done = {}, {}                    # entry -> (qp, cycle its QP is retired)
    t, last_len = 0, 0
    sends = []
    waited = False
    for q, msgs in run.items[1:]:           # the warm-up item went alone, before
        e = q % s.cache
        t += ii * last_len
        if e in owner and owner[e] != q:
            if done[e] + 1 > t:
                t, waited = done[e] + 1, True
        retire, first = chain(msgs[0])
        for k, _ in enumerate(msgs):
            sends.append(t + first + k * ii)
        owner[e], done[e] = q, t + retire + (len(msgs) - 1) * ii
        last_len = len(msgs)
    if not waited:
        return ii
    lo, hi = _window(run.n)
    # sends[] lacks the warm-up message (position 0 of the cycle model's list).
    return (sends[hi - 1] - sends[lo - 1]) / (hi - lo)


def _serial(s, run):
    """The rate with one message in flight (``serial``): the front takes the next
    work item in the cycle after the completion unit retired the previous message, and
    each message's chain (:func:`_chain`) starts from the host interfaces as the one
    before left them (its CQE write can delay the next read request). Returns the
    cycles per message over :func:`_window`."""
    if s.ring_every != 1 or not all(run.ack):
        raise _not_covered("one message at a time needs a doorbell and an ACK per "
                           "message")
    lo, hi = _window(run.n)
    mrrs = s.prof.max_read_request // _W
    wqe_of = {first: a for a, _, first in reversed(run.wqe_reads)}
    # The host interfaces' state relative to the front's take: the cycles each
    # direction stays busy, the kind that started last. A message's chain depends only
    # on that, its contexts and its buffers' offsets, so equal cases are computed once.
    state = (0, "wr", 0, "mmio", 0, "wr", 0, "mmio")
    t_f, sends, memo = 0, {}, {}
    for x in range(1, hi + 1):
        j = run.order[x]
        key = (run.miss_a[j], run.wb_a[j], run.miss_b[j], run.wb_b[j], run.signalled[j],
               (run.pay_base + j * s.words) % mrrs, wqe_of.get(j, 0) % mrrs, state)
        if key not in memo:
            ha, hb = _Host(s.prof), _Host(s.prof)
            (ha.up.free, ha.up.last, ha.dn.free, ha.dn.last,
             hb.up.free, hb.up.last, hb.dn.free, hb.dn.last) = state
            c = _chain(s, 0, ha, hb, *key[:4], key[6], key[5], key[4], True,
                       [0] * (1 + s.n_inline))
            nxt = c["retire"] + 1
            after = tuple(v if isinstance(v, str) else max(0, v - nxt)
                          for v in (ha.up.free, ha.up.last, ha.dn.free, ha.dn.last,
                                    hb.up.free, hb.up.last, hb.dn.free, hb.dn.last))
            memo[key] = (nxt, c["frames"][-1]["first"], after)
        nxt, send, state = memo[key]
        sends[x] = t_f + send
        t_f += nxt
    return (sends[hi] - sends[lo]) / (hi - lo)


# -- The rate of a run that starts with every doorbell posted --------------------------------

#: Resources :func:`_flow` follows message by message (host interface A's down direction,
#: the read tags, the FIFOs between the requester's stages, the framer); the others enter
#: it as a least spacing between sends.
_FLOW_BOUNDS = ("host A down", "host A up", "read tags", "WQE reads (batch)", "WQE FIFO",
                "frame descriptors (segs)", "payload FIFO", "work items (fetch)",
                "doorbell intake", "QP front", "WQE fetch", "wire A->B")


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
    doorbell buffer and in ``items``, ``fetch``, ``batch``, the WQE FIFO, ``segs`` and
    the payload FIFO (:data:`spec.rdma_engine.FIFO_DEPTHS`), and for a free read tag;
    messages leave the framer at most one per ``gap`` cycles (the resources not
    followed here: :data:`_FLOW_BOUNDS`). Host interface A's up direction carries the
    read requests, the fills' write-backs and the CQE writes, these ``cqe_after``
    cycles after the first beat of the message's last frame (as on an idle engine).

    A short run does not reach the steady state of :func:`rdma_bounds`: the doorbells
    go first, the WQE reads of the first ``batch`` messages come back before any
    payload, and the gaps these leave recur a read latency later; the window of
    :func:`pymodel.rdma.metrics.steady_ii` sees those phases. Returns the cycles per
    message over :func:`_window`, or None where this does not apply (WQEs by MMIO or
    inline data: host interface A then carries no reads for the WQE or the payload;
    messages larger than half the payload FIFO).
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
        shapes = [_read_shape(p, (base + k * (s.pmtu // _W)) % mrrs, f.words)
                  for k, f in enumerate(frames)]
        pay.append((shapes, sum(len(sh) for sh in shapes)))
    cpl = {n: _cpl_cycles(p, n) for n in range(1, mrrs + 1)}
    d_mmio = _tlp(DOORBELL_BYTES, p.mmio_overhead, p.bytes_per_cycle, 1)
    cap_mmio = p.mmio_fifo_words + FIFO_DEPTHS["items"]
    d_fetch, d_batch, d_segs = FIFO_DEPTHS["fetch"], FIFO_DEPTHS["batch"], FIFO_DEPTHS["segs"]
    wqe_cap, pay_cap = REQUESTER_DEFAULTS["wqe_words"], REQUESTER_DEFAULTS["payload_words"]
    offsets = [sum(f.words for f in frames[:k]) for k in range(nf)]
    n_items, n_reads, n_frames = len(items), len(reads), m * nf
    miss = [run.miss_a[order[ps[0]]] for ps in items]
    wb = [run.wb_a[order[ps[0]]] for ps in items]
    mmio_start, front, fill_at, leave = ([None] * n_items for _ in range(4))
    wqe_issue, batch_free = [None] * n_reads, [None] * n_reads
    wqe_words = [[] for _ in range(n_reads)]    # cycles each word is on rd_data
    seq = [None] * m
    pay_issue, pay_at, take, first_beat = ([None] * n_frames for _ in range(4))
    pay_left = [0] * n_frames                   # completions not yet served
    wqe_pop, pops = [], []                      # per WQE / payload word: popped
    tag_free = []                               # per request TLP: its tag is free
    heap, up = [], set()
    wr = _tlp(_W, p.req_overhead, p.bytes_per_cycle, 1)
    signalled = [run.signalled[j] for j in order]
    nxt = dict(item=0, read=0, msg=0, frame=0, serial=0)
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
                    and (i < d_fetch or leave[i - d_fetch] is not None) and tags_known(1)):
                t = mmio_start[i] + d_mmio + 2
                if i:
                    t = max(t, front[i - 1] + 1)
                if i >= d_fetch:
                    t = max(t, leave[i - d_fetch] + 1)
                front[i] = t
                if miss[i]:
                    if wb[i]:
                        up_slot(t + 2, wr)
                    request(t + 2, ((1,),), "fill", i)
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
                segs = f0 + nf - 1 - d_segs
                room = len(pops) + msg_words - pay_cap - 1
                shapes, chunks = pay[x]
                if (len(wqe_words[r]) > k and (segs < 0 or take[segs] is not None)
                        and (room < 0 or pops[room] is not None) and tags_known(chunks)):
                    t = wqe_words[r][k] + 1
                    if x:
                        t = max(t, seq[x - 1] + slot)
                    if segs >= 0:
                        t = max(t, take[segs] + 1 - nf)
                    if room >= 0:
                        t = max(t, pops[room])
                    seq[x] = t
                    wqe_pop.extend(t + j for j in range(slot))
                    if last:
                        batch_free[r] = t + slot
                    for kf, shape in enumerate(shapes):
                        pay_issue[f0 + kf] = t + 1 + kf
                        request(t + 3 + kf, shape, "pay", f0 + kf)
                    pops.extend([None] * msg_words)
                    nxt["msg"], moved = x + 1, True
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
            fill_at[ref], moved = t + d, True
        else:
            pay_left[ref] -= 1
            if not pay_left[ref]:
                pay_at[ref], moved = t + d, True
    # first_beat[] lacks the warm-up message (position 0 of the cycle model's list).
    return (first_beat[hi * nf - 1] - first_beat[lo * nf - 1]) / (hi - lo)


# -- State in flight ----------------------------------------------------------------------

def _inflight(s, run, ii, regime, hold_rec, rtt_b):
    """Estimated high-water marks of a back-to-back run and their bits.

    ``regime``: ``"serial"``, ``"pinned"`` (entries shared: at most ``cache_entries``
    QPs in flight) or ``"free"``. In the free regime the host has posted every WQE at
    once, so every FIFO and reserve upstream of the slowest resource fills to its
    capacity; what is downstream holds what Little's law gives (rate times hold).
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
    rest = sum(max(0, min(f.beats, MAX_FRAME_BEATS) - 2) for f in frames)
    body = run.n - 1
    k_ack = max(1, round(body / max(1, sum(run.ack[1:]))))
    cold_b = len({(7 * q + 3) % _MAX_QPS % s.cache for q in range(s.qps)}) - 1
    m = dict(tags_a=1, tags_b=1, records=1, wqe_words=0 if s.bf else slot,
             payload_words=max(1, s.words), fills_a=1, fills_b=1, rx=rest)
    if regime == "serial":
        m["tags_a"] = max(1, chunks_w, chunks_p)
    elif regime == "pinned":
        e = s.cache
        m.update(tags_a=min(p.tags, e * max(1, chunks_w, chunks_p)), tags_b=e, records=e,
                 wqe_words=0 if s.bf else e * slot, payload_words=e * max(1, s.words),
                 fills_a=e, fills_b=e, rx=max(rest, e * rest // nf))
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
            + 8 * _W * (m["wqe_words"] + m["payload_words"] + m["fills_a"] + m["fills_b"]
                        + m["rx"]))
    return bits, m


def _inline_source(s):
    """Cycles per message of the MMIO writes that bring a WQE with its inline data (the
    host interface's down direction and the intake's word a cycle)."""
    p = s.prof
    nbytes = _W * (1 + s.n_inline)
    return max(_tlp(nbytes, p.mmio_overhead, p.bytes_per_cycle, 1 + s.n_inline),
               1 + s.n_inline)


# -- The point ------------------------------------------------------------------------------

#: Fewest back-to-back messages a fast-path point accepts (see the module doc).
MIN_MESSAGES = 8


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
    if gap * ii + rtt >= REQUESTER_DEFAULTS["timeout"] // 2:
        raise _not_covered(f"ACK coalescing leaves a message {gap} messages from its ACK "
                           f"request, near the {REQUESTER_DEFAULTS['timeout']}-cycle "
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


def _latency(s, n_lat):
    """Median latency and completion of the one-at-a-time run (pymodel.rdma.point):
    ``n_lat`` messages after a warm-up, a doorbell (or WQE by MMIO) and a CQE each,
    posted :func:`pymodel.rdma.point.latency_spacing` cycles apart into an idle
    engine; the chain of each (:func:`_chain`) with its own context hits and misses."""
    sl = dataclasses.replace(s, ring_every=1, signal_every=1)
    run = _scenario(sl, n_lat + 1)
    spacing = 6 * s.prof.read_latency + 600
    mrrs = s.prof.max_read_request // _W
    wqe_of = {first: a for a, _, first in reversed(run.wqe_reads)}
    ha, hb = _Host(s.prof), _Host(s.prof)
    lat, comp, memo = [], [], {}
    for j in run.order:
        # Messages that meet the same contexts, buffer alignment and interface state
        # (the kinds of TLP that started last) take the same times.
        state = (ha.up.last, ha.dn.last, hb.up.last, hb.dn.last)
        key = (run.miss_a[j], run.wb_a[j], run.miss_b[j], run.wb_b[j],
               (run.pay_base + j * s.words) % mrrs, wqe_of.get(j, 0) % mrrs, state)
        if key not in memo:
            la, co, _ = _isolated(sl, run, j, ha, hb, t0=j * spacing)
            memo[key] = (la, co, (ha.up.last, ha.dn.last, hb.up.last, hb.dn.last))
        la, co, after = memo[key]
        ha.up.last, ha.dn.last, hb.up.last, hb.dn.last = after
        lat.append(la)
        comp.append(co)
    return statistics.median(lat[1:]), statistics.median(comp[1:]), run


def rdma_fast_point(msg_bytes, messages, p):
    """The metrics dict of :func:`pymodel.points.cycle_point` for ``"rdma"`` from the
    closed forms of this module (``p``: :func:`pymodel.points.resolve`'s params).

    Raises ``ValueError`` for a point the verbs model refuses (inline data that does
    not fit, a full host memory) and for the regimes the fast path does not cover
    (module doc): fewer than :data:`MIN_MESSAGES` messages, ACK coalescing that would
    meet transport timeouts, a responder receive buffer that would overflow.
    """
    if messages < MIN_MESSAGES:
        raise _not_covered(f"{messages} messages: the steady state needs at least "
                           f"{MIN_MESSAGES}")
    s = _setup(msg_bytes, p)
    n = messages + 1
    run = _scenario(s, n)
    t = _totals(s, run)
    lat, comp, lrun = _latency(s, p["latency_messages"])
    # A message's times on an idle engine (hit, and all-miss) for the holds below.
    hit = _chain(s, 0, _Host(s.prof), _Host(s.prof), False, False, False, False, 0, 0,
                 True, True, [0] * (1 + s.n_inline))
    rtt = hit["retire"] - hit["frames"][-1]["take"]
    miss = _chain(s, 0, _Host(s.prof), _Host(s.prof), False, False, True, True, 0, 0,
                  True, True, [0] * (1 + s.n_inline))
    rtt_b = miss["frames"][0]["verify"] - hit["frames"][0]["verify"] + 2
    if s.serial:
        ii, regime = _serial(s, run), "serial"
    else:
        bounds = rdma_bounds(s, run)
        ii0 = max(bounds.values())
        _check_acks(s, run, ii0, rtt)
        ii = _pinned(s, run, ii0)
        regime = "pinned" if ii > ii0 * (1 + 1e-9) else "free"
        if regime == "free" and messages <= FLOW_MAX_MESSAGES:
            gap = max(v for k, v in bounds.items() if k not in _FLOW_BOUNDS)
            flow = _flow(s, run, gap, None if hit["cqe"] is None
                         else hit["cqe"] - hit["frames"][-1]["first"])
            ii = ii if flow is None else flow
        _check_receive(s, run, bounds, rtt_b, regime)
    bits, _ = _inflight(s, run, ii, regime, rtt, rtt_b)
    busiest = max(t.busy.values())
    start = 6 * s.prof.read_latency + 600
    cycles = start + (hit["cqe"] - 0) + (n - 2) * ii + 1
    return {
        "latency_cycles": lat, "completion_cycles": comp, "ii_cycles": ii,
        "wire_bytes": t.wire / n, "ctrl_ops": {k: v / n for k, v in t.ops.items()},
        "ctrl_bytes": _ctrl_bytes(t) / n, "host_bytes": t.bytes / n,
        "host_tlps": {k: v / n for k, v in t.tlps.items()},
        "host_util": min(1.0, busiest / n / ii) if ii else None,
        "inflight_bits": bits, "messages": messages, "cycles": round(cycles),
    }
