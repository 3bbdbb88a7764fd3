"""Twin of :class:`rtl.nic.nic_tx.NicTx`: segmenter, framer, FCS and the credit gate."""

import functools

from pymodel.nic.store_segmenter import StoreSegmenterModel
from pymodel.nic.tx_framer import TxFramerModel
from spec.formats.nic import PSN_BITS, PSN_BYTES, completion_beats, frame_beats

__all__ = ["NicTxModel"]

# A pure function of the framing and a length, called per frame; each call builds a
# layout, so it is cached.
_frame_beats = functools.cache(frame_beats)

#: Slot kinds that do not wait for a command beat (:data:`pymodel.nic.tx_framer.SLOT_KINDS`).
_UNGATED = frozenset(("tail", "pad", "spill"))


class NicTxModel:
    """One node's transmit side, cycle for cycle.

    Parameters
    ----------
    width, framing, max_payload, credits
        As for :class:`rtl.nic.nic_tx.NicTx`.
    node_id : int
        The ``node_id`` port.
    completion : str
        ``"credit"`` or ``"e2e"``: then ``side["cpl"]`` is the completion frame offered
        in ``c`` whose first beat was not taken yet (its wire beats, from
        :meth:`pymodel.nic.completion_gen.CompletionGenModel.offer`), or None. Between
        store frames it has the link first (the RTL's rule): its first beat leaves with
        ``credits >= completion_beats``, the rest back to back (every beat, the first
        included, only in a cycle with ``link_ready``), and no store frame starts
        meanwhile. The step's result then also has ``"sent"`` (the destination of a store
        frame whose first beat left, or None) and ``"started"`` (the completion's first
        beat left); a completion beat is ``{"o": (None, beat, False, n)}``.
    sender : pymodel.nic.peer_retry.PeerRetrySenderModel, optional
        ``peer_retry`` (with ``e2e``): each store frame carries its destination's next
        PSN (:data:`spec.formats.nic.PSN_BYTES` after the header; the PSNs are given in
        queue order, the order the new frames leave; 0 to an id ``>= peers``). Between
        frames, after a completion and before a new frame, the resend the sender offers
        (:meth:`~pymodel.nic.peer_retry.PeerRetrySenderModel.offer`, the state of the
        start of the cycle) leaves from the replay buffer: the same wire beats again,
        the first with ``credits >= need``, the rest back to back, none waiting for a
        command beat (``{"o": (mid, beat, False, n)}``; the step's ``"resent"`` is True
        at its first beat). A new frame starts only with ``sender.can_send()``. The
        owner steps the sender (``send``: ``"sent"``; ``ready``: ``"resent"``).

    The frames are planned when the stores are queued (:meth:`queue`): the segmenter and
    the framer have fixed timing (zero latency, no bubble), so each frame is a list of
    wire beats with their kinds, and the cycle only decides when each beat leaves.

    ``step(c, side)``: ``side["valid"]`` says whether the command beat at ``cmd`` is
    valid in cycle ``c`` (read only by ``hdr``/``body`` beats), ``side["link_ready"]``
    (default True) is the link's ``ready``, ``side["give"]`` the credits the credit
    return delivers in ``c`` (they count from ``c + 1``). Returns ``{"o": None}`` or
    ``{"o": (mid, beat, took, n)}``: the frame's message id, the flat wire beat sent in
    ``c``, whether it consumed a command beat, and its number on the link. A frame starts
    only with ``credits >= need`` (its wire beats); every beat sent takes one credit.

    Attributes
    ----------
    tx : tuple of lists
        The beats sent and their cycles.
    cr : list
        The cycles credits arrived in.
    credit_error : bool
        The counter went below zero or above ``credits`` (never, while both ends follow
        the protocol).
    """

    def __init__(self, width, framing, max_payload, credits, node_id, completion="credit",
                 id_bits=8, sender=None):
        self.e2e = completion == "e2e"
        self.sender = sender
        self.ext = PSN_BYTES if sender is not None else 0
        self.psn_f, self.psn_q = {}, {}          # dst -> next PSN (frames, queue)
        self.replay, self.rs_rest = {}, []       # (dst, psn) -> plan entry; resend beats
        self.cpl_need = completion_beats(width, framing)
        self.cpl_rest = []
        self.dsts = {}
        self.w, self.framing = width, framing
        self.segmenter = StoreSegmenterModel(width, max_payload)
        self.framer = TxFramerModel(width, framing, id_bits, self.ext)
        self.max_credits = self.credits = credits
        self.node_id = node_id
        self.plan = []                   # (mid, slots, need) per frame, in order
        self.fi = self.si = 0            # frame index, slot index in the frame
        self.sent = 0
        self.tx = ([], [])
        self.cr = []
        self.credit_error = False

    def frames(self, store):
        """The frames of ``store``: ``[(segment, slots, frame bytes)]`` (segmenter, then
        framer)."""
        out = []
        for seg in self.segmenter.step(0, {"i": store})["o"]:
            psn = self.psn_f.get(seg.dst, 0)       # an id >= peers has none: PSN 0
            if self.sender is not None and seg.dst < self.sender.peers:
                self.psn_f[seg.dst] = (psn + 1) & ((1 << PSN_BITS) - 1)
            slots, frame = self.framer.slots(seg, self.node_id, psn)
            out.append((seg, slots, frame))
        return out

    def queue(self, mid, seg, slots):
        """Queue the frame of segment ``seg`` (message ``mid``) behind the others; returns
        its ``need`` (wire beats)."""
        need = _frame_beats(self.w, self.framing, seg.length + self.ext)
        self.plan.append((mid, slots, need))
        if self.sender is not None and seg.dst < self.sender.peers:
            psn = self.psn_q.get(seg.dst, 0)
            self.psn_q[seg.dst] = (psn + 1) & ((1 << PSN_BITS) - 1)
            self.replay[seg.dst, psn] = self.plan[-1]
        self.dsts[mid] = seg.dst
        return need

    def head(self):
        """``(mid, slot index, kind)`` of the beat offered next, or None when all sent."""
        if self.fi >= len(self.plan):
            return None
        mid, slots, _ = self.plan[self.fi]
        return mid, self.si, slots[self.si][0]

    def _send(self, c, beat, mid, body):
        self.tx[0].append(beat)
        self.tx[1].append(c)
        self.sent += 1
        self.credits -= 1
        if self.credits < 0:
            self.credit_error = True
        return (mid, beat, body, self.sent - 1)

    def step(self, c, side):
        out = None
        cpl = side.get("cpl")
        result = {}
        if self.e2e:
            result = {"sent": None, "started": False, "resent": False}
            ready = side.get("link_ready", True)
            if self.cpl_rest or (cpl is not None and self.si == 0 and not self.rs_rest):
                if ready and self.cpl_rest:
                    out = self._send(c, self.cpl_rest.pop(0), None, False)
                elif ready and not self.cpl_rest and self.credits >= self.cpl_need:
                    out = self._send(c, cpl[0], None, False)
                    self.cpl_rest = list(cpl[1:])
                    result["started"] = True
                return self._give(c, side, {"o": out, **result})
            offer = self.sender.offer() if self.sender and self.si == 0 else None
            if self.rs_rest or offer is not None:
                if ready and self.rs_rest:
                    out = self._send(c, self.rs_rest[0][1], self.rs_rest[0][0], False)
                    self.rs_rest.pop(0)
                elif ready and not self.rs_rest:
                    mid, slots, need = self.replay[offer[0], offer[1]]
                    if self.credits >= need:
                        out = self._send(c, slots[0][1], mid, False)
                        self.rs_rest = [(mid, beat) for _, beat in slots[1:]]
                        result["resent"] = True
                return self._give(c, side, {"o": out, **result})
        if self.fi < len(self.plan):
            mid, slots, need = self.plan[self.fi]
            kind, beat = slots[self.si]
            if kind in _UNGATED:
                ok = True
            elif self.si == 0:
                ok = (side["valid"] and self.credits >= need
                      and (self.sender is None or self.sender.can_send()))
            else:
                ok = side["valid"]
            if ok and side.get("link_ready", True):
                if self.e2e and self.si == 0:
                    result["sent"] = self.dsts[mid]
                out = self._send(c, beat, mid, kind == "body")
                self.si += 1
                if self.si == len(slots):
                    self.fi += 1
                    self.si = 0
        return self._give(c, side, {"o": out, **result})

    def _give(self, c, side, result):
        give = side.get("give")
        if give:
            self.cr.append(c)
            self.credits += give
            if self.credits > self.max_credits:
                self.credit_error = True
                self.credits = self.max_credits
        return result

    def commit(self):
        pass
