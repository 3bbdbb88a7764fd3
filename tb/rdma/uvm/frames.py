"""RoCEv2 frames as the environment's intent checks and coverage read them: decoded by
scapy (``scapy.contrib.roce``), not by the spec layer's layouts nor the model's frame
builder, so that these checks share no code with what they check.
"""

import dataclasses

from scapy.contrib.roce import AETH, BTH
from scapy.layers.l2 import Ether

from pymodel.packet import beats_to_frames, unpack_beat

__all__ = ["Frame", "decode", "whole_frames", "frames_with_cycles", "OPCODES", "SYNDROMES"]

#: BTH opcodes of the RC transport this engine uses (IBTA table 38), by name.
OPCODES = {0x06: "WRITE_FIRST", 0x07: "WRITE_MIDDLE", 0x08: "WRITE_LAST",
           0x0A: "WRITE_ONLY", 0x11: "ACKNOWLEDGE"}
#: AETH syndromes the responder sends (IBTA 9.7.5.2), by name.
SYNDROMES = {0x1F: "ACK", 0x60: "NAK_PSN_SEQUENCE", 0x62: "NAK_REMOTE_ACCESS"}
_RETH_BYTES = 16


@dataclasses.dataclass(frozen=True)
class Frame:
    """One decoded frame: ``opcode`` (a name of :data:`OPCODES`, or the number as text),
    ``dest_qp``, ``psn``, ``ack_req``; a WRITE's ``payload`` (without padding) and, on a
    FIRST/ONLY, ``reth`` = ``(va, rkey, dma_length)``; an ACKNOWLEDGE's ``syndrome``
    (a name of :data:`SYNDROMES`, or the number as text) and ``msn``."""
    opcode: str
    dest_qp: int
    psn: int
    ack_req: bool
    payload: bytes = b""
    reth: tuple = None
    syndrome: str = None
    msn: int = None

    @property
    def last(self):
        """The last frame of a message (WRITE LAST or ONLY)."""
        return self.opcode in ("WRITE_LAST", "WRITE_ONLY")


def decode(frame):
    """The :class:`Frame` of ``frame`` (bytes with FCS); opcode ``"not RoCEv2"`` (QP and
    PSN -1) if scapy finds no BTH."""
    pkt = Ether(frame[:-4])
    if BTH not in pkt:
        return Frame("not RoCEv2", -1, -1, False)
    bth = pkt[BTH]
    name = OPCODES.get(bth.opcode, str(bth.opcode))
    if AETH in pkt:
        syn = pkt[AETH].syndrome
        return Frame(name, bth.dqpn, bth.psn, bool(bth.ackreq),
                     syndrome=SYNDROMES.get(syn, str(syn)), msn=pkt[AETH].msn)
    body = bytes(bth.payload)
    reth = None
    if name in ("WRITE_FIRST", "WRITE_ONLY"):
        reth = (int.from_bytes(body[:8], "big"), int.from_bytes(body[8:12], "big"),
                int.from_bytes(body[12:16], "big"))
        body = body[_RETH_BYTES:]
    return Frame(name, bth.dqpn, bth.psn, bool(bth.ackreq),
                 payload=body[:len(body) - bth.padcount], reth=reth)


def frames_with_cycles(beats, cycles):
    """``[(first beat cycle, last beat cycle, frame bytes)]`` of recorded beats, leaving
    out a frame whose last beat was not recorded (a run cut short by a hang). A broken
    beat stream gives no frames: the raw beat comparison of the scoreboard says where."""
    flags = [unpack_beat(64, b)[2:] for b in beats]
    ends = [k for k, (_, last) in enumerate(flags) if last]
    if not ends:
        return []
    n = ends[-1] + 1
    try:
        frames = beats_to_frames(list(beats[:n]), 64)
    except ValueError:
        return []
    firsts = [k for k, (first, _) in enumerate(flags[:n]) if first]
    return [(cycles[f], cycles[e], fr) for f, e, fr in zip(firsts, ends, frames, strict=True)]


def whole_frames(beats):
    """The frames (bytes) of a recorded beat list (see :func:`frames_with_cycles`)."""
    return [fr for _, _, fr in frames_with_cycles(beats, list(range(len(beats))))]
