"""The requester's clients of the host interface: one read port, one write port."""

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from spec.host import rd_req_layout, wr_layout
from spec.rdma_engine import QPC_LOG2_BITS, RD_FILL, RD_PAYLOAD, RD_WQE
from spec.rdma_stages import read_layout, write_layout_req, writeback_layout

__all__ = ["ReadArbiter", "RequesterWriteArbiter"]


class ReadArbiter(wiring.Component):
    """Merge the requester's reads into the host interface's read port.

    Ports
    -----
    fill : In(stream.Signature(range(depth)))
        Context fills (a whole context each: ``2**qpc_log2`` words), from the cache's
        FIFO; ``id`` ``RD_FILL``.
    qpc_log2 : In(QPC_LOG2_BITS)
        A context is ``2**qpc_log2`` host words (held from reset).
    wqe, pay : In(stream.Signature(read_layout(depth)))
        WQE reads (``RD_WQE``) and payload reads (``RD_PAYLOAD``), from FIFOs.
    o : Out(stream.Signature(rd_req_layout(depth)))
        To the host interface.

    Timing: combinational; fixed priority fill, then WQE, then payload (a fill holds
    up a lookup at the head of the pipeline, a WQE read holds up all the messages it
    carries, a payload read one message).
    """

    def __init__(self, depth):
        self.depth = depth
        super().__init__({
            "fill": In(stream.Signature(range(depth))),
            "qpc_log2": In(QPC_LOG2_BITS),
            "wqe": In(stream.Signature(read_layout(depth))),
            "pay": In(stream.Signature(read_layout(depth))),
            "o": Out(stream.Signature(rd_req_layout(depth))),
        })

    def elaborate(self, platform):
        m = Module()
        o = self.o.payload
        with m.If(self.fill.valid):
            m.d.comb += [o.addr.eq(self.fill.payload), o.words.eq(1 << self.qpc_log2),
                         o.id.eq(RD_FILL),
                         self.o.valid.eq(1), self.fill.ready.eq(self.o.ready)]
        with m.Elif(self.wqe.valid):
            m.d.comb += [o.addr.eq(self.wqe.payload.addr), o.words.eq(self.wqe.payload.words),
                         o.id.eq(RD_WQE), self.o.valid.eq(1), self.wqe.ready.eq(self.o.ready)]
        with m.Elif(self.pay.valid):
            m.d.comb += [o.addr.eq(self.pay.payload.addr), o.words.eq(self.pay.payload.words),
                         o.id.eq(RD_PAYLOAD), self.o.valid.eq(1),
                         self.pay.ready.eq(self.o.ready)]
        return m


class RequesterWriteArbiter(wiring.Component):
    """Merge the requester's writes (context write-backs, CQEs) into the host
    interface's write port, one word per transfer and per TLP.

    Ports
    -----
    wb : In(stream.Signature(writeback_layout(depth)))
        Context write-backs, from the cache's FIFO.
    cqe : In(stream.Signature(write_layout_req(depth)))
        CQE writes, from the CQE writer's FIFO.
    data : In(stream.Signature(wr_layout(depth)))
        With ``reads``: READ response data and atomics' original values, from the
        response intake's FIFO (a TLP of several words, ``last`` on its last).
    o : Out(stream.Signature(wr_layout(depth)))
        To the host interface (whole words, ``last`` on each; ``data``'s words as given
        but unmarked: the host interface's marked writes of the requester are its CQEs).

    Timing: combinational; fixed priority write-backs, then ``data``, then CQEs (a CQE
    never passes the data of its READ or atomic, handed over before it); once a
    ``data`` word without ``last`` is taken, only ``data`` is served until its TLP's
    ``last`` word (a register).
    """

    def __init__(self, depth, reads=0):
        self.depth, self.reads = depth, reads
        ports = {
            "wb": In(stream.Signature(writeback_layout(depth))),
            "cqe": In(stream.Signature(write_layout_req(depth))),
            "o": Out(stream.Signature(wr_layout(depth))),
        }
        if reads:
            ports["data"] = In(stream.Signature(wr_layout(depth)))
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        o = self.o.payload
        # Whole-word TLPs; ``be`` and ``last`` are set in the branches rather than as
        # constants: Verilog simulators may never evaluate a block without inputs.
        wb = [o.addr.eq(self.wb.payload.addr), o.data.eq(self.wb.payload.data),
              o.be.eq((1 << 64) - 1), o.last.eq(1),
              self.o.valid.eq(1), self.wb.ready.eq(self.o.ready)]
        c = self.cqe.payload
        cqe = [o.addr.eq(c.addr), o.data.eq(c.data), o.mark.eq(c.mark),
               o.tag.eq(c.tag), o.be.eq((1 << 64) - 1), o.last.eq(1),
               self.o.valid.eq(1), self.cqe.ready.eq(self.o.ready)]
        if self.reads:
            locked = Signal()           # inside a data TLP
            dt = self.data
            with m.If(dt.valid & dt.ready):
                m.d.sync += locked.eq(~dt.payload.last)
            with m.If(locked):
                m.d.comb += [o.eq(dt.payload), o.mark.eq(0), o.tag.eq(0),
                             self.o.valid.eq(dt.valid), dt.ready.eq(self.o.ready)]
            with m.Elif(self.wb.valid):
                m.d.comb += wb
            with m.Elif(dt.valid):
                m.d.comb += [o.eq(dt.payload), o.mark.eq(0), o.tag.eq(0), self.o.valid.eq(1),
                             dt.ready.eq(self.o.ready)]
            with m.Elif(self.cqe.valid):
                m.d.comb += cqe
            return m
        with m.If(self.wb.valid):
            m.d.comb += wb
        with m.Elif(self.cqe.valid):
            m.d.comb += cqe
        return m
