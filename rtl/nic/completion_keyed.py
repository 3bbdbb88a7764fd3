"""A receiver's completion generator keyed by destination id: one memory entry per
destination the receiver stands for (docs/nic.md, "4,096 destinations"). Twin:
:class:`pymodel.nic.completion_keyed.CompletionKeyedModel`."""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from spec.checks import check_int
from spec.formats.nic import (
    COMPLETION_COUNT_BITS,
    DESTINATIONS,
    ETHERTYPE,
    ID_BITS,
    MAC_PREFIX,
    NicOp,
    completion_bytes,
    l2_completion_layout,
)
from spec.formats.packet import check_width, packet_signature
from spec.nic import AGE_STAMP_BITS, age_fifo_depth

__all__ = ["CompletionKeyed", "keyed_event_layout"]

#: A store frame the receiver finished (``NicRx.ack`` with 16-bit ids): its source, the
#: destination id it was sent to, dropped or written, its ``ack_req``.
keyed_event_layout = data.StructLayout({"src": ID_BITS, "dropped": 1, "ack_req": 1,
                                        "dst": ID_BITS})


class CompletionKeyed(wiring.Component):
    """The generator of a receiver standing for destination ids ``0 .. destinations -
    1`` (the rules, cycle by cycle: :class:`pymodel.nic.completion_keyed.
    CompletionKeyedModel`), L2 framing, 16-bit ids.

    Parameters
    ----------
    width : int
    destinations : int
        Entries, a power of two from 2 to :data:`spec.formats.nic.DESTINATIONS`.
    coalesce : int
        1 to 255.
    flush_idle : int
        1 to 2**14.
    age_depth : int
        Items of the age FIFO (a power of two, at least 2): the frames younger than
        ``flush_idle`` cycles, at most one a cycle (default: the power of two above
        ``flush_idle + 2``: :func:`spec.nic.age_fifo_depth`).

    Ports
    -----
    ev : In(stream.Signature(keyed_event_layout, always_ready=True))
    sender : In(ID_BITS)
        The one sender tracked; events from other sources are ignored.
    o : Out(packet_signature(width))
        Completion frames without FCS (src MAC the destination id, dst MAC the sender).
    cpl_sent, ack_req_seen : Out(32)
    """

    def __init__(self, width, destinations, coalesce, flush_idle, age_depth=None):
        self.width = check_width(width, self)
        self.destinations = check_int(self, "destinations", destinations, 2, DESTINATIONS)
        self.coalesce = check_int(self, "coalesce", coalesce, 1, 255)
        self.flush_idle = check_int(self, "flush_idle", flush_idle, 1, 1 << 14)
        if age_depth is None:
            age_depth = age_fifo_depth(flush_idle)
        self.age_depth = check_int(self, "age_depth", age_depth, 2, 1 << 16)
        for name, v in (("destinations", destinations), ("age_depth", age_depth)):
            if v & (v - 1):
                raise ValueError(f"CompletionKeyed: {name} must be a power of two, "
                                 f"not {v!r}")
        self.nbytes = completion_bytes("l2")
        self.nbeats = -(-self.nbytes // width)
        super().__init__({
            "ev": In(stream.Signature(keyed_event_layout, always_ready=True)),
            "sender": In(ID_BITS),
            "o": Out(packet_signature(width)),
            "cpl_sent": Out(32),
            "ack_req_seen": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        w, b, n = self.width, COMPLETION_COUNT_BITS, self.destinations
        ab = (n - 1).bit_length()
        gb = (self.age_depth - 1).bit_length()
        entry = data.StructLayout({"count": b, "dropped": b,
                                   "pending": range(self.coalesce + 1), "dflag": 1,
                                   "asked": 1, "queued": 1})
        age_item = data.StructLayout({"d": ab, "t": AGE_STAMP_BITS, "n": b})
        m.submodules.mem = mem = Memory(shape=entry, depth=n, init=[])
        m.submodules.ready = rmem = Memory(shape=ab, depth=n, init=[])
        m.submodules.ages = amem = Memory(shape=age_item, depth=self.age_depth, init=[])
        rd, wr = mem.read_port(domain="comb"), mem.write_port()
        r_rd, r_wr = rmem.read_port(domain="comb"), rmem.write_port()
        a_rd, a_wr = amem.read_port(domain="comb"), amem.write_port()
        r_head, r_tail = Signal(ab), Signal(ab)
        r_level = Signal(ab + 1)
        a_head, a_tail = Signal(gb), Signal(gb)
        a_level = Signal(gb + 1)
        now = Signal(AGE_STAMP_BITS)
        m.d.sync += now.eq(now + 1)

        ev = self.ev.payload
        held = Signal()
        hit, emit, agechk = Signal(), Signal(), Signal()
        age = Signal(AGE_STAMP_BITS)
        head = a_rd.data
        m.d.comb += [
            r_rd.addr.eq(r_head), a_rd.addr.eq(a_head),
            age.eq(now - head.t),
            hit.eq(self.ev.valid & (ev.src == self.sender) & (ev.dst >> ab == 0)),
            emit.eq(~hit & ~held & (r_level != 0)),
            agechk.eq(~hit & ~emit & (a_level != 0) & (age >= self.flush_idle)),
            rd.addr.eq(Mux(hit, ev.dst[:ab], Mux(emit, r_rd.data, head.d))),
        ]
        e = rd.data
        # The entry after an event.
        pend = Signal.like(e.pending)
        m.d.comb += pend.eq(Mux(e.pending == self.coalesce, e.pending, e.pending + 1))
        asked = Signal()
        m.d.comb += asked.eq(e.asked | ev.ack_req)
        due = Signal()                          # an event makes the entry ready
        m.d.comb += due.eq(((pend >= self.coalesce) | asked) & ~e.queued)
        flush = Signal()                        # the age check makes it ready
        m.d.comb += flush.eq((head.n == e.count) & (e.pending != 0) & ~e.queued)
        new = Signal(entry)
        m.d.comb += [
            new.count.eq(Mux(hit, e.count + 1, e.count)),
            new.dropped.eq(Mux(hit, e.dropped + ev.dropped, e.dropped)),
            new.pending.eq(Mux(hit, pend, Mux(emit, 0, e.pending))),
            new.dflag.eq(Mux(hit, e.dflag | ev.dropped, Mux(emit, 0, e.dflag))),
            new.asked.eq(Mux(hit, asked, Mux(emit, 0, e.asked))),
            new.queued.eq(Mux(hit, e.queued | due, Mux(emit, 0, e.queued | flush))),
            wr.en.eq(hit | emit | (agechk & flush)),
            wr.addr.eq(rd.addr),
            wr.data.eq(new),
        ]
        # The ready FIFO: pushed by an event or the age check, popped by a completion.
        push = Signal()
        m.d.comb += [push.eq((hit & due) | (agechk & flush)),
                     r_wr.en.eq(push), r_wr.addr.eq(r_tail), r_wr.data.eq(rd.addr)]
        m.d.sync += [r_tail.eq(r_tail + push), r_head.eq(r_head + emit),
                     r_level.eq(r_level + push - emit)]
        # The age FIFO: an item per event, judged at its head.
        m.d.comb += [a_wr.en.eq(hit), a_wr.addr.eq(a_tail), a_wr.data.d.eq(ev.dst[:ab]),
                     a_wr.data.t.eq(now), a_wr.data.n.eq(e.count + 1)]
        m.d.sync += [a_tail.eq(a_tail + hit), a_head.eq(a_head + agechk),
                     a_level.eq(a_level + hit - agechk),
                     self.ack_req_seen.eq(self.ack_req_seen + (hit & ev.ack_req))]

        # The completion frame: latched at ``emit``, offered from the next cycle.
        l_dst, l_cnt, l_drp, l_st = Signal(ab), Signal(b), Signal(b), Signal()
        with m.If(emit):
            m.d.sync += [l_dst.eq(rd.addr), l_cnt.eq(e.count), l_drp.eq(e.dropped),
                         l_st.eq(e.dflag), held.eq(1)]
        hdr = Signal(l2_completion_layout)
        cpl = hdr.cpl
        m.d.comb += [cpl.opcode.eq(NicOp.COMPLETION), cpl.ack_req.eq(0),
                     cpl.status.eq(l_st), cpl.count.eq(l_cnt), cpl.dropped.eq(l_drp),
                     cpl.reserved.eq(0)]
        src = Signal(ID_BITS)
        m.d.comb += src.eq(l_dst)
        for i in range(4):
            m.d.comb += [hdr.dst_mac[i].eq(MAC_PREFIX[i]), hdr.src_mac[i].eq(MAC_PREFIX[i])]
        m.d.comb += [hdr.dst_mac[4].eq(self.sender[8:]), hdr.dst_mac[5].eq(self.sender[:8]),
                     hdr.src_mac[4].eq(src[8:]), hdr.src_mac[5].eq(src[:8]),
                     hdr.ethertype[0].eq(ETHERTYPE >> 8),
                     hdr.ethertype[1].eq(ETHERTYPE & 0xFF)]
        idx = Signal(range(self.nbeats + 1))
        frame = Cat(hdr.as_value(), Const(0, 8 * w * self.nbeats - hdr.shape().size))
        last = idx == self.nbeats - 1
        o = self.o.payload
        m.d.comb += [
            self.o.valid.eq(held),
            o.data.eq(frame.word_select(idx, 8 * w)),
            o.nbytes.eq(Mux(last, self.nbytes - (self.nbeats - 1) * w, w)),
            o.first.eq(idx == 0),
            o.last.eq(last),
        ]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += idx.eq(idx + 1)
            with m.If(last):
                m.d.sync += [held.eq(0), idx.eq(0), self.cpl_sent.eq(self.cpl_sent + 1)]
        return m
