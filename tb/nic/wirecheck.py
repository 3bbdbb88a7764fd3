"""Independent checks of the NIC's L2 frames: scapy decodes, zlib recomputes the FCS.

Shares no code with the RTL framer, its CRC, or the model's frame builder; the expected
values are written here by hand from the wire format (docs/nic.md, IEEE 802.3-2022
clause 3.1.1): destination and source MAC ``02:00:00:00:00:<node>``, EtherType 0x88B5
(IEEE 802 local experimental), at least 64 bytes with the FCS, the FCS a CRC-32 of the
rest sent least significant byte first.
"""

import zlib

from scapy.layers.l2 import Ether

__all__ = ["l2_frame_problems", "check_sent_frames"]

#: The EtherType of the NIC's frames, written out here rather than imported.
_ETHERTYPE = 0x88B5
_MAC_PREFIX = "02:00:00:00:00:"
_WIDE_PREFIX = "02:00:00:00:"


def l2_frame_problems(frame, src_node, dst_node=None, wide=False):
    """A list of what is wrong with the L2 ``frame`` (bytes with FCS) sent by node
    ``src_node`` (to ``dst_node``, if given); empty if it is good. ``wide``: 16-bit ids,
    ``02:00:00:00:<id hi>:<id lo>`` (docs/nic.md, "4,096 destinations")."""
    problems = []
    if len(frame) < 64:
        problems.append(f"{len(frame)} bytes: shorter than 64")
    if zlib.crc32(frame[:-4]).to_bytes(4, "little") != frame[-4:]:
        problems.append("FCS")
    pkt = Ether(frame[:-4])
    if pkt.type != _ETHERTYPE:
        problems.append(f"EtherType {pkt.type:#06x}")
    if wide:
        want_src = f"{_WIDE_PREFIX}{src_node >> 8:02x}:{src_node & 0xFF:02x}"
        want_dst = _WIDE_PREFIX + ("" if dst_node is None else
                                   f"{dst_node >> 8:02x}:{dst_node & 0xFF:02x}")
    else:
        want_src = f"{_MAC_PREFIX}{src_node:02x}"
        want_dst = _MAC_PREFIX + ("" if dst_node is None else f"{dst_node:02x}")
    if pkt.src != want_src:
        problems.append(f"source MAC {pkt.src}")
    if not pkt.dst.startswith(want_dst):
        problems.append(f"destination MAC {pkt.dst}")
    return problems


def check_sent_frames(sb, sent, node_ids, destinations=None):
    """Every L2 frame each node sent (``sent[q]``: frames with ``data``) through
    :func:`l2_frame_problems` into the scoreboard ``sb``. With ``destinations`` (16-bit
    ids) node ``q > 0`` sends completions whose source is a destination id it stands for,
    ``d < destinations`` with ``1 + d mod (nodes - 1) == q`` (docs/nic.md, "4,096
    destinations"), which is checked instead of its own id."""
    nodes = len(node_ids)
    for q in range(nodes):
        for k, f in enumerate(sent[q]):
            src_id = node_ids[q]
            if destinations and q > 0:
                src_id = int.from_bytes(f.data[10:12], "big")
                sb.equal(f"tx{q} frame {k}: source id {src_id} routed to port {q}",
                         src_id < destinations and 1 + src_id % (nodes - 1) == q, True)
            sb.equal(f"tx{q} frame {k}: scapy Ether decode and zlib FCS",
                     l2_frame_problems(f.data, src_id, wide=bool(destinations)), [])
