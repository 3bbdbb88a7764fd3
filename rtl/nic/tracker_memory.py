"""The sender's outstanding tracker at many destinations: one memory entry a destination
(docs/nic.md, "4,096 destinations"). Twin: :class:`pymodel.nic.tracker_memory.
TrackerMemoryModel`."""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from spec.checks import check_int
from spec.formats.nic import COMPLETION_COUNT_BITS, DESTINATIONS, ID_BITS

__all__ = ["TrackerMemory", "wide_sent_layout", "wide_cpl_layout", "entry_layout"]

#: A store frame leaving the sender for destination id ``dst`` (16-bit ids).
wide_sent_layout = data.StructLayout({"dst": ID_BITS})
#: A completion that passed the receiver's checks, as :data:`rtl.nic.
#: outstanding_tracker.cpl_event_layout` with a 16-bit source id.
wide_cpl_layout = data.StructLayout({
    "src": ID_BITS, "known": 1, "status": 5,
    "count": COMPLETION_COUNT_BITS, "dropped": COMPLETION_COUNT_BITS})


def entry_layout(timeout):
    """One destination's entry: the four counts and the deadline stamp
    (:func:`pymodel.nic.tracker_memory.deadline_bits`: ``bits(timeout) + 1``)."""
    b = COMPLETION_COUNT_BITS
    return data.StructLayout({"sent": b, "completed": b, "dropped": b, "timeouts": b,
                              "deadline": timeout.bit_length() + 1})


class TrackerMemory(wiring.Component):
    """Per destination id ``0 .. destinations - 1``: frames sent, completed, dropped,
    timeouts, in a memory (the rules: :class:`pymodel.nic.tracker_memory.
    TrackerMemoryModel`).

    Parameters
    ----------
    destinations : int
        Entries, a power of two from 2 to :data:`spec.formats.nic.DESTINATIONS`.
    timeout : int
        Cycles from a destination's last progress to its timeout (2 to 2**16).
    record_port : bool
        A fourth read port for the completion records
        (:class:`rtl.nic.completion_record.CompletionRecorderQueue`): ``rec_id``
        (In(16)) in, ``rec_completed`` and ``rec_dropped`` (Out(16)) its entry's counts
        in the same cycle.

    Ports
    -----
    sent, cpl : In(stream, always ready)
        As :class:`rtl.nic.outstanding_tracker.OutstandingTracker`'s, 16-bit ids.
    poll : In(ID_BITS)
        A destination id; ``outstanding``, ``completed``, ``dropped``, ``timeouts``
        (Out(16) each) are its entry in the same cycle.
    accepted : Out(stream, always valid when a completion is accepted)
        Its source, as the register tracker's.
    timed_out : Out(stream)
        A timeout counted in this cycle, and its destination.
    cpl_ok, cpl_bad : Out(32)

    One read-modify-write: three asynchronous read ports (the event's entry, the
    scan's, the poll's) and one write port. A completion takes the write port first, a
    sent event next (a 2-entry FIFO holds the ones that wait), the timer scan in the
    cycles left.
    """

    def __init__(self, destinations, timeout, record_port=False):
        self.destinations = check_int(self, "destinations", destinations, 2, DESTINATIONS)
        if destinations & (destinations - 1):
            raise ValueError(f"TrackerMemory: destinations must be a power of two, not "
                             f"{destinations!r}")
        self.timeout = check_int(self, "timeout", timeout, 2, 1 << 16)
        self.record_port = bool(record_port)
        b = COMPLETION_COUNT_BITS
        rec = ({"rec_id": In(ID_BITS), "rec_completed": Out(b), "rec_dropped": Out(b)}
               if self.record_port else {})
        super().__init__({
            **rec,
            "sent": In(stream.Signature(wide_sent_layout, always_ready=True)),
            "cpl": In(stream.Signature(wide_cpl_layout, always_ready=True)),
            "poll": In(ID_BITS),
            "outstanding": Out(b), "completed": Out(b), "dropped": Out(b),
            "timeouts": Out(b),
            "accepted": Out(stream.Signature(data.StructLayout({"src": ID_BITS}),
                                             always_ready=True)),
            "timed_out": Out(stream.Signature(data.StructLayout({"dst": ID_BITS}),
                                              always_ready=True)),
            "cpl_ok": Out(32),
            "cpl_bad": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.destinations
        ab = (n - 1).bit_length()
        layout = entry_layout(self.timeout)
        sb = layout["deadline"].width
        m.submodules.mem = mem = Memory(shape=layout, depth=n, init=[])
        ev, scan_rd, poll_rd = (mem.read_port(domain="comb") for _ in range(3))
        wr = mem.write_port()
        now = Signal(sb)
        m.d.sync += now.eq(now + 1)
        later = Signal(sb)
        m.d.comb += later.eq(now + self.timeout)

        # The sent FIFO (2 entries) with a bypass: the head is the oldest waiting event,
        # else this cycle's.
        q = [Signal(ab, name=f"q{k}") for k in range(2)]
        level = Signal(range(3))
        s_in = Signal()
        m.d.comb += s_in.eq(self.sent.valid & (self.sent.payload.dst >> ab == 0))
        head = Signal(ab)
        has = Signal()
        m.d.comb += [head.eq(Mux(level != 0, q[0], self.sent.payload.dst[:ab])),
                     has.eq((level != 0) | s_in)]
        c = self.cpl.payload
        take = Signal()
        m.d.comb += take.eq(~self.cpl.valid & has)
        popped = Signal()                      # a waiting event left the FIFO
        m.d.comb += popped.eq(take & (level != 0))
        keep = Signal(range(3))                # waiting after the pop, before the push
        m.d.comb += keep.eq(level - popped)
        push = Signal()
        m.d.comb += push.eq(s_in & ~(take & (level == 0)))
        with m.If(popped):
            m.d.sync += q[0].eq(q[1])
        with m.If(push):
            with m.If(keep == 0):
                m.d.sync += q[0].eq(self.sent.payload.dst[:ab])
            with m.Else():
                m.d.sync += q[1].eq(self.sent.payload.dst[:ab])
        m.d.sync += level.eq(keep + push)

        # The event's read-modify-write.
        e = ev.data
        b = COMPLETION_COUNT_BITS
        out, delta, ok = Signal(b), Signal(b), Signal()
        m.d.comb += [
            ev.addr.eq(Mux(self.cpl.valid, c.src[:ab], head)),
            out.eq(e.sent - e.completed),
            delta.eq(c.count - e.completed),
            ok.eq(self.cpl.valid & c.known & (c.src >> ab == 0) & (delta != 0)
                  & (delta <= out)),
            self.accepted.valid.eq(ok),
            self.accepted.payload.src.eq(c.src),
        ]
        # The scan, in the cycles the port is free.
        ptr = Signal(ab)
        sc = scan_rd.data
        due = Signal()
        busy = Signal()
        past = Signal(sb)                      # now - deadline, wrapping
        m.d.comb += [
            busy.eq(self.cpl.valid | take),
            scan_rd.addr.eq(ptr),
            past.eq(now - sc.deadline),
            due.eq(~busy & (sc.sent != sc.completed) & ~past[sb - 1]),
            self.timed_out.valid.eq(due),
            self.timed_out.payload.dst.eq(ptr),
        ]
        with m.If(~busy):
            m.d.sync += ptr.eq(ptr + 1)
        # The entry written: the event's or the scan's, changed by the one that holds
        # the port (plain expressions: docs/nic.md, "A simulator note (Icarus)").
        new, base = Signal(layout), Signal(layout)
        m.d.comb += [
            base.eq(Mux(busy, e, sc)),
            new.sent.eq(Mux(take, e.sent + 1, base.sent)),
            new.completed.eq(Mux(ok, c.count, base.completed)),
            new.dropped.eq(Mux(ok, c.dropped, base.dropped)),
            new.timeouts.eq(Mux(due, sc.timeouts + 1, base.timeouts)),
            new.deadline.eq(Mux(ok | due | (take & (out == 0)), later, base.deadline)),
            wr.en.eq(ok | take | due),
            wr.addr.eq(Mux(busy, ev.addr, ptr)),
            wr.data.eq(new),
        ]
        with m.If(ok):
            m.d.sync += self.cpl_ok.eq(self.cpl_ok + 1)
        with m.Elif(self.cpl.valid):
            m.d.sync += self.cpl_bad.eq(self.cpl_bad + 1)

        p = poll_rd.data
        m.d.comb += [poll_rd.addr.eq(self.poll[:ab]),
                     self.outstanding.eq(p.sent - p.completed),
                     self.completed.eq(p.completed), self.dropped.eq(p.dropped),
                     self.timeouts.eq(p.timeouts)]
        if self.record_port:
            rec_rd = mem.read_port(domain="comb")
            m.d.comb += [rec_rd.addr.eq(self.rec_id[:ab]),
                         self.rec_completed.eq(rec_rd.data.completed),
                         self.rec_dropped.eq(rec_rd.data.dropped)]
        return m
