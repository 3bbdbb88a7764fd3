"""CQE writer: completions into the host's completion queue, with the owner bit."""

from amaranth import Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from spec.formats.roce import CQE_LAYOUT, WqeOpcode
from spec.rdma_stages import cqe_req_layout, write_layout_req

__all__ = ["CqeWriter"]


class CqeWriter(wiring.Component):
    """Write each completion as one CQE word at the CQ's next slot.

    Parameters
    ----------
    depth : int
        Host-memory words.
    reads : int
        1: the CQE's opcode is the completion's ``op`` (the WQE's opcode, rdma-core's
        ``ibv_wr_opcode`` numbering as :data:`~spec.formats.roce.CQE_LAYOUT` declares);
        0 (default): RDMA_WRITE.

    Ports
    -----
    cqe : In(stream.Signature(cqe_req_layout()))
        Completions, from a FIFO.
    wr : Out(stream.Signature(write_layout_req(depth)))
        The CQE writes (``mark`` set, ``tag`` the QPN: the host interface reports when
        the CQE reaches host memory), to the CQE write client's FIFO.
    cq_base : In(range(depth)), cq_log2 : In(5)
        The CQ: ``2**cq_log2`` CQEs from word ``cq_base``; CQE ``k`` goes to slot
        ``k % 2**cq_log2`` with owner bit ``1 ^ (k >> cq_log2) & 1`` (the host polls it).
    cqe_writes : Out(32)
        CQEs written.

    Timing: combinational, one CQE per cycle while ``wr`` has room.
    """

    def __init__(self, depth, reads=0):
        self.depth, self.reads = depth, reads
        super().__init__({
            "cqe": In(stream.Signature(cqe_req_layout(bool(reads)))),
            "wr": Out(stream.Signature(write_layout_req(depth))),
            "cq_base": In(range(depth)), "cq_log2": In(5),
            "cqe_writes": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        index = Signal(32)
        q = self.cqe.payload
        word = Signal(CQE_LAYOUT)
        mask = Signal(32)
        m.d.comb += [
            mask.eq((Const(1, 33) << self.cq_log2) - 1),
            word.wr_id.eq(q.wr_id), word.status.eq(q.status),
            word.opcode.eq(q.op if self.reads else WqeOpcode.RDMA_WRITE),
            word.owner.eq(~(index >> self.cq_log2)[0]),
            word.qpn.eq(q.qpn), word.byte_len.eq(q.byte_len), word.sq_index.eq(q.sq_index),
            self.wr.payload.addr.eq(self.cq_base + (index & mask)),
            self.wr.payload.data.eq(word.as_value()),
            self.wr.payload.mark.eq(1), self.wr.payload.tag.eq(q.qpn),
            self.wr.valid.eq(self.cqe.valid), self.cqe.ready.eq(self.wr.ready),
        ]
        with m.If(self.cqe.valid & self.wr.ready):
            m.d.sync += [index.eq(index + 1), self.cqe_writes.eq(self.cqe_writes + 1)]
        return m
