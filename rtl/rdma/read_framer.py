"""Build RDMA READ RESPONSE frames (Ethernet/IPv4/UDP or scale-up header, BTH[/AETH],
payload) from a descriptor and the payload words."""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.rdma.eth_ip_udp import fill_bth_common, fill_eth_ip_udp, fill_scaleup, framing_param
from spec.formats.packet import packet_signature
from spec.formats.roce import (
    AETH_BYTES,
    BTH_BYTES,
    HOST_WORD_BITS,
    ICRC_BYTES,
    MSN_BITS,
    PSN_BITS,
    QPN_BITS,
    UDP_BYTES,
    OpCode,
    bswap,
)
from spec.formats.scaleup import Header
from spec.rdma import MAX_SEGMENT

__all__ = ["ReadResponseFramer", "response_layout", "has_aeth"]


def response_layout():
    """One READ RESPONSE frame to build: addressing, BTH and AETH fields, payload bytes
    (0..4096)."""
    return data.StructLayout({
        "opcode": OpCode, "dmac": 48, "smac": 48, "sip": 32, "dip": 32,
        "src_qp": QPN_BITS, "dest_qp": QPN_BITS, "psn": PSN_BITS, "syndrome": 8,
        "msn": MSN_BITS, "length": range(MAX_SEGMENT + 1),
    })


def has_aeth(opcode):
    """READ RESPONSE FIRST, LAST and ONLY and ATOMIC ACKNOWLEDGE carry an AETH, READ
    RESPONSE MIDDLE does not (IBTA Vol 1 table 38)."""
    return ((opcode == OpCode.RC_RDMA_READ_RESPONSE_FIRST)
            | (opcode == OpCode.RC_RDMA_READ_RESPONSE_LAST)
            | (opcode == OpCode.RC_RDMA_READ_RESPONSE_ONLY)
            | (opcode == OpCode.RC_ATOMIC_ACKNOWLEDGE))


class ReadResponseFramer(wiring.Component):
    """Turn a response descriptor and its payload words into one frame (no ICRC, no FCS).

    An ATOMIC ACKNOWLEDGE is framed as a READ RESPONSE ONLY of 8 bytes (its AtomicAckETH,
    big endian, in the payload word's first bytes) with opcode 0x12.

    Ports
    -----
    i_seg : In(stream.Signature(response_layout()))
        One descriptor per frame. FIRST/LAST/ONLY frames carry an AETH (58 header bytes
        with RoCEv2 headers, 26 with the scale-up header), MIDDLE frames do not (54, 22).
    i_data : In(stream.Signature(HOST_WORD_BITS))
        The payload as ``ceil(length / 64)`` 64-byte words, byte 0 in the LSBs. Bytes of
        the last word above ``length`` are ignored (sent as the zero pad).
    o : Out(packet_signature(64))
        The frame: headers, payload, zero pad to a multiple of 4 bytes (BTH PadCnt).
    busy : Out(1)
        A frame is in progress (a register: set when a descriptor is taken, cleared after
        the frame's last beat has left).

    Timing
    ------
    A descriptor is taken in a cycle when the framer is not busy or sends the last beat
    of a frame (no gap between frames); the first beat is offered in the next cycle and
    beat ``k`` follows while ``o.ready`` and, for ``k < ceil(length / 64)``, payload
    word ``k`` is valid (beat ``k`` takes word ``k``: every header fits the first beat);
    a final beat made only of carried bytes takes no word. Header fields as
    :class:`~rtl.rdma.write_framer.WriteFramer`'s (AckReq 0).
    """

    def __init__(self, header="roce"):
        self.framing = framing_param(self, header)
        super().__init__({
            "i_seg": In(stream.Signature(response_layout())),
            "i_data": In(stream.Signature(HOST_WORD_BITS)),
            "o": Out(packet_signature(64)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        fr = self.framing
        seg = Signal(response_layout())
        hr, hp = 8 * fr.ack_bytes, 8 * fr.plain_bytes
        aeth, pad, padded = Signal(), Signal(2), Signal(13)
        transport = Signal(16)      # BTH to ICRC
        m.d.comb += [aeth.eq(has_aeth(seg.opcode)), pad.eq(-seg.length),
                     padded.eq(seg.length + pad),
                     transport.eq(BTH_BYTES + ICRC_BYTES + padded
                                  + Mux(aeth, AETH_BYTES, 0))]
        hdr = Signal(fr.ack)
        if fr.header is Header.SCALEUP:
            fill_scaleup(m, hdr.su, sip=seg.sip, dip=seg.dip, src_qp=seg.src_qp,
                         length=transport)
        else:
            fill_eth_ip_udp(m, hdr, dmac=seg.dmac, smac=seg.smac, sip=seg.sip, dip=seg.dip,
                            src_qp=seg.src_qp, udp_len=UDP_BYTES + transport, prefix="rr_")
        fill_bth_common(m, hdr.bth, opcode=seg.opcode, dest_qp=seg.dest_qp, psn=seg.psn,
                        ack_req=0, pad=pad)
        m.d.comb += [hdr.aeth.syndrome.eq(seg.syndrome), hdr.aeth.msn.eq(bswap(seg.msn, 3))]
        flat = hdr.as_value()

        in_aeth, in_pad = Signal(), Signal(2)
        m.d.comb += [in_aeth.eq(has_aeth(self.i_seg.payload.opcode)),
                     in_pad.eq(-self.i_seg.payload.length)]
        carry = Signal(hr)              # bytes carried into the next beat
        rem = Signal(range(hr // 8 + MAX_SEGMENT + 4))     # frame bytes still to send
        payload_left = Signal(range(MAX_SEGMENT + 1))
        first = Signal()
        cur = Signal(hr)
        m.d.comb += cur.eq(Mux(first, flat[:hr], carry))
        take_n = Signal(7)
        m.d.comb += take_n.eq(Mux(payload_left >= 64, 64, payload_left))
        word = Signal(HOST_WORD_BITS)
        ones = Const((1 << HOST_WORD_BITS) - 1, HOST_WORD_BITS)
        m.d.comb += word.eq(self.i_data.payload & (ones >> ((64 - take_n) * 8)[:10]))
        last, sent, done = Signal(), Signal(), Signal()
        m.d.comb += [
            last.eq(rem <= 64),
            self.o.payload.nbytes.eq(Mux(last, rem, 64)),
            self.o.payload.last.eq(last),
            self.o.payload.first.eq(first),
            sent.eq(self.o.valid & self.o.ready),
            done.eq(sent & last),
            self.i_seg.ready.eq(~self.busy | done),
        ]
        with m.If(self.busy):
            with m.If(payload_left != 0):
                m.d.comb += [
                    self.o.valid.eq(self.i_data.valid),
                    self.i_data.ready.eq(self.o.ready),
                    self.o.payload.data.eq(Mux(aeth, Cat(cur[:hr], word[:HOST_WORD_BITS - hr]),
                                               Cat(cur[:hp], word[:HOST_WORD_BITS - hp]))),
                ]
                with m.If(sent):
                    m.d.sync += [payload_left.eq(payload_left - take_n),
                                 carry.eq(Mux(aeth, word[HOST_WORD_BITS - hr:],
                                              word[HOST_WORD_BITS - hp:]))]
            with m.Else():
                m.d.comb += [self.o.valid.eq(1),
                             self.o.payload.data.eq(Mux(aeth, cur[:hr], cur[:hp]))]
        with m.If(sent):
            m.d.sync += [first.eq(0), rem.eq(Mux(last, 0, rem - 64))]
        with m.If(done):
            m.d.sync += self.busy.eq(0)
        with m.If(self.i_seg.valid & self.i_seg.ready):
            m.d.sync += [
                seg.eq(self.i_seg.payload), first.eq(1), self.busy.eq(1),
                rem.eq(Mux(in_aeth, hr // 8, hp // 8) + self.i_seg.payload.length + in_pad),
                payload_left.eq(self.i_seg.payload.length),
            ]
        return m
