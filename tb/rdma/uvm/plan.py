"""From work requests to runs: host images, MR table, MMIO writes and injected frames.

A test's items become runs of the top, each after its own reset:

- the *posted* runs: the items of the host-side kinds (``none`` and the access errors)
  are posted through :class:`pymodel.rdma.verbs.Verbs` as their flags say (WQE in the
  send queue or by MMIO, payload in memory or inline, signalled or not) and announced by
  the MMIO player (a doorbell, or the WQE itself), each write released ``gap`` cycles
  after the previous one; the requester sends their frames. An access error moves its
  QP to ERR, which flushes every later WQE of the QP (docs/rdma.md, QP states): so that
  each item keeps an outcome of its own, an item that follows an access error on its QP
  starts a new posted run (with the WQEs of other QPs still waiting for their doorbell;
  an access error always rings, see the sequences).
- the *inject* run: the items of :data:`WIRE_KINDS`. Their frames are the ones the
  requester would send (a planning run of the golden model on their WQEs, one doorbell
  each), played through the ``inject`` player with one bad copy of one frame of each
  item placed just before that frame.

:class:`RunPlan` holds everything a run loads, the run-time ports (:class:`RunKnobs`)
and what the intent oracle needs (targets, ``wr_id``, send-queue indices, first PSNs,
AckReq); the driver hands it to the bench, and the scoreboard runs the golden model on
it. The inject run is kept within the responder's receive buffers (header entries and
payload beats, :class:`RdmaConfig`), so that no frame is dropped for ``overflow``, which
would hide the error kind of a bad copy (``test_rdma_receive_overflow`` covers
overflow; docs/uvm.md, limits).
"""

import dataclasses

from pymodel.fields import unpack
from pymodel.rdma.frames import icrc, with_fcs
from pymodel.rdma.system import simulate
from pymodel.rdma.verbs import Verbs
from spec.formats.roce import CQE_LAYOUT, WRITE_HEADER, OpCode

from .config import RunKnobs
from .items import ACCESS_KINDS, MAX_SIZE, QP_TABLE

__all__ = ["RunPlan", "plan_runs", "split_after_access_errors", "inject_cost",
           "intended_ack_req", "read_cqes",
           "payload_at", "bad_copy", "GOOD_MR", "RO_MR", "WR_ID_BASE", "CQ_LOG2",
           "INJECT_MAX_RATE"]

#: MR table entries: the writable target buffer and a buffer without the write right.
GOOD_MR, RO_MR = 1, 2
#: An MR entry that stays empty (``access_rkey``/``empty_entry``).
EMPTY_MR = 7
#: Key tag of every registered MR (``Verbs.reg_mr``) and the wrong one.
KEY_TAG, WRONG_TAG = 0xA5, 0x3C
#: Largest stall rate of the inject player: the model draws the player's stall pattern
#: for ``8 * beats + 64`` cycles only, which a rate near 256 outruns.
INJECT_MAX_RATE = 128
#: ``wr_id`` of item ``k`` of a test.
WR_ID_BASE = 0x5000_0000
#: CQEs in the CQ (larger than any test's item count: the CQ never wraps).
CQ_LOG2 = 10
_M24 = (1 << 24) - 1


def _beats(nbytes):
    return -(-nbytes // 64)


def inject_cost(item):
    """``(frames, beats, rest)`` an inject item adds to the inject run: its own frames
    plus the bad copy (at most one beat longer than the longest frame), their beats, and
    their beats after each frame's first two (what the responder's payload FIFO holds)."""
    beats = [_beats(n) for n in item.frames()] + [_beats(max(item.frames()) + 8)]
    return len(beats), sum(beats), sum(max(0, b - 2) for b in beats)


def run_last_of_qp(items):
    """The indices of the last item of each QP among ``items`` (``(index, item)``)."""
    return set({it.qp.qpn_a: k for k, it in items}.values())


def intended_ack_req(items, knobs):
    """Whether each item's last frame asks for an ACK (``{index: bool}``; ``items`` are
    ``(index, item)`` in posting order), from the ACK-coalescing rule alone
    (:data:`spec.rdma_engine.RUNG_KNOBS`): a signalled WQE always asks; otherwise every
    ``ack_every``-th message of a QP asks, and so does the one that brings the QP's
    frames since the last request to ``ack_frames`` (when not 0). The last item of each
    QP in the run asks too (the host sets ``WQE_ACK_REQ``, :func:`run_last_of_qp`): a run
    may end a QP's traffic before the sequence does (a later item behind an access error
    goes to a later run), and a message that never asks for an ACK would wait for the
    transport timer."""
    msgs, frames, out = {}, {}, {}
    last = run_last_of_qp(items)
    for k, it in items:
        q = it.qp.qpn_a
        m, f = msgs.get(q, 0) + 1, frames.get(q, 0) + len(it.frames())
        want = (it.signalled or knobs.ack_every <= 1 or m >= knobs.ack_every
                or (knobs.ack_frames != 0 and f >= knobs.ack_frames) or k in last)
        out[k] = want
        msgs[q], frames[q] = (0, 0) if want else (m, f)
    return out


@dataclasses.dataclass
class RunPlan:
    """One run of the top.

    ``knobs``: its run-time ports; ``engine``: the model's :class:`Config` (with the CQ);
    ``mem_a``/``mem_b``: initial host images ``{word: value}``; ``mr_table``: MR_LAYOUT
    integers; ``mmio``/``release``: the MMIO player's words and release cycles;
    ``announcements``: ``(release cycle, item indices, "doorbell" or "blueflame")`` of
    each MMIO write, in order; ``inject``: frames with FCS; ``items``: indices (into the
    test's items) of the items this run carries; per item: ``targets`` ``(raddr, rkey)``,
    ``wr_ids``, ``sq_index``, ``psns`` (first PSN), ``ack_req`` (intent); ``bad``: item
    -> position of its bad copy in ``inject``; ``qps``: the QPs that have contexts (those
    with traffic first).
    """
    index: int
    kind: str
    knobs: RunKnobs
    engine: object
    mem_a: dict
    mem_b: dict
    mr_table: list
    mmio: list
    release: list
    announcements: list
    inject: list
    items: tuple
    targets: dict
    wr_ids: dict
    sq_index: dict
    psns: dict
    ack_req: dict
    bad: dict
    qps: tuple

    def model(self):
        """The golden model's results for this run (:func:`pymodel.rdma.system.simulate`),
        computed once; callers that change them change a copy."""
        if not hasattr(self, "_model"):
            self._model = simulate(self.engine, self.mem_a, self.mem_b, self.mr_table,
                                   self.mmio, self.release, self.inject,
                                   self.knobs.inject_stall)
        return self._model


def _image(cfg, items, index, kind, knobs, extra_qps=()):
    """Verbs images of ``items`` (``(test index, item)``) and their targets; the QPs of
    ``extra_qps`` get contexts too (QPs without traffic in this run)."""
    v = Verbs(depth=cfg.depth, mr_entries=cfg.mr_entries, max_qps=QP_TABLE, cq_log2=CQ_LOG2)
    qps, per_qp = [], {}
    for _, it in items:
        if it.qp not in per_qp:
            qps.append(it.qp)
        per_qp[it.qp] = per_qp.get(it.qp, 0) + 1
    qps += [q for q in dict.fromkeys(extra_qps) if q not in per_qp]
    pairs = {}
    for qp in qps:
        sq_log2 = max(0, (per_qp.get(qp, 1) - 1).bit_length())
        pairs[qp] = v.create_qp(qp.qpn_a, qp.qpn_b, sq_log2=sq_log2, pmtu_log2=qp.pmtu_log2,
                                psn_a=qp.psn, psn_b=qp.psn, stride_log2=qp.stride_log2)
    # The writable MR holds every target in turn (aligned, 64 bytes apart); a target that
    # runs past its end overlaps the last ones.
    room = sum(_beats(it.size) * 64 + 64 for _, it in items)
    base, key = v.reg_mr(room, index=GOOD_MR, key_tag=KEY_TAG)
    ro_base, ro_key = v.reg_mr(MAX_SIZE, index=RO_MR, remote_write=False, key_tag=KEY_TAG)
    cursor, targets, wr_ids, sq_index, psns = base, {}, {}, {}, {}
    next_psn = {qp: qp.psn for qp in qps}
    announcements, pending, release = [], {}, 0
    last_of_qp = run_last_of_qp(items)
    for k, it in items:
        raddr, rkey = cursor, key
        cursor += _beats(it.size) * 64 + 64
        if it.error == "access_rkey":
            rkey = (EMPTY_MR | KEY_TAG << 8) if it.variant == "empty_entry" else \
                (GOOD_MR | WRONG_TAG << 8)
        elif it.error == "access_right":
            raddr, rkey = ro_base, ro_key
        elif it.error == "access_bounds":
            if it.variant == "above":        # aligned, starts inside, ends past the end
                raddr = base + room - 64 * (it.fault_pick % _beats(it.size))
            else:                            # aligned, starts before the MR
                raddr = base - 64 * (1 + it.fault_pick % 4)
        elif it.error == "access_align":
            raddr += 1 + it.fault_pick % 63
        targets[k], wr_ids[k] = (raddr, rkey), WR_ID_BASE + k
        psns[k] = next_psn[it.qp]
        next_psn[it.qp] = (next_psn[it.qp] + len(it.frames())) & _M24
        msg = v.post_write(pairs[it.qp], it.payload, raddr, rkey, wr_id=wr_ids[k],
                           signalled=it.signalled, inline=it.inline,
                           ack_req=knobs.coalescing and k in last_of_qp)
        sq_index[k] = msg.sq_index
        pending.setdefault(it.qp, []).append(k)
        if it.announces:
            release += it.gap
            (v.blueflame if it.bf else v.ring)(pairs[it.qp], release)
            announcements.append((release, tuple(pending.pop(it.qp)),
                                  "blueflame" if it.bf else "doorbell"))
    if pending:
        raise ValueError(f"WQEs never announced: {pending}")
    engine = dataclasses.replace(cfg.engine(knobs), cq_base=v.cq_base, cq_log2=v.cq_log2)
    mmio, release = v.mmio_items()
    return RunPlan(index, kind, knobs, engine, v.mem_a, v.mem_b, v.mr_table, mmio, release,
                   announcements, [], tuple(k for k, _ in items), targets, wr_ids, sq_index,
                   psns, intended_ack_req(items, knobs), {}, tuple(qps))


def _offset(*path):
    """Byte offset of a field of a WRITE frame's headers (``WRITE_HEADER``)."""
    layout, bits = WRITE_HEADER, 0
    for name in path:
        field = layout[name]
        bits, layout = bits + field.offset, field.shape
    return bits // 8


def _field(frame, *path, nbytes):
    off = _offset(*path)
    return int.from_bytes(frame[off:off + nbytes], "big")


def _redo_crcs(body):
    """Frame bytes without ICRC and FCS -> with a fresh ICRC and FCS."""
    return with_fcs(body + icrc(body))


def _flip(data, bit):
    out = bytearray(data)
    out[bit // 8 % len(out)] ^= 1 << bit % 8
    return bytes(out)


def bad_copy(frame, kind, variant, pick, bad_qpn):
    """A copy of ``frame`` (with ICRC and FCS) that the responder must reject for
    ``kind`` alone (the checks before it still pass)."""
    body = frame[:-8]
    if kind == "fcs_bad":
        return _flip(frame, pick % (8 * len(frame)))
    if kind == "truncated":
        plain = frame[:-4]
        if variant == "short":
            return with_fcs(plain[:60 + pick % (len(plain) - 60)])
        return with_fcs(plain + bytes(1 + pick % 8))
    if kind == "icrc_bad":
        if variant == "icrc":
            return with_fcs(_flip(frame[:-4], 8 * (len(frame) - 8) + pick % 32))
        hdr = 70 if frame[_offset("bth", "opcode")] in (OpCode.RC_RDMA_WRITE_FIRST.value,
                                                        OpCode.RC_RDMA_WRITE_ONLY.value) \
            else 54
        return with_fcs(_flip(frame[:-4], 8 * hdr + pick % (8 * (len(frame) - 8 - hdr))))
    b = bytearray(body)
    if kind == "malformed":
        if variant == "dport":
            b[_offset("udp", "dport"):_offset("udp", "dport") + 2] = (4790).to_bytes(2, "big")
        elif variant == "opcode":
            b[_offset("bth", "opcode")] = 0x04           # RC SEND ONLY: not a WRITE
        elif variant == "tver":
            b[_offset("bth", "tver")] |= 1 + pick % 15   # TVer is the low nibble
        else:
            off = _offset("eth", "ethertype")
            b[off:off + 2] = (0x86DD).to_bytes(2, "big")
    elif kind == "unknown_qp":
        off = _offset("bth", "dest_qp")
        b[off:off + 3] = bad_qpn.to_bytes(3, "big")
    elif kind == "psn_nak":
        off = _offset("bth", "psn")
        psn = int.from_bytes(b[off:off + 3], "big")
        b[off:off + 3] = ((psn + 1 + pick % 64) & _M24).to_bytes(3, "big")
    else:
        raise ValueError(f"no bad copy for error kind {kind!r}")
    return _redo_crcs(bytes(b))


def _inject_plan(cfg, wire, index, knobs, qps, bad_qpn):
    """The inject run of the ``wire`` items: their frames from a planning run of the
    model, each item's in PSN order with its bad copy before the chosen one."""
    plan = _image(cfg, wire, index, "inject", RunKnobs(cache_entries=knobs.cache_entries,
                                                       inject_stall=knobs.inject_stall),
                  extra_qps=qps)
    sent = {}
    for _, frame in plan.model()["wire_ab"]:
        key = (_field(frame, "bth", "dest_qp", nbytes=3), _field(frame, "bth", "psn",
                                                                 nbytes=3))
        if key in sent:
            raise ValueError(f"the planning run sent QP {key[0]} PSN {key[1]} twice")
        sent[key] = frame
    out = []
    for k, it in wire:
        psns = [(plan.psns[k] + j) & _M24 for j in range(len(it.frames()))]
        own = [sent.pop((it.qp.qpn_b, p), b"") for p in psns]
        if [len(f) for f in own] != it.frames():
            raise ValueError(f"{it}: planned frames {[len(f) for f in own]}, expected "
                             f"{it.frames()}")
        j = it.fault_pick % len(own)
        for n, f in enumerate(own):
            if n == j:
                plan.bad[k] = len(out)
                out.append(bad_copy(f, it.error, it.variant, it.fault_pick >> 4, bad_qpn))
            out.append(f)
    if sent:
        raise ValueError(f"the planning run sent frames no item owns: {sorted(sent)}")
    beats = [_beats(len(f)) for f in out]
    rest = sum(max(0, b - 2) for b in beats)
    if (len(out) > cfg.inject_frames or rest > cfg.inject_rest_beats
            or sum(beats) > cfg.inject_depth):
        raise ValueError(f"inject run of {len(out)} frames, {sum(beats)} beats ({rest} "
                         f"after the first two of each): over the responder's buffers "
                         f"({cfg.inject_frames}, {cfg.inject_rest_beats}) or the player "
                         f"({cfg.inject_depth})")
    plan.inject, plan.mmio, plan.release, plan.announcements = out, [], [], []
    del plan._model
    return plan


def plan_runs(cfg, items, bad_qpn, qps=(), knobs=None):
    """The runs of a test's ``items`` (a list of :class:`WriteItem`): a posted run if
    any item is of a host-side kind, an inject run if any is of a wire kind; both with
    ``knobs`` (default :class:`RunKnobs`; the inject run with every message asking for
    an ACK, and not serial).
    Every QP of ``qps`` (the sequence's QP set) gets contexts in each run, with traffic
    or not. ``bad_qpn`` is a responder QPN without a context (``unknown_qp`` copies).
    Checks the inject run's limits; raises ``ValueError``.
    """
    knobs = knobs or RunKnobs()
    if any(q.qpn_b == bad_qpn for q in list(qps) + [it.qp for it in items]):
        raise ValueError(f"bad QPN {bad_qpn} belongs to a QP")
    if knobs.inject_stall[1] > INJECT_MAX_RATE:
        raise ValueError(f"inject stall rate {knobs.inject_stall[1]} over {INJECT_MAX_RATE}")
    runs = []
    host = [(k, it) for k, it in enumerate(items) if it.path == "host"]
    wire = [(k, it) for k, it in enumerate(items) if it.path == "inject"]
    for group in split_after_access_errors(host):
        runs.append(_image(cfg, group, len(runs), "posted", knobs, extra_qps=qps))
    if wire:
        runs.append(_inject_plan(cfg, wire, len(runs), knobs, qps, bad_qpn))
    return runs


def split_after_access_errors(host):
    """The posted runs of ``host`` (``(index, item)`` in posting order): a new run
    starts at an item whose QP had an access error earlier in the current run; the WQEs
    of the current run still waiting for their doorbell move on with it (an access error
    announces itself, so its QP has none waiting)."""
    groups, cur, erred = [], [], set()
    for k, it in host:
        if it.qp in erred:
            last = {}
            for pos, (_, x) in enumerate(cur):
                if x.announces:
                    last[x.qp] = pos
            wait = [pos > last.get(x.qp, -1) for pos, (_, x) in enumerate(cur)]
            groups.append([e for e, w in zip(cur, wait, strict=True) if not w])
            cur, erred = [e for e, w in zip(cur, wait, strict=True) if w], set()
        cur.append((k, it))
        if it.error in ACCESS_KINDS:
            if not it.announces:
                raise ValueError(f"access error {it.get_name()} does not announce itself")
            erred.add(it.qp)
    if cur:
        groups.append(cur)
    return groups


def read_cqes(mem_a, plan, count):
    """The first ``count`` CQEs of ``plan``'s CQ in the memory image ``mem_a`` (a list of
    words), as dicts; stops at the first whose owner bit is not the first pass's."""
    out = []
    for i in range(count):
        cqe = unpack(CQE_LAYOUT, mem_a[plan.engine.cq_base + i % (1 << plan.engine.cq_log2)])
        if cqe["owner"] != 1:
            break
        out.append(cqe)
    return out


def payload_at(mem, raddr, size):
    """``size`` bytes at byte address ``raddr`` of a memory image (a list of words)."""
    first, last = raddr // 64, (raddr + size - 1) // 64
    raw = b"".join(mem[a].to_bytes(64, "little") for a in range(first, last + 1))
    return raw[raddr % 64:raddr % 64 + size]
