"""The per-peer retry's sender: PSNs per destination, the replay buffer's slots, go-back-N."""

from amaranth import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from spec.checks import check_int
from spec.formats.nic import PSN_BITS
from spec.nic import check_peer_retry
from spec.rdma_engine import TIMEOUT_BITS

__all__ = ["PeerRetrySender", "ack_event_layout"]

#: A completion that passed the receiver's checks: its source, its cumulative count and
#: its GAP flag (a NAK).
ack_event_layout = data.StructLayout({"src": 8, "count": PSN_BITS, "gap": 1})


class PeerRetrySender(wiring.Component):
    """Per destination the next PSN, the oldest unacknowledged PSN, a timer and the
    go-back cursor; the replay buffer's slot tags (destination, PSN, valid). The frames
    themselves live in a memory indexed by the slot number, outside this block.

    Parameters
    ----------
    peers : int
        Destinations: ids ``0 .. peers - 1`` (1 to 256).
    window : int
        Slots (:func:`spec.nic.check_peer_retry`: a power of two, 2 to ``2**15``).
    timeout : int
        Cycles without an accepted completion of a destination with frames outstanding
        that send it back to its oldest unacknowledged PSN (2 to ``2**TIMEOUT_BITS``).

    Ports
    -----
    send : In(stream.Signature({"dst": 8}, always_ready=True))
        A new frame to ``dst`` leaves in this cycle; taken when ``can_send`` and ``dst <
        peers`` (into slot ``slot`` with PSN ``psn``), else refused and counted.
    can_send : Out(1)
        A slot is free and no destination is going back (resends go first).
    psn : Out(16)
        The next PSN of ``send.payload.dst`` (the frame's PSN extension).
    slot : Out(range(window))
        The lowest free slot.
    ack : In(stream.Signature(ack_event_layout, always_ready=True))
        A completion (cumulative ACK; with ``gap`` a NAK).
    resend : Out(stream.Signature({"dst": 8, "psn": 16, "slot": range(window)}))
        The frame to resend: the lowest destination going back, its cursor, the slot
        that holds it; taken with ``ready``.
    accepted : Out(1)
        Combinational: the ``ack`` of this cycle is accepted.
    next_psn, una, timeouts, resent : Out(data.ArrayLayout(16, peers))
    ack_ok, ack_bad, refused : Out(32)

    Timing
    ------
    Outputs on the state of the start of the cycle. At its end, in this order: the
    resend taken (the cursor advances; at the next PSN the destination stops going
    back); the ACK, on the start-of-cycle PSNs (a frame sent in the cycle is not
    covered): accepted if its count advances the oldest unacknowledged PSN by at most
    the outstanding frames and by at least one, or it is a NAK (``gap``, count not the
    next PSN), otherwise counted bad; accepted, it frees the slots it covers, moves a
    cursor behind it up to it (or stops the going back at the next PSN), and a NAK sends
    the destination back to the count; the new frame; the timers (a destination with
    nothing outstanding, going back or acknowledged in the cycle restarts at 0; at
    ``timeout - 1`` it counts a timeout and goes back to its oldest unacknowledged PSN).
    The twin: :meth:`pymodel.nic.peer_retry.PeerRetrySenderModel.step`.
    """

    def __init__(self, peers, window, timeout):
        self.peers = check_int(self, "peers", peers, 1, 256)
        _, self.window = check_peer_retry(True, "e2e", window)
        self.timeout = check_int(self, "timeout", timeout, 2, 1 << TIMEOUT_BITS)
        arr = data.ArrayLayout(PSN_BITS, peers)
        super().__init__({
            "send": In(stream.Signature(data.StructLayout({"dst": 8}), always_ready=True)),
            "can_send": Out(1),
            "psn": Out(PSN_BITS),
            "slot": Out(range(window)),
            "ack": In(stream.Signature(ack_event_layout, always_ready=True)),
            "resend": Out(stream.Signature(data.StructLayout(
                {"dst": 8, "psn": PSN_BITS, "slot": range(window)}))),
            "accepted": Out(1),
            "next_psn": Out(arr), "una": Out(arr),
            "timeouts": Out(arr), "resent": Out(arr),
            "ack_ok": Out(32), "ack_bad": Out(32), "refused": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        n, w, b = self.peers, self.window, PSN_BITS
        half = 1 << (b - 1)
        a = self.ack.payload
        # Slot tags.
        valid = [Signal(name=f"valid{k}") for k in range(w)]
        sdst = [Signal(8, name=f"sdst{k}") for k in range(w)]
        spsn = [Signal(b, name=f"spsn{k}") for k in range(w)]
        # Per destination.
        going = [Signal(name=f"going{d}") for d in range(n)]
        cur = [Signal(b, name=f"cur{d}") for d in range(n)]
        timer = [Signal(range(self.timeout), name=f"timer{d}") for d in range(n)]
        # Lowest free slot.
        free_any = Signal()
        for k in reversed(range(w)):
            with m.If(~valid[k]):
                m.d.comb += [self.slot.eq(k), free_any.eq(1)]
        any_going = Signal()
        m.d.comb += any_going.eq(sum(going) != 0)
        m.d.comb += self.can_send.eq(free_any & ~any_going)
        dst_ok = Signal()
        m.d.comb += dst_ok.eq(self.send.payload.dst < n)
        for d in range(n):
            with m.If(self.send.payload.dst == d):
                m.d.comb += self.psn.eq(self.next_psn[d])
        # The resend offered: the lowest destination going back.
        rd = Signal(8)
        rpsn = Signal(b)
        for d in reversed(range(n)):
            with m.If(going[d]):
                m.d.comb += [rd.eq(d), rpsn.eq(cur[d])]
        m.d.comb += [self.resend.valid.eq(any_going), self.resend.payload.dst.eq(rd),
                     self.resend.payload.psn.eq(rpsn)]
        for k in range(w):
            with m.If(valid[k] & (sdst[k] == rd) & (spsn[k] == rpsn)):
                m.d.comb += self.resend.payload.slot.eq(k)
        take = Signal()
        m.d.comb += take.eq(self.resend.valid & self.resend.ready)
        # The ACK, on the start-of-cycle state.
        una_s, next_s = Signal(b), Signal(b)
        for d in range(n):
            with m.If(a.src == d):
                m.d.comb += [una_s.eq(self.una[d]), next_s.eq(self.next_psn[d])]
        adv, outs = Signal(b), Signal(b)
        nak, ok = Signal(), Signal()
        m.d.comb += [
            adv.eq(a.count - una_s), outs.eq(next_s - una_s),
            nak.eq(a.gap & (a.count != next_s)),
            ok.eq(self.ack.valid & (a.src < n) & (adv <= outs) & ((adv != 0) | nak)),
        ]
        m.d.comb += self.accepted.eq(ok)
        with m.If(ok):
            m.d.sync += self.ack_ok.eq(self.ack_ok + 1)
        with m.Elif(self.ack.valid):
            m.d.sync += self.ack_bad.eq(self.ack_bad + 1)
        sending = Signal()
        m.d.comb += sending.eq(self.send.valid & self.can_send & dst_ok)
        with m.If(self.send.valid & ~sending):
            m.d.sync += self.refused.eq(self.refused + 1)
        # Slots: freed by an accepted ACK, taken by a new frame (never the same slot:
        # the new frame's PSN is the next one, beyond any count).
        for k in range(w):
            rel = Signal(b, name=f"rel{k}")
            m.d.comb += rel.eq(spsn[k] - una_s)
            with m.If(ok & valid[k] & (sdst[k] == a.src) & (rel < adv)):
                m.d.sync += valid[k].eq(0)
            with m.If(sending & (self.slot == k)):
                m.d.sync += [valid[k].eq(1), sdst[k].eq(self.send.payload.dst),
                             spsn[k].eq(self.psn)]
        for d in range(n):
            # The cursor and the going-back flag: the take, then the ACK, then the timer.
            g1, c1 = Signal(name=f"g1_{d}"), Signal(b, name=f"c1_{d}")
            g2, c2 = Signal(name=f"g2_{d}"), Signal(b, name=f"c2_{d}")
            took = Signal(name=f"took{d}")
            m.d.comb += [took.eq(take & (rd == d)), g1.eq(going[d]), c1.eq(cur[d])]
            with m.If(took):
                m.d.comb += c1.eq(cur[d] + 1)
                with m.If(((cur[d] + 1) & ((1 << b) - 1)) == self.next_psn[d]):
                    m.d.comb += g1.eq(0)
                m.d.sync += self.resent[d].eq(self.resent[d] + 1)
            acked = Signal(name=f"acked{d}")
            m.d.comb += [acked.eq(ok & (a.src == d)), g2.eq(g1), c2.eq(c1)]
            behind = Signal(b, name=f"behind{d}")
            m.d.comb += behind.eq(c1 - a.count)
            with m.If(acked):
                m.d.sync += self.una[d].eq(a.count)
                with m.If(g1 & (behind >= half)):
                    m.d.comb += c2.eq(a.count)
                with m.If(g1 & (a.count == self.next_psn[d])):
                    m.d.comb += g2.eq(0)
                with m.If(nak):
                    m.d.comb += [g2.eq(1), c2.eq(a.count)]
            nxt = Signal(b, name=f"nxt{d}")
            una2 = Signal(b, name=f"una2_{d}")
            m.d.comb += [nxt.eq(self.next_psn[d] + (sending & (self.send.payload.dst == d))),
                         una2.eq(self.una[d])]
            with m.If(acked):
                m.d.comb += una2.eq(a.count)
            m.d.sync += [self.next_psn[d].eq(nxt), going[d].eq(g2), cur[d].eq(c2)]
            with m.If((nxt == una2) | g2 | acked):
                m.d.sync += timer[d].eq(0)
            with m.Elif(timer[d] == self.timeout - 1):
                m.d.sync += [timer[d].eq(0), self.timeouts[d].eq(self.timeouts[d] + 1),
                             going[d].eq(1), cur[d].eq(una2)]
            with m.Else():
                m.d.sync += timer[d].eq(timer[d] + 1)
        return m
