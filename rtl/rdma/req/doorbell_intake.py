"""Doorbell intake: the host's MMIO writes into the requester, as work items."""

from amaranth import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from spec.formats.roce import HOST_WORD_BITS, WQE_LAYOUT
from spec.host import mmio_layout
from spec.rdma_engine import BLUEFLAME_OFFSET, DOORBELL_OFFSET, MODIFY_QP_OFFSET
from spec.rdma_stages import DOORBELL_LAYOUT, item_layout

__all__ = ["DoorbellIntake"]



class DoorbellIntake(wiring.Component):
    """Turn MMIO writes into work items; pass WQEs written by MMIO on.

    Ports
    -----
    mmio : In(stream.Signature(mmio_layout()))
        The host's writes, one word per transfer.
    item : Out(stream.Signature(item_layout()))
        A doorbell ``{qpn, sq_tail, bf=0}``, or for a WQE by MMIO ``{wqe.qpn,
        wqe.sq_index + 1, bf=1}``, or for a modify command (offset
        :data:`~spec.rdma_engine.MODIFY_QP_OFFSET`) ``{qpn, modify=1}``; to a FIFO.
    bf : Out(stream.Signature(HOST_WORD_BITS))
        The words of WQEs written by MMIO, in order; to a FIFO.
    doorbells, bf_writes, mmio_dropped, qp_modifies : Out(32)
        Doorbell writes taken, WQEs written by MMIO, words written to any other
        offset (dropped), modify commands taken.

    Timing
    ------
    Combinational: a word is taken in the cycle it is offered if the FIFOs it goes to
    have room (a doorbell or a WQE's first word needs ``item`` and, for a WQE, ``bf``;
    a WQE's later words need ``bf``; a modify command needs ``item``); words to other
    offsets are taken and dropped.
    """

    mmio: In(stream.Signature(mmio_layout()))
    item: Out(stream.Signature(item_layout()))
    bf: Out(stream.Signature(HOST_WORD_BITS))
    doorbells: Out(32)
    bf_writes: Out(32)
    mmio_dropped: Out(32)
    qp_modifies: Out(32)

    def elaborate(self, platform):
        m = Module()
        w = self.mmio.payload
        wqe = data.View(WQE_LAYOUT, w.data)
        doorbell = data.View(DOORBELL_LAYOUT, w.data[:DOORBELL_LAYOUT.size])
        is_db = w.addr == DOORBELL_OFFSET
        is_bf = w.addr == BLUEFLAME_OFFSET
        is_mod = w.addr == MODIFY_QP_OFFSET
        m.d.comb += self.bf.payload.eq(w.data)
        with m.If(self.mmio.valid):
            with m.If(is_db):
                m.d.comb += [
                    self.item.payload.qpn.eq(doorbell.qpn),
                    self.item.payload.sq_tail.eq(doorbell.sq_tail),
                    self.item.valid.eq(1),
                    self.mmio.ready.eq(self.item.ready),
                ]
                with m.If(self.item.ready):
                    m.d.sync += self.doorbells.eq(self.doorbells + 1)
            with m.Elif(is_mod):
                m.d.comb += [
                    self.item.payload.qpn.eq(doorbell.qpn),
                    self.item.payload.modify.eq(1),
                    self.item.valid.eq(1),
                    self.mmio.ready.eq(self.item.ready),
                ]
                with m.If(self.item.ready):
                    m.d.sync += self.qp_modifies.eq(self.qp_modifies + 1)
            with m.Elif(is_bf & w.first):
                go = self.item.ready & self.bf.ready
                m.d.comb += [
                    self.item.payload.qpn.eq(wqe.qpn),
                    self.item.payload.sq_tail.eq(wqe.sq_index + 1),
                    self.item.payload.bf.eq(1),
                    self.item.valid.eq(go), self.bf.valid.eq(go), self.mmio.ready.eq(go),
                ]
                with m.If(go):
                    m.d.sync += self.bf_writes.eq(self.bf_writes + 1)
            with m.Elif(is_bf):
                m.d.comb += [self.bf.valid.eq(self.bf.ready), self.mmio.ready.eq(self.bf.ready)]
            with m.Else():
                m.d.comb += self.mmio.ready.eq(1)
                m.d.sync += self.mmio_dropped.eq(self.mmio_dropped + 1)
        return m
