"""The sender's completion records: each accepted completion written into host memory."""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from spec.checks import check_int, reject
from spec.formats.nic import (
    COMPLETION_COUNT_BITS,
    DESTINATIONS,
    ID_BITS,
    completion_record_layout,
    wide_record_layout,
)
from spec.host import TAG_BITS

__all__ = ["CompletionRecorder", "CompletionRecorderQueue", "record_write_layout",
           "record_event_layout", "record_event"]

#: What a top with many destinations records of a completion record as it reaches host
#: memory: the tag (the ring slot, :class:`CompletionRecorderQueue`) and the record's
#: destination and count, taken from the word written.
record_event_layout = data.StructLayout({"slot": TAG_BITS, "peer": ID_BITS,
                                         "count": COMPLETION_COUNT_BITS})


def record_event(tag, word):
    """A :data:`record_event_layout` value of a record write's ``tag`` and memory
    ``word`` (:data:`spec.formats.nic.wide_record_layout` in its low bits)."""
    rec = data.View(wide_record_layout, word[:wide_record_layout.size])
    return Cat(tag, rec.peer, rec.count)


def record_write_layout(width, depth):
    """A record write: word ``addr``, ``data`` (a whole word of ``width`` bytes), ``tag``
    (what the host interface reports when the word reaches host memory: the record's
    destination in bits 0..7 and its ``count`` in bits 8..23; with 16-bit ids
    (:class:`CompletionRecorderQueue`) the record's ring slot)."""
    return data.StructLayout({"addr": range(depth), "data": 8 * width, "tag": TAG_BITS})


def _check_slots(block, slots, depth):
    """``slots``, the ring's records: a power of two, 1 to half the memory's ``depth``."""
    check_int(block, "slots", slots, 1, depth // 2)
    if slots & (slots - 1):
        reject(block, f"slots must be a power of two, not {slots!r}")
    return slots


class CompletionRecorder(wiring.Component):
    """Write a completion record (:data:`spec.formats.nic.completion_record_layout`) into
    a ring in host memory for every completion the sender's tracker accepts.

    The end-to-end completion then means what the RDMA engine's does: a record is in the
    host's memory, where the host finds it (a completion at the tracker alone would have
    to be read across the host interface). A destination with a record not yet written
    is pending; a later completion of it before its record goes out is covered by that
    record (it carries the tracker's cumulative ``completed`` and ``dropped`` of the
    cycle it is written), as the engine's unsignalled WQEs are covered by a later CQE.

    Parameters
    ----------
    peers : int
        Destinations of the tracker (1 to 256).
    width : int
        Bytes of a host-memory word (a record is one word).
    depth : int
        Host-memory words; the ring is the top ``slots`` words,
        ``depth - slots .. depth - 1``.
    slots : int
        Ring slots, a power of two of at most ``depth // 2``.

    Ports
    -----
    accepted : In(stream.Signature(StructLayout({"src": 8}), always_ready=True))
        The tracker's accepted completion (:class:`~rtl.nic.outstanding_tracker.
        OutstandingTracker` ``accepted``).
    completed, dropped : In(ArrayLayout(16, peers))
        The tracker's per-destination counts.
    free : In(1)
        The write port may take a record in this cycle (the receiver is not writing
        and is not inside a posted write of several words).
    wr : Out(stream.Signature(record_write_layout(width, depth)))
        The record of the lowest pending destination while ``free``; taken with
        ``ready``.

    Timing: a completion accepted in cycle ``t`` makes its destination pending at the
    end of ``t``; its record is offered from ``t + 1`` on; the record's figures are the
    tracker's of the cycle it is offered. A record taken in the cycle of a new
    acceptance of the same destination leaves it pending. Never stalls the tracker.
    """

    def __init__(self, peers, width, depth, slots):
        self.peers = check_int(self, "peers", peers, 1, 256)
        self.width, self.depth = width, depth
        self.slots = _check_slots(self, slots, depth)
        arr = data.ArrayLayout(COMPLETION_COUNT_BITS, peers)
        super().__init__({
            "accepted": In(stream.Signature(data.StructLayout({"src": 8}),
                                            always_ready=True)),
            "completed": In(arr),
            "dropped": In(arr),
            "free": In(1),
            "wr": Out(stream.Signature(record_write_layout(width, depth))),
        })

    def elaborate(self, platform):
        m = Module()
        n, log2 = self.peers, self.slots.bit_length() - 1
        pending = Signal(n)
        index = Signal(log2 + 1)            # the record counter: slot and owner bit
        sel = Signal(range(max(n, 2)))
        for d in reversed(range(n)):        # the lowest pending destination
            with m.If(pending[d]):
                m.d.comb += sel.eq(d)
        rec = Signal(completion_record_layout)
        count = Signal(COMPLETION_COUNT_BITS)
        m.d.comb += [
            count.eq(self.completed[sel]),
            rec.peer.eq(sel), rec.count.eq(count), rec.dropped.eq(self.dropped[sel]),
            rec.owner.eq(~index[log2]),
            self.wr.valid.eq((pending != 0) & self.free),
            self.wr.payload.addr.eq(self.depth - self.slots + index[:log2]),
            self.wr.payload.data.eq(rec.as_value()),
            self.wr.payload.tag.eq(sel | count << 8),
        ]
        taken = Signal(n)
        got = Signal(n)
        m.d.comb += [
            taken.eq(Mux(self.wr.valid & self.wr.ready, Const(1, n) << sel, 0)),
            got.eq(Mux(self.accepted.valid & (self.accepted.payload.src < n),
                       Const(1, n) << self.accepted.payload.src, 0)),
        ]
        m.d.sync += pending.eq(pending & ~taken | got)
        with m.If(self.wr.valid & self.wr.ready):
            m.d.sync += index.eq(index + 1)
        return m



class CompletionRecorderQueue(wiring.Component):
    """The completion records of a sender with many destinations (docs/nic.md, "4,096
    destinations"): as :class:`CompletionRecorder`, with 16-bit ids
    (:data:`spec.formats.nic.wide_record_layout`), the pending destinations written in
    the order their completions were accepted (a pending flag each and a FIFO of ids,
    where a priority encoder over thousands of flags would not fit a cycle), and the
    record's counts read from the tracker's memory
    (:class:`rtl.nic.tracker_memory.TrackerMemory`'s record port) rather than from
    registers. Twin: :class:`pymodel.nic.completion_record.CompletionRecorderModel`
    with ``id_bits`` 16.

    Parameters
    ----------
    destinations : int
        Destination ids ``0 .. destinations - 1``, a power of two from 2 to
        :data:`spec.formats.nic.DESTINATIONS`.
    width, depth, slots
        As :class:`CompletionRecorder`'s.

    Ports
    -----
    accepted : In(stream.Signature(StructLayout({"src": 16}), always_ready=True))
        The tracker's accepted completion; an id ``>= destinations`` is ignored.
    read_id : Out(16)
        The destination whose record is offered (the FIFO's head): the tracker's record
        port reads its entry.
    completed, dropped : In(16)
        That entry's counts, in the same cycle.
    free : In(1)
        As :class:`CompletionRecorder`'s.
    wr : Out(stream.Signature(record_write_layout(width, depth)))
        The record of the oldest pending destination while ``free``; ``tag`` is the
        record's ring slot (a 16-bit id and a 16-bit count do not fit
        :data:`spec.host.TAG_BITS`: the record's word carries them).

    Timing as :class:`CompletionRecorder`'s. A record taken in the cycle of a new
    acceptance of the same destination leaves it pending, at the FIFO's tail.
    """

    def __init__(self, destinations, width, depth, slots):
        self.destinations = check_int(self, "destinations", destinations, 2, DESTINATIONS)
        if destinations & (destinations - 1):
            reject(self, f"destinations must be a power of two, not {destinations!r}")
        self.width, self.depth = width, depth
        self.slots = _check_slots(self, slots, depth)
        b = COMPLETION_COUNT_BITS
        super().__init__({
            "accepted": In(stream.Signature(data.StructLayout({"src": ID_BITS}),
                                            always_ready=True)),
            "read_id": Out(ID_BITS),
            "completed": In(b),
            "dropped": In(b),
            "free": In(1),
            "wr": Out(stream.Signature(record_write_layout(width, depth))),
        })

    def elaborate(self, platform):
        m = Module()
        n, log2 = self.destinations, self.slots.bit_length() - 1
        ab = (n - 1).bit_length()
        pending = Signal(n)
        index = Signal(log2 + 1)            # the record counter: slot and owner bit
        m.submodules.fifo = fifo = Memory(shape=ab, depth=n, init=[])
        wp, rp = fifo.write_port(), fifo.read_port(domain="comb")
        w_ptr, r_ptr = Signal(ab), Signal(ab)
        level = Signal(range(n + 1))
        head = Signal(ab)
        rec = Signal(wide_record_layout)
        m.d.comb += [
            rp.addr.eq(r_ptr), head.eq(rp.data),
            self.read_id.eq(head),
            rec.peer.eq(head), rec.count.eq(self.completed),
            rec.dropped.eq(self.dropped), rec.owner.eq(~index[log2]),
            self.wr.valid.eq((level != 0) & self.free),
            self.wr.payload.addr.eq(self.depth - self.slots + index[:log2]),
            self.wr.payload.data.eq(rec.as_value()),
            self.wr.payload.tag.eq(index[:log2]),
        ]
        src = self.accepted.payload.src
        take, got, push = Signal(), Signal(), Signal()
        m.d.comb += [
            take.eq(self.wr.valid & self.wr.ready),
            got.eq(self.accepted.valid & (src >> ab == 0)),
            # A new pending id, or one whose record leaves in this cycle: to the tail.
            push.eq(got & (~pending.bit_select(src[:ab], 1)
                           | (take & (head == src[:ab])))),
            wp.addr.eq(w_ptr), wp.data.eq(src[:ab]), wp.en.eq(push),
        ]
        with m.If(take):
            m.d.sync += [pending.bit_select(head, 1).eq(0), r_ptr.eq(r_ptr + 1),
                         index.eq(index + 1)]
        with m.If(push):
            m.d.sync += [pending.bit_select(src[:ab], 1).eq(1), w_ptr.eq(w_ptr + 1)]
        m.d.sync += level.eq(level + push - take)
        return m
