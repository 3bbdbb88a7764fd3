"""RoCEv2 wire formats and the RDMA engine's host-memory structures, in one place.

Wire headers (Ethernet, IPv4, UDP, BTH, RETH, AETH) are ``StructLayout``s over the packet
stream's byte order: byte 0 of a header is its 8 least significant bits, so a layout
field that spans several bytes holds them in wire order, which for the big-endian fields
of these protocols reads as the byte-swapped value. :func:`bswap` converts, for Python
integers (golden model, tests) and Amaranth values (RTL) alike. Sub-byte fields are
listed LSB first inside their byte (the IPv4 version is the high nibble of byte 0, so
``ihl`` comes before ``version``).

Host-memory structures (WQE, CQE, QP context, MR entry) are little-endian 64-byte words
of the host-memory model: a field's value is stored as is.

# Ref: IEEE 802.3-2022 clause 3.1.1 (MAC frame); RFC 791 section 3.1 (IPv4 header);
# RFC 768 (UDP); IBTA Vol 1 Rel 1.4 section 9.2 (BTH), 9.3.3 (RETH), 9.3.5 (AETH),
# table 38 (opcodes), 9.7.5.2 (ACK/NAK syndromes); IBTA Vol 1 Annex A17 (RoCEv2: UDP
# destination port 4791, ICRC over the IP datagram with variant fields masked).
"""

from amaranth import Cat, Shape, Value
from amaranth.lib import data, enum

__all__ = [
    "ROCE_UDP_PORT", "ETHERTYPE_IPV4", "IP_PROTO_UDP", "IP_TTL", "IP_FLAGS_DF", "ROCE_PKEY",
    "ACK_SYNDROME_ACK",
    "OpCode", "Syndrome", "bswap",
    "ETH_LAYOUT", "IPV4_LAYOUT", "UDP_LAYOUT", "BTH_LAYOUT", "RETH_LAYOUT", "AETH_LAYOUT",
    "ATOMIC_ETH_LAYOUT", "ATOMIC_ACK_ETH_LAYOUT",
    "WRITE_RETH_HEADER", "WRITE_HEADER", "ACK_HEADER", "header_bytes",
    "ICRC_MASKED_BYTES", "WQE_LAYOUT", "CQE_LAYOUT", "QPC_LAYOUT", "MR_LAYOUT", "MR_LAYOUT_RA",
    "QPC_DYNAMIC_FIELDS", "QPC_DYNAMIC_MASK", "QPC_BYTES_CHOICES", "QPC_BYTES_DEFAULT",
    "qpc_words", "qpc_image",
    "WqeOpcode", "CqeStatus", "QpState", "HOST_WORD_BYTES", "HOST_WORD_BITS", "QPN_BITS",
    "PSN_BITS", "MSN_BITS", "WQE_SIGNALLED", "WQE_INLINE",
    "WQE_ACK_REQ",
]

#: UDP destination port of RoCEv2. Ref: IBTA Annex A17.
ROCE_UDP_PORT = 4791
#: Ref: IEEE 802.3 / IANA EtherType registry.
ETHERTYPE_IPV4 = 0x0800
#: Ref: IANA protocol numbers.
IP_PROTO_UDP = 17
#: TTL of every IPv4 header the engine sends.
IP_TTL = 64
#: IPv4 flags/fragment field of every header sent: Don't Fragment, offset 0.
IP_FLAGS_DF = 0x4000
#: The default partition key. Ref: IBTA Vol 1 section 10.9.1.1.
ROCE_PKEY = 0xFFFF
#: AETH syndrome of a positive ACK with "invalid" credit count (RC without end-to-end
#: credits, as Linux rxe sends it). Ref: IBTA Vol 1 section 9.7.5.2 / table 44.
ACK_SYNDROME_ACK = 0x1F
#: Bytes of one host-memory word: a WQE, a CQE, a QP context and an MR entry each fill
#: exactly one word.
HOST_WORD_BYTES = 64
#: Bits of one host-memory word (and of one 64-byte datapath beat).
HOST_WORD_BITS = 8 * HOST_WORD_BYTES
#: Bits of a QP number (BTH DestQP). Ref: IBTA Vol 1 section 9.2 (BTH), 24-bit DestQP.
QPN_BITS = 24
#: Bits of a packet sequence number (BTH PSN); PSNs are compared modulo ``2**PSN_BITS``.
#: Ref: IBTA Vol 1 section 9.2 (BTH), 24-bit PSN.
PSN_BITS = 24
#: Bits of a message sequence number (AETH MSN). Ref: IBTA Vol 1 section 9.3.5 (AETH).
MSN_BITS = 24


class OpCode(enum.Enum, shape=8):
    """BTH opcodes of the reliable-connected transport used here. Ref: IBTA Vol 1
    section 9.2.1 table 38 (RC opcodes 0x00-0x14: RDMA READ request 0x0C with a RETH,
    READ responses 0x0D-0x10, FIRST and LAST and ONLY with an AETH, MIDDLE with none);
    the same values in Wireshark's InfiniBand dissector (epan/dissectors/
    packet-infiniband.h, ``RC_RDMA_READ_REQUEST`` ... ``RC_RDMA_READ_RESPONSE_ONLY``)
    and Linux rxe (drivers/infiniband/sw/rxe/rxe_opcode.c, ``IB_OPCODE_RC_RDMA_READ_*``);
    ATOMIC ACKNOWLEDGE 0x12 (BTH + AETH + AtomicAckETH), COMPARE & SWAP 0x13 and FETCH &
    ADD 0x14 (BTH + AtomicETH).
    """
    RC_RDMA_WRITE_FIRST = 0x06
    RC_RDMA_WRITE_MIDDLE = 0x07
    RC_RDMA_WRITE_LAST = 0x08
    RC_RDMA_WRITE_ONLY = 0x0A
    RC_RDMA_READ_REQUEST = 0x0C
    RC_RDMA_READ_RESPONSE_FIRST = 0x0D
    RC_RDMA_READ_RESPONSE_MIDDLE = 0x0E
    RC_RDMA_READ_RESPONSE_LAST = 0x0F
    RC_RDMA_READ_RESPONSE_ONLY = 0x10
    RC_ACKNOWLEDGE = 0x11
    RC_ATOMIC_ACKNOWLEDGE = 0x12
    RC_CMP_SWAP = 0x13
    RC_FETCH_ADD = 0x14


class Syndrome(enum.Enum, shape=8):
    """AETH syndromes sent by the responder. Ref: IBTA section 9.7.5.2.

    ``0b000ccccc`` is an ACK (``ccccc`` credits), ``0b011nnnnn`` a NAK with code ``n``.
    """
    ACK = ACK_SYNDROME_ACK
    NAK_PSN_SEQUENCE = 0x60
    NAK_INVALID_REQUEST = 0x61
    NAK_REMOTE_ACCESS = 0x62


def bswap(value, nbytes):
    """Reverse the byte order of an ``nbytes`` value (int or Amaranth value)."""
    if isinstance(value, int):
        return int.from_bytes(value.to_bytes(nbytes, "big"), "little")
    value = Value.cast(value)
    return Cat(*[value[8 * k:8 * k + 8] for k in reversed(range(nbytes))])


#: Ref: IEEE 802.3 clause 3.1.1. 14 bytes. ``dst``/``src``/``ethertype`` in wire order.
ETH_LAYOUT = data.StructLayout({"dst": 48, "src": 48, "ethertype": 16})

#: Ref: RFC 791 section 3.1. 20 bytes, no options. Multi-byte fields in wire order.
IPV4_LAYOUT = data.StructLayout({
    "ihl": 4, "version": 4, "tos": 8, "total_length": 16, "ident": 16, "flags_frag": 16,
    "ttl": 8, "protocol": 8, "checksum": 16, "src": 32, "dst": 32,
})

#: Ref: RFC 768. 8 bytes. Multi-byte fields in wire order.
UDP_LAYOUT = data.StructLayout({"sport": 16, "dport": 16, "length": 16, "checksum": 16})

#: Base Transport Header. Ref: IBTA Vol 1 section 9.2. 12 bytes.
#: Byte 1 holds SE (bit 7), MigReq (6), PadCnt (5:4), TVer (3:0); byte 4 FECN (7), BECN
#: (6); byte 8 AckReq (7). ``pkey``, ``dest_qp``, ``psn`` in wire order.
BTH_LAYOUT = data.StructLayout({
    "opcode": OpCode, "tver": 4, "pad_count": 2, "mig_req": 1, "solicited": 1,
    "pkey": 16, "resv6": 6, "becn": 1, "fecn": 1, "dest_qp": QPN_BITS,
    "resv7": 7, "ack_req": 1, "psn": PSN_BITS,
})

#: RDMA Extended Transport Header. Ref: IBTA Vol 1 section 9.3.3. 16 bytes, wire order.
RETH_LAYOUT = data.StructLayout({"va": 64, "rkey": 32, "dma_length": 32})

#: Atomic Extended Transport Header of COMPARE & SWAP and FETCH & ADD: the remote VA
#: (8-byte aligned), rkey, the swap (or add) operand and the compare operand, all big
#: endian. Ref: IBTA Vol 1 section 9.3.4; Linux rxe ``struct rxe_atmeth``
#: (drivers/infiniband/sw/rxe/rxe_hdr.h). 28 bytes, wire order.
ATOMIC_ETH_LAYOUT = data.StructLayout({"va": 64, "rkey": 32, "swap_add": 64, "compare": 64})
#: Atomic ACK Extended Transport Header: the original value at the VA. Ref: IBTA Vol 1
#: section 9.3.6; Linux rxe ``struct rxe_atmack``. 8 bytes, wire order.
ATOMIC_ACK_ETH_LAYOUT = data.StructLayout({"orig": 64})
#: ACK Extended Transport Header. Ref: IBTA Vol 1 section 9.3.5. 4 bytes; ``msn`` in
#: wire order.
AETH_LAYOUT = data.StructLayout({"syndrome": 8, "msn": MSN_BITS})

#: The headers of an RDMA WRITE FIRST / ONLY frame (70 bytes).
WRITE_RETH_HEADER = data.StructLayout({
    "eth": ETH_LAYOUT, "ip": IPV4_LAYOUT, "udp": UDP_LAYOUT, "bth": BTH_LAYOUT,
    "reth": RETH_LAYOUT})
#: The headers of an RDMA WRITE MIDDLE / LAST frame (54 bytes).
WRITE_HEADER = data.StructLayout({
    "eth": ETH_LAYOUT, "ip": IPV4_LAYOUT, "udp": UDP_LAYOUT, "bth": BTH_LAYOUT})
#: The headers of an ACKNOWLEDGE frame (58 bytes); the frame has no payload. An RDMA
#: READ RESPONSE FIRST / LAST / ONLY frame has the same headers (BTH + AETH) and carries
#: payload after them; a READ RESPONSE MIDDLE frame has :data:`WRITE_HEADER`'s (54 bytes).
#: Ref: IBTA Vol 1 section 9.3.5 and table 38.
ACK_HEADER = data.StructLayout({
    "eth": ETH_LAYOUT, "ip": IPV4_LAYOUT, "udp": UDP_LAYOUT, "bth": BTH_LAYOUT,
    "aeth": AETH_LAYOUT})


#: Sizes of the layouts :func:`header_bytes` has measured, by the layout object (a
#: layout's fields are fixed when it is made; the model asks for a frame's header size
#: once per frame, and Amaranth walks the whole layout each time).
_HEADER_BYTES = {}


def header_bytes(layout):
    """Size of a header layout in bytes."""
    known = _HEADER_BYTES.get(id(layout))
    if known is None or known[0] is not layout:
        known = _HEADER_BYTES[id(layout)] = (layout, Shape.cast(layout).width // 8)
    return known[1]


IPV4_BYTES = header_bytes(IPV4_LAYOUT)
UDP_BYTES = header_bytes(UDP_LAYOUT)
BTH_BYTES = header_bytes(BTH_LAYOUT)
RETH_BYTES = header_bytes(RETH_LAYOUT)
AETH_BYTES = header_bytes(AETH_LAYOUT)
#: The invariant CRC that ends every RoCEv2 packet, before the FCS. Ref: IBTA Annex A17.
ICRC_BYTES = 4


#: Frame byte offsets (counted from the Ethernet destination) that the ICRC sees as
#: 0xFF: IPv4 TOS, TTL, header checksum; UDP checksum; BTH byte 4 (FECN, BECN, resv6).
#: Ref: IBTA Annex A17 (ICRC for RoCEv2 over IPv4).
ICRC_MASKED_BYTES = (15, 22, 24, 25, 40, 41, 46)


class WqeOpcode(enum.Enum, shape=8):
    """Work-request opcodes a WQE may carry, numbered as rdma-core's
    ``enum ibv_wr_opcode`` (libibverbs/verbs.h: IBV_WR_RDMA_WRITE 0,
    IBV_WR_RDMA_WRITE_WITH_IMM 1, IBV_WR_SEND 2, IBV_WR_SEND_WITH_IMM 3,
    IBV_WR_RDMA_READ 4, IBV_WR_ATOMIC_CMP_AND_SWP 5, IBV_WR_ATOMIC_FETCH_AND_ADD 6).
    A requester built with ``reads`` executes all four (:mod:`spec.rdma_read_req`);
    without, it does not look at the opcode: any WQE is sent as a WRITE."""
    RDMA_WRITE = 0x00
    RDMA_READ = 0x04
    ATOMIC_CMP_AND_SWP = 0x05
    ATOMIC_FETCH_AND_ADD = 0x06


class CqeStatus(enum.Enum, shape=8):
    """Completion status written into a CQE.

    Ref: rdma-core, libibverbs/verbs.h, ``enum ibv_wc_status`` (IBV_WC_SUCCESS 0,
    IBV_WC_LOC_LEN_ERR 1, IBV_WC_LOC_QP_OP_ERR 2, IBV_WC_LOC_EEC_OP_ERR 3,
    IBV_WC_LOC_PROT_ERR 4, IBV_WC_WR_FLUSH_ERR 5, ..., IBV_WC_REM_ACCESS_ERR 10, ...,
    IBV_WC_RETRY_EXC_ERR 12); only the statuses the engine writes are listed.
    ``WR_FLUSH_ERR``: a WQE of a QP in the error state, completed without being
    executed (IBTA Vol 1 table 91, "Any State to Error": work requests pending
    or in process are completed in error; Linux rxe, rxe_req.c, flushes them so).
    """
    SUCCESS = 0
    WR_FLUSH_ERR = 5
    REM_ACCESS_ERR = 10
    RETRY_EXC_ERR = 12


class QpState(enum.Enum, shape=3):
    """QP states of the context's ``state`` field.

    Ref: rdma-core, libibverbs/verbs.h, ``enum ibv_qp_state`` (IBV_QPS_RESET 0,
    IBV_QPS_INIT 1, IBV_QPS_RTR 2, IBV_QPS_RTS 3, IBV_QPS_SQD 4, IBV_QPS_SQE 5,
    IBV_QPS_ERR 6); IBTA Vol 1 chapter 10 (the QP state machine). The engine tells only
    ``ERR`` apart: a context that is ``valid`` and not in ``ERR`` works as RTS.
    """
    RESET = 0
    RTS = 3
    ERR = 6


#: Send-queue entry (one 64-byte host word, little endian). ``laddr`` is the local
#: source address, ``raddr``/``rkey`` the remote target, ``length`` the byte count
#: (1 .. 16 KiB here), ``wr_id`` is returned in the CQE. ``qpn`` and ``sq_index`` (the
#: WQE's send-queue slot) let a WQE written by MMIO act as its own doorbell, as the
#: control segment of an mlx5 WQE carries the QP number and the WQE counter
#: (rdma-core, providers/mlx5: ``mlx5_wqe_ctrl_seg``).
#: An atomic WQE (``ATOMIC_CMP_AND_SWP``, ``ATOMIC_FETCH_AND_ADD``) has ``length`` 8,
#: ``laddr`` (where the original value goes) and ``raddr`` 8-byte aligned, and its
#: operands in ``swap_add`` (the swap value, or the value to add) and ``compare``, as
#: ``ibv_send_wr.wr.atomic`` carries ``swap``/``compare_add`` (the add value is in
#: ``compare_add`` there; one field per role here). Ref: rdma-core libibverbs/verbs.h.
WQE_LAYOUT = data.StructLayout({
    "wr_id": 64, "opcode": WqeOpcode, "flags": 8, "sq_index": 16, "length": 32,
    "laddr": 64, "raddr": 64, "rkey": 32, "qpn": QPN_BITS, "resv1": 8, "swap_add": 64,
    "compare": 64, "resv2": 64,
})
#: WQE ``flags``: the WQE asks for a CQE (``IBV_SEND_SIGNALED``); its payload follows the
#: header word in the WQE (``IBV_SEND_INLINE``), ``ceil(length / 64)`` words; the host
#: asks for an ACK of this message (AckReq on its last frame) whatever the coalescing
#: policy says: the driver's end of a burst on a QP, so that a QP that goes quiet is
#: acknowledged at once and its context released, not after a transport timeout.
WQE_SIGNALLED = 0x01
WQE_INLINE = 0x02
WQE_ACK_REQ = 0x04

#: Completion-queue entry (one 64-byte host word). ``owner`` is the phase bit that the
#: host polls (it flips each time the CQ wraps).
CQE_LAYOUT = data.StructLayout({
    "wr_id": 64, "status": CqeStatus, "opcode": WqeOpcode, "owner": 1, "resv0": 15,
    "qpn": QPN_BITS, "resv1": 8, "byte_len": 32, "sq_index": 16, "resv2": 16, "resv3": 256,
})

#: QP context fields (the layout of the context's words: see :data:`QPC_DYNAMIC_FIELDS`
#: for how a context of ``qpc_bytes`` lays them out in host memory). The requester uses the
#: send side (``next_psn``, ``sq_*``), the responder the receive side (``expected_psn``,
#: ``msn``, and ``resp_va``/``resp_left``: where the next MIDDLE/LAST payload of the
#: message in progress goes and how many bytes it may still carry); both use the
#: addressing (``dest_qp``, MACs, IPs). ``valid`` marks a created QP; ``state`` is its
#: :class:`QpState` (a valid QP not in ``ERR`` works as RTS; the requester's sequencer
#: owns it in the cache, the responder reads it); ``pmtu_log2`` is the path MTU (8..12).
#: ``nak_sent`` (responder) is set when a PSN sequence error NAK has been sent and
#: cleared when the expected PSN is accepted: one NAK per sequence error, later
#: out-of-order packets are dropped silently (the responder behaviour of IBTA Vol 1
#: section 9.7.5). One of the 8 spare bits after ``expected_psn``: every field fits in
#: one 64-byte host word. ``sq_stride_log2``: a send-queue slot is ``2**sq_stride_log2``
#: words (room for a WQE with inline data).
#: ``ack_msgs``/``ack_frames`` (requester): messages and frames sent since the last one
#: that asked for an ACK (ACK coalescing).
QPC_LAYOUT = data.StructLayout({
    "valid": 1, "state": 3, "pmtu_log2": 4, "dest_qp": QPN_BITS,
    "next_psn": PSN_BITS, "sq_size_log2": 8,
    "expected_psn": PSN_BITS, "nak_sent": 1, "sq_stride_log2": 2, "resv0": 5,
    "msn": MSN_BITS, "ack_msgs": 8,
    "sq_base": 32,
    "sq_head": 16, "sq_tail": 16,
    "dmac": 48, "smac": 48,
    "dip": 32, "sip": 32,
    "resp_va": 64,
    "resp_left": 32,
    "ack_frames": 16, "resv2": 48,
})

#: Memory-region entry of the responder's on-chip MR table (the memory protection
#: table, fully cached), indexed by the low bits of the rkey. ``key`` must equal the
#: whole rkey; ``remote_write`` is the access right checked for RDMA WRITE.
MR_LAYOUT = data.StructLayout({
    "valid": 1, "remote_write": 1, "key": 32, "base": 64, "length": 32,
})
#: The MR entry of a responder that executes RDMA READ and the atomics (its
#: ``read_words`` > 0): :data:`MR_LAYOUT`'s fields, then the rights ``remote_read`` and
#: ``remote_atomic`` (``IBV_ACCESS_REMOTE_READ`` and ``IBV_ACCESS_REMOTE_ATOMIC`` of
#: ``ibv_reg_mr``; IBTA Vol 1 section 10.6.3.2, the access rights of a memory region).
#: An :data:`MR_LAYOUT` integer is one of these without those rights.
MR_LAYOUT_RA = data.StructLayout({**{name: MR_LAYOUT[name].shape for name in MR_LAYOUT.members},
                                  "remote_read": 1, "remote_atomic": 1})

#: The context fields the engines' pipeline stages rewrite (the context caches' groups:
#: the requester's ``sq_head`` and sequencer state, the responder's PSN/MSN and message
#: state). A context of ``qpc_bytes`` bytes is ``W = qpc_bytes // 64`` host words at
#: ``qpc_base + qpn * W``: word 0 is the *dynamic word* (these fields, the others zero),
#: word 1 the *static word* (every other field: addressing, send-queue configuration,
#: path MTU, ``valid``; these fields zero), both in :data:`QPC_LAYOUT`; words 2 to W - 1
#: are the rest of a real context (features this model does not interpret: mlx5's QPC,
#: ``mlx5_ifc_qpc_bits`` in Linux include/linux/mlx5/mlx5_ifc.h, is 0x740 bits = 232
#: bytes) and are read on a fill and discarded. With W = 1 (``qpc_bytes`` 64) the one
#: word holds every field. A cache holds the word ``static fields of word 1 | dynamic
#: fields of word 0`` and writes back only word 0.
QPC_DYNAMIC_FIELDS = ("sq_head", "next_psn", "ack_msgs", "ack_frames", "state",
                      "expected_psn", "nak_sent", "msn", "resp_va", "resp_left")
#: The bits of :data:`QPC_DYNAMIC_FIELDS` in a context word.
QPC_DYNAMIC_MASK = sum(((1 << Shape.cast(QPC_LAYOUT[f].shape).width) - 1)
                       << QPC_LAYOUT[f].offset for f in QPC_DYNAMIC_FIELDS)
#: Accepted context sizes in bytes (``qpc_bytes``): 1 to 16 host words, a power of two so
#: that a context's address is a shift of its QPN.
QPC_BYTES_CHOICES = (64, 128, 256, 512, 1024)
#: Default context size: 256 bytes, the power of two that holds mlx5's 232-byte QPC
#: (``mlx5_ifc_qpc_bits``, Linux include/linux/mlx5/mlx5_ifc.h).
QPC_BYTES_DEFAULT = 256


def qpc_words(qpc_bytes, owner="qpc_bytes"):
    """Host words of one context (``W``) for ``qpc_bytes``; ``ValueError`` naming
    ``qpc_bytes`` unless it is one of :data:`QPC_BYTES_CHOICES`."""
    if isinstance(qpc_bytes, bool) or qpc_bytes not in QPC_BYTES_CHOICES:
        raise ValueError(f"{owner}: QP-context size qpc_bytes must be one of "
                         f"{QPC_BYTES_CHOICES}, not {qpc_bytes!r}")
    return qpc_bytes // HOST_WORD_BYTES


def qpc_image(word, words):
    """The host words ``[word 0, word 1, 0, ...]`` (``words`` of them) of a context whose
    fields are the integer ``word`` (:data:`QPC_LAYOUT`): ``[word]`` when ``words`` is 1,
    else the dynamic word and the static word, then zeros."""
    if words == 1:
        return [word]
    return [word & QPC_DYNAMIC_MASK, word & ~QPC_DYNAMIC_MASK] + [0] * (words - 2)


for _layout in (WQE_LAYOUT, CQE_LAYOUT, QPC_LAYOUT, MR_LAYOUT, MR_LAYOUT_RA):
    assert _layout.size <= 8 * HOST_WORD_BYTES, _layout
del _layout
