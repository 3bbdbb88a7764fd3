"""Twin of :class:`rtl.rdma.req.ack_queue.AckQueue`."""

from collections import deque

from pymodel.cycle import note_activity
from spec.formats.roce import PSN_BITS, Syndrome

__all__ = ["AckQueueModel", "coalesce"]

_PSN_MASK, _HALF = (1 << PSN_BITS) - 1, 1 << (PSN_BITS - 1)
_ACK, _SEQ = Syndrome.ACK.value, Syndrome.NAK_PSN_SEQUENCE.value


def coalesce(p, n):
    """The pending event after event ``n`` arrives for the slot of pending event ``p``
    (the rule of :class:`~rtl.rdma.req.ack_queue.AckQueue`): ``n`` or ``p``."""
    if n["qpn"] != p["qpn"]:
        return n
    p_err = p["syndrome"] not in (_ACK, _SEQ)
    if p_err:
        return p
    if n["syndrome"] not in (_ACK, _SEQ):
        return n
    cov_p = (p["psn"] - (p["syndrome"] == _SEQ)) & _PSN_MASK
    cov_n = (n["psn"] - (n["syndrome"] == _SEQ)) & _PSN_MASK
    d = (cov_n - cov_p) & _PSN_MASK
    if (d != 0 and d < _HALF) or (d == 0 and n["syndrome"] == _SEQ and p["syndrome"] == _ACK):
        return n
    return p


class AckQueueModel:
    """A pending event per window slot and a queue of slots, as the completion unit's
    ``ev`` FIFO (``can_read``, ``head``, ``read``); ``write`` an arrival. ``slot(qpn)``:
    the completion unit's window slot. Changes take effect at :meth:`commit`: the take
    first, then the arrival (merged into its slot's pending event, or a new one)."""

    def __init__(self, slot):
        self.slot = slot
        self.pend = {}                 # slot -> pending event
        self.order = deque()           # slots with a pending event, oldest first
        self._taken = False
        self._arrival = None
        self.coalesced = 0

    def can_read(self):
        return bool(self.order) and not self._taken

    def head(self):
        return self.pend[self.order[0]]

    def read(self):
        if not self.can_read():
            raise AssertionError("ack queue: read from an empty queue")
        self._taken = True
        return self.pend[self.order[0]]

    def can_write(self):
        return True

    def write(self, ev):
        if self._arrival is not None:
            raise AssertionError("ack queue: two arrivals in one cycle")
        self._arrival = ev

    def idle(self):
        return not self.order and self._arrival is None

    def commit(self):
        taken, ev = self._taken, self._arrival
        if not taken and ev is None:
            return
        note_activity()
        self._taken, self._arrival = False, None
        if taken:
            del self.pend[self.order.popleft()]
        if ev is not None:
            s = self.slot(ev["qpn"])
            p = self.pend.get(s)
            if p is None:
                self.pend[s] = ev
                self.order.append(s)
            else:
                self.pend[s] = coalesce(p, ev)
                self.coalesced += 1
