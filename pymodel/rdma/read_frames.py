"""RDMA READ and atomic frames byte for byte: READ REQUEST, READ RESPONSE
(FIRST/MIDDLE/LAST/ONLY), COMPARE & SWAP, FETCH & ADD and ATOMIC ACKNOWLEDGE, behind
Ethernet/IPv4/UDP (``header="roce"``) or the scale-up header (``"scaleup"``), with the
header packing of :mod:`pymodel.rdma.frames`.
"""

from pymodel.fields import pack
from pymodel.rdma.frames import (
    _aeth_word,
    _bth_word,
    _headers,
    _reth_word,
    _su_headers,
    icrc,
    icrc_of,
    scaleup_icrc,
    with_fcs,
)
from spec.formats.roce import (
    ACK_HEADER,
    ATOMIC_ETH_LAYOUT,
    WRITE_HEADER,
    WRITE_RETH_HEADER,
    OpCode,
    bswap,
)
from spec.formats.scaleup import (
    SU_ACK_HEADER,
    SU_WRITE_HEADER,
    SU_WRITE_RETH_HEADER,
    Header,
    check_header,
)

__all__ = ["read_request_frame", "read_response_headers", "read_response_frame",
           "atomic_request_frame", "atomic_ack_frame"]


_READ_AETH = frozenset((OpCode.RC_RDMA_READ_RESPONSE_FIRST.value,
                        OpCode.RC_RDMA_READ_RESPONSE_LAST.value,
                        OpCode.RC_RDMA_READ_RESPONSE_ONLY.value,
                        OpCode.RC_ATOMIC_ACKNOWLEDGE.value))
_READ_PLAIN = frozenset((OpCode.RC_RDMA_READ_RESPONSE_MIDDLE.value,))


def read_request_frame(src, dst, src_qp, dest_qp, psn, va, rkey, dma_length, ack_req=True,
                       header="roce"):
    """An RDMA READ request (BTH + RETH, no payload) with ICRC and FCS. Ref: IBTA Vol 1
    table 38 (opcode 0x0C) and section 9.3.3 (RETH: the remote VA, rkey and the DMA
    length to read)."""
    bth = _bth_word(OpCode.RC_RDMA_READ_REQUEST.value, dest_qp, psn, ack_req, 0)
    reth = _reth_word(va, rkey, dma_length)
    if header != "roce" and check_header(header) is Header.SCALEUP:
        frame = _su_headers(SU_WRITE_RETH_HEADER, src, dst, src_qp, 12 + 16 + 4, bth, reth,
                            "reth")
        return with_fcs(frame + scaleup_icrc(frame))
    frame = _headers(WRITE_RETH_HEADER, src, dst, src_qp, 12 + 16 + 4, bth, reth, "reth")
    return with_fcs(frame + icrc(frame))


def read_response_headers(opcode, src, dst, src_qp, dest_qp, psn, syndrome, msn, length,
                          header="roce"):
    """The headers of an RDMA READ RESPONSE frame of ``length`` payload bytes: BTH and,
    on FIRST / LAST / ONLY, an AETH (``syndrome``, ``msn``); an ATOMIC ACKNOWLEDGE has
    the headers of a READ RESPONSE ONLY and its AtomicAckETH as an 8-byte payload.
    Ref: IBTA Vol 1 table 38 (opcodes 0x0D-0x10, 0x12) and section 9.3.5 (AETH)."""
    value = OpCode(opcode).value
    pad = -length % 4
    bth = _bth_word(value, dest_qp, psn, False, pad)
    su = header != "roce" and check_header(header) is Header.SCALEUP
    body = length + pad + 4
    if value in _READ_AETH:
        aeth = _aeth_word(int(getattr(syndrome, "value", syndrome)), msn)
        if su:
            return _su_headers(SU_ACK_HEADER, src, dst, src_qp, 12 + 4 + body, bth, aeth,
                               "aeth")
        return _headers(ACK_HEADER, src, dst, src_qp, 12 + 4 + body, bth, aeth, "aeth")
    if value not in _READ_PLAIN:
        raise ValueError(f"opcode must be an RDMA READ RESPONSE opcode, not "
                         f"{OpCode(value)!r}")
    if su:
        return _su_headers(SU_WRITE_HEADER, src, dst, src_qp, 12 + body, bth)
    return _headers(WRITE_HEADER, src, dst, src_qp, 12 + body, bth)


def read_response_frame(opcode, src, dst, src_qp, dest_qp, psn, syndrome, msn, payload,
                        header="roce"):
    """An RDMA READ RESPONSE frame with ICRC and FCS (payload padded to 4 bytes)."""
    frame = read_response_headers(opcode, src, dst, src_qp, dest_qp, psn, syndrome, msn,
                                  len(payload), header)
    frame += bytes(payload) + b"\0" * (-len(payload) % 4)
    return with_fcs(frame + icrc_of(header)(frame))


def atomic_request_frame(opcode, src, dst, src_qp, dest_qp, psn, va, rkey, swap_add,
                         compare=0, ack_req=True, header="roce"):
    """A COMPARE & SWAP or FETCH & ADD request (BTH + AtomicETH: VA, rkey, the swap or
    add operand, the compare operand, big endian; no payload) with ICRC and FCS. Ref:
    IBTA Vol 1 table 38 (0x13, 0x14) and section 9.3.4."""
    value = OpCode(opcode).value
    if value not in (OpCode.RC_CMP_SWAP.value, OpCode.RC_FETCH_ADD.value):
        raise ValueError(f"opcode must be an atomic opcode, not {OpCode(value)!r}")
    bth = _bth_word(value, dest_qp, psn, ack_req, 0)
    ext = pack(ATOMIC_ETH_LAYOUT, {"va": bswap(va, 8), "rkey": bswap(rkey, 4),
                                   "swap_add": bswap(swap_add, 8),
                                   "compare": bswap(compare, 8)}).to_bytes(28, "little")
    if header != "roce" and check_header(header) is Header.SCALEUP:
        frame = _su_headers(SU_WRITE_HEADER, src, dst, src_qp, 12 + 28 + 4, bth) + ext
        return with_fcs(frame + scaleup_icrc(frame))
    frame = _headers(WRITE_HEADER, src, dst, src_qp, 12 + 28 + 4, bth) + ext
    return with_fcs(frame + icrc(frame))


def atomic_ack_frame(src, dst, src_qp, dest_qp, psn, syndrome, msn, orig, header="roce"):
    """An ATOMIC ACKNOWLEDGE (BTH + AETH + AtomicAckETH: the original value, big endian)
    with ICRC and FCS. Ref: IBTA Vol 1 table 38 (0x12) and section 9.3.6."""
    return read_response_frame(OpCode.RC_ATOMIC_ACKNOWLEDGE, src, dst, src_qp, dest_qp, psn,
                               syndrome, msn, orig.to_bytes(8, "big"), header=header)
