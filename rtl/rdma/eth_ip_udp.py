"""Fill the Ethernet, IPv4 and UDP headers of a RoCEv2 frame, or the scale-up header that
replaces them (helpers, not components).

Ref: RFC 791 section 3.1 (IPv4), RFC 1071 (checksum), RFC 768 (UDP), IBTA Annex A17;
:mod:`spec.formats.scaleup` (the scale-up header).
"""

from amaranth import Cat, Const, Signal

from spec.checks import reject
from spec.formats.roce import (
    ETHERTYPE_IPV4,
    IP_FLAGS_DF,
    IP_PROTO_UDP,
    IP_TTL,
    ROCE_PKEY,
    ROCE_UDP_PORT,
    bswap,
)
from spec.formats.scaleup import SCALEUP_HOP_LIMIT, ScaleUpType, framing

__all__ = ["fill_eth_ip_udp", "fill_bth_common", "fill_scaleup", "framing_param"]


def framing_param(owner, header):
    """The :class:`spec.formats.scaleup.Framing` of a component's ``header`` parameter;
    a bad value is refused (``ValueError`` naming ``header``, the component silenced)."""
    try:
        return framing(header)
    except ValueError as exc:
        reject(owner, f"{type(owner).__name__}: {exc}")


def fill_scaleup(m, su, *, sip, dip, src_qp, length):
    """Drive a scale-up header (:data:`spec.formats.scaleup.SCALEUP_LAYOUT`): ``dst`` and
    ``src`` the low 16 bits of ``dip`` and ``sip``, ``type`` BTH, ``hop_limit`` 64,
    ``length`` (bytes from the BTH to the ICRC), ``entropy`` the RoCEv2 UDP source port
    ``0xC000 | src_qp[13:0]``."""
    m.d.comb += [
        su.dst.eq(bswap(dip[:16], 2)), su.src.eq(bswap(sip[:16], 2)),
        su.type.eq(ScaleUpType.BTH.value), su.hop_limit.eq(SCALEUP_HOP_LIMIT),
        su.length.eq(bswap(length, 2)),
        su.entropy.eq(bswap(Cat(src_qp[:14], Const(0b11, 2)), 2)),
    ]


def fill_eth_ip_udp(m, hdr, *, dmac, smac, sip, dip, src_qp, udp_len, prefix):
    """Drive ``hdr.eth``, ``hdr.ip``, ``hdr.udp`` combinationally.

    IPv4: version 4, IHL 5, TOS 0, identification 0, DF, TTL 64, protocol UDP, header
    checksum computed here. UDP: source port ``0xC000 | src_qp[13:0]``, destination
    4791, checksum 0 (allowed over IPv4). ``udp_len`` is the UDP length (header
    included).
    """
    ip_len = Signal(16, name=f"{prefix}ip_len")
    m.d.comb += ip_len.eq(20 + udp_len)
    words = [Const(0x4500, 16), ip_len, Const(0, 16), Const(IP_FLAGS_DF, 16),
             Const(IP_TTL << 8 | IP_PROTO_UDP, 16), sip[16:], sip[:16], dip[16:], dip[:16]]
    total = Signal(20, name=f"{prefix}ip_sum")
    m.d.comb += total.eq(sum(words))
    fold = Signal(17, name=f"{prefix}ip_fold")
    m.d.comb += fold.eq(total[:16] + total[16:])
    checksum = Signal(16, name=f"{prefix}ip_checksum")
    m.d.comb += checksum.eq(~(fold[:16] + fold[16]))
    m.d.comb += [
        hdr.eth.dst.eq(bswap(dmac, 6)),
        hdr.eth.src.eq(bswap(smac, 6)),
        hdr.eth.ethertype.eq(bswap(Const(ETHERTYPE_IPV4, 16), 2)),
        hdr.ip.ihl.eq(5), hdr.ip.version.eq(4),
        hdr.ip.total_length.eq(bswap(ip_len, 2)),
        hdr.ip.flags_frag.eq(bswap(Const(IP_FLAGS_DF, 16), 2)),
        hdr.ip.ttl.eq(IP_TTL), hdr.ip.protocol.eq(IP_PROTO_UDP),
        hdr.ip.checksum.eq(bswap(checksum, 2)),
        hdr.ip.src.eq(bswap(sip, 4)), hdr.ip.dst.eq(bswap(dip, 4)),
        hdr.udp.sport.eq(bswap(Cat(src_qp[:14], Const(0b11, 2)), 2)),
        hdr.udp.dport.eq(bswap(Const(ROCE_UDP_PORT, 16), 2)),
        hdr.udp.length.eq(bswap(udp_len, 2)),
    ]


def fill_bth_common(m, bth, *, opcode, dest_qp, psn, ack_req, pad):
    """Drive a BTH: TVer 0, P_Key 0xFFFF, no SE/MigReq/FECN/BECN."""
    m.d.comb += [
        bth.opcode.eq(opcode), bth.pad_count.eq(pad),
        bth.pkey.eq(bswap(Const(ROCE_PKEY, 16), 2)),
        bth.dest_qp.eq(bswap(dest_qp, 3)),
        bth.ack_req.eq(ack_req),
        bth.psn.eq(bswap(psn, 3)),
    ]
