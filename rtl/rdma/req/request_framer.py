"""Build RDMA READ request and atomic (COMPARE & SWAP, FETCH & ADD) request frames, with
ICRC and FCS, from a descriptor."""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.common.fcs_inserter import FcsInserter
from rtl.rdma.eth_ip_udp import fill_bth_common, fill_eth_ip_udp
from rtl.rdma.icrc_inserter import IcrcInserter
from spec.formats.packet import packet_signature
from spec.formats.roce import (
    ATOMIC_ETH_LAYOUT,
    BTH_BYTES,
    HOST_WORD_BITS,
    ICRC_BYTES,
    PSN_BITS,
    QPN_BITS,
    RETH_BYTES,
    UDP_BYTES,
    WRITE_HEADER,
    WRITE_RETH_HEADER,
    OpCode,
    bswap,
    header_bytes,
)

__all__ = ["RequestFramer", "request_layout"]

_READ_BYTES = header_bytes(WRITE_RETH_HEADER)                         # 70
_ATOMIC_BYTES = header_bytes(WRITE_HEADER) + header_bytes(ATOMIC_ETH_LAYOUT)   # 82


def request_layout():
    """One request to frame: ``opcode`` (RC_RDMA_READ_REQUEST, RC_CMP_SWAP or
    RC_FETCH_ADD), addressing, BTH fields, the remote ``va`` and ``rkey``, a READ's
    ``dma_length``, an atomic's ``swap_add`` and ``compare`` operands."""
    return data.StructLayout({
        "opcode": OpCode, "dmac": 48, "smac": 48, "sip": 32, "dip": 32,
        "src_qp": QPN_BITS, "dest_qp": QPN_BITS, "psn": PSN_BITS, "ack_req": 1,
        "va": 64, "rkey": 32, "dma_length": 32, "swap_add": 64, "compare": 64,
    })


class RequestFramer(wiring.Component):
    """Turn a request descriptor into one frame: a READ request is Ethernet/IPv4/UDP,
    BTH and RETH (70 bytes), an atomic BTH and AtomicETH (82 bytes); the ICRC and the FCS
    follow (an :class:`~rtl.rdma.icrc_inserter.IcrcInserter` and a
    :class:`~rtl.common.fcs_inserter.FcsInserter`, zero latency). No payload, PadCnt 0.

    Ref: IBTA Vol 1 table 38 (opcodes 0x0C, 0x13, 0x14), section 9.3.3 (RETH: VA, R_Key,
    DMA length), 9.3.4 (AtomicETH: VA, R_Key, swap or add data, compare data, all big
    endian); header fields as :class:`~rtl.rdma.write_framer.WriteFramer`'s.

    Ports
    -----
    i : In(stream.Signature(request_layout()))
        One descriptor per frame.
    o : Out(packet_signature(64))
        The frames: 78 bytes (2 beats) for a READ request, 90 bytes (2 beats) for an
        atomic.

    Timing
    ------
    A descriptor is taken in a cycle when the framer is idle or sends the last beat of a
    frame; beat 0 is offered from the next cycle, beat 1 after it is taken (``o.ready``).
    """

    def __init__(self):
        super().__init__({"i": In(stream.Signature(request_layout())),
                          "o": Out(packet_signature(64))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.icrc = icrc = IcrcInserter()
        m.submodules.fcs = fcs = FcsInserter(64)
        wiring.connect(m, icrc.o, fcs.i)
        wiring.connect(m, fcs.o, wiring.flipped(self.o))
        d = Signal(request_layout())
        busy, beat1 = Signal(), Signal()
        read = Signal()
        m.d.comb += read.eq(d.opcode == OpCode.RC_RDMA_READ_REQUEST)
        rh = Signal(WRITE_RETH_HEADER)
        ah = Signal(WRITE_HEADER)
        aeth = Signal(ATOMIC_ETH_LAYOUT)
        addr = dict(dmac=d.dmac, smac=d.smac, sip=d.sip, dip=d.dip, src_qp=d.src_qp)
        fill_eth_ip_udp(m, rh, udp_len=UDP_BYTES + BTH_BYTES + RETH_BYTES + ICRC_BYTES,
                        prefix="rq_", **addr)
        fill_eth_ip_udp(m, ah, udp_len=(UDP_BYTES + BTH_BYTES + ICRC_BYTES
                                        + header_bytes(ATOMIC_ETH_LAYOUT)),
                        prefix="aq_", **addr)
        for hdr in (rh, ah):
            fill_bth_common(m, hdr.bth, opcode=d.opcode, dest_qp=d.dest_qp, psn=d.psn,
                            ack_req=d.ack_req, pad=0)
        m.d.comb += [
            rh.reth.va.eq(bswap(d.va, 8)), rh.reth.rkey.eq(bswap(d.rkey, 4)),
            rh.reth.dma_length.eq(bswap(d.dma_length, 4)),
            aeth.va.eq(bswap(d.va, 8)), aeth.rkey.eq(bswap(d.rkey, 4)),
            aeth.swap_add.eq(bswap(d.swap_add, 8)), aeth.compare.eq(bswap(d.compare, 8)),
        ]
        flat = Signal(2 * HOST_WORD_BITS)
        m.d.comb += flat.eq(Mux(read, rh.as_value(), Cat(ah.as_value(), aeth.as_value())))
        o = icrc.i
        m.d.comb += [
            o.valid.eq(busy),
            o.payload.data.eq(Mux(beat1, flat[HOST_WORD_BITS:], flat[:HOST_WORD_BITS])),
            o.payload.first.eq(~beat1), o.payload.last.eq(beat1),
            o.payload.nbytes.eq(Mux(beat1, Mux(read, _READ_BYTES, _ATOMIC_BYTES) - 64, 64)),
        ]
        sent_last = Signal()
        m.d.comb += [sent_last.eq(busy & beat1 & o.ready),
                     self.i.ready.eq(~busy | sent_last)]
        with m.If(busy & o.ready):
            m.d.sync += beat1.eq(~beat1)
        with m.If(sent_last):
            m.d.sync += busy.eq(0)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [d.eq(self.i.payload), busy.eq(1), beat1.eq(0)]
        return m
