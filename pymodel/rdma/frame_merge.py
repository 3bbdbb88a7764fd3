"""Twins of :class:`rtl.rdma.frame_merge.FrameMerge` and
:class:`rtl.rdma.frame_demux.FrameDemux` (from their docstrings)."""

from collections import deque

from pymodel.credit_counter import CreditCounterModel
from spec.formats.roce import OpCode
from spec.rdma import MAX_FRAME_BEATS
from spec.rdma_fabric import FRAME_OVERHEAD, IP_LENGTH_BYTE, MERGE_ROOM, OPCODE_BYTE

__all__ = ["FrameMergeModel", "MergeOverflow", "is_ack_frame", "frame_beats_of"]


class MergeOverflow(RuntimeError):
    """A requester beat would find the merge buffer full: the requester did not obey
    ``room`` (outside the contract; never in the fabric, where ``room`` drives its
    ``go``)."""


def frame_beats_of(data):
    """Beats of the frame whose first beat's data (an int, byte 0 in the LSBs) is
    ``data``: from its IPv4 total length."""
    length = int.from_bytes(((data >> (8 * IP_LENGTH_BYTE)) & 0xFFFF).to_bytes(2, "little"),
                            "big")
    return -(-(length + FRAME_OVERHEAD) // 64)


def is_ack_frame(frame, reads=False):
    """The demux's rule: BTH opcode RC ACKNOWLEDGE (frame bytes); with ``reads`` any of
    RC RDMA READ RESPONSE FIRST to ATOMIC ACKNOWLEDGE (0x0D-0x12)."""
    if len(frame) <= OPCODE_BYTE:
        return False
    op = frame[OPCODE_BYTE]
    if reads:
        return (OpCode.RC_RDMA_READ_RESPONSE_FIRST.value <= op
                <= OpCode.RC_ATOMIC_ACKNOWLEDGE.value)
    return op == OpCode.RC_ACKNOWLEDGE.value


class FrameMergeModel:
    """The merge, one cycle at a time. Beats are dicts ``data``, ``nbytes``, ``first``,
    ``last`` (extra keys are carried along).

    Each cycle ``c``: :meth:`room` (the flow control to the requester, from the level at
    the start of the cycle) and :meth:`b_ready` (whether the merge takes the beat ``b``
    offers, from the state at the start of the cycle), then :meth:`step` with the beat arriving
    on ``a`` and the credit returned; it returns the beat on ``o`` (or None).
    """

    def __init__(self, credits, depth, node=0):
        for name, v, lo in (("credits (beats)", credits, MAX_FRAME_BEATS),
                            ("merge buffer depth (beats)", depth, MERGE_ROOM)):
            if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= 65535:
                raise ValueError(f"{name} must be an integer from {lo} to 65535, "
                                 f"not {v!r}")
        self.depth, self.node = depth, node
        self.q = deque()
        self.counter = CreditCounterModel(credits)
        self.busy = self.src_b = self.prio_b = False
        self.credits = credits
        self.level_max = self.credits_max = 0
        self._decided = None

    def _decide(self, b_beat):
        credits = self.counter.credits
        head = self.q[0] if self.q else None
        if self.busy:
            return (False, False, not self.src_b and head is not None,
                    self.src_b and b_beat is not None, self.src_b)
        ok_a = (head is not None and head["first"]
                and credits >= frame_beats_of(head["data"]))
        ok_b = (b_beat is not None and b_beat["first"]
                and credits >= frame_beats_of(b_beat["data"]))
        start_a = ok_a and (not ok_b or not self.prio_b)
        start_b = ok_b and (not ok_a or self.prio_b)
        return start_a, start_b, start_a, start_b, start_b

    def room(self):
        """``room`` in this cycle: the buffer holds at most ``depth - MERGE_ROOM`` beats
        (call before :meth:`step`)."""
        return len(self.q) <= self.depth - MERGE_ROOM

    def b_ready(self, b_beat):
        """``b.ready`` in this cycle, given the beat ``b`` offers (or None)."""
        self._decided = self._decide(b_beat)
        return self._decided[4]

    def step(self, c, a_beat, b_beat, give=0):
        """Cycle ``c``; returns the beat on ``o`` (or None)."""
        start_a, start_b, send_a, send_b, _ = self._decided or self._decide(b_beat)
        self._decided = None
        out = self.q.popleft() if send_a else (b_beat if send_b else None)
        level = len(self.q) + (1 if send_a else 0)          # at the start of the cycle
        self.level_max = max(self.level_max, level)
        self.credits_max = max(self.credits_max, self.credits - self.counter.credits)
        if a_beat is not None:
            if level >= self.depth:
                raise MergeOverflow(f"node {self.node}: cycle {c}: a requester beat finds "
                                    f"the uplink merge's buffer ({self.depth} beats) full")
            self.q.append(a_beat)
        if out is not None:
            self.busy = not out["last"]
            if start_a or start_b:
                self.src_b = start_b
        if start_a:
            self.prio_b = True
        if start_b:
            self.prio_b = False
        self.counter.cycle(take=out is not None, give=give)
        return out

    def idle(self):
        return not self.q and not self.busy
