"""Build RDMA WRITE frames (Ethernet/IPv4/UDP or scale-up header, BTH[/RETH], payload)
from a descriptor."""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.rdma.eth_ip_udp import fill_bth_common, fill_eth_ip_udp, fill_scaleup, framing_param
from spec.checks import reject
from spec.formats.packet import check_width, packet_signature
from spec.formats.roce import (
    BTH_BYTES,
    HOST_WORD_BITS,
    ICRC_BYTES,
    IPV4_BYTES,
    PSN_BITS,
    QPN_BITS,
    RETH_BYTES,
    UDP_BYTES,
    WRITE_RETH_HEADER,
    OpCode,
    bswap,
)
from spec.formats.scaleup import SU_WRITE_RETH_HEADER, Header
from spec.rdma import MAX_SEGMENT

__all__ = ["WriteFramer", "segment_layout"]


class _Phase(enum.Enum, shape=2):
    """Where the framer is in a frame: no frame (``IDLE``), the first beat of a RETH
    frame, made of headers only (``HEAD``), the beats that carry payload (``BODY``)."""
    IDLE = 0
    HEAD = 1
    BODY = 2


def segment_layout():
    """One frame to build: addressing, BTH/RETH fields, payload length (1..4096)."""
    return data.StructLayout({
        "opcode": OpCode, "ack_req": 1, "dmac": 48, "smac": 48, "sip": 32, "dip": 32,
        "src_qp": QPN_BITS, "dest_qp": QPN_BITS, "psn": PSN_BITS, "va": 64, "rkey": 32,
        "dma_length": 32,
        "length": range(MAX_SEGMENT + 1),
    })


class WriteFramer(wiring.Component):
    """Turn a segment descriptor and its payload words into one frame (no ICRC, no FCS).

    Ports
    -----
    i_seg : In(stream.Signature(segment_layout()))
        One descriptor per frame. ``opcode`` FIRST/ONLY frames carry a RETH (70 header
        bytes), MIDDLE/LAST frames do not (54). Taken only while no frame is in progress.
    i_data : In(stream.Signature(HOST_WORD_BITS))
        The payload as ``ceil(length / 64)`` 64-byte words, byte 0 in the LSBs. Bytes of
        the last word above ``length`` are ignored (sent as the zero pad).
    o : Out(packet_signature(64))
        The frame: headers, payload, zero pad to a multiple of 4 bytes (BTH PadCnt).

    Timing
    ------
    A descriptor is taken in a cycle when the framer is idle or sends the last beat of a
    frame (so frames can follow each other without a gap); the first beat is offered in
    the next cycle and one beat follows per cycle while ``o.ready`` and (for beats that
    need a payload word) ``i_data.valid`` are high. A RETH frame's first beat needs no
    payload word; beat ``k >= 1`` takes word ``k - 1``. A frame without RETH takes word
    ``k`` in beat ``k``; a final beat made only of carried bytes takes no word.

    UDP checksum 0, IPv4 identification 0, DF set, TTL 64, TOS 0, P_Key 0xFFFF, UDP
    source port ``0xC000 | src_qp[13:0]``. Only the 64-byte datapath is supported.

    ``header="scaleup"``: the 10-byte scale-up header replaces Ethernet/IPv4/UDP
    (:mod:`spec.formats.scaleup`; FIRST/ONLY headers 38 bytes, MIDDLE/LAST 22). Every
    header then fits the first beat: there is no headers-only beat, and beat ``k`` takes
    payload word ``k`` for every opcode.
    """

    def __init__(self, width=64, header="roce"):
        self.framing = framing_param(self, header)
        self.width = check_width(width, self)
        if width != 64:
            reject(self, f"WriteFramer datapath width must be 64 bytes, not {width!r}")
        super().__init__({
            "i_seg": In(stream.Signature(segment_layout())),
            "i_data": In(stream.Signature(HOST_WORD_BITS)),
            "o": Out(packet_signature(64)),
        })

    def elaborate(self, platform):
        if self.framing.header is Header.SCALEUP:
            return self._elaborate_scaleup()
        m = Module()
        seg = Signal(segment_layout())
        reth, pad, padded, udp_len, ip_len = _lengths(m, seg, "")
        in_reth, _, in_padded, _, _ = _lengths(m, self.i_seg.payload, "in_")

        hdr = Signal(WRITE_RETH_HEADER)
        fill_eth_ip_udp(m, hdr, dmac=seg.dmac, smac=seg.smac, sip=seg.sip, dip=seg.dip,
                        src_qp=seg.src_qp, udp_len=udp_len, prefix="")
        fill_bth_common(m, hdr.bth, opcode=seg.opcode, dest_qp=seg.dest_qp, psn=seg.psn,
                        ack_req=seg.ack_req, pad=pad)
        m.d.comb += [
            hdr.reth.va.eq(bswap(seg.va, 8)),
            hdr.reth.rkey.eq(bswap(seg.rkey, 4)),
            hdr.reth.dma_length.eq(bswap(seg.dma_length, 4)),
        ]
        flat = hdr.as_value()

        carry = Signal(54 * 8)          # bytes carried into the next beat (6 or 54 used)
        rem = Signal(range(70 + MAX_SEGMENT + 4))    # frame bytes still to send
        payload_left = Signal(range(MAX_SEGMENT + 1))
        first = Signal()
        cur = Signal(54 * 8)
        m.d.comb += cur.eq(Mux(first, flat[:432], carry))

        # The current payload word with the bytes beyond the payload cleared.
        take_n = Signal(7)
        m.d.comb += take_n.eq(Mux(payload_left >= 64, 64, payload_left))
        word = Signal(HOST_WORD_BITS)
        ones = Const((1 << HOST_WORD_BITS) - 1, HOST_WORD_BITS)
        m.d.comb += word.eq(self.i_data.payload & (ones >> ((64 - take_n) * 8)[:10]))
        last = Signal()
        m.d.comb += [
            last.eq(rem <= 64),
            self.o.payload.nbytes.eq(Mux(last, rem, 64)),
            self.o.payload.last.eq(last),
            self.o.payload.first.eq(first),
        ]
        sent = Signal()
        m.d.comb += sent.eq(self.o.valid & self.o.ready)
        with m.If(sent):
            m.d.sync += [first.eq(0), rem.eq(Mux(last, 0, rem - 64))]

        # A descriptor is taken while idle, or in the cycle the last beat leaves (no
        # bubble between frames); loading it overrides the end-of-frame updates above.
        phase = Signal(_Phase)
        done = Signal()
        m.d.comb += done.eq(sent & last)
        m.d.comb += self.i_seg.ready.eq((phase == _Phase.IDLE) | done)
        with m.Switch(phase):
            with m.Case(_Phase.HEAD):
                m.d.comb += [self.o.valid.eq(1), self.o.payload.data.eq(flat[:HOST_WORD_BITS])]
                with m.If(self.o.ready):
                    m.d.sync += [carry[:48].eq(flat[HOST_WORD_BITS:HOST_WORD_BITS + 48]),
                                 phase.eq(_Phase.BODY)]
            with m.Case(_Phase.BODY):
                with m.If(payload_left != 0):
                    m.d.comb += [
                        self.o.valid.eq(self.i_data.valid),
                        self.i_data.ready.eq(self.o.ready),
                        self.o.payload.data.eq(Mux(reth, Cat(cur[:48], word[:464]),
                                                   Cat(cur, word[:80]))),
                    ]
                    with m.If(sent):
                        m.d.sync += payload_left.eq(payload_left - take_n)
                        with m.If(reth):
                            m.d.sync += carry[:48].eq(word[464:])
                        with m.Else():
                            m.d.sync += carry.eq(word[80:])
                with m.Else():
                    m.d.comb += [
                        self.o.valid.eq(1),
                        self.o.payload.data.eq(Mux(reth, cur[:48], cur)),
                    ]
                with m.If(done):
                    m.d.sync += phase.eq(_Phase.IDLE)
        with m.If(self.i_seg.valid & self.i_seg.ready):
            m.d.sync += [
                seg.eq(self.i_seg.payload), first.eq(1),
                rem.eq(Mux(in_reth, 70, 54) + in_padded),
                payload_left.eq(self.i_seg.payload.length),
                phase.eq(Mux(in_reth, _Phase.HEAD, _Phase.BODY)),
            ]
        return m


    def _elaborate_scaleup(self):
        """The scale-up framing: ``h`` header bytes (38 or 22) then the payload, so beat
        ``k`` is ``h`` carried bytes (the headers in beat 0) and ``64 - h`` bytes of
        payload word ``k``; a final beat of carried bytes only takes no word."""
        m = Module()
        seg = Signal(segment_layout())
        reth, pad, padded, udp_len, _ = _lengths(m, seg, "")
        in_reth, _, in_padded, _, _ = _lengths(m, self.i_seg.payload, "in_")
        hr, hp = 8 * self.framing.reth_bytes, 8 * self.framing.plain_bytes

        hdr = Signal(SU_WRITE_RETH_HEADER)
        fill_scaleup(m, hdr.su, sip=seg.sip, dip=seg.dip, src_qp=seg.src_qp,
                     length=(udp_len - UDP_BYTES)[:16])
        fill_bth_common(m, hdr.bth, opcode=seg.opcode, dest_qp=seg.dest_qp, psn=seg.psn,
                        ack_req=seg.ack_req, pad=pad)
        m.d.comb += [
            hdr.reth.va.eq(bswap(seg.va, 8)),
            hdr.reth.rkey.eq(bswap(seg.rkey, 4)),
            hdr.reth.dma_length.eq(bswap(seg.dma_length, 4)),
        ]
        flat = hdr.as_value()
        carry = Signal(hr)              # bytes carried into the next beat (38 or 22 used)
        rem = Signal(range(hr // 8 + MAX_SEGMENT + 4))     # frame bytes still to send
        payload_left = Signal(range(MAX_SEGMENT + 1))
        first = Signal()
        busy = Signal()
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
            self.i_seg.ready.eq(~busy | done),
        ]
        with m.If(busy):
            with m.If(payload_left != 0):
                m.d.comb += [
                    self.o.valid.eq(self.i_data.valid),
                    self.i_data.ready.eq(self.o.ready),
                    self.o.payload.data.eq(Mux(reth, Cat(cur[:hr], word[:HOST_WORD_BITS - hr]),
                                               Cat(cur[:hp], word[:HOST_WORD_BITS - hp]))),
                ]
                with m.If(sent):
                    m.d.sync += [payload_left.eq(payload_left - take_n),
                                 carry.eq(Mux(reth, word[HOST_WORD_BITS - hr:],
                                              word[HOST_WORD_BITS - hp:]))]
            with m.Else():
                m.d.comb += [self.o.valid.eq(1),
                             self.o.payload.data.eq(Mux(reth, cur[:hr], cur[:hp]))]
        with m.If(sent):
            m.d.sync += [first.eq(0), rem.eq(Mux(last, 0, rem - 64))]
        with m.If(done):
            m.d.sync += busy.eq(0)
        with m.If(self.i_seg.valid & self.i_seg.ready):
            m.d.sync += [
                seg.eq(self.i_seg.payload), first.eq(1), busy.eq(1),
                rem.eq(Mux(in_reth, hr // 8, hp // 8) + in_padded),
                payload_left.eq(self.i_seg.payload.length),
            ]
        return m


def _lengths(m, seg, prefix):
    """RETH flag, pad count, padded payload, UDP and IP lengths of a descriptor."""
    reth, pad, padded = Signal(name=f"{prefix}reth"), Signal(2, name=f"{prefix}pad"), \
        Signal(13, name=f"{prefix}padded")
    udp_len, ip_len = Signal(16, name=f"{prefix}udp_len"), Signal(16, name=f"{prefix}ip_len")
    m.d.comb += [
        reth.eq((seg.opcode == OpCode.RC_RDMA_WRITE_FIRST)
                | (seg.opcode == OpCode.RC_RDMA_WRITE_ONLY)),
        pad.eq(-seg.length),
        padded.eq(seg.length + pad),
        udp_len.eq(UDP_BYTES + BTH_BYTES + ICRC_BYTES + padded + Mux(reth, RETH_BYTES, 0)),
        ip_len.eq(IPV4_BYTES + udp_len),
    ]
    return reth, pad, padded, udp_len, ip_len
