"""The frames of a message and of an ACK, as the framer and the responder see them.

:func:`_frames` gives, per frame of a message cut at the path MTU, its payload bytes,
wire beats (with ICRC and FCS), the framer's own beats and the responder writer's words
and steps, for the headers of either framing (:mod:`spec.formats.scaleup`).
:func:`_ack_bytes`/:func:`_ack_beats`: one ACKNOWLEDGE frame. Pure functions of the
message size, the path MTU and the header.
"""

import dataclasses
from functools import lru_cache

from analysis.rdma.fastpath.params import _FCS, _W, _cdiv
from spec.formats.roce import ICRC_BYTES, RETH_BYTES
from spec.formats.scaleup import Header, framing
from spec.rdma import MAX_FRAME_BEATS


def _ack_bytes(header):
    """Bytes of an ACKNOWLEDGE frame with ICRC and FCS (66 RoCEv2, 34 scale-up)."""
    return framing(header).ack_bytes + ICRC_BYTES + _FCS


def _ack_beats(header):
    return -(-_ack_bytes(header) // _W)


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
        have = head_bytes - (RETH_BYTES if reth else 0)
        pops = 0
        for j in range(words):
            if min(_W * (j + 1), seg) > have + _W * pops:
                pops += 1
        steps = max(1, words + max(0, rest - pops))
        head = int(reth and fr.header is Header.ROCE)
        out.append(_Frame(seg, reth, beats, own, body + ICRC_BYTES + _FCS, words, steps,
                          head))
    return tuple(out)
