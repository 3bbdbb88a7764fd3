"""Twin of :class:`rtl.nic.completion_record.CompletionRecorder` and (``id_bits`` 16) of
:class:`rtl.nic.completion_record.CompletionRecorderQueue`."""

from pymodel.fields import pack
from spec.formats.nic import record_layout

__all__ = ["CompletionRecorderModel"]


class CompletionRecorderModel:
    """The pending destinations and the record counter of one sender.

    ``offer(free, completed, dropped)`` is the record presented in the cycle (a dict with
    ``addr``, ``data``, ``be`` (the whole word), ``last``, ``mark``, ``tag``, or None),
    from the state at the start of the cycle and the tracker's per-destination
    ``completed`` and ``dropped`` of that cycle; ``step(accepted, taken)`` ends the
    cycle: ``accepted`` the source of the completion the tracker accepted in it (or
    None), ``taken`` whether the offered record was taken. ``record`` is the offered
    record's ``(destination, count)``.

    ``id_bits`` 16 (a NIC with many destinations): the record's ``peer`` is 16 bits
    (:data:`spec.formats.nic.wide_record_layout`), the tag the record's ring slot (a
    16-bit id and a 16-bit count do not fit :data:`spec.host.TAG_BITS`), and the
    pending destinations are written in the order their completions were accepted
    (a pending flag each and a FIFO of ids) instead of the lowest first."""

    def __init__(self, peers, width, depth, slots, id_bits=8):
        self.peers, self.width, self.depth, self.slots = peers, width, depth, slots
        self.id_bits, self.layout = id_bits, record_layout(id_bits)
        self.log2 = slots.bit_length() - 1
        self.pending = {}                # insertion-ordered: the FIFO of ids
        self.index = 0
        self._sel = None
        self.record = None

    def offer(self, free, completed, dropped):
        self._sel = None
        if not self.pending or not free:
            return None
        d = self._sel = min(self.pending) if self.id_bits == 8 else next(iter(self.pending))
        owner = 1 ^ ((self.index >> self.log2) & 1)
        word = pack(self.layout, {"peer": d, "count": completed[d], "dropped": dropped[d],
                                  "owner": owner})
        slot = self.index & (self.slots - 1)
        self.record = (d, completed[d])
        return {"addr": self.depth - self.slots + slot,
                "data": word, "be": (1 << self.width) - 1, "last": 1, "mark": 1,
                "tag": d | completed[d] << 8 if self.id_bits == 8 else slot}

    def step(self, accepted, taken):
        if taken:
            self.pending.pop(self._sel, None)
            self.index = (self.index + 1) & ((self.slots << 1) - 1)
        if accepted is not None and accepted < self.peers:
            self.pending.setdefault(accepted)
        self._sel = None

    def busy(self):
        return bool(self.pending)
