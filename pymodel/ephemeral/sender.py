"""Twin of :class:`rtl.ephemeral.sender.EphemeralSender`: a sender's ephemeral context
pool, its per-context ACK-request count, its spacing and its ACK queue, one cycle at a
time (rules: docs/ephemeral.md; the flow that runs it: :mod:`analysis.ephemeral.flow`)."""

import collections

from pymodel.ephemeral.pool import ContextPoolModel
from spec.ephemeral import Verdict, check_sender

__all__ = ["SenderModel"]


class SenderModel:
    """Twin of :class:`rtl.ephemeral.sender.EphemeralSender`, one :meth:`cycle` per clock.

    Holds the pool twin, each entry's count of messages since its context's last ACK
    request, the spacing count (cycles until the next message may go) and the ACK queue
    (``(due cycle, entry)`` in send order; ``ack_slots`` None: unbounded). ``now``: the
    pool's ``now`` in the first cycle stepped. Every decision of a cycle reads the state
    at its start."""

    def __init__(self, entries, idle, ack_every, ii, completion, ack_slots=None, now=0):
        check_sender(entries, idle, ack_every, ii, completion, ack_slots)
        self.pool = ContextPoolModel(entries, idle, now)
        self.ack_every, self.ii, self.completion = ack_every, ii, completion
        self.ack_slots = ack_slots
        self.unasked = [0] * entries
        self.acks = collections.deque()
        self.gap = 0
        self.t = 0                      # cycles stepped

    def busy(self):
        """ACKs awaited or contexts open: the flow has not ended."""
        return bool(self.acks) or self.pool.used > 0

    def cycle(self, msg=None):
        """One clock cycle with ``msg`` offered: ``(dest, last_for_now)`` or None.
        Returns ``(sent, closed)``: ``(entry, asked, opened)`` when the message was taken
        (sent) in this cycle, else None; the key the pool's scan closed, else None."""
        full = self.ack_slots is not None and len(self.acks) >= self.ack_slots
        done = None
        if self.acks and self.acks[0][0] == self.t:
            done = self.acks.popleft()[1]
        req = ask = run = None
        if msg is not None and self.gap == 0:
            dest, last = msg
            e = self.pool.where.get(dest)
            run = self.unasked[e] if e is not None else 0
            ask = bool(last) or run + 1 >= self.ack_every
            if not (ask and full):     # the queue as at the cycle's start
                req = (dest, 1, int(run == 0))
        verdict, entry, closed = self.pool.cycle(req, done)
        sent = None
        if req is not None and verdict != Verdict.FULL:
            self.unasked[entry] = 0 if ask else run + 1
            if ask:
                self.acks.append((self.t + self.completion, entry))
            self.gap = self.ii - 1
            sent = (entry, ask, verdict == Verdict.OPENED)
        elif self.gap:
            self.gap -= 1
        self.t += 1
        return sent, closed
