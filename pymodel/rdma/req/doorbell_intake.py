"""Twin of :class:`rtl.rdma.req.doorbell_intake.DoorbellIntake`."""

from pymodel.fields import field_slot, unpack
from spec.formats.roce import WQE_LAYOUT
from spec.rdma_engine import BLUEFLAME_OFFSET, DOORBELL_OFFSET, MODIFY_QP_OFFSET
from spec.rdma_stages import DOORBELL_LAYOUT, SQ_INDEX_BITS

_SQ_MASK = (1 << SQ_INDEX_BITS) - 1

__all__ = ["DoorbellIntakeModel"]

#: ``(offset, mask)`` of the doorbell's fields in the MMIO word.
_QPN, _SQ_TAIL = field_slot(DOORBELL_LAYOUT, "qpn"), field_slot(DOORBELL_LAYOUT, "sq_tail")


class DoorbellIntakeModel:
    """Doorbells and WQEs by MMIO, from the host interface's ``mmio`` words.

    ``step(c, side)``: ``side["mmio"]`` is the word the host interface offers in cycle
    ``c`` (a dict of ``mmio_layout``'s fields) or None; returns ``{"mmio.ready": 1}``
    when it is taken, ``{"mmio.ready": 0}`` when not, ``{}`` without a word. A doorbell
    or QP modify writes a work item into ``items``; a WQE by MMIO writes its words into
    ``bf`` (and an item with its first word); a word at any other offset is dropped
    (taken and counted).
    """

    def __init__(self, items, bf):
        self.items, self.bf = items, bf
        self.count = dict(doorbells=0, bf_writes=0, mmio_dropped=0, qp_modifies=0)

    def would_take(self, word):
        """Whether ``word`` (offered this cycle) is taken: ``mmio.ready``."""
        if word is None:
            return False
        if word["addr"] in (DOORBELL_OFFSET, MODIFY_QP_OFFSET):
            return self.items.can_write()
        if word["addr"] == BLUEFLAME_OFFSET:
            return self.bf.can_write() and (not word["first"] or self.items.can_write())
        return True

    def step(self, c, side):
        word = side.get("mmio")
        if word is None:
            return {}
        return {"mmio.ready": int(self._take(word))}

    def _take(self, word):
        if word["addr"] == DOORBELL_OFFSET:
            if not self.items.can_write():
                return False
            data = word["data"]
            self.items.write(dict(qpn=data >> _QPN[0] & _QPN[1],
                                  sq_tail=data >> _SQ_TAIL[0] & _SQ_TAIL[1], bf=0, modify=0))
            self.count["doorbells"] += 1
            return True
        if word["addr"] == MODIFY_QP_OFFSET:
            if not self.items.can_write():
                return False
            self.items.write(dict(qpn=word["data"] >> _QPN[0] & _QPN[1], sq_tail=0, bf=0,
                                  modify=1))
            self.count["qp_modifies"] += 1
            return True
        if word["addr"] == BLUEFLAME_OFFSET:
            if word["first"]:
                if not (self.items.can_write() and self.bf.can_write()):
                    return False
                wqe = unpack(WQE_LAYOUT, word["data"])
                self.items.write(dict(qpn=wqe["qpn"], sq_tail=(wqe["sq_index"] + 1) & _SQ_MASK,
                                      bf=1, modify=0))
                self.count["bf_writes"] += 1
            elif not self.bf.can_write():
                return False
            self.bf.write(word["data"])
            return True
        self.count["mmio_dropped"] += 1
        return True

    def commit(self):
        """End of the cycle: nothing staged (the stage has no registers of its own that
        others read)."""
