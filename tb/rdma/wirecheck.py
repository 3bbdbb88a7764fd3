"""Independent checks of RoCEv2 frames: scapy decodes, zlib recomputes.

Shares no code with the RTL CRC or with the model's ICRC masking: the masked copy is
made by setting the variant fields through scapy's own field names.
"""

import zlib

from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

__all__ = ["frame_problems"]


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
