"""Bad input with the scale-up header (:mod:`spec.formats.scaleup`): good and bad WRITE
frames played straight onto the A->B link of an RdmaTop built with ``header="scaleup"``.
"""

import random
import zlib

from pymodel.rdma.frames import Endpoint, scaleup_icrc, write_frame
from pymodel.rdma.verbs import IP_A, IP_B, MAC_A, MAC_B, Verbs
from spec.formats.roce import OpCode
from spec.formats.scaleup import SCALEUP_LAYOUT
from spec.rdma_engine import HOST_DEPTH

__all__ = ["scaleup_bad_frames_scenario"]

_TYPE_AT = SCALEUP_LAYOUT["type"].offset // 8
_LENGTH_AT = SCALEUP_LAYOUT["length"].offset // 8


def _reseal(frame):
    """``frame`` (with ICRC and FCS) with both CRCs computed again over its bytes."""
    body = bytes(frame[:-8])
    body += scaleup_icrc(body)
    return body + zlib.crc32(body).to_bytes(4, "little")


def _refcs(frame):
    body = bytes(frame[:-4])
    return body + zlib.crc32(body).to_bytes(4, "little")


def scaleup_bad_frames_scenario(seed=2, depth=HOST_DEPTH, mr_entries=16, qpc_words=None):
    """``(verbs, frames, reasons)``: the expected responder counter of each frame.

    A good WRITE; then, at the next PSN, one with a wrong ``type`` (ICRC and FCS
    computed over the wrong byte: ``malformed``), one whose ``length`` says 4 bytes more
    and one 4 bytes less than the frame carries (``truncated``), one with a bad ICRC
    (FCS recomputed: ``icrc_bad``), one with a bad FCS (``fcs_bad``); then a one-beat
    WRITE (8 bytes of payload, a 54-byte frame: accepted) and a 129-byte one.
    """
    rng = random.Random(seed)
    v = Verbs(depth=depth, mr_entries=mr_entries, qpc_words=qpc_words)
    v.create_qp(1, 5, psn_a=100, psn_b=100)
    raddr, rkey = v.reg_mr(4096, index=2)
    a, b = Endpoint(MAC_A, IP_A), Endpoint(MAC_B, IP_B)
    only = OpCode.RC_RDMA_WRITE_ONLY

    def w(psn, payload, va):
        return write_frame(only, a, b, 1, 5, psn, True, payload, va=va, rkey=rkey,
                           dma_length=len(payload), header="scaleup")

    frames, reasons = [], []

    def add(frame, reason):
        frames.append(bytes(frame))
        reasons.append(reason)

    add(w(100, rng.randbytes(100), raddr), "frames_ok")
    bad = bytearray(w(101, rng.randbytes(64), raddr + 128))
    bad[_TYPE_AT] ^= 0x40
    add(_reseal(bad), "malformed")
    for delta in (4, -4):
        bad = bytearray(w(101, rng.randbytes(64), raddr + 128))
        n = int.from_bytes(bad[_LENGTH_AT:_LENGTH_AT + 2], "big") + delta
        bad[_LENGTH_AT:_LENGTH_AT + 2] = n.to_bytes(2, "big")
        add(_reseal(bad), "truncated")
    bad = bytearray(w(101, rng.randbytes(64), raddr + 128))
    bad[-6] ^= 0x20
    add(_refcs(bad), "icrc_bad")
    bad = bytearray(w(101, rng.randbytes(64), raddr + 128))
    bad[-2] ^= 0x01
    add(bad, "fcs_bad")
    add(w(101, rng.randbytes(8), raddr + 256), "frames_ok")
    add(w(102, rng.randbytes(129), raddr + 512), "frames_ok")
    return v, frames, reasons
