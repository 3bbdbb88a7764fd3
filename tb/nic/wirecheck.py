"""Independent checks of the NIC's L2 frames: scapy decodes, zlib recomputes the FCS.

Shares no code with the RTL framer, its CRC, or the model's frame builder; the expected
values are written here by hand from the wire format (docs/nic.md, IEEE 802.3-2022
clause 3.1.1): destination and source MAC ``02:00:00:00:00:<node>``, EtherType 0x88B5
(IEEE 802 local experimental), at least 64 bytes with the FCS, the FCS a CRC-32 of the
rest sent least significant byte first.
"""

import zlib

from scapy.layers.l2 import Ether

__all__ = ["l2_frame_problems"]

#: The EtherType of the NIC's frames, written out here rather than imported.
_ETHERTYPE = 0x88B5
_MAC_PREFIX = "02:00:00:00:00:"


def l2_frame_problems(frame, src_node, dst_node=None):
    """A list of what is wrong with the L2 ``frame`` (bytes with FCS) sent by node
    ``src_node`` (to ``dst_node``, if given); empty if it is good."""
    problems = []
    if len(frame) < 64:
        problems.append(f"{len(frame)} bytes: shorter than 64")
    if zlib.crc32(frame[:-4]).to_bytes(4, "little") != frame[-4:]:
        problems.append("FCS")
    pkt = Ether(frame[:-4])
    if pkt.type != _ETHERTYPE:
        problems.append(f"EtherType {pkt.type:#06x}")
    if pkt.src != f"{_MAC_PREFIX}{src_node:02x}":
        problems.append(f"source MAC {pkt.src}")
    want_dst = _MAC_PREFIX + ("" if dst_node is None else f"{dst_node:02x}")
    if not pkt.dst.startswith(want_dst):
        problems.append(f"destination MAC {pkt.dst}")
    return problems
