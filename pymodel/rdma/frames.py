"""RoCEv2 frames byte for byte: RDMA WRITE (ONLY/FIRST/MIDDLE/LAST) and ACKNOWLEDGE,
behind Ethernet/IPv4/UDP (``header="roce"``) or the scale-up header (``"scaleup"``).

Headers are packed with the layouts of :mod:`spec.formats.roce` and
:mod:`spec.formats.scaleup` (one definition, used by the RTL and here). The ICRC and FCS
use ``zlib.crc32``.
"""

import dataclasses
import zlib

from pymodel.fcs import IFG_BYTES, PREAMBLE_SFD_BYTES
from pymodel.fields import field_slot, pack
from spec.formats.roce import (
    ACK_HEADER,
    AETH_LAYOUT,
    BTH_LAYOUT,
    ETHERTYPE_IPV4,
    ICRC_MASKED_BYTES,
    IP_FLAGS_DF,
    IP_PROTO_UDP,
    IP_TTL,
    MSN_BITS,
    PSN_BITS,
    RETH_LAYOUT,
    ROCE_PKEY,
    ROCE_UDP_PORT,
    WRITE_HEADER,
    WRITE_RETH_HEADER,
    OpCode,
    bswap,
    header_bytes,
)
from spec.formats.scaleup import (
    SCALEUP_HOP_LIMIT,
    SCALEUP_ICRC_MASKED_BYTES,
    SU_ACK_HEADER,
    SU_WRITE_HEADER,
    SU_WRITE_RETH_HEADER,
    Header,
    ScaleUpType,
    check_header,
)

__all__ = ["Endpoint", "udp_sport", "ipv4_checksum", "icrc", "icrc_of", "scaleup_icrc",
           "write_frame", "ack_frame", "with_fcs", "ETH_OVERHEAD"]

_PSN_MASK = (1 << PSN_BITS) - 1
_MSN_MASK = (1 << MSN_BITS) - 1

#: Preamble + SFD (8) and the inter-frame gap (12) that every frame costs on the PHY.
ETH_OVERHEAD = PREAMBLE_SFD_BYTES + IFG_BYTES


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """Addresses of one side: MAC and IPv4."""
    mac: int
    ip: int


def udp_sport(qpn):
    """UDP source port of a QP: 0xC000 | low 14 bits of the source QPN (flow entropy)."""
    return 0xC000 | (qpn & 0x3FFF)


def ipv4_checksum(header20):
    """RFC 1071 one's complement checksum of a 20-byte header whose checksum is 0."""
    total = sum(int.from_bytes(header20[k:k + 2], "big") for k in range(0, 20, 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def icrc(frame_no_icrc):
    """The 4 ICRC bytes of a frame (Ethernet header included, no ICRC, no FCS)."""
    # The CRC of 8 0xFF bytes, the masked bytes 14..46 and the rest, in three runs (a CRC
    # goes on from the last one's value): the same as one run over their concatenation
    # (tests/test_model_speed_equivalence.py), without copying the frame.
    head = bytearray(frame_no_icrc[:_ICRC_HEAD])
    for k in ICRC_MASKED_BYTES:
        head[k] = 0xFF
    crc = zlib.crc32(head[14:], _ICRC_SEED)
    return zlib.crc32(frame_no_icrc[_ICRC_HEAD:], crc).to_bytes(4, "little")


#: The bytes of a frame the ICRC masks lie before this one; the CRC of the 8 0xFF bytes
#: that stand for the LRH.
_ICRC_HEAD = max(ICRC_MASKED_BYTES) + 1
_ICRC_SEED = zlib.crc32(b"\xff" * 8)


def _icrc_plain(frame_no_icrc):
    """:func:`icrc` as one CRC over a masked copy of the frame (its plain definition)."""
    masked = bytearray(frame_no_icrc)
    for k in ICRC_MASKED_BYTES:
        masked[k] = 0xFF
    return zlib.crc32(b"\xff" * 8 + bytes(masked[14:])).to_bytes(4, "little")


def scaleup_icrc(frame_no_icrc):
    """The 4 ICRC bytes of a scale-up frame (no ICRC, no FCS): a CRC-32 over the frame
    with ``hop_limit`` and BTH byte 4 set to 0xFF (:mod:`spec.formats.scaleup`)."""
    head = bytearray(frame_no_icrc[:_SU_ICRC_HEAD])
    for k in SCALEUP_ICRC_MASKED_BYTES:
        if k < len(head):
            head[k] = 0xFF
    return zlib.crc32(frame_no_icrc[_SU_ICRC_HEAD:], zlib.crc32(head)).to_bytes(4, "little")


_SU_ICRC_HEAD = max(SCALEUP_ICRC_MASKED_BYTES) + 1


def icrc_of(header):
    """The ICRC function of a header choice: :func:`icrc` or :func:`scaleup_icrc`."""
    return scaleup_icrc if check_header(header) is Header.SCALEUP else icrc


def with_fcs(frame):
    """``frame`` followed by its Ethernet FCS."""
    return frame + zlib.crc32(frame).to_bytes(4, "little")


def _headers(layout, src, dst, qpn_src, transport_len, bth, ext=None, ext_name=None):
    """Pack Ethernet/IPv4/UDP/BTH(/ext) into bytes, IP checksum filled in (``bth`` and
    ``ext``: field dicts or their layouts' integers)."""
    word = _addressing(layout, src, dst, qpn_src, transport_len)
    if type(bth) is int and (ext is None or type(ext) is int):
        # Integers are placed at their fields' offsets, as pack places them.
        offset, mask = _slot(layout, "bth")
        word |= (bth & mask) << offset
        if ext is not None:
            offset, mask = _slot(layout, ext_name)
            word |= (ext & mask) << offset
    else:
        fields = {"bth": bth}
        if ext is not None:
            fields[ext_name] = ext
        word |= pack(layout, fields)
    return word.to_bytes(_HEADER_BYTES[id(layout)], "little")


_SLOTS = {}


def _slot(layout, name):
    """:func:`pymodel.fields.field_slot` of a header layout's field, looked up once."""
    key = (id(layout), name)
    hit = _SLOTS.get(key)
    if hit is None:
        hit = _SLOTS[key] = field_slot(layout, name)
    return hit


_ADDRESSING = {}


def _addressing(layout, src, dst, qpn_src, transport_len):
    """The Ethernet, IPv4 (checksum filled in) and UDP headers of ``layout`` as an
    integer, the other fields 0. They depend only on the arguments, the same for every
    frame of a QP of one size, so they are packed once per argument tuple; the BTH and
    the extension header, in bits of their own, are ORed in by :func:`_headers`."""
    key = (id(layout), src.mac, src.ip, dst.mac, dst.ip, qpn_src, transport_len)
    word = _ADDRESSING.get(key)
    if word is not None:
        return word
    n = _HEADER_BYTES[id(layout)]
    raw = bytearray(pack(layout, addressing_fields(src, dst, qpn_src, transport_len))
                    .to_bytes(n, "little"))
    raw[24:26] = ipv4_checksum(bytes(raw[14:34])).to_bytes(2, "big")
    if len(_ADDRESSING) >= 1 << 16:          # a bound for very long runs of many QPs
        _ADDRESSING.clear()
    word = _ADDRESSING[key] = int.from_bytes(raw, "little")
    return word


def addressing_fields(src, dst, qpn_src, transport_len):
    """The Ethernet, IPv4 (checksum 0) and UDP fields of a RoCEv2 header, as
    :func:`pymodel.fields.pack` takes them."""
    ip_len = 20 + 8 + transport_len
    return {
        "eth": {"dst": bswap(dst.mac, 6), "src": bswap(src.mac, 6),
                "ethertype": bswap(ETHERTYPE_IPV4, 2)},
        "ip": {"ihl": 5, "version": 4, "tos": 0, "total_length": bswap(ip_len, 2),
               "ident": 0, "flags_frag": bswap(IP_FLAGS_DF, 2), "ttl": IP_TTL,
               "protocol": IP_PROTO_UDP, "checksum": 0,
               "src": bswap(src.ip, 4), "dst": bswap(dst.ip, 4)},
        "udp": {"sport": bswap(udp_sport(qpn_src), 2), "dport": bswap(ROCE_UDP_PORT, 2),
                "length": bswap(8 + transport_len, 2), "checksum": 0},
    }


#: Bytes of each header layout (``header_bytes`` casts the layout: slow per frame).
_HEADER_BYTES = {id(lay): header_bytes(lay) for lay in (
    WRITE_RETH_HEADER, WRITE_HEADER, ACK_HEADER, SU_WRITE_RETH_HEADER, SU_WRITE_HEADER,
    SU_ACK_HEADER)}


def scaleup_fields(src, dst, qpn_src, transport_len):
    """The scale-up header's fields (:data:`spec.formats.scaleup.SCALEUP_LAYOUT`) as
    :func:`pymodel.fields.pack` takes them: addresses are the low 16 bits of the IPv4
    addresses, ``length`` the bytes from the BTH to the ICRC, ``entropy`` the UDP
    source port RoCEv2 would send."""
    return {"dst": bswap(dst.ip & 0xFFFF, 2), "src": bswap(src.ip & 0xFFFF, 2),
            "type": ScaleUpType.BTH.value, "hop_limit": SCALEUP_HOP_LIMIT,
            "length": bswap(transport_len, 2), "entropy": bswap(udp_sport(qpn_src), 2)}


def _su_headers(layout, src, dst, qpn_src, transport_len, bth, ext=None, ext_name=None):
    """Pack the scale-up header, the BTH and ``ext`` (integers of their layouts)."""
    word = pack(layout, {"su": scaleup_fields(src, dst, qpn_src, transport_len)})
    offset, mask = _slot(layout, "bth")
    word |= (bth & mask) << offset
    if ext is not None:
        offset, mask = _slot(layout, ext_name)
        word |= (ext & mask) << offset
    return word.to_bytes(_HEADER_BYTES[id(layout)], "little")


def _bth(opcode, dest_qp, psn, ack_req, pad):
    return {"opcode": opcode, "tver": 0, "pad_count": pad, "mig_req": 0, "solicited": 0,
            "pkey": bswap(ROCE_PKEY, 2), "resv6": 0, "becn": 0, "fecn": 0,
            "dest_qp": bswap(dest_qp, 3), "resv7": 0, "ack_req": int(ack_req),
            "psn": bswap(psn & _PSN_MASK, 3)}


#: The BTH fields that differ between frames, placed one by one by :func:`_bth_word`.
_BTH_VARIABLE = ("opcode", "pad_count", "dest_qp", "ack_req", "psn")
_BTH_SLOTS = tuple(field_slot(BTH_LAYOUT, name) for name in _BTH_VARIABLE)
#: The BTH of every frame without those fields (the P_Key): :func:`_bth`'s, packed once.
_BTH_FIXED = pack(BTH_LAYOUT, {k: v for k, v in _bth(OpCode.RC_ACKNOWLEDGE, 0, 0, 0, 0).items()
                               if k not in _BTH_VARIABLE})


def _bth_word(opcode, dest_qp, psn, ack_req, pad):
    """``pack(BTH_LAYOUT, _bth(OpCode(opcode), ...))`` for the value ``opcode`` of an
    :class:`OpCode` (tested against it): the fixed fields packed once, the others placed
    at their layout offsets."""
    (o_op, m_op), (o_pad, m_pad), (o_qp, m_qp), (o_ack, m_ack), (o_psn, m_psn) = _BTH_SLOTS
    return (_BTH_FIXED | (opcode & m_op) << o_op | (pad & m_pad) << o_pad
            | (bswap(dest_qp, 3) & m_qp) << o_qp | (int(ack_req) & m_ack) << o_ack
            | (bswap(psn & _PSN_MASK, 3) & m_psn) << o_psn)


_RETH_SLOTS = tuple(field_slot(RETH_LAYOUT, name) for name in ("va", "rkey", "dma_length"))
_AETH_SLOTS = tuple(field_slot(AETH_LAYOUT, name) for name in ("syndrome", "msn"))


def _reth_word(va, rkey, dma_length):
    """``pack(RETH_LAYOUT, {"va": bswap(va, 8), ...})`` (tested against it)."""
    (o_va, m_va), (o_key, m_key), (o_len, m_len) = _RETH_SLOTS
    return ((bswap(va, 8) & m_va) << o_va | (bswap(rkey, 4) & m_key) << o_key
            | (bswap(dma_length, 4) & m_len) << o_len)


def _aeth_word(syndrome, msn):
    """``pack(AETH_LAYOUT, {"syndrome": syndrome, "msn": bswap(msn & _MSN_MASK, 3)})``
    (tested against it)."""
    (o_syn, m_syn), (o_msn, m_msn) = _AETH_SLOTS
    return (syndrome & m_syn) << o_syn | (bswap(msn & _MSN_MASK, 3) & m_msn) << o_msn


#: The values of the opcodes (an :class:`OpCode` is looked up only for an argument that
#: is not one of them, which raises as ``OpCode(opcode)`` does), and those of the WRITEs
#: with and without a RETH.
_OPCODE_VALUES = frozenset(op.value for op in OpCode)
_RETH_OPCODES = frozenset((OpCode.RC_RDMA_WRITE_FIRST.value, OpCode.RC_RDMA_WRITE_ONLY.value))
_PLAIN_OPCODES = frozenset((OpCode.RC_RDMA_WRITE_MIDDLE.value,
                            OpCode.RC_RDMA_WRITE_LAST.value))


def write_frame(opcode, src, dst, src_qp, dest_qp, psn, ack_req, payload,
                va=0, rkey=0, dma_length=0, header="roce"):
    """An RDMA WRITE frame with ICRC and FCS.

    ``opcode`` is an :class:`OpCode` WRITE opcode; FIRST and ONLY carry a RETH with
    ``va``, ``rkey``, ``dma_length``. The payload is padded with zeros to a multiple of 4
    bytes (BTH PadCnt). ``header``: ``"roce"`` (Ethernet/IPv4/UDP) or ``"scaleup"``.
    """
    if header != "roce" and check_header(header) is Header.SCALEUP:
        return _su_write_frame(opcode, src, dst, src_qp, dest_qp, psn, ack_req, payload,
                               va, rkey, dma_length)
    value = opcode if type(opcode) is int and opcode in _OPCODE_VALUES else OpCode(opcode).value
    pad = -len(payload) % 4
    body = bytes(payload) + b"\0" * pad
    bth = _bth_word(value, dest_qp, psn, ack_req, pad)
    if value in _RETH_OPCODES:
        reth = _reth_word(va, rkey, dma_length)
        hdr = _headers(WRITE_RETH_HEADER, src, dst, src_qp, 12 + 16 + len(body) + 4,
                       bth, reth, "reth")
    elif value in _PLAIN_OPCODES:
        hdr = _headers(WRITE_HEADER, src, dst, src_qp, 12 + len(body) + 4, bth)
    else:
        opcode = OpCode(value)
        raise ValueError(f"opcode must be an RDMA WRITE opcode, not {opcode!r}")
    frame = hdr + body
    return with_fcs(frame + icrc(frame))


def _su_write_frame(opcode, src, dst, src_qp, dest_qp, psn, ack_req, payload, va, rkey,
                    dma_length):
    """:func:`write_frame` behind the scale-up header."""
    value = OpCode(opcode).value
    pad = -len(payload) % 4
    body = bytes(payload) + b"\0" * pad
    bth = _bth_word(value, dest_qp, psn, ack_req, pad)
    if value in _RETH_OPCODES:
        hdr = _su_headers(SU_WRITE_RETH_HEADER, src, dst, src_qp, 12 + 16 + len(body) + 4,
                          bth, _reth_word(va, rkey, dma_length), "reth")
    elif value in _PLAIN_OPCODES:
        hdr = _su_headers(SU_WRITE_HEADER, src, dst, src_qp, 12 + len(body) + 4, bth)
    else:
        raise ValueError(f"opcode must be an RDMA WRITE opcode, not {OpCode(value)!r}")
    frame = hdr + body
    return with_fcs(frame + scaleup_icrc(frame))


def ack_frame(src, dst, src_qp, dest_qp, psn, syndrome, msn, header="roce"):
    """An ACKNOWLEDGE frame (AETH ``syndrome``, ``msn``) with ICRC and FCS, behind the
    headers of ``header``."""
    bth = _bth_word(OpCode.RC_ACKNOWLEDGE.value, dest_qp, psn, False, 0)
    aeth = _aeth_word(int(getattr(syndrome, "value", syndrome)), msn)
    if header != "roce" and check_header(header) is Header.SCALEUP:
        frame = _su_headers(SU_ACK_HEADER, src, dst, src_qp, 12 + 4 + 4, bth, aeth, "aeth")
        return with_fcs(frame + scaleup_icrc(frame))
    frame = _headers(ACK_HEADER, src, dst, src_qp, 12 + 4 + 4, bth, aeth, "aeth")
    return with_fcs(frame + icrc(frame))

