"""ACK queue: one pending ACK/NAK event per window slot and a queue of slots; never full."""

from amaranth import Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from rtl.rdma.context_cache import CACHE_LOG2_BITS, entry_of
from spec.checks import check_windows
from spec.formats.roce import PSN_BITS, Syndrome
from spec.rdma_stages import ack_event_layout

__all__ = ["AckQueue"]


class AckQueue(wiring.Component):
    """Between the ACK receiver and the completion unit: coalesce events per window slot.

    Each window slot (the completion unit's: ``qpn % windows``, or with ``windows`` 0
    the QP's direct-mapped cache entry ``qpn % 2**cache_log2``) has one *pending event*
    register (QPN, PSN, syndrome, MSN) and a valid bit; a queue of slot numbers orders
    the slots with a pending event by the arrival of their first one. A slot is in the
    queue at most once, so the queue (one place per slot, and one more for a slot that
    leaves and comes back in one cycle) can not overflow: ``i`` is always ready.

    Coalescing, when an event ``n`` arrives for a slot whose pending event is ``p``
    (and ``p`` is not taken in that cycle):

    - ``n`` of another QP than ``p``'s replaces ``p`` (a slot holds one QP's window at a
      time; the QP of the newer event is the one that sent last);
    - ``p`` an error NAK (any syndrome but ACK and PSN sequence NAK): ``p`` stays (the
      QP enters ERR at it; what follows it is moot);
    - ``n`` an error NAK: ``n`` replaces ``p``;
    - both an ACK or a PSN sequence NAK: each *covers* PSNs up to ``c``, its PSN for an
      ACK and its PSN - 1 for a sequence NAK (IBTA Vol 1 section 9.7.5.1.2: a NAK
      acknowledges the packets before the one it names). ``n`` replaces ``p`` if ``c_n``
      is after ``c_p`` (PSNs modulo 2**24, a 2**23 window), or equal and ``n`` is a
      sequence NAK and ``p`` an ACK (the NAK adds that the next PSN is missing); else
      ``n`` is absorbed (``p`` already says as much).

    Every arrival merged into a pending event (replacing it or absorbed) counts in
    ``coalesced``. The completion unit acts on a pending event as it would on the
    newest of the events it stands for (ACKs are cumulative), so no acknowledgement is
    lost; an event of a QP without an open window still reaches it (``ack_unexpected``).

    Ports
    -----
    i : In(stream.Signature(ack_event_layout()))
        Events from the ACK receiver; ``ready`` is always high.
    o : Out(stream.Signature(ack_event_layout()))
        The pending event of the slot at the head of the queue. It may change while
        offered (an arrival merged into it shows from the next cycle).
    cache_log2 : In(4)
        Cache entries in use (the slot of a QP with ``windows`` 0).
    coalesced : Out(32)
        Arrivals merged into a pending event.

    Timing: an arrival is offered on ``o`` from the next cycle (if its slot is at the
    head). Taking ``o`` frees the slot at the end of the cycle; an arrival for it in
    the same cycle is a new pending event that queues behind the others.

    Parameters
    ----------
    entries : int
        Context-cache entries.
    windows : int
        Window slots, as the completion unit's (0: one per cache entry).
    """

    def __init__(self, entries, windows=0):
        self.entries = entries
        self.windows = check_windows(self, windows, entries)
        self.shared = windows == 0
        super().__init__({"i": In(stream.Signature(ack_event_layout())),
                          "o": Out(stream.Signature(ack_event_layout())),
                          "cache_log2": In(CACHE_LOG2_BITS,
                                           init=(entries - 1).bit_length()),
                          "coalesced": Out(32)})

    def elaborate(self, platform):
        m = Module()
        n, nw = self.entries, self.windows
        ibits = (n - 1).bit_length()
        wbits = max((nw - 1).bit_length(), 1)
        lay = ack_event_layout()
        m.submodules.pend = pend = memory.Memory(shape=lay, depth=nw, init=[])
        m.submodules.pvalid = pvalid = memory.Memory(shape=1, depth=nw, init=[])
        m.submodules.order = order = SyncFIFO(width=wbits, depth=nw + 1)

        def rd(mm, addr):
            p = mm.read_port(domain="comb")
            m.d.comb += p.addr.eq(addr)
            return p.data

        ev = self.i.payload
        s_in = Signal(wbits)
        m.d.comb += s_in.eq(entry_of(ev.qpn, self.cache_log2, ibits) if self.shared
                            else ev.qpn[:wbits] if nw > 1 else 0)
        head = order.r_data
        m.d.comb += [self.i.ready.eq(1), self.o.valid.eq(order.r_rdy),
                     self.o.payload.eq(rd(pend, head))]
        take = self.o.valid & self.o.ready
        m.d.comb += order.r_en.eq(take)

        p = Signal(lay)
        m.d.comb += p.eq(rd(pend, s_in))
        ack, seq = Syndrome.ACK.value, Syndrome.NAK_PSN_SEQUENCE.value
        p_err = (p.syndrome != ack) & (p.syndrome != seq)
        n_err = (ev.syndrome != ack) & (ev.syndrome != seq)
        cov_p, cov_n, d = Signal(PSN_BITS), Signal(PSN_BITS), Signal(PSN_BITS)
        m.d.comb += [cov_p.eq(p.psn - (p.syndrome == seq)),
                     cov_n.eq(ev.psn - (ev.syndrome == seq)), d.eq(cov_n - cov_p)]
        replace = ((ev.qpn != p.qpn)
                   | (~p_err & (n_err | ((d != 0) & ~d[PSN_BITS - 1])
                                | ((d == 0) & (ev.syndrome == seq) & (p.syndrome == ack)))))
        merge = self.i.valid & rd(pvalid, s_in) & ~(take & (head == s_in))

        w_pend, w_set, w_clr = pend.write_port(), pvalid.write_port(), pvalid.write_port()
        m.d.comb += [w_pend.addr.eq(s_in), w_pend.data.eq(ev),
                     w_pend.en.eq(self.i.valid & Mux(merge, replace, 1)),
                     w_set.addr.eq(s_in), w_set.data.eq(1),
                     w_set.en.eq(self.i.valid & ~merge),
                     order.w_data.eq(s_in), order.w_en.eq(self.i.valid & ~merge),
                     # (a slot taken and arriving in one cycle: w_set alone writes it)
                     w_clr.addr.eq(head), w_clr.data.eq(0),
                     w_clr.en.eq(take & ~(self.i.valid & (s_in == head)))]
        with m.If(merge):
            m.d.sync += self.coalesced.eq(self.coalesced + 1)
        return m
