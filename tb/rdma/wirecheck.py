"""Independent checks of RoCEv2 frames: scapy decodes, zlib recomputes.

Shares no code with the RTL CRC or with the model's ICRC masking: the masked copy is
made by setting the variant fields through scapy's own field names
(:func:`frame_problems`), or, in :func:`wire_problems`, at offsets this file derives
from the header lengths it reads (IPv4 IHL; Ethernet II 14 bytes, UDP 8; IBTA Annex A17
names the masked fields: IPv4 TOS, TTL and header checksum, the UDP checksum, and the
BTH byte that holds FECN, BECN and resv6).

Decoding a frame with scapy costs about a millisecond. :func:`wire_problems` checks
every frame of a run with a hand decoder written here (struct and zlib, microseconds a
frame), and also decodes with scapy the first frame of every shape (length and BTH
opcode) it meets; the two checkers must agree on those frames.
"""

import struct
import zlib

from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

__all__ = ["frame_problems", "hand_problems", "wire_problems", "scaleup_problems"]

_ETHERTYPE_IPV4 = 0x0800
_UDP = 17
_ROCE_PORT = 4791        # IANA: RoCEv2


def frame_problems(frame):
    """A list of what is wrong with ``frame`` (bytes with FCS); empty if it is good."""
    problems = []
    if zlib.crc32(frame[:-4]).to_bytes(4, "little") != frame[-4:]:
        problems.append("FCS")
    pkt = Ether(frame[:-4])
    if IP not in pkt or UDP not in pkt or pkt[UDP].dport != 4791 or BTH not in pkt:
        return problems + ["not RoCEv2"]
    ip = pkt[IP].copy()
    ip.chksum = None
    if IP(bytes(ip)).chksum != pkt[IP].chksum:
        problems.append("IP checksum")
    m = Ether(frame[:-4])
    m[IP].tos, m[IP].ttl, m[IP].chksum = 0xFF, 0xFF, 0xFFFF
    m[UDP].chksum = 0xFFFF
    m[BTH].fecn, m[BTH].becn, m[BTH].resv6 = 1, 1, 0x3F
    body = bytes(m[IP])[:-4]
    if zlib.crc32(b"\xff" * 8 + body).to_bytes(4, "little") != frame[-8:-4]:
        problems.append("ICRC")
    return problems


def _ones_complement(header):
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def hand_problems(frame):
    """:func:`frame_problems` without scapy: the same verdicts from a decoder written
    here (frame bytes with FCS; empty list if good)."""
    problems = []
    if zlib.crc32(frame[:-4]).to_bytes(4, "little") != frame[-4:]:
        problems.append("FCS")
    body = frame[:-4]
    if len(body) < 14 + 20 or struct.unpack_from("!H", body, 12)[0] != _ETHERTYPE_IPV4:
        return problems + ["not RoCEv2"]
    ihl = (body[14] & 0x0F) * 4
    udp = 14 + ihl
    if (body[14] >> 4 != 4 or ihl < 20 or body[23] != _UDP or len(body) < udp + 8 + 12
            or struct.unpack_from("!H", body, udp + 2)[0] != _ROCE_PORT):
        return problems + ["not RoCEv2"]
    if _ones_complement(body[14:udp]) != 0xFFFF:
        problems.append("IP checksum")
    ip_end = 14 + struct.unpack_from("!H", body, 16)[0]
    masked = bytearray(body[14:ip_end - 4])
    for off in (1, 8, 10, 11, ihl + 6, ihl + 7):     # TOS, TTL, checksum; UDP checksum
        masked[off] = 0xFF
    masked[ihl + 8 + 4] = 0xFF                       # BTH byte 4: FECN, BECN, resv6
    if zlib.crc32(b"\xff" * 8 + bytes(masked)).to_bytes(4, "little") != body[ip_end - 4:
                                                                           ip_end]:
        problems.append("ICRC")
    return problems


def wire_problems(frames):
    """``[(index, problems)]`` for ``frames`` (bytes with FCS), in order: every frame by
    :func:`hand_problems`; the first frame of each (length, BTH opcode) shape also by
    scapy, and a frame the two checkers judge differently gets ``"checkers disagree"``."""
    out, shapes = [], set()
    for k, frame in enumerate(frames):
        problems = hand_problems(frame)
        shape = (len(frame), frame[42] if len(frame) > 42 else None)
        if shape not in shapes:
            shapes.add(shape)
            if frame_problems(frame) != problems:
                problems = problems + ["checkers disagree"]
        out.append((k, problems))
    return out


def scaleup_problems(frame):
    """What is wrong with a frame of the scale-up framing (bytes with FCS; empty list if
    good), from a decoder written here: the 10-byte header is ``dst`` (2), ``src`` (2),
    ``type`` (1, 0x1B: a BTH follows), ``hop_limit`` (1), ``length`` (2: BTH to ICRC),
    ``entropy`` (2); the ICRC is a CRC-32 from byte 0 with ``hop_limit`` and BTH byte 4
    read as 0xFF (docs/rdma.md, "Scale-up header")."""
    problems = []
    if zlib.crc32(frame[:-4]).to_bytes(4, "little") != frame[-4:]:
        problems.append("FCS")
    body = frame[:-4]
    if len(body) < 10 + 12 + 4 or body[4] != 0x1B:
        return problems + ["not scale-up RoCE"]
    if 10 + struct.unpack_from("!H", body, 6)[0] != len(body):
        problems.append("length")
    masked = bytearray(body[:-4])
    masked[5] = 0xFF                      # hop limit
    masked[10 + 4] = 0xFF                 # BTH byte 4: FECN, BECN, resv6
    if zlib.crc32(bytes(masked)).to_bytes(4, "little") != body[-4:]:
        problems.append("ICRC")
    return problems
