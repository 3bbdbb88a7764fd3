"""From work requests to runs: host images, MR table, doorbells and injected frames.

A test's items become at most two runs of the top, each after its own reset:

- the *doorbell* run: the items of the requester-side kinds (``none`` and the access
  errors) are posted as WQEs through :class:`pymodel.rdma.verbs.Verbs` and rung through the
  doorbell player; the requester sends their frames.
- the *inject* run: the items of :data:`WIRE_KINDS`. Their frames are the ones the
  requester would send (a planning run of the golden model on their WQEs, one doorbell
  each), played through the ``inject`` player with one bad copy of one frame of each
  item placed just before that frame.

:class:`RunPlan` holds everything a run loads; the driver hands it to the bench, and the
scoreboard runs the golden model on it. The inject run is kept within the responder's
receive buffers (:data:`INJECT_FRAMES` frames, :data:`INJECT_BEATS` beats in all), so
that no frame is dropped for ``overflow``, which would hide the error kind of a bad copy
(the directed test ``test_rdma_receive_overflow`` covers overflow; docs/uvm.md, limits).
"""

import dataclasses

from pymodel.packet import beats_to_frames, unpack_beat
from pymodel.rdma.engine import simulate
from pymodel.rdma.fields import unpack
from pymodel.rdma.frames import icrc, with_fcs
from pymodel.rdma.verbs import Verbs
from spec.formats.roce import CQE_LAYOUT, WRITE_HEADER, OpCode
from spec.rdma import RX_FIFO_BEATS, RX_FRAME_ROOM, RX_FRAMES

from .items import ACCESS_KINDS, QP_TABLE

__all__ = ["RunPlan", "plan_runs", "inject_cost", "read_cqes", "payload_at", "bad_copy",
           "whole_frames", "INJECT_FRAMES", "INJECT_BEATS", "GOOD_MR", "RO_MR", "WR_ID_BASE",
           "CQ_LOG2"]

#: Frames the responder's receive side holds (its verdict FIFO).
INJECT_FRAMES = RX_FRAMES
#: Beats the receive FIFO may hold when a frame starts (room for a largest frame is
#: required).
INJECT_BEATS = RX_FIFO_BEATS - RX_FRAME_ROOM
#: MR table entries: the writable target buffer and a buffer without the write right.
GOOD_MR, RO_MR = 1, 2
#: An MR entry that stays empty (``access_rkey``/``empty_entry``).
EMPTY_MR = 7
#: Key tag of every registered MR (``Verbs.reg_mr``) and the wrong one.
KEY_TAG, WRONG_TAG = 0xA5, 0x3C
#: Bytes of the read-only MR (access_right targets are one frame, at most 4096 bytes).
RO_BYTES = 4096
#: Largest stall rate of the inject player: the model draws the player's stall pattern
#: for ``8 * beats + 64`` cycles only, which a rate near 256 outruns.
INJECT_MAX_RATE = 128
#: ``wr_id`` of item ``k`` of a test.
WR_ID_BASE = 0x5000_0000
#: CQEs in the CQ (larger than any test's item count: the CQ never wraps).
CQ_LOG2 = 10


def _beats(nbytes):
    return -(-nbytes // 64)


def inject_cost(item):
    """``(frames, beats)`` an inject item adds to the inject run: its own frames plus the
    bad copy (at most one beat longer than the longest frame)."""
    lens = item.frames()
    return len(lens) + 1, sum(_beats(n) for n in lens) + _beats(max(lens) + 8)


@dataclasses.dataclass
class RunPlan:
    """One run of the top.

    ``engine``: the model's :class:`Config` with the run-time ports (context tables, CQ);
    ``mem_a``/``mem_b``: initial host images ``{word: value}``; ``mr_table``: MR_LAYOUT
    integers; ``doorbells``: ``(qpn, sq_tail)`` in order, ``batches`` the WQEs each one
    covers; ``stall``: the ``(seed, rate)`` of the doorbell and inject players (the inject
    run's rate at most :data:`INJECT_MAX_RATE`);
    ``inject``: frames with FCS; ``items``: indices (into the test's items) of the items
    this run carries; ``targets``: item -> ``(raddr, rkey)``; ``wr_ids``: item -> wr_id;
    ``bad``: item -> position of its bad copy in ``inject``; ``qps``: the QPs that have
    contexts (those with traffic first).
    """
    index: int
    kind: str
    engine: object
    mem_a: dict
    mem_b: dict
    mr_table: list
    doorbells: list
    batches: list
    stall: tuple
    inject: list
    items: tuple
    targets: dict
    wr_ids: dict
    bad: dict
    qps: tuple

    def model(self):
        """The golden model's results for this run (:func:`pymodel.rdma.engine.simulate`)."""
        return simulate(self.engine, self.mem_a, self.mem_b, self.mr_table, self.doorbells,
                        self.stall, self.inject, self.stall)


def _image(cfg, items, index, kind, stall, ring_all, extra_qps=()):
    """Verbs images of ``items`` (``(test index, item)``) and their targets; the QPs of
    ``extra_qps`` get contexts too (QPs without traffic in this run)."""
    v = Verbs(cfg.engine(), max_qps=QP_TABLE, cq_log2=CQ_LOG2)
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
                                psn_a=qp.psn, psn_b=qp.psn)
    # The writable MR holds every target in turn (aligned, 64 bytes apart), then room
    # for the targets that run past its end.
    room = sum(-(-it.size // 64) * 64 + 64 for _, it in items)
    base, key = v.reg_mr(room, index=GOOD_MR, key_tag=KEY_TAG)
    ro_base, ro_key = v.reg_mr(RO_BYTES, index=RO_MR, remote_write=False, key_tag=KEY_TAG)
    cursor, targets, wr_ids = base, {}, {}
    left = dict(per_qp)
    batches, pending = [], {}
    for k, it in items:
        raddr, rkey = cursor, key
        cursor += -(-it.size // 64) * 64 + 64
        if it.error == "access_rkey":
            rkey = (EMPTY_MR | KEY_TAG << 8) if it.variant == "empty_entry" else \
                (GOOD_MR | WRONG_TAG << 8)
        elif it.error == "access_right":
            raddr, rkey = ro_base, ro_key
        elif it.error == "access_bounds":
            if it.variant == "above":        # aligned, starts inside, ends past the end
                raddr = base + room - 64 * (it.fault_pick % -(-it.size // 64))
            else:                            # aligned, starts before the MR
                raddr = base - 64 * (1 + it.fault_pick % 4)
        elif it.error == "access_align":
            raddr += 1 + it.fault_pick % 63
        targets[k] = (raddr, rkey)
        wr_ids[k] = WR_ID_BASE + k
        v.post_write(pairs[it.qp], it.payload, raddr, rkey, wr_id=wr_ids[k])
        pending[it.qp] = pending.get(it.qp, 0) + 1
        left[it.qp] -= 1
        if ring_all or it.ring or not left[it.qp]:
            v.ring(pairs[it.qp])
            batches.append(pending.pop(it.qp))
    assert not pending, pending
    return RunPlan(index, kind, v.cfg, v.mem_a, v.mem_b, v.mr_table, list(v.doorbells),
                   batches, tuple(stall), [], tuple(k for k, _ in items), targets, wr_ids,
                   {}, tuple(qps))


def _offset(*path):
    """Byte offset of a field of a WRITE frame's headers (``WRITE_HEADER``)."""
    layout, bits = WRITE_HEADER, 0
    for name in path:
        field = layout[name]
        bits, layout = bits + field.offset, field.shape
    return bits // 8


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
        b[off:off + 3] = ((psn + 1 + pick % 64) & 0xFFFFFF).to_bytes(3, "big")
    else:
        raise ValueError(f"no bad copy for error kind {kind!r}")
    return _redo_crcs(bytes(b))


def plan_runs(cfg, items, bad_qpn, qps=()):
    """The runs of a test's ``items`` (a list of :class:`WriteItem`): a doorbell run if
    any item is of a requester-side kind, an inject run if any is of a wire kind. Every QP
    of ``qps`` (the sequence's QP set) gets contexts in each run, with traffic or not.

    ``bad_qpn`` is a responder QPN without a context (``unknown_qp`` copies). Checks the
    one-stall-pattern rule and the inject run's limits; raises ``ValueError``.
    """
    stalls = {(it.stall_seed, it.gap) for it in items}
    if len(stalls) > 1:
        raise ValueError(f"one doorbell stall pattern per run, the items carry {stalls}")
    stall = stalls.pop() if stalls else (1, 0)
    if any(q.qpn_b == bad_qpn for q in list(qps) + [it.qp for it in items]):
        raise ValueError(f"bad QPN {bad_qpn} belongs to a QP")
    runs = []
    ring = [(k, it) for k, it in enumerate(items) if it.path == "doorbell"]
    wire = [(k, it) for k, it in enumerate(items) if it.path == "inject"]
    for _, it in ring:
        if it.error in ACCESS_KINDS and len(it.frames()) != 1:
            raise ValueError(f"{it}: an access error must be one frame")
    if ring:
        runs.append(_image(cfg, ring, len(runs), "doorbell", stall, ring_all=False,
                           extra_qps=qps))
    if wire:
        plan = _image(cfg, wire, len(runs), "inject", (stall[0], min(stall[1], INJECT_MAX_RATE)),
                      ring_all=True, extra_qps=qps)
        want = plan.model()
        frames = [f for _, f in want["wire_ab"]]
        out, pos = [], 0
        for k, it in wire:
            own = frames[pos:pos + len(it.frames())]
            pos += len(own)
            if [len(f) for f in own] != it.frames():
                raise ValueError(f"{it}: planned frames {[len(f) for f in own]}, "
                                 f"expected {it.frames()}")
            j = it.fault_pick % len(own)
            for n, f in enumerate(own):
                if n == j:
                    plan.bad[k] = len(out)
                    out.append(bad_copy(f, it.error, it.variant, it.fault_pick >> 4,
                                        bad_qpn))
                out.append(f)
        if pos != len(frames):
            raise ValueError(f"the planning run sent {len(frames)} frames, items {pos}")
        beats = sum(_beats(len(f)) for f in out)
        if len(out) > INJECT_FRAMES or beats > INJECT_BEATS:
            raise ValueError(f"inject run of {len(out)} frames, {beats} beats: over the "
                             f"responder's buffers ({INJECT_FRAMES}, {INJECT_BEATS})")
        plan.inject, plan.doorbells, plan.batches = out, [], []
        runs.append(plan)
    return runs


def whole_frames(beats):
    """The frames (bytes) of a recorded beat list, leaving out a frame whose last beat
    was not recorded (a run cut short by a hang: the scoreboard reports that)."""
    ends = [k for k, b in enumerate(beats) if unpack_beat(64, b)[3]]
    return beats_to_frames(list(beats[:ends[-1] + 1]), 64) if ends else []


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
