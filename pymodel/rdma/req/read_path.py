"""Twin of :mod:`rtl.rdma.req.read_path`: the requester's issue port into the response
intake, the completion unit's events with READs, and the ACK queue's hold."""

from spec.formats.roce import PSN_BITS, Syndrome

__all__ = ["IssuePort", "ReadEvents", "ack_held"]


def ack_held(acks, intake):
    """Whether the ACK queue's head (``acks``) waits: an ACK reaching the PSN of its QP's
    oldest unanswered READ or atomic (``intake``'s limit, at the start of the cycle), or
    a NAK past it (a NAK acknowledges the PSNs before its own)."""
    if not acks.can_read():
        return False
    h = acks.head()
    lim, lim_psn = intake.limit(h["qpn"])
    d = (h["psn"] - lim_psn) & ((1 << PSN_BITS) - 1)
    reach = d == 0 if h["syndrome"] == Syndrome.ACK.value else False
    return bool(lim and (reach or (d != 0 and not d >> (PSN_BITS - 1))))


class IssuePort:
    """The frame sender's ``issue`` into the response intake (no FIFO): the sender's
    offer of this cycle, taken by the intake's step of the same cycle."""

    def __init__(self):
        self.item = None

    def offer(self, item):
        self.item = item

    def can_read(self):
        return self.item is not None

    def head(self):
        return self.item

    def read(self):
        item, self.item = self.item, None
        return item


class ReadEvents:
    """The completion unit's ``ev`` with READs: the intake's ``done`` (as an ACK of its
    PSN), then its ``rewind`` (as a PSN sequence NAK), then the ACK queue's head unless
    :attr:`held` (set each cycle before the stages step)."""

    def __init__(self, done, rewind, acks):
        self.done, self.rewind, self.acks = done, rewind, acks
        self.held = False

    def _src(self):
        if self.done.can_read():
            return self.done, Syndrome.ACK.value
        if self.rewind.can_read():
            return self.rewind, Syndrome.NAK_PSN_SEQUENCE.value
        if self.acks.can_read() and not self.held:
            return self.acks, None
        return None, None

    def can_read(self):
        return self._src()[0] is not None

    def head(self):
        src, syndrome = self._src()
        if syndrome is None:
            return src.head()
        h = src.head()
        return dict(qpn=h["qpn"], psn=h["psn"], syndrome=syndrome, msn=0)

    def read(self):
        ev = self.head()
        self._src()[0].read()
        return ev
