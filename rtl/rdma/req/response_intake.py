"""The requester's receipt of RDMA READ responses and ATOMIC ACKNOWLEDGEs: the table of
outstanding operations (ORD per QP), the PSN checks, the data into host memory."""

from functools import reduce
from operator import or_

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from spec.checks import check_int
from spec.formats.roce import (
    ACK_HEADER,
    ETHERTYPE_IPV4,
    HOST_WORD_BITS,
    IP_PROTO_UDP,
    PSN_BITS,
    QPN_BITS,
    ROCE_UDP_PORT,
    OpCode,
    bswap,
)
from spec.host import wr_layout
from spec.rdma_read_req import (
    INTAKE_COUNTERS,
    SLOTS_RANGE,
    done_layout,
    issue_layout,
    rewind_layout,
    slot_layout,
)
from spec.rdma_responder import REST_MAX
from spec.rdma_stages import header_entry_layout

__all__ = ["ResponseIntake"]

_RESPONSES = (OpCode.RC_RDMA_READ_RESPONSE_FIRST, OpCode.RC_RDMA_READ_RESPONSE_MIDDLE,
              OpCode.RC_RDMA_READ_RESPONSE_LAST, OpCode.RC_RDMA_READ_RESPONSE_ONLY,
              OpCode.RC_ATOMIC_ACKNOWLEDGE)
#: IPv4 + UDP + BTH + ICRC bytes of a response, without AETH and payload.
_BASE = 20 + 8 + 12 + 4


class ResponseIntake(wiring.Component):
    """Track the READs and atomics sent, check each response frame against the oldest
    outstanding operation of its QP and write its data into host memory.

    Parameters
    ----------
    slots, ord : int
        Operations outstanding at once, all QPs (1 to 64), and per QP (1 to ``slots``).
    depth : int
        Host-memory words.

    Ports
    -----
    hdr : In(stream.Signature(header_entry_layout()))
        One entry per received frame (:class:`~rtl.rdma.resp.rx.Receive`), from a FIFO.
    beats : In(stream.Signature(HOST_WORD_BITS))
        The payload FIFO: beats 2 and later of every stored frame.
    issue : In(stream.Signature(issue_layout(depth)))
        An operation sent (:func:`spec.rdma_read_req.issue_layout`). Taken when a slot is
        free and the QP has fewer than ``ord`` slots (ORD backpressure); the lowest free.
    o : Out(stream.Signature(wr_layout(depth)))
        Host writes: a READ response's payload as words from its local address on (``be``
        for its bytes, bytes outside ``be`` zero); an ATOMIC ACKNOWLEDGE's original value
        (AtomicAckETH, big endian on the wire) as the 8-byte little-endian value at its
        local address. ``last`` on a frame's last word; ``mark``, ``tag`` = QPN on the
        last word of an operation.
    done : Out(stream.Signature(done_layout()))
        An operation, in the cycle its last word goes to ``o``.
    rewind : Out(stream.Signature(rewind_layout()))
        Re-request the QP's operations from the PSN given (its oldest's expected PSN).
    timeout : In(PSN_BITS)
        Cycles without progress before the oldest operation is re-requested (0: never).
    held_qpn : In(QPN_BITS), held_psn : In(PSN_BITS), held : Out(1), done_pending : Out(1)
        Combinational: a slot holds QP ``held_qpn``'s operation of last PSN ``held_psn``;
        the job in hand writes an operation's last word (its ``done`` is to come).
    evict : In(stream.Signature(rewind_layout(), always_ready=True))
        QP ``qpn``'s slots whose operation ends after PSN ``psn`` are free at the end of
        the cycle (whatever else would change them).
    limit_qpn : In(QPN_BITS), limit : Out(1), limit_psn : Out(PSN_BITS)
        Combinational: ``limit`` when QP ``limit_qpn`` has an operation outstanding (one
        whose last response's words are still going to ``o`` counts, with its last PSN),
        ``limit_psn`` its head's expected PSN: an ACK of that QP covers PSNs before it
        only (a READ's data is not in host memory before its responses are), so that a
        completion unit must not complete a message from ``limit_psn`` on by an ACK.
    <counter> : Out(32)
        :data:`spec.rdma_read_req.INTAKE_COUNTERS`.

    Behaviour
    ---------
    A frame is good if its FCS and ICRC are correct, it is not too long, its Ethernet, IPv4
    (version 4, IHL 5), UDP (port 4791) headers are RoCEv2's and its length is the IPv4 length
    plus 18; a good frame whose opcode is not a READ RESPONSE or ATOMIC ACKNOWLEDGE is
    ``other``. Its QP's *head* is the oldest outstanding slot of the QP (BTH DestQP),
    ``unmatched`` if there is none. With ``d`` = (BTH PSN - the head's expected PSN) mod 2**24:
    ``d`` in [2**23, 2**24) is a duplicate, ``d`` in (0, 2**23) a gap: the frame is dropped and,
    unless the head is ``rewound`` already, ``rewind`` asks for the QP's operations from the
    expected PSN (the head becomes ``rewound``). At ``d`` = 0 the frame must be what IBTA
    prescribes there: for an atomic an ATOMIC ACKNOWLEDGE of 8 bytes; for a READ, FIRST (nothing
    ``started``, more to come), ONLY (nothing started, the last PSN), MIDDLE (started, more to
    come) or LAST (started, the last PSN), of ``2**pmtu_log2`` bytes but at the last PSN, which
    carries the bytes left; a ``rewound`` head that has started also takes FIRST or ONLY there
    (the answer to a READ of the bytes left from the expected PSN, where MIDDLE or LAST answers
    the whole READ sent again); and an AETH syndrome ACK (``0b000xxxxx``). Otherwise it is
    ``malformed``. An accepted frame advances the head: its PSN, address and bytes left; the
    last frame frees the slot.

    Timing
    ------
    A frame at the head of ``hdr`` is decided in one cycle (which, for a gap that asks for a
    re-request, needs ``rewind.ready``), then executed as
    :class:`~rtl.rdma.resp.writer.PayloadWriter` does (a payload starting at frame byte 58 after
    an AETH, 54 without): one step a cycle, a word to ``o`` (with ``done`` on an operation's
    last word; each needs its ready) and, if it needs it, a beat popped; then one tail beat a
    cycle; the entry is popped with the last step (a dropped frame: one step per beat of it in
    the FIFO, at least one). An accepted response of 0 bytes (a READ of 0 bytes) writes one
    word with no byte enabled, which carries its ``mark`` and ``done``. So a 256-byte READ
    RESPONSE ONLY (6 beats) takes 6 cycles. In every cycle an issue may be taken as well (from
    the table at the start of the cycle). The timer counts the cycles in which a slot is valid
    and neither a frame is accepted nor an issue taken (others clear it; it stops at
    ``timeout``); in a cycle that starts with it at ``timeout`` (not 0) and decides no frame,
    with ``rewind.ready``, the oldest valid slot is re-requested (``timeouts``) and the timer
    cleared.
    """

    def __init__(self, slots=16, ord=16, depth=1 << 14):
        check_int(self, "outstanding-operation slots (slots)", slots, *SLOTS_RANGE)
        check_int(self, "outstanding operations per QP (ord)", ord, 1, slots)
        self.slots, self.ord, self.depth = slots, ord, depth
        ports = {
            "hdr": In(stream.Signature(header_entry_layout())),
            "beats": In(stream.Signature(HOST_WORD_BITS)),
            "issue": In(stream.Signature(issue_layout(depth))),
            "o": Out(stream.Signature(wr_layout(depth))),
            "done": Out(stream.Signature(done_layout())),
            "rewind": Out(stream.Signature(rewind_layout())),
            "timeout": In(PSN_BITS),
            "limit_qpn": In(QPN_BITS), "limit": Out(1), "limit_psn": Out(PSN_BITS),
            "held_qpn": In(QPN_BITS), "held_psn": In(PSN_BITS), "held": Out(1),
            "done_pending": Out(1),
            "evict": In(stream.Signature(rewind_layout(), always_ready=True)),
        }
        ports.update({n: Out(32) for n in INTAKE_COUNTERS})
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        n, depth = self.slots, self.depth
        lay = slot_layout(depth)
        slot = [Signal(lay, name=f"slot{j}") for j in range(n)]
        age = [Signal(n, name=f"age{j}") for j in range(n)]   # bit k: slot k is older
        valid = Signal(n)
        m.d.comb += valid.eq(Cat(*[s.valid for s in slot]))

        def pick(onehot):
            """The slot selected by a one-hot vector (all zero if none)."""
            sel = Signal(lay)
            m.d.comb += sel.eq(reduce(or_, [Mux(onehot[j], slot[j].as_value(), 0)
                                            for j in range(n)]))
            return sel

        def oldest(members):
            """One-hot: the member with no older member."""
            v = Signal(n)
            m.d.comb += v.eq(Cat(*[members[j] & ~(age[j] & members).any()
                                   for j in range(n)]))
            return v

        # ---- the frame at the head of hdr ----
        e = self.hdr.payload
        h = Signal(ACK_HEADER)
        m.d.comb += h.eq(e.b0[:ACK_HEADER.size])
        opcode = h.bth.opcode
        ip_len, qpn, psn = Signal(16), Signal(QPN_BITS), Signal(PSN_BITS)
        aeth, pad = Signal(), Signal(2)
        m.d.comb += [ip_len.eq(bswap(h.ip.total_length, 2)), qpn.eq(bswap(h.bth.dest_qp, 3)),
                     psn.eq(bswap(h.bth.psn, 3)), pad.eq(h.bth.pad_count),
                     aeth.eq(opcode != OpCode.RC_RDMA_READ_RESPONSE_MIDDLE)]
        head_len = Signal(8)
        m.d.comb += head_len.eq(_BASE + Mux(aeth, 4, 0) + pad)
        plen = Signal(16)
        m.d.comb += plen.eq(ip_len - head_len)
        good, is_resp = Signal(), Signal()
        m.d.comb += [
            good.eq(e.fcs_ok & e.icrc_ok & ~e.too_long
                    & (h.eth.ethertype == bswap(Const(ETHERTYPE_IPV4, 16), 2))
                    & (h.ip.version == 4) & (h.ip.ihl == 5)
                    & (h.ip.protocol == IP_PROTO_UDP)
                    & (h.udp.dport == bswap(Const(ROCE_UDP_PORT, 16), 2))
                    & (e.length == ip_len + 18) & (ip_len >= head_len)),
            is_resp.eq(reduce(or_, [opcode == op for op in _RESPONSES])),
        ]
        same = Signal(n)
        m.d.comb += same.eq(Cat(*[slot[j].valid & (slot[j].qpn == qpn) for j in range(n)]))
        head_oh = oldest(same)
        hs = pick(head_oh)
        matched = Signal()
        m.d.comb += matched.eq(same.any())
        d = Signal(PSN_BITS)
        m.d.comb += d.eq(psn - hs.next_psn)
        at, ahead = Signal(), Signal()
        m.d.comb += [at.eq(d == 0), ahead.eq((d != 0) & ~d[PSN_BITS - 1])]
        last = Signal()
        m.d.comb += last.eq(hs.next_psn == hs.last_psn)
        want = Signal(OpCode, init=OpCode.RC_RDMA_READ_RESPONSE_ONLY)
        fresh = Signal(OpCode, init=OpCode.RC_RDMA_READ_RESPONSE_ONLY)
        m.d.comb += fresh.eq(Mux(last, OpCode.RC_RDMA_READ_RESPONSE_ONLY,
                                 OpCode.RC_RDMA_READ_RESPONSE_FIRST))
        with m.If(hs.started):
            m.d.comb += want.eq(Mux(last, OpCode.RC_RDMA_READ_RESPONSE_LAST,
                                    OpCode.RC_RDMA_READ_RESPONSE_MIDDLE))
        with m.Else():
            m.d.comb += want.eq(fresh)
        shape_ok = Signal()
        m.d.comb += shape_ok.eq(
            Mux(hs.atomic, (opcode == OpCode.RC_ATOMIC_ACKNOWLEDGE) & (plen == 8),
                ((opcode == want) | (hs.rewound & (opcode == fresh)))
                & (plen == Mux(last, hs.left, Const(1, 13) << hs.pmtu_log2)))
            & (~aeth | (h.aeth.syndrome[5:8] == 0)))
        accept, gap = Signal(), Signal()
        m.d.comb += [accept.eq(good & is_resp & matched & at & shape_ok),
                     gap.eq(good & is_resp & matched & ahead)]
        need_rw = Signal()
        m.d.comb += need_rw.eq(gap & ~hs.rewound)

        # ---- the ACK limit ----
        lim = Signal(n)
        m.d.comb += lim.eq(Cat(*[slot[j].valid & (slot[j].qpn == self.limit_qpn)
                                 for j in range(n)]))
        ls = pick(oldest(lim))

        # ---- the job being executed ----
        busy = Signal()
        j_write, j_aeth, j_atomic, j_done = Signal(), Signal(), Signal(), Signal()
        j_addr = Signal(range(64 * depth))
        j_plen = Signal(16)
        j_qpn, j_psn = Signal(QPN_BITS), Signal(PSN_BITS)
        # An operation whose last response is being written is still unanswered.
        ending = Signal()
        m.d.comb += ending.eq(busy & j_write & j_done & (j_qpn == self.limit_qpn))
        hq, hp = self.held_qpn, self.held_psn
        held = Cat(*[s.valid & (s.qpn == hq) & (s.last_psn == hp) for s in slot])
        m.d.comb += [self.limit.eq(lim.any() | ending), self.held.eq(held.any()),
                     self.limit_psn.eq(Mux(ending, j_psn, ls.next_psn)),
                     self.done_pending.eq(busy & j_write & j_done)]
        decide = Signal()
        m.d.comb += decide.eq(self.hdr.valid & ~busy & (~need_rw | self.rewind.ready))

        # ---- the timer ----
        timer = Signal(PSN_BITS)
        expired = Signal()
        m.d.comb += expired.eq((self.timeout != 0) & (timer >= self.timeout) & valid.any())
        fire = Signal()
        m.d.comb += fire.eq(expired & ~decide & self.rewind.ready)
        old_oh = oldest(valid)
        olds = pick(old_oh)

        rw = self.rewind.payload
        with m.If(decide & need_rw):
            m.d.comb += [self.rewind.valid.eq(1), rw.qpn.eq(qpn), rw.psn.eq(hs.next_psn)]
        with m.Elif(fire):
            m.d.comb += [self.rewind.valid.eq(1), rw.qpn.eq(olds.qpn),
                         rw.psn.eq(olds.next_psn)]

        # ---- issue ----
        iss = self.issue.payload
        free = Signal(n)
        m.d.comb += free.eq(~valid)
        first_free = Signal(n)
        m.d.comb += first_free.eq(free & (~free + 1))
        mine = Signal(range(n + 1))
        m.d.comb += mine.eq(sum(slot[j].valid & (slot[j].qpn == iss.qpn) for j in range(n)))
        m.d.comb += self.issue.ready.eq(free.any() & (mine < self.ord))
        take = Signal()
        m.d.comb += take.eq(self.issue.valid & self.issue.ready)
        npk = Signal(PSN_BITS)
        m.d.comb += npk.eq(Mux(iss.atomic | (iss.length == 0), 1,
                               (iss.length + (Const(1, 13) << iss.pmtu_log2) - 1)
                               >> iss.pmtu_log2))

        for j in range(n):
            s = slot[j]
            with m.If(take & first_free[j]):
                m.d.sync += [
                    s.valid.eq(1), s.atomic.eq(iss.atomic), s.qpn.eq(iss.qpn),
                    s.next_psn.eq(iss.psn), s.last_psn.eq(iss.psn + npk - 1),
                    s.pmtu_log2.eq(iss.pmtu_log2), s.addr.eq(iss.laddr),
                    s.left.eq(Mux(iss.atomic, 8, iss.length)), s.started.eq(0),
                    s.rewound.eq(0),
                ]
            with m.If(decide & head_oh[j]):
                with m.If(accept):
                    m.d.sync += [s.next_psn.eq(s.next_psn + 1), s.addr.eq(s.addr + plen),
                                 s.left.eq(s.left - plen), s.started.eq(1),
                                 s.rewound.eq(0)]
                    with m.If(last):
                        m.d.sync += s.valid.eq(0)
                with m.Elif(need_rw):
                    m.d.sync += s.rewound.eq(1)
            with m.If(fire & old_oh[j]):
                m.d.sync += s.rewound.eq(1)
            ev, after = self.evict, (s.last_psn - self.evict.payload.psn)[:PSN_BITS]
            with m.If(ev.valid & (s.qpn == ev.payload.qpn) & (after != 0) & ~after[-1]):
                m.d.sync += s.valid.eq(0)
            # A slot taken now is no slot's elder.
            with m.If(take):
                m.d.sync += age[j].eq(age[j] & ~first_free)
            with m.If(take & first_free[j]):
                m.d.sync += age[j].eq(valid)

        with m.If(~valid.any() | (decide & accept) | take | fire):
            m.d.sync += timer.eq(0)
        with m.Elif(timer < self.timeout):
            m.d.sync += timer.eq(timer + 1)

        def count(counter, cond):
            with m.If(cond):
                m.d.sync += counter.eq(counter + 1)

        count(self.bad, decide & ~good)
        count(self.other, decide & good & ~is_resp)
        count(self.unmatched, decide & good & is_resp & ~matched)
        count(self.duplicates, decide & good & is_resp & matched & ~at & ~ahead)
        count(self.gaps, decide & gap)
        count(self.malformed, decide & good & is_resp & matched & at & ~shape_ok)
        count(self.responses, decide & accept)
        count(self.timeouts, fire)
        count(self.rewinds, (decide & need_rw) | fire)

        with m.If(decide):
            m.d.sync += [busy.eq(1), j_write.eq(accept), j_aeth.eq(aeth),
                         j_atomic.eq(hs.atomic), j_done.eq(last), j_addr.eq(hs.addr),
                         j_plen.eq(Mux(accept, plen, 0)), j_qpn.eq(qpn),
                         j_psn.eq(hs.next_psn)]

        # ---- execution: words to o, beats popped ----
        k, nwords = Signal(8), Signal(8)
        popped, carry = Signal(range(REST_MAX + 1)), Signal(HOST_WORD_BITS)
        # An accepted response of 0 bytes writes one word (no byte enabled): mark and done.
        m.d.comb += nwords.eq(Mux(j_write & (j_plen == 0), 1, (j_plen + 63) >> 6))
        left = Signal(16)
        m.d.comb += left.eq(j_plen - (k << 6))
        word_due, need_beat, tail = Signal(), Signal(), Signal()
        m.d.comb += [
            word_due.eq(k < nwords),
            need_beat.eq(word_due & (k != 0) & Mux(j_aeth, left > 6, left > 10)),
            tail.eq(~word_due & (popped < e.rest)),
        ]
        b0, b1, hi = e.b0, e.b1, self.beats.payload
        word = Signal(HOST_WORD_BITS)
        with m.If(k == 0):
            m.d.comb += word.eq(Mux(j_aeth, Cat(b0[58 * 8:], b1[:58 * 8]),
                                    Cat(b0[54 * 8:], b1[:54 * 8])))
        with m.Else():
            m.d.comb += word.eq(Mux(j_aeth, Cat(carry[58 * 8:], hi[:58 * 8]),
                                    Cat(carry[54 * 8:], hi[:54 * 8])))
        be = Signal(64)
        m.d.comb += be.eq(Mux(left >= 64, (1 << 64) - 1, (Const(1, 65) << left[:7]) - 1))
        mask = Signal(HOST_WORD_BITS)
        m.d.comb += mask.eq(Cat(*[b.replicate(8) for b in be]))
        off = Signal(6)
        m.d.comb += off.eq(j_addr[:6])
        orig = Signal(64)
        m.d.comb += orig.eq(bswap(word[:64], 8))
        last_word = Signal()
        m.d.comb += last_word.eq(k + 1 == nwords)
        out = self.o.payload
        m.d.comb += [
            out.addr.eq((j_addr >> 6) + k),
            out.data.eq(Mux(j_atomic, orig << (off * 8), word & mask)),
            out.be.eq(Mux(j_atomic, Const(0xFF, 64) << off, be)),
            out.last.eq(last_word), out.mark.eq(j_done & last_word),
            out.tag.eq(Mux(j_done & last_word, j_qpn, 0)),
            self.done.payload.qpn.eq(j_qpn), self.done.payload.psn.eq(j_psn),
            self.done.payload.atomic.eq(j_atomic),
        ]
        want_done = Signal()
        m.d.comb += want_done.eq(word_due & last_word & j_done)
        pop, step = Signal(), Signal()
        m.d.comb += [
            pop.eq(need_beat | tail),
            step.eq(busy & (~word_due | self.o.ready) & (~want_done | self.done.ready)
                    & (~pop | self.beats.valid)),
        ]
        with m.If(step):
            m.d.comb += [self.o.valid.eq(word_due), self.beats.ready.eq(pop),
                         self.done.valid.eq(want_done)]
            with m.If(pop):
                m.d.sync += carry.eq(hi)
            with m.Elif(k == 0):
                m.d.sync += carry.eq(b1)
            count(self.words, word_due)
            with m.If((k + word_due == nwords) & (popped + pop == e.rest)):
                m.d.comb += self.hdr.ready.eq(1)
                m.d.sync += [busy.eq(0), k.eq(0), popped.eq(0)]
            with m.Else():
                m.d.sync += [k.eq(k + word_due), popped.eq(popped + pop)]
        return m
