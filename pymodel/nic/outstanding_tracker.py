"""Twin of :class:`rtl.nic.outstanding_tracker.OutstandingTracker`."""

from spec.formats.nic import COMPLETION_COUNT_BITS

__all__ = ["OutstandingTrackerModel"]

_MASK = (1 << COMPLETION_COUNT_BITS) - 1


class OutstandingTrackerModel:
    """One sender's per-destination counts of frames sent, completed and dropped.

    ``step(c, side)``: ``side["sent"]`` the destination of a store frame whose first beat
    left in ``c`` (or None), ``side["cpl"]`` a completion reaching the tracker in ``c``
    (``(src, known, status, count, dropped)`` or None). The checks use the state of the
    start of the cycle (the RTL's rule, :class:`rtl.nic.outstanding_tracker.
    OutstandingTracker`). Returns ``{"ok": bool}`` for a completion, else ``{}``.

    Attributes
    ----------
    sent, completed, dropped, timeouts : list of int
        Per destination (modulo ``2**16``).
    timeout_cycles : list of (cycle, dst)
        The cycles whose clock edge counted a timeout.
    cpl_ok, cpl_bad : int
    """

    def __init__(self, peers, timeout):
        self.peers, self.timeout = peers, timeout
        self.sent = [0] * peers
        self.completed = [0] * peers
        self.dropped = [0] * peers
        self.timeouts = [0] * peers
        self.timer = [0] * peers
        self.timeout_cycles = []
        self.cpl_ok = self.cpl_bad = 0

    def outstanding(self, d):
        return (self.sent[d] - self.completed[d]) & _MASK

    def step(self, c, side):
        out = {}
        ok_d = None
        cpl = side.get("cpl")
        if cpl is not None:
            src, known, _status, count, dropped = cpl
            if known and src < self.peers:
                delta = (count - self.completed[src]) & _MASK
                if 0 < delta <= self.outstanding(src):
                    ok_d = src
            if ok_d is None:
                self.cpl_bad += 1
            else:
                self.cpl_ok += 1
            out["ok"] = ok_d is not None
        for d in range(self.peers):
            if ok_d == d or self.outstanding(d) == 0:
                self.timer[d] = 0
            elif self.timer[d] == self.timeout - 1:
                self.timer[d] = 0
                self.timeouts[d] = (self.timeouts[d] + 1) & _MASK
                self.timeout_cycles.append((c, d))
            else:
                self.timer[d] += 1
        if ok_d is not None:
            self.completed[ok_d] = cpl[3]
            self.dropped[ok_d] = cpl[4]
        dst = side.get("sent")
        if dst is not None and dst < self.peers:
            self.sent[dst] = (self.sent[dst] + 1) & _MASK
        return out

    def ports(self):
        """The per-destination port values (:data:`spec.nic.CPL_PEER_PORTS`)."""
        return {"outstanding": [self.outstanding(d) for d in range(self.peers)],
                "completed": list(self.completed), "dropped": list(self.dropped),
                "timeouts": list(self.timeouts)}

    def commit(self):
        pass
