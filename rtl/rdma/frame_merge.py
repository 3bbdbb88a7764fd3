"""Uplink merge of a node of the RDMA fabric: the requester's WRITE frames and the
responder's ACK/NAK frames onto one credited link, whole frames, round robin."""

from amaranth import Cat, Module, Mux, ResetSignal, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from rtl.common.credit_counter import CreditCounter
from spec.checks import check_int
from spec.formats.packet import packet_layout, packet_signature
from spec.rdma import MAX_FRAME_BEATS
from spec.rdma_fabric import FRAME_OVERHEAD, IP_LENGTH_BYTE, MERGE_ROOM

__all__ = ["FrameMerge"]


class FrameMerge(wiring.Component):
    """Merge two RoCEv2 frame streams onto one uplink without ever splitting a frame, and
    never send more beats than the far end's buffer has room for (credits).

    Parameters
    ----------
    credits : int
        The receiver's buffer in beats (the switch's ingress ``fifo_depth``): the credit
        count at reset. At least :data:`spec.rdma.MAX_FRAME_BEATS`, so that any frame
        can start.
    depth : int
        Beats of the buffer of input ``a``, at least
        :data:`spec.rdma_fabric.MERGE_ROOM` (``MAX_FRAME_BEATS + 2``, 68).

    Ports
    -----
    a : In(packet_signature(64))
        The requester's frames. ``ready`` is high in every cycle out of reset: a started
        frame is never held (the requester's frame sender sends its beats back to back),
        so the merge buffers them and holds the requester between frames with ``room``.
        A beat that finds the buffer full would be lost and set ``overflow``; while the
        requester obeys ``room`` that never happens (the golden model raises if it
        does).
    room : Out(1)
        Flow control to the requester (its ``go``): high in a cycle when the buffer's
        level is at most ``depth - MERGE_ROOM``, so that it may start a new frame.
        Why that is enough: the frame sender takes a descriptor only in a cycle ``t``
        with ``room`` high; from ``t`` on, at most ``MERGE_TAIL_BEATS`` (2) beats of
        the frame in progress are still to come (the framer takes the next descriptor
        while sending its own last beat, and ICRC/FCS add at most one beat behind it)
        and then the new frame's at most ``MAX_FRAME_BEATS``; with nothing leaving,
        the last of these finds ``level(t) + MERGE_ROOM - 1 <= depth - 1`` beats in
        the buffer. No other frame starts before ``room`` is high again. Combinational
        from the level at the start of the cycle (a register): no path from ``a``.
    b : In(packet_signature(64))
        The responder's ACK/NAK frames. ``ready`` is high in the cycles the merge takes
        a beat (the responder's ACK sender holds its frame while ``ready`` is low).
    o : Out(packet_signature(64))
        The uplink; ``ready`` is ignored (a link).
    give : In(1)
        One credit (one buffer beat freed at the far end) returned this cycle.
    overflow, credit_errors : Out(1)
        Sticky: a beat of ``a`` was lost (never, while the requester obeys ``room``);
        the credit counter under- or overflowed (never, while the far end returns
        exactly one credit per beat it takes).
    level_max : Out(range(max(depth, credits) + 1))
        High-water mark of the ``a`` buffer's level (one cycle behind the level).
    credits_max : Out(range(max(depth, credits) + 1))
        High-water mark of the credits in use, ``credits`` less the count (one cycle
        behind the count): the most beats of this sender that the far end's buffer held
        or had on their way to it, from the credit taken to the credit back.

    Timing and arbitration
    ----------------------
    A beat taken on ``a`` in cycle ``t`` can be on ``o`` in ``t + 1`` (one buffer
    cycle); a beat of ``b`` is on ``o`` in the cycle it is taken (no buffer). A frame's
    length in beats, ``ceil((ip_total_length + 18) / 64)``, is read from the IPv4 total
    length in its first beat (both engines send only RoCEv2 over IPv4; every frame is at
    least 64 bytes, so there is no Ethernet padding).

    In a cycle with no frame in progress, input ``x`` can start when its head beat (the
    buffer's head for ``a``, the offered beat for ``b``) is a first beat and the credit
    count covers the whole frame. If both can, the one that did not start the previous
    frame wins (``a`` at reset). The started frame then moves one beat a cycle while its
    input has one (the engines send a frame's beats back to back, so it never waits); no
    other frame starts until its last beat has left, and the next frame can start in the
    following cycle (frames follow each other without idle cycles). Each beat on ``o``
    takes one credit; a credit given in cycle ``t`` counts from ``t + 1``.
    """

    def __init__(self, credits, depth):
        self.credits = check_int(self, "credits (beats)", credits, MAX_FRAME_BEATS, 65535)
        self.depth = check_int(self, "merge buffer depth (beats)", depth, MERGE_ROOM, 65535)
        super().__init__({
            "a": In(packet_signature(64)),
            "b": In(packet_signature(64)),
            "o": Out(packet_signature(64)),
            "give": In(1),
            "room": Out(1),
            "overflow": Out(1),
            "credit_errors": Out(1),
            "level_max": Out(range(max(depth, credits) + 1)),
            "credits_max": Out(range(max(depth, credits) + 1)),
        })

    @staticmethod
    def _beats(beat):
        """The frame's beats, from the IPv4 total length in its first beat."""
        k = 8 * IP_LENGTH_BYTE
        length = Cat(beat.data[k + 8:k + 16], beat.data[k:k + 8])    # big endian
        return (length + FRAME_OVERHEAD + 63) >> 6

    def elaborate(self, platform):
        m = Module()
        layout = packet_layout(64)
        m.submodules.buf = q = fifo.SyncFIFO(width=layout.size, depth=self.depth)
        m.submodules.counter = cnt = CreditCounter(self.credits)
        a, b, o = self.a, self.b, self.o
        m.d.comb += [a.ready.eq(~ResetSignal()), q.w_en.eq(a.valid), q.w_data.eq(a.payload),
                     self.room.eq(q.level <= self.depth - MERGE_ROOM)]
        with m.If(a.valid & ~q.w_rdy):
            m.d.sync += self.overflow.eq(1)
        with m.If(q.level > self.level_max):
            m.d.sync += self.level_max.eq(q.level)
        in_use = Signal(range(self.credits + 1))
        m.d.comb += in_use.eq(self.credits - cnt.credits)
        with m.If(in_use > self.credits_max):
            m.d.sync += self.credits_max.eq(in_use)
        head = Signal(layout)
        m.d.comb += head.eq(q.r_data)

        busy = Signal()           # a frame is in progress
        src_b = Signal()          # ... from b
        prio_b = Signal()         # b wins when both can start
        ok_a, ok_b = Signal(), Signal()
        start_a, start_b, send_a, send_b = Signal(), Signal(), Signal(), Signal()
        m.d.comb += [
            ok_a.eq(~busy & q.r_rdy & head.first & (cnt.credits >= self._beats(head))),
            ok_b.eq(~busy & b.valid & b.payload.first & (cnt.credits >= self._beats(b.payload))),
            start_a.eq(ok_a & (~ok_b | ~prio_b)),
            start_b.eq(ok_b & (~ok_a | prio_b)),
            send_a.eq(start_a | (busy & ~src_b & q.r_rdy)),
            send_b.eq(start_b | (busy & src_b & b.valid)),
            q.r_en.eq(send_a),
            b.ready.eq(start_b | (busy & src_b)),
            o.valid.eq(send_a | send_b),
            o.payload.eq(Mux(send_b, b.payload, head)),
            cnt.take.eq(send_a | send_b),
            cnt.give.eq(self.give),
            self.credit_errors.eq(cnt.underflow | cnt.overflow),
        ]
        with m.If(send_a | send_b):
            m.d.sync += busy.eq(~o.payload.last)
            with m.If(start_a | start_b):
                m.d.sync += src_b.eq(start_b)
        with m.If(start_a):
            m.d.sync += prio_b.eq(1)
        with m.If(start_b):
            m.d.sync += prio_b.eq(0)
        return m
