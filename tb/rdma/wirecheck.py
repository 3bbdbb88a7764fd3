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

:func:`msn_problems` checks the AETH MSN of every ACK and NAK against the request
stream on the other wire, with the opcode numbers scapy defines.
"""

import struct
import zlib

from scapy.contrib.roce import BTH, opcode
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

__all__ = ["frame_problems", "hand_problems", "wire_problems", "scaleup_problems",
           "msn_problems"]

_ETHERTYPE_IPV4 = 0x0800
_UDP = 17
_ROCE_PORT = 4791        # IANA: RoCEv2
#: RC request opcodes that end a message (IBTA Vol 1 9.2.1): a READ request or an atomic
#: is a message of one request packet.
_MESSAGE_ENDS = frozenset(opcode("RC", op)[0] for op in (
    "SEND_LAST", "SEND_LAST_WITH_IMMEDIATE", "SEND_ONLY", "SEND_ONLY_WITH_IMMEDIATE",
    "RDMA_WRITE_LAST", "RDMA_WRITE_LAST_WITH_IMMEDIATE", "RDMA_WRITE_ONLY",
    "RDMA_WRITE_ONLY_WITH_IMMEDIATE", "RDMA_READ_REQUEST", "COMPARE_SWAP", "FETCH_ADD"))
_REQUESTS = _MESSAGE_ENDS | {opcode("RC", op)[0] for op in (
    "SEND_FIRST", "SEND_MIDDLE", "RDMA_WRITE_FIRST", "RDMA_WRITE_MIDDLE")}
_ACKNOWLEDGE = opcode("RC", "ACKNOWLEDGE")[0]
_M24 = (1 << 24) - 1


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


def msn_problems(requests, responses, qp_pairs, bth_at=42):
    """``(problems, checked)``: the AETH MSN of every ACKNOWLEDGE frame in
    ``responses`` against the one the request stream ``requests`` implies.

    Parameters
    ----------
    requests, responses : list of bytes
        The frames (with FCS) the requester sent, in the order sent, and the frames the
        responder sent; a frame :func:`hand_problems` rejects is skipped, and so is any
        frame of another opcode than a request (in ``requests``) or an ACKNOWLEDGE (in
        ``responses``).
    qp_pairs : dict
        Requester QPN (an ACK's destination QP) -> responder QPN (its requests'
        destination QP).
    bth_at : int
        Offset of the BTH (42: behind Ethernet, IPv4 and UDP).

    The MSN counts the request messages the responder completed (IBTA Vol 1 9.7.5:
    once per message, at its LAST or ONLY packet; a READ or atomic at its request). An
    ACK of PSN ``p`` acknowledges every PSN up to ``p``: its MSN must be the count of
    the QP's messages whose last request PSN is at most ``p``; a NAK names the first PSN
    not received: the count of those before it. Both modulo 2**24, PSNs taken from the
    QP's first request PSN. This holds for a responder that ACKs a duplicate
    cumulatively (selective repeat): under go-back-N a duplicate's ACK names its own
    PSN with the current MSN, and its READ responses and ATOMIC ACKNOWLEDGEs (not
    checked here) carry the MSN of the time they were answered.
    """
    start, ends = {}, {}        # per responder QPN: first PSN; PSNs that end a message
    for frame in requests:
        if hand_problems(frame) or frame[bth_at] not in _REQUESTS:
            continue
        qpn, psn = _bth_qp_psn(frame, bth_at)
        start.setdefault(qpn, psn)
        if frame[bth_at] in _MESSAGE_ENDS:
            ends.setdefault(qpn, set()).add(psn)
    problems, checked = [], 0
    for k, frame in enumerate(responses):
        if hand_problems(frame) or frame[bth_at] != _ACKNOWLEDGE:
            continue
        qpn_a, psn = _bth_qp_psn(frame, bth_at)
        qpn = qp_pairs.get(qpn_a)
        if qpn not in start:
            problems.append(f"ACK {k}: QP {qpn_a} sent no request")
            continue
        syndrome, msn = frame[bth_at + 12], int.from_bytes(frame[bth_at + 13:bth_at + 16],
                                                           "big")
        last = psn if syndrome >> 5 == 0 else psn - 1       # ACK: up to it; NAK: before
        upto = _signed(last - start[qpn])
        want = sum(_signed(p - start[qpn]) <= upto for p in ends.get(qpn, ())) & _M24
        checked += 1
        if msn != want:
            kind = "ACK" if syndrome >> 5 == 0 else f"NAK {syndrome:#x}"
            problems.append(f"{kind} {k} (QP {qpn_a}, PSN {psn:#x}): MSN {msn}, "
                            f"the requests say {want}")
    return problems, checked


def _bth_qp_psn(frame, bth_at):
    return (int.from_bytes(frame[bth_at + 5:bth_at + 8], "big"),
            int.from_bytes(frame[bth_at + 9:bth_at + 12], "big"))


def _signed(d):
    """A PSN distance modulo 2**24 as a signed number (behind: negative)."""
    d &= _M24
    return d - (1 << 24) if d >> 23 else d
