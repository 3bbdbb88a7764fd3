"""The sender's completion records: each accepted completion written into host memory."""

from amaranth import Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from spec.checks import check_int, reject
from spec.formats.nic import COMPLETION_COUNT_BITS, completion_record_layout
from spec.host import TAG_BITS

__all__ = ["CompletionRecorder", "record_write_layout"]


def record_write_layout(width, depth):
    """A record write: word ``addr``, ``data`` (a whole word of ``width`` bytes), ``tag``
    (the record's destination in bits 0..7 and its ``count`` in bits 8..23: what the
    host interface reports when the word reaches host memory)."""
    return data.StructLayout({"addr": range(depth), "data": 8 * width, "tag": TAG_BITS})


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
        self.slots = check_int(self, "slots", slots, 1, depth // 2)
        if slots & (slots - 1):
            reject(self, f"slots must be a power of two, not {slots!r}")
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

