"""Wire formats of the MAC-routed scale-up NIC: the store header and its two framings.

# Ref: IEEE 802.3-2022 clause 3.1.1 (MAC frame: destination address, source address,
# Length/Type, client data, FCS) and clause 3.2.6 (Length/Type >= 0x0600 is a Type);
# IEEE 802 "local experimental" EtherType 0x88B5 (IEEE Std 802-2014 clause 9.2.4).

Every byte order below is the wire order: byte 0 is sent first. Layouts are
``StructLayout`` s packed LSB first, so a layout's bit ``8*i`` is wire byte ``i``
(``Layout.const(...).as_bits()`` then ``int.to_bytes(n, "little")``). Multi-byte
integers of our own headers are therefore little endian on the wire; the MAC addresses
and the EtherType, which belong to IEEE 802.3, are byte arrays in network order.

Store header (6 bytes, both framings)::

    bits  0..1   opcode   NicOp (STORE = 1)
    bit   2      ack_req  ask the receiver for its completion at once (end-to-end
                          completion only; the rule: "Ack request" below)
    bits  3..15  length   payload bytes, 1 .. 8191
    bits 16..47  addr     remote byte address (a multiple of the datapath width)

The flag is the only bit of the header that is not length, address or opcode: two bits
hold the opcodes (0 is malformed; 3 heads spec.formats.nic_mem's memory frames, which a
store receiver drops as malformed), the third bit of the opcode's byte is the flag.

Compact header (8 bytes, replaces the L2 header; routed by node id)::

    byte 0  dst   destination node id
    byte 1  src   source node id
    bytes 2..7    store header

L2 header (20 bytes)::

    bytes  0..5   dst MAC   02:00:00:00:00:<dst node>  (locally administered, unicast)
    bytes  6..11  src MAC   02:00:00:00:00:<src node>
    bytes 12..13  EtherType 0x88B5 (big endian)
    bytes 14..19  store header

Completion header (6 bytes, in place of the store header; end-to-end completion only,
sent by a receiver back to a source of stores)::

    bits  0..1   opcode   NicOp (COMPLETION = 2)
    bit   2      ack_req  reserved on a completion: sent 0, ignored
    bits  3..7   status   CompletionStatus flags (DROPPED = 1: a store of the source was
                          dropped since the previous completion)
    bits  8..23  count    stores (frames) of the source the receiver has finished,
                          written or dropped at the address or window check, modulo
                          2**COMPLETION_COUNT_BITS
    bits 24..39  dropped  of those, the ones dropped, modulo 2**COMPLETION_COUNT_BITS
    bits 40..47  reserved 0

A completion frame is the framing's header (``dst`` the store source, ``src`` the
receiver) with the completion header, no payload (L2: zero padding to 60 bytes), FCS.

Ack request (the store header's ``ack_req``). Ref: IBTA Vol 1 Rel 1.4 section 9.2 (BTH
AckReq: the requester asks the responder to acknowledge this packet). The rule is the
RDMA engine's: its requester sets AckReq on a message's last frame only
(rtl.rdma.req.payload_fetch), its host asks on a QP's last queued message
(analysis.scenarios.rdma.coalesced_ack_requests), and its responder sends the ACK of a
packet with AckReq at once (rtl.rdma.resp.verify, ``ack_due``). Here: the issuer marks a
store command ``ack_req`` when no next store of its own is queued behind it (the last
store of a batch), and the NIC puts the flag on that store's last frame only (its other
frames have a next frame waiting in the segmenter). With end-to-end completion the
receiver's completion generator then sends the source's completion at once, instead of
waiting for ``coalesce`` frames or the idle flush. Without it (``completion`` "credit")
the flag asks for nothing: the frame is checked and written like any store.

After the header: ``length`` payload bytes, then the 4-byte FCS. An L2 frame shorter than
the IEEE 802.3 minimum (64 bytes with FCS, clause 3.2.8) is padded with zero bytes in
front of the FCS (``length`` still says the payload bytes); compact frames are never
padded (they travel on a scale-up link of their own, not on an Ethernet segment).

PSN extension (per-peer retry only, ``peer_retry``): :data:`PSN_BYTES` bytes after the
store header, the frame's PSN (``psn_layout``); the completion's ``count`` is the
cumulative ACK and its status flag ``GAP`` a NAK (docs/nic.md, "Per-peer retry").
"""

import enum

from amaranth.lib import data
from amaranth.lib import enum as amenum

__all__ = ["NicOp", "Framing", "ETHERTYPE", "MAC_PREFIX", "store_header_layout",
           "compact_header_layout", "l2_header_layout", "header_layout", "header_bytes",
           "node_mac", "dst_byte", "src_byte", "MAX_LENGTH", "store_cmd_layout", "MIN_FRAME_BYTES",
           "padded_bytes", "frame_beats", "COMPLETION_COUNT_BITS", "CompletionStatus",
           "completion_header_layout", "compact_completion_layout", "l2_completion_layout",
           "completion_layout", "completion_bytes", "completion_beats",
           "completion_record_layout", "ID_BITS", "DESTINATIONS", "check_id_bits",
           "id_bytes", "wide_mac", "wide_record_layout", "record_layout", "PSN_BITS",
           "PSN_BYTES", "psn_layout"]

#: Our EtherType (IEEE 802 local experimental).
ETHERTYPE = 0x88B5
#: The first five bytes of every node's MAC address; byte 5 is the node id.
MAC_PREFIX = bytes([0x02, 0x00, 0x00, 0x00, 0x00])
#: Largest ``length`` the 13-bit field holds.
MAX_LENGTH = (1 << 13) - 1
#: Smallest L2 frame, FCS included (IEEE 802.3 clause 3.2.8).
MIN_FRAME_BYTES = 64


class NicOp(amenum.Enum, shape=2):
    """Opcode of a NIC frame: a store, or (end-to-end completion only) a completion. The
    value 3 heads the memory frames (:data:`spec.formats.nic_mem.MEM_OPCODE`)."""
    STORE = 1
    COMPLETION = 2


#: Width of the completion's cumulative counts: a sender may have at most
#: ``2**COMPLETION_COUNT_BITS - 1`` frames outstanding to one destination.
COMPLETION_COUNT_BITS = 16


class CompletionStatus(enum.IntFlag):
    """Flags of a completion's ``status`` field. ``GAP`` (per-peer retry only): a NAK,
    the receiver dropped a frame of the source whose PSN was ahead of the one it
    expects; ``count`` is that expected PSN, the sender goes back to it."""
    DROPPED = 1
    GAP = 2


#: Bits of the per-peer retry's packet sequence number (PSN): the completion's ``count``
#: width, so that the completion's cumulative count is the cumulative ACK (the next
#: PSN the receiver expects) with no new field in the completion. Go-back-N needs a
#: window below 2**PSN_BITS (Tanenbaum and Wetherall, Computer Networks 5th ed., 3.4.2:
#: at most MAX_SEQ frames outstanding with MAX_SEQ + 1 sequence numbers).
PSN_BITS = COMPLETION_COUNT_BITS
#: Bytes of the PSN extension that follows the store header with per-peer retry
#: (``peer_retry``): the frame's PSN, little endian. Neither header has 16 spare bits
#: (the store header's 48 bits are opcode, flag, length and address; the L2 MACs'
#: constant bytes are addresses a switch learns, not free fields).
PSN_BYTES = PSN_BITS // 8


def psn_layout():
    """The PSN extension (:data:`PSN_BYTES` bytes after the store header)."""
    return data.StructLayout({"psn": PSN_BITS})


class Framing(enum.Enum):
    """Which header a NIC puts in front of each store (an elaboration parameter)."""
    L2 = "l2"
    COMPACT = "compact"


store_header_layout = data.StructLayout({
    "opcode": NicOp,
    "ack_req": 1,
    "length": 13,
    "addr": 32,
})

compact_header_layout = data.StructLayout({
    "dst": 8,
    "src": 8,
    "store": store_header_layout,
})

l2_header_layout = data.StructLayout({
    "dst_mac": data.ArrayLayout(8, 6),
    "src_mac": data.ArrayLayout(8, 6),
    "ethertype": data.ArrayLayout(8, 2),
    "store": store_header_layout,
})


completion_header_layout = data.StructLayout({
    "opcode": NicOp,
    "ack_req": 1,
    "status": 5,
    "count": COMPLETION_COUNT_BITS,
    "dropped": COMPLETION_COUNT_BITS,
    "reserved": 8,
})

#: The completion record the sender writes into its host memory for a completion its
#: tracker accepted (NicTop's ``records``; docs/nic.md, "Completion records"): bits 0..7
#: the destination the completion came from, 8..23 its cumulative ``count``, 24..39 its
#: ``dropped``, bit 40 the owner bit of the ring slot, ``1 ^ (k >> log2(slots)) & 1`` for
#: record ``k``, the convention of the RDMA engine's CQE (:data:`spec.formats.roce.
#: CQE_LAYOUT`, ``owner``): the host polls the slot for the flip. The rest of the word is
#: 0; the record is written as a whole word, as a CQE is.
completion_record_layout = data.StructLayout({
    "peer": 8,
    "count": COMPLETION_COUNT_BITS,
    "dropped": COMPLETION_COUNT_BITS,
    "owner": 1,
})

compact_completion_layout = data.StructLayout({
    "dst": 8,
    "src": 8,
    "cpl": completion_header_layout,
})

l2_completion_layout = data.StructLayout({
    "dst_mac": data.ArrayLayout(8, 6),
    "src_mac": data.ArrayLayout(8, 6),
    "ethertype": data.ArrayLayout(8, 2),
    "cpl": completion_header_layout,
})


def completion_layout(framing):
    """The completion frame's header layout of ``framing``: the store frame's header with
    the completion header in place of the store header (same size, same offsets)."""
    framing = Framing(framing)
    return l2_completion_layout if framing is Framing.L2 else compact_completion_layout


def completion_bytes(framing):
    """Bytes of a completion frame before its FCS: the header, padded to
    ``MIN_FRAME_BYTES - 4`` for L2: 8 compact, 60 L2."""
    return padded_bytes(framing, 0)


def completion_beats(width, framing):
    """Wire beats of a completion frame (FCS and padding included): its credits."""
    return frame_beats(width, framing, 0)


def header_layout(framing):
    """The header layout of ``framing`` (a :class:`Framing` or its value string)."""
    framing = Framing(framing)
    return l2_header_layout if framing is Framing.L2 else compact_header_layout


def header_bytes(framing):
    """Header length in bytes: 20 for L2, 8 for compact."""
    return header_layout(framing).size // 8


def padded_bytes(framing, length):
    """Bytes of a store frame before its FCS: header + ``length``, raised to
    ``MIN_FRAME_BYTES - 4`` for the L2 framing."""
    n = header_bytes(framing) + length
    return max(n, MIN_FRAME_BYTES - 4) if Framing(framing) is Framing.L2 else n


def frame_beats(width, framing, length):
    """Beats of a store frame of header ``length`` on a ``width``-byte link, FCS and L2
    padding included: ``ceil((padded_bytes + 4) / width)`` (the credits it needs)."""
    return -(-(padded_bytes(framing, length) + 4) // width)


def dst_byte(framing):
    """Wire byte of the destination node id: 5 (the low byte of the destination MAC) for
    L2, 0 for compact. Read off the header layouts."""
    if Framing(framing) is Framing.L2:
        return l2_header_layout["dst_mac"].offset // 8 + len(MAC_PREFIX)
    return compact_header_layout["dst"].offset // 8


def src_byte(framing):
    """Wire byte of the source node id: 11 (the low byte of the source MAC) for L2, 1
    for compact. Read off the header layouts. The switch's source check
    (:class:`rtl.fabric.switch.Switch`) and the receiver's window check read it."""
    if Framing(framing) is Framing.L2:
        return l2_header_layout["src_mac"].offset // 8 + len(MAC_PREFIX)
    return compact_header_layout["src"].offset // 8


def node_mac(node):
    """The MAC address of node ``node`` as 6 wire bytes."""
    return MAC_PREFIX + bytes([node & 0xFF])


#: Width of a node or destination id in the L2 MAC's last two bytes (the wide ids of a
#: NIC with many destinations, docs/nic.md "4,096 destinations"): ``02:00:00:00:<id
#: hi>:<id lo>``. For an id below 256 the address is :func:`node_mac`'s, byte for byte.
ID_BITS = 16
#: Destinations of the NIC at scale: the RDMA engine's QPs of the gap table's row 7
#: (tb.gap_table, "4096 QPs"), one destination id for each.
DESTINATIONS = 4096


def check_id_bits(id_bits, framing):
    """``id_bits`` of a frame builder, parser or switch: 8 (byte 5 of the MAC, or the
    compact header's byte) or :data:`ID_BITS` (bytes 4..5 of the MAC, L2 only: the
    compact header's ids are one byte each). Returns it; ``ValueError`` naming it."""
    if id_bits not in (8, ID_BITS):
        raise ValueError(f"id_bits must be 8 or {ID_BITS}, not {id_bits!r}")
    if id_bits == ID_BITS and Framing(framing) is not Framing.L2:
        raise ValueError(f"id_bits {ID_BITS} needs framing 'l2' (the ids in the MAC's "
                         f"bytes 4..5), not {Framing(framing).value!r}")
    return id_bits


def id_bytes(framing, id_bits, which="dst"):
    """The wire bytes of an id (``which`` "dst" or "src"), most significant first: the
    one byte of :func:`dst_byte` / :func:`src_byte` at 8 bits, the MAC's bytes 4..5 (or
    10..11) at :data:`ID_BITS`."""
    low = dst_byte(framing) if which == "dst" else src_byte(framing)
    return tuple(range(low - check_id_bits(id_bits, framing) // 8 + 1, low + 1))


def wide_mac(node):
    """The MAC address of id ``node`` (0 .. 2**ID_BITS - 1) with :data:`ID_BITS`-bit ids:
    ``02:00:00:00:<hi>:<lo>``; equal to :func:`node_mac` below 256."""
    if not isinstance(node, int) or not 0 <= node < 1 << ID_BITS:
        raise ValueError(f"node must be an id 0..{(1 << ID_BITS) - 1}, not {node!r}")
    return MAC_PREFIX[:4] + node.to_bytes(2, "big")


def store_cmd_layout(width, id_bits=8):
    """One beat of a store command on the accelerator side of a ``width``-byte NIC
    (``dst`` of ``id_bits``: :data:`ID_BITS` for a NIC with many destinations).

    ``dst``, ``addr``, ``length`` and ``ack_req`` are read on the ``first`` beat only;
    ``data``, ``nbytes``, ``first``, ``last`` are the payload as :func:`packet_layout`
    beats. ``ack_req``: the issuer has no next store queued behind this one
    (the module's "Ack request"); the store's last frame carries the header's ``ack_req``.
    """
    from spec.formats.packet import packet_layout

    beat = packet_layout(width)
    return data.StructLayout({
        "dst": id_bits,
        "addr": 32,
        "length": 13,
        "ack_req": 1,
        "data": beat["data"].shape,
        "nbytes": beat["nbytes"].shape,
        "first": 1,
        "last": 1,
    })


#: The completion record of a NIC with :data:`ID_BITS`-bit destination ids
#: (NicTop's ``destinations``): :data:`completion_record_layout` with a 16-bit ``peer``.
wide_record_layout = data.StructLayout({
    "peer": ID_BITS,
    "count": COMPLETION_COUNT_BITS,
    "dropped": COMPLETION_COUNT_BITS,
    "owner": 1,
})


def record_layout(id_bits=8):
    """The completion record's layout for ids of ``id_bits`` (8 or :data:`ID_BITS`)."""
    return wide_record_layout if id_bits == ID_BITS else completion_record_layout
