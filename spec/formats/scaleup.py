"""The RDMA engine's framing option: RoCEv2 headers, or a 10-byte scale-up header.

``header="roce"`` (the default) frames every packet as RoCEv2: Ethernet (14) + IPv4 (20)
+ UDP (8) + BTH (12) [+ RETH (16) | AETH (4)] + payload + pad + ICRC (4) + FCS (4), the
layouts of :mod:`spec.formats.roce`.

``header="scaleup"`` puts the same transport (BTH, RETH/AETH, payload, pad, ICRC) behind
one short scale-up header instead of Ethernet + IPv4 + UDP (42 bytes), and keeps the
link's FCS::

    SU (10) | BTH (12) | RETH (16) or AETH (4) or nothing | payload | pad | ICRC (4) | FCS (4)

Scale-up header (10 bytes; multi-byte fields big endian, network order, as the BTH's;
held in wire order in the layout, see :func:`spec.formats.roce.bswap`)::

    bytes 0..1  dst        destination node address: the route key of a scale-up switch
                           (a 16-bit address of a limited domain, looked up in a flat
                           table; here the low 16 bits of the QP context's ``dip``)
    bytes 2..3  src        source node address (the low 16 bits of ``sip``)
    byte  4     type       what follows: :class:`ScaleUpType` (``BTH``: an IBTA BTH, the
                           role of RoCEv2's UDP destination port 4791)
    byte  5     hop_limit  decremented by each switch, 64 when sent (RoCEv2's IPv4 TTL)
    bytes 6..7  length     bytes after this header up to and including the ICRC (BTH,
                           RETH/AETH, payload, pad, ICRC): RoCEv2's UDP length minus 8
    bytes 8..9  entropy    flow entropy for multipath: RoCEv2's UDP source port
                           (``0xC000 | src_qp[13:0]``)

ICRC. RoCEv2's ICRC covers 8 bytes of 0xFF standing for the IB LRH, then the IP datagram
with its variant fields masked to 0xFF (IBTA Annex A17). Without IP and UDP it covers here
the whole frame from the scale-up header's first byte to the end of the pad, with the
variant fields set to 0xFF: ``hop_limit`` (byte 5, changed by switches as the IPv4 TTL)
and BTH byte 4 (FECN, BECN, resv6: frame byte 14, as in RoCEv2). The addresses, the type
and the length are covered end to end (as RoCEv2's ICRC covers the IP addresses and the
UDP length). No LRH stand-in: it is a plain CRC-32 (the polynomial, initial value and
final inversion of the FCS, IEEE 802.3 clause 3.2.9, as the ICRC) over that masked copy.
:data:`SCALEUP_CHECK_MIN_BYTES` is the shortest frame (FCS included) whose ICRC does
not overlap a masked byte; shorter frames fail the ICRC check.

Frames are not padded to the 64-byte Ethernet minimum: as the NIC's compact frames
(:mod:`spec.formats.nic`) they travel on scale-up links of their own. A 128-byte RDMA
WRITE ONLY is 10 + 12 + 16 + 128 + 4 + 4 = 174 bytes: 3 beats of 64 bytes, where RoCEv2
needs 206 bytes, 4 beats.

# Ref: Broadcom Tomahawk Ultra (BCM78920, announced July 2025): an "optimized Ethernet
# header" of 10 bytes in place of 46 bytes of Ethernet/IP/UDP headers, for the Scale-Up
# Ethernet (SUE) framework (Broadcom, "Scale Up Ethernet Framework", OCP 2025).
# Ref: T. Herbert, "Scale-Up Network Header (SUNH)", draft-herbert-sunh-00/-01 (IETF,
# November 2025 / January 2026): a compressed network header for scale-up domains with
# 16-bit addresses (a route lookup by array index), a next-header type and a hop limit.
# Ref: IBTA Vol 1 Rel 1.4 section 9.2 (BTH), 9.3.3 (RETH), 9.3.5 (AETH), 7.8.1 (ICRC);
# Annex A17 (RoCEv2: UDP port 4791, ICRC masking). IEEE 802.3-2022 clause 3.2.9 (FCS).
# Ref (pcap): tcpdump.org link-layer header types, LINKTYPE_USER0 = 147 ("reserved for
# private use"); pcapng (draft-ietf-opsawg-pcapng) section 4.2, the IDB's LinkType.
"""

import dataclasses
import enum

from amaranth.lib import data
from amaranth.lib import enum as amenum

from spec.formats.roce import (
    ACK_HEADER,
    AETH_LAYOUT,
    BTH_LAYOUT,
    ICRC_MASKED_BYTES,
    IP_TTL,
    RETH_LAYOUT,
    WRITE_HEADER,
    WRITE_RETH_HEADER,
    header_bytes,
)

__all__ = ["Header", "ScaleUpType", "SCALEUP_LAYOUT", "SU_WRITE_RETH_HEADER",
           "SU_WRITE_HEADER", "SU_ACK_HEADER", "SCALEUP_BYTES", "SCALEUP_ICRC_MASKED_BYTES",
           "SCALEUP_CHECK_MIN_BYTES", "SCALEUP_HOP_LIMIT", "Framing", "framing",
           "check_header", "HEADERS", "LINKTYPE_ETHERNET", "LINKTYPE_SCALEUP"]


class Header(enum.Enum):
    """The framing of the RDMA engine (an elaboration / model parameter ``header``)."""
    ROCE = "roce"
    SCALEUP = "scaleup"


#: The accepted values of ``header``.
HEADERS = tuple(h.value for h in Header)


class ScaleUpType(amenum.Enum, shape=8):
    """The scale-up header's ``type``: what follows it (only a BTH here)."""
    BTH = 0x1B


#: ``hop_limit`` of every frame sent: RoCEv2's IPv4 TTL.
SCALEUP_HOP_LIMIT = IP_TTL

#: The scale-up header (10 bytes). Multi-byte fields in wire order.
SCALEUP_LAYOUT = data.StructLayout({
    "dst": 16, "src": 16, "type": 8, "hop_limit": 8, "length": 16, "entropy": 16,
})
SCALEUP_BYTES = header_bytes(SCALEUP_LAYOUT)
assert SCALEUP_BYTES <= 12

#: The headers of an RDMA WRITE FIRST / ONLY frame (38 bytes).
SU_WRITE_RETH_HEADER = data.StructLayout({
    "su": SCALEUP_LAYOUT, "bth": BTH_LAYOUT, "reth": RETH_LAYOUT})
#: The headers of an RDMA WRITE MIDDLE / LAST frame (22 bytes).
SU_WRITE_HEADER = data.StructLayout({"su": SCALEUP_LAYOUT, "bth": BTH_LAYOUT})
#: The headers of an ACKNOWLEDGE frame (26 bytes); no payload.
SU_ACK_HEADER = data.StructLayout({"su": SCALEUP_LAYOUT, "bth": BTH_LAYOUT,
                                   "aeth": AETH_LAYOUT})

#: Frame bytes the scale-up ICRC sees as 0xFF: ``hop_limit``; BTH byte 4.
SCALEUP_ICRC_MASKED_BYTES = (SCALEUP_LAYOUT["hop_limit"].offset // 8, SCALEUP_BYTES + 4)
#: Shortest frame (ICRC and FCS included) whose ICRC lies after every masked byte.
SCALEUP_CHECK_MIN_BYTES = max(SCALEUP_ICRC_MASKED_BYTES) + 1 + 8

#: pcap link types: Ethernet (RoCEv2 frames), private use 0 (scale-up frames, read by
#: scripts/wireshark/scaleup.lua). Ref: tcpdump.org link-layer header types.
LINKTYPE_ETHERNET = 1
LINKTYPE_SCALEUP = 147


@dataclasses.dataclass(frozen=True)
class Framing:
    """What a header choice fixes for the RTL, the model and the tests.

    ``write_reth``, ``write``, ``ack``: header layouts of the three frame kinds;
    ``outer``: bytes in front of the BTH; ``icrc_masked``: frame bytes the ICRC sees as
    0xFF; ``lead_in``: the ICRC starts with 8 bytes of 0xFF in place of the Ethernet
    header (RoCEv2; :func:`rtl.rdma.icrc_inserter.icrc_lead_in`), else it starts at
    frame byte 0; ``check_min``: frames shorter than this fail the ICRC check;
    ``linktype``: the pcap link type of the frames.
    """
    header: Header
    write_reth: data.StructLayout
    write: data.StructLayout
    ack: data.StructLayout
    outer: int
    icrc_masked: tuple
    lead_in: bool
    check_min: int
    linktype: int

    @property
    def reth_bytes(self):
        """Header bytes of a WRITE FIRST / ONLY frame."""
        return header_bytes(self.write_reth)

    @property
    def plain_bytes(self):
        """Header bytes of a WRITE MIDDLE / LAST frame."""
        return header_bytes(self.write)

    @property
    def ack_bytes(self):
        """Header bytes of an ACKNOWLEDGE frame."""
        return header_bytes(self.ack)

    @property
    def head_bytes(self):
        """Bytes of the first two beats from the payload of a MIDDLE/LAST frame on: the
        bytes the responder's header check hands to its payload writer."""
        return 128 - self.plain_bytes


_FRAMINGS = {
    Header.ROCE: Framing(Header.ROCE, WRITE_RETH_HEADER, WRITE_HEADER, ACK_HEADER, 42,
                         ICRC_MASKED_BYTES, True, 48, LINKTYPE_ETHERNET),
    Header.SCALEUP: Framing(Header.SCALEUP, SU_WRITE_RETH_HEADER, SU_WRITE_HEADER,
                            SU_ACK_HEADER, SCALEUP_BYTES, SCALEUP_ICRC_MASKED_BYTES, False,
                            SCALEUP_CHECK_MIN_BYTES, LINKTYPE_SCALEUP),
}


def check_header(value, owner=None):
    """The :class:`Header` named by ``value`` (a Header or its string); ``ValueError``
    naming ``header`` otherwise."""
    if isinstance(value, Header):
        return value
    if isinstance(value, str) and value in HEADERS:
        return Header(value)
    who = f"{type(owner).__name__}: " if owner is not None else ""
    raise ValueError(f"{who}header must be one of {list(HEADERS)}, not {value!r}")


def framing(value="roce"):
    """The :class:`Framing` of a header choice (checked by :func:`check_header`)."""
    return _FRAMINGS[check_header(value)]
