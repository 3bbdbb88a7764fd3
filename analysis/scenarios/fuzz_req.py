"""Seeded mutation fuzzing of the requester's response path: the fuzz scenario.

One chunk (:func:`req_chunk`) is the input of
:class:`rtl.tops.read_requester_top.ReadRequesterTop`: RDMA READs and atomics issued on
two QPs, their honest READ RESPONSEs (FIRST/MIDDLE/LAST/ONLY by path MTU) and ATOMIC
ACKNOWLEDGEs in order, and among them mutants of those responses
(:class:`analysis.scenarios.mutator.Mutator`, :func:`analysis.scenarios.fuzz.roce_refresh`)
and crafted hostile responses (:data:`HOSTILE`): an ATOMIC ACKNOWLEDGE where a READ
RESPONSE is due and the reverse, a wrong length, a NAK syndrome, a QP with nothing
outstanding, a PSN far outside the outstanding range, a plain ACKNOWLEDGE.

A frame whose FCS and ICRC are right, whose QP and PSN are an honest response's and whose
opcode, length and syndrome are ones the requester accepts there, but whose bytes differ,
is a response by IBTA's rules (the ICRC is the only integrity check): the mutator never
sends one (``forbid``), so every frame the requester accepts is honest. The scenario is a
pure function of ``(seed, chunk)``.
"""

import dataclasses
import random
import zlib

from analysis.scenarios.fuzz import RDMA_WEIGHTS, ROCE_FIELDS, frame_kind, roce_refresh
from analysis.scenarios.mutator import FIXES, Mutant, Mutator
from pymodel.rdma.frames import Endpoint, ack_frame, icrc
from pymodel.rdma.read_frames import atomic_ack_frame, read_response_frame
from spec.formats.roce import OpCode, Syndrome

__all__ = ["QP_A", "QP_B", "QP_STRAY", "LEAD", "HOSTILE", "HOSTILE_P", "ReqChunk",
           "req_chunk", "beats_of", "frame_kind"]

#: The requester's QPs (the responses' BTH DestQP), their first PSNs (QP B's wrap round
#: 2**24 within a chunk) and a QP with nothing outstanding ever.
QP_A, QP_B, QP_STRAY = 0x77, 0x78, 0x79
PSN_START = {QP_A: 100, QP_B: 0xFFFFF0}
#: The responder's and the requester's addresses (B answers A).
A = Endpoint(0x02_00_00_00_00_01, 0x0A_00_00_01)
B = Endpoint(0x02_00_00_00_00_02, 0x0A_00_00_02)
#: ACKNOWLEDGEs ahead of each chunk, so that the first issues are taken before the first
#: response is decided (``other`` counts them).
LEAD = 2
#: The crafted hostile responses: ``ack_for_read`` (an ATOMIC ACKNOWLEDGE at a READ
#: RESPONSE's PSN), ``read_for_atomic`` (a READ RESPONSE ONLY at an atomic's PSN),
#: ``wrong_length`` (the honest opcode and PSN, one byte more or less), ``nak`` (the
#: honest frame with a NAK syndrome), ``no_qp`` (a READ RESPONSE ONLY to a QP with
#: nothing outstanding), ``far_psn`` (a PSN 4,096 to 2**22 ahead of or behind the honest
#: one), ``ack`` (an ACKNOWLEDGE).
HOSTILE = ("ack_for_read", "read_for_atomic", "wrong_length", "nak", "no_qp", "far_psn",
           "ack")
#: The chance of a crafted hostile frame before each honest response.
HOSTILE_P = 0.15
_FIRST, _MIDDLE, _LAST, _ONLY = (OpCode.RC_RDMA_READ_RESPONSE_FIRST,
                                 OpCode.RC_RDMA_READ_RESPONSE_MIDDLE,
                                 OpCode.RC_RDMA_READ_RESPONSE_LAST,
                                 OpCode.RC_RDMA_READ_RESPONSE_ONLY)
_ACK_OP = OpCode.RC_ATOMIC_ACKNOWLEDGE.value
#: READ lengths (a READ of 0 bytes among them) and path MTUs (log2) drawn.
READ_LENGTHS = (0, 1, 8, 63, 64, 100, 256, 257, 512, 700, 1024)
PMTU_LOG2 = (8, 9)


def beats_of(frame, width=64):
    return -(-len(frame) // width)


@dataclasses.dataclass
class ReqChunk:
    """One requester fuzz chunk: ``frames`` (:class:`Mutant` s: the lead, then the fuzz),
    ``fuzz_frames`` (the fuzz's), ``issues`` (issue_layout dicts, in order), ``expect``
    (``{byte address: byte}`` the honest operations leave), ``last`` (per operation in
    order: ``(qpn, last PSN, atomic)``, its completion), ``windows`` (``(first byte,
    bytes)`` each operation may write) and ``honest`` (honest response frames)."""
    frames: list
    fuzz_frames: int
    issues: list
    expect: dict
    last: list
    windows: list
    honest: int


def _op(rng, qpn, psn, addr):
    """One operation at local byte ``addr``: its issue, honest ``[(psn, opcode, frame)]``,
    expected bytes and the bytes it takes."""
    if rng.random() < 0.3:
        orig = rng.getrandbits(64)
        laddr = addr + 8 * rng.randrange(8)
        frame = atomic_ack_frame(B, A, 0x100, qpn, psn, Syndrome.ACK, 9, orig)
        exp = dict(zip(range(laddr, laddr + 8), orig.to_bytes(8, "little"), strict=True))
        issue = dict(atomic=1, qpn=qpn, psn=psn, pmtu_log2=8, laddr=laddr, length=0)
        return issue, [(psn, _ACK_OP, frame)], exp, (laddr, 8), 128
    n, pmtu = rng.choice(READ_LENGTHS), rng.choice(PMTU_LOG2)
    data = rng.randbytes(n)
    mtu = 1 << pmtu
    parts = [data[k:k + mtu] for k in range(0, n, mtu)] or [b""]
    out = []
    for k, part in enumerate(parts):
        op = (_ONLY if len(parts) == 1 else _FIRST if k == 0
              else _LAST if k == len(parts) - 1 else _MIDDLE)
        p = (psn + k) & 0xFFFFFF
        out.append((p, op.value, read_response_frame(op, B, A, 0x100, qpn, p, Syndrome.ACK,
                                                     9, part)))
    exp = dict(zip(range(addr, addr + n), data, strict=True))
    issue = dict(atomic=0, qpn=qpn, psn=psn, pmtu_log2=pmtu, laddr=addr, length=n)
    return issue, out, exp, (addr, n), -(-n // 64) * 64 + 64


def _accepts(op, plen):
    """``{(opcode, payload bytes)}`` the requester accepts at an honest response's PSN:
    its own, and FIRST for a MIDDLE, ONLY for a LAST (after a re-request)."""
    out = {(op, plen)}
    if op == _MIDDLE.value:
        out.add((_FIRST.value, plen))
    if op == _LAST.value:
        out.add((_ONLY.value, plen))
    return out


def _plen(frame):
    aeth = frame[42] != _MIDDLE.value
    head = 20 + 8 + 12 + 4 + 4 * aeth + ((frame[43] >> 4) & 3)
    return int.from_bytes(frame[16:18], "big") - head


def forged(frame, honest):
    """Whether ``frame`` would be accepted as a response although it is not the honest
    one: FCS and ICRC right, Ethernet type IPv4, an IPv4 header of 20 bytes, UDP to port
    4791, the frame as long as its IPv4 length says, the QP and PSN of an honest response
    (``honest``: ``{(qpn, psn): (accepted {(opcode, length)}, frame)}``), an opcode and
    payload length accepted there, an ACK syndrome. (IBTA's and IPv4's rules; the IPv4
    header checksum, which the ICRC does not cover, is not looked at: a frame with it
    wrong counts as forged, so it is never sent.)"""
    if len(frame) < 62:
        return False
    body = frame[:-4]
    if zlib.crc32(body).to_bytes(4, "little") != frame[-4:] or icrc(body[:-4]) != body[-4:]:
        return False
    if (frame[12:14] != b"\x08\x00" or frame[14] != 0x45 or frame[23] != 17
            or frame[36:38] != (4791).to_bytes(2, "big")
            or len(frame) != int.from_bytes(frame[16:18], "big") + 18 or _plen(frame) < 0):
        return False
    h = honest.get((int.from_bytes(frame[47:50], "big"), int.from_bytes(frame[51:54], "big")))
    if h is None or frame == h[1]:
        return False
    if frame[42] != _MIDDLE.value and frame[54] >> 5:
        return False
    return (frame[42], _plen(frame)) in h[0]


def _hostile(rng, qpn, psn, op, frame, kind=None, small=False):
    """A crafted hostile frame of ``kind`` (drawn from :data:`HOSTILE` if None) before the
    honest response ``(psn, op, frame)`` of QP ``qpn``; ``small``: of at most two beats
    (kinds ``no_qp``, ``far_psn`` and ``ack``)."""
    kind = kind or rng.choice(HOSTILE)
    sizes = (0, 8) if small else (0, 8, 64)
    plen = _plen(frame)
    if kind == "ack_for_read" and op == _ACK_OP:
        kind = "read_for_atomic"
    elif kind == "read_for_atomic" and op != _ACK_OP:
        kind = "ack_for_read"
    if kind == "nak" and op == _MIDDLE.value:
        kind = "wrong_length"
    if kind == "ack_for_read":
        fr = atomic_ack_frame(B, A, 0x100, qpn, psn, Syndrome.ACK, 9, rng.getrandbits(64))
    elif kind == "read_for_atomic":
        fr = read_response_frame(_ONLY, B, A, 0x100, qpn, psn, Syndrome.ACK, 9,
                                 rng.randbytes(8))
    elif kind == "wrong_length":
        n = plen + 1 if plen == 0 or rng.random() < 0.5 else plen - 1
        fr = read_response_frame(op, B, A, 0x100, qpn, psn, Syndrome.ACK, 9,
                                 rng.randbytes(n))
    elif kind == "nak":
        fr = read_response_frame(op, B, A, 0x100, qpn, psn,
                                 rng.choice((0x60, 0x61, 0x62, 0x63, 0x20)), 9,
                                 frame[58:58 + plen])
    elif kind == "no_qp":
        fr = read_response_frame(_ONLY, B, A, 0x100, QP_STRAY, psn, Syndrome.ACK, 9,
                                 rng.randbytes(rng.choice(sizes)))
    elif kind == "far_psn":
        far = rng.randrange(4096, 1 << 22) * rng.choice((1, -1))
        fr = read_response_frame(_ONLY, B, A, 0x100, qpn, (psn + far) & 0xFFFFFF,
                                 Syndrome.ACK, 9, rng.randbytes(rng.choice(sizes[1:])))
    else:
        kind = "ack"
        fr = ack_frame(B, A, 0x100, qpn, psn, Syndrome.ACK, 9)
    return Mutant(fr, "hostile", "none", f"hostile.{kind}")


def req_chunk(seed, chunk, frames, max_beats=1024):
    """``frames`` fuzz frames (after :data:`LEAD` ACKs) in at most ``max_beats`` 64-byte
    beats: operations on QPs :data:`QP_A` and :data:`QP_B` (a third atomics, the rest
    READs of :data:`READ_LENGTHS` bytes at path MTU 256 or 512) with their honest
    responses, mutants and hostile frames before them; when the next operation's share
    would not fit, the chunk is filled up with hostile frames of one or two beats.
    Deterministic in ``(seed, chunk)``."""
    if frames < 1 or 2 * frames + 2 * LEAD > max_beats:
        raise ValueError(f"frames must be 1 to {(max_beats - 2 * LEAD) // 2}, not {frames}")
    rng = random.Random(f"req-fuzz-{seed}-{chunk}")
    lead = [Mutant(ack_frame(B, A, 0x100, QP_B, 1, Syndrome.ACK, 3), "lead")] * LEAD
    # Every operation the chunk may hold, first: the forbid rule then knows every honest
    # response (a mutant may carry a later operation's QP and PSN, and that operation may
    # be issued already when it arrives).
    psn, addr, cands, honest = dict(PSN_START), 64 * 64, [], {}
    for _ in range(frames):
        qpn = rng.choice((QP_A, QP_B))
        issue, resp, exp, window, size = _op(rng, qpn, psn[qpn], addr)
        for p, op, fr in resp:
            honest[(qpn, p)] = (_accepts(op, _plen(fr)), fr)
        cands.append((issue, resp, exp, window))
        psn[qpn] = (psn[qpn] + len(resp)) & 0xFFFFFF
        addr += size
    fuzz, beats, ops = [], sum(beats_of(m.frame) for m in lead), []

    def forbid(fr):
        return forged(fr, honest)

    mut = Mutator(rng, ROCE_FIELDS, roce_refresh, FIXES, RDMA_WEIGHTS, forbid)
    for issue, resp, exp, window in cands:
        share = []
        by_frame = {fr: (p, op) for p, op, fr in resp}
        for m in mut.stream([fr for _, _, fr in resp]):
            if m.kind == "valid" and m.frame in by_frame and rng.random() < HOSTILE_P:
                p, op = by_frame[m.frame]
                share.append(_hostile(rng, issue["qpn"], p, op, m.frame))
            share.append(m)
        cost = sum(beats_of(m.frame) for m in share)
        left = frames - len(fuzz) - len(share)
        if left < 0 or beats + cost + 2 * left > max_beats:
            break
        fuzz += share
        beats += cost
        ops.append((issue, resp, exp, window))
    while len(fuzz) < frames:           # the fill: hostile frames of one or two beats
        qpn = rng.choice((QP_A, QP_B))
        fuzz.append(_hostile(rng, qpn, rng.randrange(1 << 24), _ONLY.value, b"\0" * 62,
                             rng.choice(("no_qp", "far_psn", "ack")), small=True))
    expect = {}
    for _, _, exp, _ in ops:
        expect.update(exp)
    return ReqChunk(
        frames=lead + fuzz, fuzz_frames=len(fuzz), issues=[o[0] for o in ops],
        expect=expect, last=[(i["qpn"], r[-1][0], i["atomic"]) for i, r, _, _ in ops],
        windows=[o[3] for o in ops], honest=sum(len(o[1]) for o in ops))
