"""Twin of :class:`rtl.nic.completion_gen.CompletionGen`: coalesced completions per source."""

from pymodel.nic.frames import build_completion
from pymodel.packet import pack_beat
from spec.formats.nic import COMPLETION_COUNT_BITS, CompletionStatus, completion_bytes

__all__ = ["CompletionGenModel"]

_MASK = (1 << COMPLETION_COUNT_BITS) - 1


class CompletionGenModel:
    """One receiver's completion generator.

    Parameters
    ----------
    width, framing, peers, coalesce, flush_idle
        As for the RTL.
    node_id : int
        The ``node_id`` port.

    :meth:`offer` is the completion frame offered in cycle ``c`` whose first beat has not
    been taken: its wire beats (FCS included: NicTx's inserter of completions is part of
    the frame here) or None; it depends only on the state at the start of the cycle.
    ``step(c, side)``: ``side["ev"]`` is NicRx's ``ack`` in ``c`` (``(src, dropped)``
    or ``(src, dropped, ack_req)``, or None), ``side["started"]`` whether NicTx took the
    offered frame's first beat in ``c`` (its beats before the FCS then leave in
    ``c .. c + n - 1``, ``n`` the generator's own beats). Follows the RTL's rule: the
    lowest source with ``pending >= coalesce`` (or ``pending > 0`` and ``asked`` or
    ``age >= flush_idle``; ``asked``: an event since its last completion had
    ``ack_req``) is chosen in a cycle where no frame is held, with the counts of the
    start of the cycle. Returns ``{}``.

    ``peer_retry`` (docs/nic.md, "Per-peer retry"): an event has a fourth item, the
    receiver's verdict (index in :data:`spec.nic.PEER_VERDICTS`: 0 accept, as above; 1
    duplicate, 2 nak). A duplicate or a NAK does not count; it makes its source owe a
    completion at once (chosen like ``asked``, even with nothing pending), a NAK with
    the status flag :attr:`~spec.formats.nic.CompletionStatus.GAP`; ``count`` is then
    the PSN the receiver expects next (the cumulative ACK).

    Attributes
    ----------
    count, dropped : list of int
        Per source, modulo ``2**16``.
    cpl_sent : int
    ack_req_seen : int
        Events of tracked sources with ``ack_req`` (the RTL's counter).
    sent : list
        ``(cycle chosen, dst, status, count, dropped)`` of each completion.
    """

    def __init__(self, width, framing, peers, coalesce, flush_idle, node_id,
                 peer_retry=False):
        self.peer_retry = peer_retry
        self.owe = [False] * peers       # peer_retry: a re-ACK or NAK due at once
        self.gflag = [False] * peers     # peer_retry: the completion owed is a NAK
        self.w, self.framing, self.peers = width, framing, peers
        self.coalesce, self.flush_idle, self.node_id = coalesce, flush_idle, node_id
        self.nbeats = -(-completion_bytes(framing) // width)
        self.count = [0] * peers
        self.dropped = [0] * peers
        self.pending = [0] * peers
        self.age = [0] * peers
        self.dflag = [False] * peers
        self.asked = [False] * peers
        self.ack_req_seen = 0
        self.frame = None                # wire beats of the frame held
        self.started = False
        self.busy_until = None
        self.cpl_sent = 0
        self.sent = []

    def offer(self, c):
        return self.frame if self.frame is not None and not self.started else None

    def busy(self):
        """A frame is held, or a source has frames not yet completed."""
        return self.frame is not None or any(self.pending) or any(self.owe)

    def _wire(self, dst, status, count, dropped):
        raw = build_completion(self.framing, self.node_id, dst, status, count, dropped)
        w = self.w
        n = -(-len(raw) // w)
        return [pack_beat(w, int.from_bytes(raw[k * w:(k + 1) * w], "little"),
                          min(w, len(raw) - k * w), int(k == 0), int(k == n - 1))
                for k in range(n)]

    def step(self, c, side):
        if side.get("started"):
            self.started = True
            self.busy_until = c + self.nbeats - 1
            self.cpl_sent += 1
        chosen = None
        if self.frame is None:
            for s in range(self.peers):
                p = self.pending[s]
                if p >= self.coalesce or self.owe[s] or (p and (
                        self.asked[s] or self.age[s] >= self.flush_idle)):
                    chosen = s
                    break
        ev = side.get("ev")
        hit, drop, req = ((ev[0], bool(ev[1]), len(ev) > 2 and bool(ev[2]))
                          if ev is not None and ev[0] < self.peers else (None, False, False))
        self.ack_req_seen += req
        verdict = ev[3] if self.peer_retry and hit is not None else 0
        if verdict:                      # a duplicate or a NAK: owed at once, not counted
            owe_s, hit, drop, req = hit, None, False, False
        if chosen is not None:
            s = chosen
            status = int(CompletionStatus.DROPPED) if self.dflag[s] else 0
            status |= int(CompletionStatus.GAP) if self.gflag[s] else 0
            self.owe[s] = self.gflag[s] = False
            self.frame = self._wire(s, status, self.count[s], self.dropped[s])
            self.sent.append((c, s, status, self.count[s], self.dropped[s]))
            self.started = False
            self.pending[s] = int(hit == s)
            self.dflag[s] = hit == s and drop
            self.asked[s] = hit == s and req
        if hit is not None:
            self.count[hit] = (self.count[hit] + 1) & _MASK
            self.dropped[hit] = (self.dropped[hit] + drop) & _MASK
            if hit != chosen:
                self.pending[hit] = min(self.pending[hit] + 1, self.coalesce)
                self.dflag[hit] = self.dflag[hit] or drop
                self.asked[hit] = self.asked[hit] or req
        if verdict:
            self.owe[owe_s] = True
            self.gflag[owe_s] = self.gflag[owe_s] or verdict == 2
        for s in range(self.peers):
            if s == hit:
                self.age[s] = 0
            elif self.age[s] != self.flush_idle:
                self.age[s] += 1
        if self.started and c == self.busy_until:
            self.frame = None
            self.started = False
        return {}

    def commit(self):
        pass
