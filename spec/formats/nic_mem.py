"""Wire formats of the NIC's memory operations: remote loads and 8-byte atomics.

# Ref: UALink Consortium, UALink 200G 1.0 Specification (2025), transaction layer:
# reads, writes and atomics as requests and responses matched by a requester tag
# (11 bits); the header fields below are this project's own, not UALink's flits.

A memory frame is a NIC frame (spec.formats.nic: the compact or L2 framing, the same
routing bytes, the FCS) whose 6-byte store header is replaced by the 8-byte memory
header. Its ``opcode`` (the store header's 2-bit opcode field) is :data:`MEM_OPCODE`
(3, a value :class:`spec.formats.nic.NicOp` leaves free), which a store receiver drops
as malformed.

Memory header (8 bytes, LSB first like the store header)::

    bits  0..1   opcode   MEM_OPCODE (3)
    bits  2..4   op       MemOp: LOAD, FETCH_ADD, CMP_SWAP (requests), RESPONSE
    bit   5      status   responses: MemStatus (0 OK, 1 ERROR); requests: 0
    bits  6..7   reserved 0
    bits  8..18  tag      the requester's tag (TAG_BITS), echoed by the response
    bits 19..31  length   LOAD: bytes asked (1 .. the target's max payload);
                          atomics: 8; OK response: data bytes; ERROR response: 0
    bits 32..63  addr     the target's byte address (echoed by the response)

Payload: LOAD request none; FETCH_ADD the 8-byte addend; CMP_SWAP the 8-byte compare
value then the 8-byte swap value (little endian); OK response ``length`` data bytes
(LOAD: the target's bytes ``[addr, addr + length)``; atomics: the 8-byte old value);
ERROR response none. L2 frames shorter than 60 bytes are padded with zeros (IEEE 802.3
clause 3.2.8), compact frames never. Then the 4-byte FCS.

Frame sizes in bytes before the FCS: compact header 10, L2 header 22.
"""

import enum

from amaranth.lib import data
from amaranth.lib import enum as amenum

from spec.formats.nic import MIN_FRAME_BYTES, Framing

__all__ = ["MemOp", "MemStatus", "TAG_BITS", "MAX_TAGS", "ATOMIC_BYTES", "mem_header_layout",
           "compact_mem_layout", "l2_mem_layout", "mem_layout", "mem_header_bytes",
           "request_payload_bytes", "mem_frame_bytes", "mem_frame_beats", "mem_cmd_layout",
           "MEM_WIDTH", "rsp_event_layout", "req_desc_layout", "MEM_OPCODE"]

#: The value of the 2-bit opcode field (the store header's) that heads a memory frame.
MEM_OPCODE = 3
#: Width of the tag field. Ref: UALink 200G 1.0 Specification (2025), transaction
#: layer: an 11-bit tag, so at most 2**11 = 2,048 requests outstanding per requester.
TAG_BITS = 11
#: The most tags a requester may have: every value of the tag field.
MAX_TAGS = 1 << TAG_BITS
#: Bytes of an atomic's operand and of its old value.
ATOMIC_BYTES = 8
#: The datapath width of the memory-operation blocks (bytes): the project's 64-byte beat
#: (SPEC.md, Units). A request frame then always fits in one beat.
MEM_WIDTH = 64


class MemOp(amenum.Enum, shape=3):
    """What a memory frame asks or answers."""
    LOAD = 1
    FETCH_ADD = 2
    CMP_SWAP = 3
    RESPONSE = 4


class MemStatus(enum.IntEnum):
    """A response's ``status``: ERROR when the target could not do the request (bounds,
    alignment, length); no data then."""
    OK = 0
    ERROR = 1


mem_header_layout = data.StructLayout({
    "opcode": 2,
    "op": MemOp,
    "status": 1,
    "reserved": 2,
    "tag": TAG_BITS,
    "length": 13,
    "addr": 32,
})

compact_mem_layout = data.StructLayout({
    "dst": 8,
    "src": 8,
    "mem": mem_header_layout,
})

l2_mem_layout = data.StructLayout({
    "dst_mac": data.ArrayLayout(8, 6),
    "src_mac": data.ArrayLayout(8, 6),
    "ethertype": data.ArrayLayout(8, 2),
    "mem": mem_header_layout,
})


def mem_layout(framing):
    """The memory frame's header layout of ``framing``."""
    return l2_mem_layout if Framing(framing) is Framing.L2 else compact_mem_layout


def mem_header_bytes(framing):
    """Header bytes of a memory frame: 10 compact, 22 L2."""
    return mem_layout(framing).size // 8


def request_payload_bytes(op):
    """Payload bytes of a request ``op`` (a :class:`MemOp`): 0, 8 or 16."""
    return {MemOp.LOAD: 0, MemOp.FETCH_ADD: 8, MemOp.CMP_SWAP: 16}[MemOp(op)]


def mem_frame_bytes(framing, payload):
    """Bytes of a memory frame with ``payload`` bytes, before the FCS (L2 padded)."""
    n = mem_header_bytes(framing) + payload
    return max(n, MIN_FRAME_BYTES - 4) if Framing(framing) is Framing.L2 else n


def mem_frame_beats(framing, payload, width=MEM_WIDTH):
    """Wire beats (FCS included) of a memory frame with ``payload`` bytes: its credits."""
    return -(-(mem_frame_bytes(framing, payload) + 4) // width)


#: One memory command of the accelerator (one beat): ``op`` a request MemOp, ``dst``
#: the target node, ``addr`` the target byte address, ``length`` the load's bytes
#: (ignored for atomics), ``laddr`` the local byte address where the response's data
#: lands (a multiple of 64), ``a``/``b`` the atomic's operands (FETCH_ADD: ``a`` the
#: addend; CMP_SWAP: ``a`` compared, ``b`` swapped in).
mem_cmd_layout = data.StructLayout({
    "op": MemOp,
    "dst": 8,
    "addr": 32,
    "length": 13,
    "laddr": 32,
    "a": 64,
    "b": 64,
})

#: A request as the target's receiver hands it to the responder.
req_desc_layout = data.StructLayout({
    "src": 8,
    "op": MemOp,
    "tag": TAG_BITS,
    "addr": 32,
    "length": 13,
    "a": 64,
    "b": 64,
})

#: A response landed at its requester (its tag freed): the tag, its status and op.
rsp_event_layout = data.StructLayout({
    "tag": TAG_BITS,
    "status": 1,
    "op": MemOp,
})
