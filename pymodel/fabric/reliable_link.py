"""Twin of :class:`rtl.fabric.reliable_link.ReliableLink`, stepped one cycle at a time.

Written from the contracts of ``ReplayTx``, ``FaultyLink`` and ``ReplayRx`` (their
docstrings and docs/recovery.md): the replay buffer and the delivery buffer are Python
lists and queues, sequence numbers wrap as on the wire, and the wire is the incremental
:class:`pymodel.fabric.faulty_link.FaultyLinkModel`.
"""

from collections import deque

from pymodel.fabric.faulty_link import FaultSettings, FaultyLinkModel
from pymodel.fcs import fcs_ok
from pymodel.packet import unpack_beat
from spec.fabric import RX_COUNTERS, TX_COUNTERS, retry_sizes
from spec.formats.link_retry import SEQ_BITS, TAG_BITS, ack_layout
from spec.formats.packet import packet_layout

__all__ = ["ReliableLinkModel"]

_MASK = (1 << SEQ_BITS) - 1


def _parity(value):
    return bin(value).count("1") & 1


def _tag(seq):
    """The tag of frame ``seq``: the number and, above it, its check bit."""
    return seq | _parity(seq) << SEQ_BITS


def _ack_bits(seq, nak):
    """An ACK/NAK as the sideband carries it (fields of ``ack_layout``, check bit last)."""
    lay = ack_layout
    value = seq << lay["seq"].offset | int(nak) << lay["nak"].offset
    return value | _parity(value) << lay["check"].offset


def _ack_fields(bits):
    """``(seq, nak)`` of a sideband item, or None when its check fails."""
    if _parity(bits):
        return None
    lay = ack_layout
    return (bits >> lay["seq"].offset) & _MASK, bool(bits >> lay["nak"].offset & 1)


class ReliableLinkModel:
    """One direction of a reliable link: call :meth:`ready` then :meth:`cycle` once per
    cycle, in increasing order.

    Parameters are those of the RTL; ``settings`` are the wire's fault settings. Set
    ``trace`` to a list to collect ``(cycle, event, details)`` tuples: ``send`` (a beat
    leaves the replay buffer), ``rewind``, ``timeout``, ``verdict`` (a frame judged at
    its last beat) and ``ack`` (an ACK/NAK reaching the sender), for timing diagrams.
    """

    def __init__(self, width, latency, max_frame_beats, settings=None, tx_depth=None,
                 rx_depth=None, timeout=None):
        self.w, self.lat = width, latency
        tx_d, rx_d, t = retry_sizes(latency, max_frame_beats)
        self.tx_depth, self.rx_depth = tx_depth or tx_d, rx_depth or rx_d
        self.timeout = timeout or t
        self.size = packet_layout(width).size
        self.wire = FaultyLinkModel(width, latency, max_frame_beats,
                                    2 * max_frame_beats + 2, tag_bits=TAG_BITS,
                                    side_bits=ack_layout.size)
        self.wire.start(settings or FaultSettings())
        self.arrivals = {}                 # cycle -> tagged beat from the wire
        self.acks = {}                     # cycle -> sideband item reaching the sender
        self.counters = {f"tx_{n}": 0 for n in TX_COUNTERS}
        self.counters.update({f"rx_{n}": 0 for n in RX_COUNTERS})
        # Sender.
        self.buf, self.ends = {}, {}       # position -> beat: positions low .. wr - 1
        self.wr = self.rd = self.hw = self.ack_ptr = self.low = 0
        self.in_seq = self.tx_seq = self.acked = self.sent = 0
        self.mid = self.pending = self.in_mid = False
        self.max_frame_beats = max_frame_beats
        self.timer = 0
        # Receiver.
        self.delivered, self.frame_beats = deque(), []
        self.expected = 0
        self.nak_sent = self.taking = self.spilled = self.tag_bad = False
        self.frame = bytearray()
        self.trace = None

    def ready(self):
        """``i.ready`` in the coming cycle."""
        need = 1 if self.in_mid else self.max_frame_beats
        return self.wr - min(self.rd, self.ack_ptr) <= self.tx_depth - need

    def busy(self):
        """Anything left in the link (frames unacknowledged, on the wire or to deliver)."""
        return (self.acked != self.in_seq or self.wr != self.rd or bool(self.arrivals)
                or bool(self.acks) or bool(self.delivered) or self.pending)

    def cycle(self, c, beat=None, out_ready=True):
        """Cycle ``c``: ``beat`` (a flat beat, or None) is taken on ``i``; returns the
        beat on ``o`` (None if not valid; it left if ``out_ready``)."""
        self._send(c, beat)
        return self._receive(c, self.arrivals.pop(c, None), out_ready)

    # -- ReplayTx ---------------------------------------------------------------------
    def _send(self, c, beat):
        cnt = self.counters
        cnt["tx_replay_cycles"] += self.pending or self.rd != self.hw
        release = nak = False
        new_ptr, new_acked = self.ack_ptr, self.acked
        bits = self.acks.pop(c, None)
        ev = None if bits is None else _ack_fields(bits)
        if bits is not None and ev is None:
            cnt["tx_acks_bad"] += 1
            self._log(c, "ack_bad", {"bits": bits})
        if ev is not None:
            seq, is_nak = ev
            self._log(c, "ack", {"seq": seq, "nak": is_nak})
            ahead, span = (seq - self.acked) & _MASK, (self.sent - self.acked) & _MASK
            release = ahead != 0 and ahead <= span
            nak = is_nak and ahead < span
            if release:
                new_ptr, new_acked = self.ends[(seq - 1) & _MASK], seq
            cnt["tx_naks"] += nak
        sent_before = self.sent
        rewind = (self.pending or self.rd < self.ack_ptr) and not self.mid
        if rewind:
            self.rd, self.tx_seq = new_ptr, new_acked
            self._log(c, "rewind", {"to": new_acked})
        elif self.rd != self.wr:
            flat = self.buf[self.rd]
            _, _, first, last = unpack_beat(self.w, flat)
            again = self.rd != self.hw
            self._log(c, "send", {"seq": self.tx_seq, "first": first, "last": last,
                                  "again": again})
            for out_cycle, out in self.wire.push(c, flat | _tag(self.tx_seq) << self.size):
                self.arrivals[out_cycle] = out
            self.rd += 1
            self.mid = not last
            if not again:
                self.hw = self.rd
            if last:
                self.tx_seq = (self.tx_seq + 1) & _MASK
                if not again:
                    self.sent = (self.sent + 1) & _MASK
            if again:
                cnt["tx_resent_beats"] += 1
                cnt["tx_resent_frames"] += first
        waiting = new_acked != sent_before and not self.pending
        expire = waiting and self.timer == self.timeout - 1
        if rewind or release or not waiting or expire:
            self.timer = 0
        else:
            self.timer += 1
        cnt["tx_timeouts"] += expire
        if expire:
            self._log(c, "timeout", {"oldest": new_acked})
        self.pending = False if rewind else (self.pending or nak or expire)
        if beat is not None:
            self.buf[self.wr] = beat
            self.wr += 1
            self.in_mid = not unpack_beat(self.w, beat)[3]
            if not self.in_mid:
                self.ends[self.in_seq] = self.wr
                self.in_seq = (self.in_seq + 1) & _MASK
                cnt["tx_frames"] += 1
        self.ack_ptr, self.acked = new_ptr, new_acked
        free = min(self.ack_ptr, self.rd)   # beats below both are acknowledged and sent
        while self.low < free:
            del self.buf[self.low]
            self.low += 1

    # -- ReplayRx ---------------------------------------------------------------------
    def _receive(self, c, tagged, out_ready):
        cnt = self.counters
        level = len(self.delivered)
        out = self.delivered[0] if self.delivered else None
        if out is not None and out_ready:
            self.delivered.popleft()
        if tagged is None:
            return out
        tag_bits = tagged >> self.size
        tag_ok = not _parity(tag_bits)
        tag = tag_bits & _MASK
        flat = tagged & ((1 << self.size) - 1)
        data, nbytes, first, last = unpack_beat(self.w, flat)
        room = level + (0 if first else len(self.frame_beats)) < self.rx_depth
        if first:
            self.tag_bad = not tag_ok
        take = (tag_ok and tag == self.expected) if first else self.taking
        spill = (take and not room) or (not first and self.spilled)
        self.taking, self.spilled = take, spill
        if first:
            self.frame = bytearray()
            self.frame_beats = []
        self.frame += data.to_bytes(self.w, "little")[:nbytes]
        if take and room:
            self.frame_beats.append(flat)
        if not last:
            return out
        ack = None
        if take and not spill and fcs_ok(bytes(self.frame)):
            self.delivered.extend(self.frame_beats)
            self.expected = (self.expected + 1) & _MASK
            self.nak_sent = False
            ack = (self.expected, False)
            cnt["rx_frames_ok"] += 1
            cnt["rx_acks"] += 1
        elif (not take and tag_ok and not self.tag_bad
              and (self.expected - tag) & _MASK < 1 << (SEQ_BITS - 1)):
            ack = (self.expected, False)
            cnt["rx_duplicates"] += 1
            cnt["rx_acks"] += 1
        else:
            if not self.nak_sent:
                ack = (self.expected, True)
                self.nak_sent = True
                cnt["rx_naks"] += 1
            key = ("rx_tag_bad" if self.tag_bad else "rx_out_of_order" if not take
                   else "rx_no_room" if spill else "rx_fcs_bad")
            cnt[key] += 1
        self._log(c, "verdict", {"seq": tag, "ack": ack})
        self.frame_beats = []
        if ack is not None:
            bits = self.wire.side(_ack_bits(*ack))       # the sideband's faults
            if bits is not None:
                self.acks[c + 1 + self.lat] = bits
        return out

    def _log(self, c, event, details):
        if self.trace is not None:
            self.trace.append((c, event, details))

    def all_counters(self):
        """The counter ports of the RTL (``tx_*``, ``rx_*``, ``link_*``)."""
        out = dict(self.counters)
        out.update({f"link_{k}": v for k, v in self.wire.counters.items()})
        return out
