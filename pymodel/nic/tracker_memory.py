"""Twin of :class:`rtl.nic.tracker_memory.TrackerMemory`: the sender's outstanding
tracker at many destinations, one entry a destination in a memory (docs/nic.md, "4,096
destinations"), the counterpart of :class:`pymodel.nic.outstanding_tracker.
OutstandingTrackerModel`'s registers."""

from collections import deque

from spec.formats.nic import COMPLETION_COUNT_BITS

__all__ = ["TrackerMemoryModel", "SENT_FIFO_DEPTH", "deadline_bits"]

_MASK = (1 << COMPLETION_COUNT_BITS) - 1

#: Sent events waiting for the read-modify-write port behind a completion: a completion
#: takes the port for one cycle and a sent event comes at most one a frame (2 beats or
#: more: an L2 frame is 64 bytes at least), so one waits at most a cycle; 2 entries.
SENT_FIFO_DEPTH = 2


def deadline_bits(timeout):
    """Bits of an entry's deadline stamp: one more than ``timeout`` needs, so that a
    deadline up to ``2**bits(timeout)`` cycles past is still read as past (the scan
    visits every entry within that)."""
    return timeout.bit_length() + 1


class TrackerMemoryModel:
    """One sender's per-destination counts in a memory of ``destinations`` entries.

    An entry: ``sent``, ``completed``, ``dropped``, ``timeouts`` (16 bits each, modulo
    ``2**16``) and a deadline stamp (:func:`deadline_bits`). One read-modify-write port:
    per cycle a completion (first) or a sent event; a sent event that finds the port
    taken waits in a FIFO of :data:`SENT_FIFO_DEPTH` and goes in order. A completion is
    accepted at entry ``src`` when ``src < destinations``, its L2 source is known, and
    its count advances by 1 .. the entry's outstanding frames; accepting it (or a sent
    event that makes a destination's outstanding count leave 0) sets the deadline to
    ``c + timeout``. A timer scan reads one entry a cycle (a second read port) and
    advances in every cycle the port is free: an entry with outstanding frames whose
    deadline has passed counts a timeout (written through the port, the deadline moved
    ``timeout`` on). So a timeout is seen at the scan's visit, up to about
    ``destinations`` cycles after it is due.

    ``step(c, side)`` as the register tracker's (``side["sent"]``, ``side["cpl"]``);
    returns ``{"ok": bool}`` for a completion, else ``{}``.
    """

    def __init__(self, destinations, timeout):
        for name, v in (("destinations", destinations), ("timeout", timeout)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be a positive integer, not {v!r}")
        self.destinations, self.timeout = destinations, timeout
        self.sbits = deadline_bits(timeout)
        self.smask = (1 << self.sbits) - 1
        self.sent = [0] * destinations
        self.completed = [0] * destinations
        self.dropped = [0] * destinations
        self.timeouts = [0] * destinations
        self.deadline = [0] * destinations
        self.fifo = deque()
        self.scan = 0
        self.timeout_cycles = []
        self.cpl_ok = self.cpl_bad = 0
        self.fifo_peak = 0

    def outstanding(self, d):
        return (self.sent[d] - self.completed[d]) & _MASK

    def _due(self, c, d):
        """Whether entry ``d``'s deadline has passed at ``c`` (wrapping stamps)."""
        return ((c - self.deadline[d]) & self.smask) < 1 << (self.sbits - 1)

    def step(self, c, side):
        out = {}
        busy = False
        cpl = side.get("cpl")
        if cpl is not None:
            busy = True
            src, known, _status, count, dropped = cpl
            ok = (known and src < self.destinations
                  and 0 < (count - self.completed[src]) & _MASK <= self.outstanding(src))
            if ok:
                self.completed[src], self.dropped[src] = count, dropped
                self.deadline[src] = (c + self.timeout) & self.smask
                self.cpl_ok += 1
            else:
                self.cpl_bad += 1
            out["ok"] = ok
        dst = side.get("sent")
        if dst is not None and dst < self.destinations:
            self.fifo.append(dst)
        if not busy and self.fifo:
            busy = True
            d = self.fifo.popleft()
            if self.outstanding(d) == 0:
                self.deadline[d] = (c + self.timeout) & self.smask
            self.sent[d] = (self.sent[d] + 1) & _MASK
        self.fifo_peak = max(self.fifo_peak, len(self.fifo))
        if len(self.fifo) > SENT_FIFO_DEPTH:
            raise RuntimeError(f"cycle {c}: {len(self.fifo)} sent events wait for the "
                               f"port (FIFO of {SENT_FIFO_DEPTH})")
        if not busy:
            d = self.scan
            if self.outstanding(d) and self._due(c, d):
                self.timeouts[d] = (self.timeouts[d] + 1) & _MASK
                self.deadline[d] = (c + self.timeout) & self.smask
                self.timeout_cycles.append((c, d))
            self.scan = (d + 1) % self.destinations
        return out

    def entry(self, d):
        """The poll port: destination ``d``'s values (:data:`spec.nic.CPL_PEER_PORTS`)."""
        return {"outstanding": self.outstanding(d), "completed": self.completed[d],
                "dropped": self.dropped[d], "timeouts": self.timeouts[d]}

    def ports(self):
        """Every entry's poll values, as the register tracker's per-destination lists."""
        return {"outstanding": [self.outstanding(d) for d in range(self.destinations)],
                "completed": list(self.completed), "dropped": list(self.dropped),
                "timeouts": list(self.timeouts)}

    def commit(self):
        pass
