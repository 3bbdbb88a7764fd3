"""Build ACKNOWLEDGE frames (Ethernet/IPv4/UDP or scale-up header, BTH, AETH; no
payload)."""

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.rdma.eth_ip_udp import fill_bth_common, fill_eth_ip_udp, fill_scaleup, framing_param
from spec.formats.packet import packet_signature
from spec.formats.roce import (
    ACK_HEADER,
    AETH_BYTES,
    BTH_BYTES,
    ICRC_BYTES,
    UDP_BYTES,
    OpCode,
    bswap,
)
from spec.formats.scaleup import SU_ACK_HEADER, Header
from spec.rdma_stages import ack_layout

__all__ = ["AckFramer"]


class AckFramer(wiring.Component):
    """Turn an ACK descriptor into a one-beat, 58-byte frame (no ICRC, no FCS).

    Ports
    -----
    i : In(stream.Signature(ack_layout()))
        One descriptor per frame.
    o : Out(packet_signature(64))
        The frame as one beat (``first`` and ``last``, 58 bytes).

    Timing: zero latency, ``o.valid = i.valid``, ``i.ready = o.ready``.

    ``header="scaleup"``: the scale-up header replaces Ethernet/IPv4/UDP; the frame is
    26 bytes (:mod:`spec.formats.scaleup`).
    """

    def __init__(self, header="roce"):
        self.framing = framing_param(self, header)
        super().__init__({"i": In(stream.Signature(ack_layout())),
                          "o": Out(packet_signature(64))})

    def elaborate(self, platform):
        m = Module()
        d = self.i.payload
        transport = BTH_BYTES + AETH_BYTES + ICRC_BYTES
        if self.framing.header is Header.SCALEUP:
            hdr = Signal(SU_ACK_HEADER)
            fill_scaleup(m, hdr.su, sip=d.sip, dip=d.dip, src_qp=d.src_qp, length=transport)
        else:
            hdr = Signal(ACK_HEADER)
            fill_eth_ip_udp(m, hdr, dmac=d.dmac, smac=d.smac, sip=d.sip, dip=d.dip,
                            src_qp=d.src_qp, prefix="ack_", udp_len=UDP_BYTES + transport)
        fill_bth_common(m, hdr.bth, opcode=OpCode.RC_ACKNOWLEDGE, dest_qp=d.dest_qp,
                        psn=d.psn, ack_req=0, pad=0)
        m.d.comb += [
            hdr.aeth.syndrome.eq(d.syndrome),
            hdr.aeth.msn.eq(bswap(d.msn, 3)),
            self.o.valid.eq(self.i.valid),
            self.i.ready.eq(self.o.ready),
            self.o.payload.data.eq(hdr.as_value()),
            self.o.payload.nbytes.eq(self.framing.ack_bytes),
            self.o.payload.first.eq(1),
            self.o.payload.last.eq(1),
        ]
        return m
