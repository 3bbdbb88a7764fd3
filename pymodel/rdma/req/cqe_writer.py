"""Twin of :class:`rtl.rdma.req.cqe_writer.CqeWriter`."""

from pymodel.fields import pack
from spec.formats.roce import CQE_LAYOUT, WqeOpcode

__all__ = ["CqeWriterModel"]

_RDMA_WRITE = WqeOpcode.RDMA_WRITE.value


class CqeWriterModel:
    """Completions into CQ slots, owner bit flipping at each wrap.

    ``step(c, side)`` (no side inputs: ``cq_base`` and ``cq_log2`` are the run's
    constants, given here) turns the completion at the head of ``cqe`` into a marked
    write of its CQ slot on ``wr`` when ``wr`` has room (the CQE's opcode the
    completion's ``op`` if it has one, as with the RTL's ``reads``, else RDMA_WRITE).
    No side outputs.
    """

    def __init__(self, cqe, wr, cq_base, cq_log2, depth):
        self.cqe, self.wr = cqe, wr
        self.cq_base, self.cq_log2, self.depth = cq_base, cq_log2, depth
        self.index = 0
        self.count = dict(cqe_writes=0)

    def step(self, c, side):
        if not (self.cqe.can_read() and self.wr.can_write()):
            return
        q = self.cqe.read()
        owner = 1 ^ ((self.index >> self.cq_log2) & 1)
        word = pack(CQE_LAYOUT, {"wr_id": q["wr_id"], "status": q["status"],
                                 "opcode": q.get("op", _RDMA_WRITE), "owner": owner,
                                 "qpn": q["qpn"],
                                 "byte_len": q["byte_len"], "sq_index": q["sq_index"]})
        slot = self.index & ((1 << self.cq_log2) - 1)
        self.wr.write(dict(addr=(self.cq_base + slot) % self.depth, data=word, mark=1,
                           tag=q["qpn"]))
        self.index += 1
        self.count["cqe_writes"] += 1

    def commit(self):
        """End of the cycle: nothing staged (the stage has no registers of its own that
        others read)."""
