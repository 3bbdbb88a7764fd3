"""Twin of :class:`rtl.nic.completion_record.CompletionRecorder`."""

from pymodel.fields import pack
from spec.formats.nic import completion_record_layout

__all__ = ["CompletionRecorderModel"]


class CompletionRecorderModel:
    """The pending destinations and the record counter of one sender.

    ``offer(free, completed, dropped)`` is the record presented in the cycle (a dict with
    ``addr``, ``data``, ``be`` (the whole word), ``last``, ``mark``, ``tag``, or None),
    from the state at the start of the cycle and the tracker's per-destination
    ``completed`` and ``dropped`` of that cycle; ``step(accepted, taken)`` ends the
    cycle: ``accepted`` the source of the completion the tracker accepted in it (or
    None), ``taken`` whether the offered record was taken."""

    def __init__(self, peers, width, depth, slots):
        self.peers, self.width, self.depth, self.slots = peers, width, depth, slots
        self.log2 = slots.bit_length() - 1
        self.pending = set()
        self.index = 0
        self._sel = None

    def offer(self, free, completed, dropped):
        self._sel = None
        if not self.pending or not free:
            return None
        d = self._sel = min(self.pending)
        owner = 1 ^ ((self.index >> self.log2) & 1)
        word = pack(completion_record_layout, {"peer": d, "count": completed[d],
                                               "dropped": dropped[d], "owner": owner})
        return {"addr": self.depth - self.slots + (self.index & (self.slots - 1)),
                "data": word, "be": (1 << self.width) - 1, "last": 1, "mark": 1,
                "tag": d | completed[d] << 8}

    def step(self, accepted, taken):
        if taken:
            self.pending.discard(self._sel)
            self.index = (self.index + 1) & ((self.slots << 1) - 1)
        if accepted is not None and accepted < self.peers:
            self.pending.add(accepted)
        self._sel = None

    def busy(self):
        return bool(self.pending)
