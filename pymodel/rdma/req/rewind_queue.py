"""The completion unit's queue of pending rewinds (part of its twin)."""

from collections import deque

from pymodel.cycle import note_activity
from spec.formats.roce import PSN_BITS
from spec.rdma_engine import REWIND_QUEUE
from spec.rdma_responder import SR_WINDOW
from spec.rdma_stages import COUNT_BITS

__all__ = ["RewindQueue", "one_message"]

_COUNT_MASK = (1 << COUNT_BITS) - 1


class RewindQueue:
    """Rewinds decided and not yet walked, as (slot, one, mark), in the order decided:
    :class:`rtl.rdma.req.completion.CompletionUnit`'s ``rwq`` FIFO and the register of
    the rewind decided in the last cycle (:meth:`decide`), which enters the queue in
    this one with the mark ``issued`` (:meth:`enter`). Changes take effect at
    :meth:`commit`; the views read the start of the cycle."""

    def __init__(self):
        self.q = deque()
        self.new = self._new_next = None
        self._pop = False
        self._push = None

    def room(self):
        """A rewind may be decided (the queue and the last cycle's one leave room)."""
        return len(self.q) + (self.new is not None) < REWIND_QUEUE

    def ready(self, appended):
        """The head (slot, one), if every record promised before it is appended."""
        if self.q and (appended - self.q[0][2]) & _COUNT_MASK < 1 << (COUNT_BITS - 1):
            return self.q[0][:2]
        return None

    def busy(self):
        return bool(self.q) or self.new is not None

    def decide(self, slot, one):
        self._new_next = (slot, one)

    def enter(self, issued):
        """Start of a cycle: the last cycle's rewind enters with mark ``issued``."""
        if self.new is not None:
            self._push = (*self.new, issued)

    def pop(self):
        self._pop = True

    def commit(self):
        if not self._pop and self._push is None and self.new is None \
                and self._new_next is None:
            return                  # (nothing staged, nothing decided)
        if self._pop:
            self.q.popleft()
        if self._push is not None:
            self.q.append(self._push)
        if self._pop or self._push is not None or self.new is not None \
                or self._new_next is not None:
            note_activity()
        self._pop, self._push = False, None
        self.new, self._new_next = self._new_next, None


def one_message(selective, last, psn):
    """Selective repeat: does a rewind from ``psn`` of a QP whose last PSN sent is
    ``last`` resend one message? Only if every PSN the QP sent after ``psn`` lies in
    the responder's bitmap (``SR_WINDOW``); beyond it the responder discarded frames:
    go back N. (A NAK of a PSN up to ``SR_WINDOW`` after the message the last rewind
    resent alone goes back N as well: the completion unit checks its ``solo``.)"""
    return bool(selective) and (last - psn) & ((1 << PSN_BITS) - 1) <= SR_WINDOW
