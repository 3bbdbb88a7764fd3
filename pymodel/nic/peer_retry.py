"""Per-peer end-to-end retry (``peer_retry``; docs/nic.md, "Per-peer retry"): the
sender's go-back-N replay per destination and the receiver's in-order check per source.

:class:`PeerRetrySenderModel` and :class:`PeerRetryReceiverModel` are the golden-model
twins of the two blocks; :func:`run_peer_retry` plays them on an abstract path (one
frame a sender cycle, a fixed one-way latency, frames chosen by their order at the
switch dropped there) with the receiver's memory, so that a test can compare a run with
drops to the fault-free run. It stands for the NIC's datapath, not its cycles: the
blocks are not in :class:`pymodel.nic.system.NicSystemModel`.

Rules (the design's; docs/nic.md):

* every store frame to destination ``d`` carries the next PSN of ``d``
  (:data:`spec.formats.nic.PSN_BITS`, modulo ``2**16``) and stays in the replay buffer
  (``window`` slots shared by the destinations; no slot free: no new frame) until a
  cumulative ACK covers it;
* the receiver takes a frame whose PSN is the one it expects from its source (written,
  or dropped at the address or window check as without retry; either way the expected
  PSN advances); a **duplicate** (PSN behind the expected one) is not written again and
  asks for a completion at once (re-ACK); a **gap** (PSN ahead) is dropped and counted,
  and the first gap since the last in-order frame asks for a NAK at once (a completion
  with :attr:`spec.formats.nic.CompletionStatus.GAP`), the next ones only count;
* the cumulative ACK is the completion's ``count``: the PSN the receiver expects next;
  an ACK that advances the oldest unacknowledged PSN frees the slots it covers and
  restarts the destination's timer; a NAK also sends the sender back to its ``count``;
* timeout: ``timeout`` cycles with frames to ``d`` unacknowledged and no ACK of ``d``:
  the sender goes back to the oldest unacknowledged PSN of ``d``;
* going back resends the destination's frames from that PSN in PSN order, before any
  new frame, the lowest destination first.
"""

from spec.formats.nic import PSN_BITS, CompletionStatus
from spec.nic import PEER_VERDICTS, check_peer_retry

__all__ = ["PeerRetrySenderModel", "PeerRetryReceiverModel", "run_peer_retry"]

_MASK = (1 << PSN_BITS) - 1
_HALF = 1 << (PSN_BITS - 1)


class PeerRetrySenderModel:
    """One sender's per-destination PSNs and the replay buffer's slots.

    The methods (``send``, ``resend``, ``ack``, ``tick``) are the rules;
    :meth:`step` is the twin of :class:`rtl.nic.peer_retry_sender.PeerRetrySender`,
    cycle by cycle.

    Attributes
    ----------
    next_psn, una : list of int
        Per destination: the PSN of its next new frame, its oldest unacknowledged PSN.
    back : list of int or None
        Per destination: the PSN it is resending from (None: not going back).
    timeouts, resent : list of int
        Per destination: timeouts counted, frames resent (modulo ``2**16``).
    ack_ok, ack_bad, refused : int
        Completions that advanced or sent back a destination, the others; new frames
        offered without a free slot, while going back, or to an id ``>= peers``.
    """

    def __init__(self, peers, window, timeout):
        check_peer_retry(True, "e2e", window)
        if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 2:
            raise ValueError(f"timeout must be an int of at least 2, not {timeout!r}")
        if not isinstance(peers, int) or not 1 <= peers <= 256:
            raise ValueError(f"peers must be an int from 1 to 256, not {peers!r}")
        self.peers, self.window, self.timeout = peers, window, timeout
        self.next_psn = [0] * peers
        self.una = [0] * peers
        self.timer = [0] * peers
        self.back = [None] * peers
        self.timeouts = [0] * peers
        self.resent = [0] * peers
        self.slots = {}                  # (dst, psn) -> frame
        self.index = {}                  # (dst, psn) -> slot number
        self.acked = set()               # destinations acknowledged this cycle
        self.ack_ok = self.ack_bad = self.refused = 0

    def outstanding(self, d):
        return (self.next_psn[d] - self.una[d]) & _MASK

    def free_slot(self):
        """The lowest free slot, or None."""
        used = set(self.index.values())
        return next((k for k in range(self.window) if k not in used), None)

    def can_send(self):
        """A new frame may leave: a slot is free and no destination is going back."""
        return len(self.slots) < self.window and all(b is None for b in self.back)

    def send(self, d, frame, slot=None):
        """A new frame to ``d`` leaves (in ``slot``; None: the lowest free): its PSN."""
        if not self.can_send():
            raise RuntimeError("no new frame may leave: check can_send first")
        return self._place(d, frame, slot)

    def _place(self, d, frame, slot=None):
        psn = self.next_psn[d]
        self.slots[d, psn] = frame
        self.index[d, psn] = self.free_slot() if slot is None else slot
        self.next_psn[d] = (psn + 1) & _MASK
        return psn

    def offer(self):
        """The frame to resend now, ``(d, psn, slot)`` (the lowest destination going
        back, its cursor), or None."""
        for d in range(self.peers):
            if self.back[d] is not None:
                return d, self.back[d], self.index[d, self.back[d]]
        return None

    def resend(self):
        """Take :meth:`offer`'s frame, ``(d, psn, frame)`` or None; moves the cursor."""
        o = self.offer()
        if o is None:
            return None
        d, psn, _ = o
        nxt = (psn + 1) & _MASK
        self.back[d] = None if nxt == self.next_psn[d] else nxt
        self.resent[d] = (self.resent[d] + 1) & _MASK
        return d, psn, self.slots[d, psn]

    def ack(self, src, count, status=0):
        """A completion of ``src``: cumulative ACK to ``count``; with ``GAP`` a NAK.
        Returns whether it was accepted."""
        if not (0 <= src < self.peers):
            self.ack_bad += 1
            return False
        adv = (count - self.una[src]) & _MASK
        if adv > self.outstanding(src):
            self.ack_bad += 1                  # beyond what was sent
            return False
        nak = bool(status & CompletionStatus.GAP) and count != self.next_psn[src]
        if adv == 0 and not nak:
            self.ack_bad += 1                  # neither advances nor sends back
            return False
        for k in range(adv):
            key = src, (self.una[src] + k) & _MASK
            del self.slots[key], self.index[key]
        self.una[src] = count
        if self.back[src] is not None and (self.back[src] - count) & _MASK >= _HALF:
            self.back[src] = count             # the cursor was behind the new ACK
        if self.back[src] is not None and count == self.next_psn[src]:
            self.back[src] = None
        if nak:
            self.back[src] = count
        self.acked.add(src)
        self.ack_ok += 1
        return True

    def tick(self):
        """The timers at the end of a cycle (after its ACKs): a destination with nothing
        outstanding, going back, or acknowledged in the cycle restarts at 0."""
        for d in range(self.peers):
            if self.outstanding(d) == 0 or self.back[d] is not None or d in self.acked:
                self.timer[d] = 0
            elif self.timer[d] == self.timeout - 1:
                self.timer[d] = 0
                self.timeouts[d] = (self.timeouts[d] + 1) & _MASK
                self.back[d] = self.una[d]
            else:
                self.timer[d] += 1
        self.acked = set()

    def step(self, c, side):
        """Cycle ``c``: ``side["send"]`` the destination of a new frame leaving (or
        None), ``side["ack"]`` a completion ``(src, count, gap)`` (or None),
        ``side["ready"]`` whether the framer takes the offered resend. Returns the
        outputs of the start of the cycle: ``can_send``, ``psn`` (``next_psn`` of the
        send's destination), ``slot`` (the lowest free slot), ``resend`` (``(d, psn,
        slot)`` or None). Then, in this order: the resend taken, the ACK (on the state
        of the start of the cycle: a frame sent in the cycle is not covered), the new
        frame (refused, counted, without ``can_send`` or to an id ``>= peers``), the
        timers."""
        dst, ack = side.get("send"), side.get("ack")
        out = {"can_send": self.can_send(), "slot": self.free_slot(),
               "resend": self.offer(),
               "psn": self.next_psn[dst] if dst is not None and dst < self.peers else None}
        if out["resend"] is not None and side.get("ready"):
            self.resend()
        if ack is not None:
            src, count, gap = ack
            self.ack(src, count, int(CompletionStatus.GAP) if gap else 0)
        if dst is not None:
            if out["can_send"] and dst < self.peers:      # decided at the start
                self._place(dst, None, out["slot"])
            else:
                self.refused += 1
        self.tick()
        return out


class PeerRetryReceiverModel:
    """One receiver's expected PSN per source.

    ``check(src, psn)`` returns ``"accept"`` (in order: take it), ``"duplicate"`` (not
    written; re-ACK at once), ``"nak"`` (a gap, the first since the last frame in
    order: dropped, NAK at once) or ``"gap"`` (dropped, counted). A source id ``>=
    peers`` is not tracked (``"accept"``, no state), as the completion generator does
    not track it. Counters wrap modulo ``2**16``.

    Attributes
    ----------
    expected, gaps, duplicates : list of int
        Per source.
    """

    def __init__(self, peers):
        if not isinstance(peers, int) or peers < 1:
            raise ValueError(f"peers must be a positive int, not {peers!r}")
        self.peers = peers
        self.expected = [0] * peers
        self.nak_sent = [False] * peers
        self.gaps = [0] * peers
        self.duplicates = [0] * peers

    def check(self, src, psn):
        if not 0 <= src < self.peers:
            return "accept"                   # an untracked id: no sequence state
        d = (psn - self.expected[src]) & _MASK
        if d == 0:
            self.expected[src] = (psn + 1) & _MASK
            self.nak_sent[src] = False
            return "accept"
        if d >= _HALF:
            self.duplicates[src] = (self.duplicates[src] + 1) & _MASK
            return "duplicate"
        self.gaps[src] = (self.gaps[src] + 1) & _MASK
        if self.nak_sent[src]:
            return "gap"
        self.nak_sent[src] = True
        return "nak"

    def step(self, c, side):
        """Twin of :class:`rtl.nic.peer_retry_check.PeerRetryCheck`: ``side["i"]`` the
        ``(src, psn)`` of a store frame checked in ``c`` (or None); returns
        ``{"verdict": index in spec.nic.PEER_VERDICTS}`` (None without a frame), decided
        on the state of the start of the cycle, which changes at its end."""
        i = side.get("i")
        if i is None:
            return {"verdict": None}
        return {"verdict": PEER_VERDICTS.index(self.check(*i))}

    def commit(self):
        pass


def run_peer_retry(stores, nodes, latency=10, drops=(), window=None, timeout=256,
                   coalesce=16, flush_idle=8, max_cycles=200_000):
    """Play ``stores`` (``[(src, dst, addr, data)]``, in issue order per source) with
    per-peer retry on the abstract path; the frames whose order at the switch is in
    ``drops`` (store frames and completions alike, counted from 0, resends included)
    are dropped there.

    Each sender puts one frame a cycle on its uplink (a resend first, else its next
    store if a slot is free, else a completion its receiver owes: a NAK or re-ACK at
    once, the cumulative ACK after ``coalesce`` frames in order or ``flush_idle``
    cycles without a frame of the source); a frame reaches its destination
    ``latency`` cycles later. Returns ``{"mem", "writes", "cycles", "senders",
    "receivers", "dropped"}``: ``mem[node]`` maps an address to its last data,
    ``writes[(node, addr)]`` counts the writes."""
    _, window = check_peer_retry(True, "e2e", window)
    for name, v in (("latency", latency), ("coalesce", coalesce),
                    ("flush_idle", flush_idle)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, not {v!r}")
    tx = [PeerRetrySenderModel(nodes, window, timeout) for _ in range(nodes)]
    rx = [PeerRetryReceiverModel(nodes) for _ in range(nodes)]
    queue = [[s for s in stores if s[0] == p] for p in range(nodes)]
    mem = [{} for _ in range(nodes)]
    writes = {}
    pending = [[0] * nodes for _ in range(nodes)]     # receiver, source: frames unacked
    age = [[0] * nodes for _ in range(nodes)]
    owe = [set() for _ in range(nodes)]               # (source, status) to send at once
    wire, order, dropped = {}, 0, []
    drops = set(drops)
    c = 0
    while True:
        if c >= max_cycles:
            raise RuntimeError("run_peer_retry did not finish: raise max_cycles")
        for kind, p, body in wire.pop(c, []):
            if kind == "store":
                src, psn, addr, data = body
                verdict = rx[p].check(src, psn)
                if verdict == "accept":
                    mem[p][addr] = data
                    writes[p, addr] = writes.get((p, addr), 0) + 1
                    pending[p][src] += 1
                    age[p][src] = 0
                elif verdict == "duplicate":
                    owe[p].add((src, 0))
                elif verdict == "nak":
                    owe[p].add((src, int(CompletionStatus.GAP)))
            else:
                src, count, status = body
                tx[p].ack(src, count, status)
        for p in range(nodes):
            tx[p].tick()
            for s in range(nodes):
                age[p][s] += 1
                if pending[p][s] >= coalesce or (pending[p][s] and age[p][s] > flush_idle):
                    owe[p].add((s, 0))
            frame = None
            r = tx[p].resend()
            if r is not None:
                d, psn, (addr, data) = r
                frame = ("store", d, (p, psn, addr, data))
            elif queue[p] and tx[p].can_send():
                _, d, addr, data = queue[p].pop(0)
                psn = tx[p].send(d, (addr, data))
                frame = ("store", d, (p, psn, addr, data))
            elif owe[p]:
                s, status = min(owe[p])
                owe[p].discard((s, status))
                pending[p][s] = 0
                frame = ("cpl", s, (p, rx[p].expected[s], status))
            if frame is None:
                continue
            if order in drops:
                dropped.append(frame)
            else:
                wire.setdefault(c + latency, []).append((frame[0], frame[1], frame[2]))
            order += 1
        busy = (wire or any(queue) or any(owe)
                or any(t.outstanding(d) for t in tx for d in range(nodes)))
        if not busy:
            break
        c += 1
    return {"mem": mem, "writes": writes, "cycles": c, "senders": tx, "receivers": rx,
            "dropped": dropped}
