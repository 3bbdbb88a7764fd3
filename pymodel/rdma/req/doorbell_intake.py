"""Twin of :class:`rtl.rdma.req.doorbell_intake.DoorbellIntake`."""

from pymodel.fields import unpack
from spec.formats.roce import WQE_LAYOUT
from spec.rdma_engine import BLUEFLAME_OFFSET, DOORBELL_OFFSET, MODIFY_QP_OFFSET

__all__ = ["DoorbellIntakeModel"]


class DoorbellIntakeModel:
    """Doorbells and WQEs by MMIO, from the host interface's ``mmio`` words."""

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

    def step(self, word):
        """``word`` is the MMIO word offered this cycle (a dict) or None; returns
        whether it is taken."""
        if word is None:
            return False
        if word["addr"] == DOORBELL_OFFSET:
            if not self.items.can_write():
                return False
            data = word["data"]
            self.items.write(dict(qpn=data & 0xFFFFFF, sq_tail=(data >> 24) & 0xFFFF, bf=0,
                                  modify=0))
            self.count["doorbells"] += 1
            return True
        if word["addr"] == MODIFY_QP_OFFSET:
            if not self.items.can_write():
                return False
            self.items.write(dict(qpn=word["data"] & 0xFFFFFF, sq_tail=0, bf=0, modify=1))
            self.count["qp_modifies"] += 1
            return True
        if word["addr"] == BLUEFLAME_OFFSET:
            if word["first"]:
                if not (self.items.can_write() and self.bf.can_write()):
                    return False
                wqe = unpack(WQE_LAYOUT, word["data"])
                self.items.write(dict(qpn=wqe["qpn"], sq_tail=(wqe["sq_index"] + 1) & 0xFFFF,
                                      bf=1, modify=0))
                self.count["bf_writes"] += 1
            elif not self.bf.can_write():
                return False
            self.bf.write(word["data"])
            return True
        self.count["mmio_dropped"] += 1
        return True
