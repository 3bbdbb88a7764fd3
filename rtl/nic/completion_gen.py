"""The receiver's completion generator: cumulative, coalesced completions per source."""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from spec.checks import check_int, reject
from spec.formats.nic import (
    COMPLETION_COUNT_BITS,
    ETHERTYPE,
    MAC_PREFIX,
    Framing,
    NicOp,
    completion_bytes,
    completion_layout,
)
from spec.formats.packet import check_width, packet_signature

__all__ = ["CompletionGen", "ack_event_layout", "peer_ack_layout"]

#: A frame the receiver has finished: its source, whether it was dropped (address or
#: window check) rather than written, and its header's ``ack_req`` flag.
ack_event_layout = data.StructLayout({"src": 8, "dropped": 1, "ack_req": 1})
#: With the per-peer retry (``peer_retry``): the receiver's verdict too (index in
#: :data:`spec.nic.PEER_VERDICTS`: 0 accept, 1 duplicate, 2 nak).
peer_ack_layout = data.StructLayout({"src": 8, "dropped": 1, "ack_req": 1, "verdict": 2})


class CompletionGen(wiring.Component):
    """Count each source's finished store frames and send it coalesced completions.

    Parameters
    ----------
    width : int
        Datapath bytes.
    framing : str or Framing
    peers : int
        Sources tracked: node ids ``0 .. peers - 1`` (1 to 256). Frames of other ids get
        no completion.
    coalesce : int
        One completion per ``coalesce`` finished frames of a source (1 to 255).
    flush_idle : int
        A source with finished frames not yet completed and no new frame for
        ``flush_idle`` cycles gets its completion then (1 to 65535).
    peer_retry : bool
        The per-peer retry (docs/nic.md, "Per-peer retry"): ``ev`` carries the
        receiver's verdict (:data:`peer_ack_layout`); a duplicate or a NAK (verdict 1,
        2) does not count, it makes its source owe a completion (``owe[s]``: eligible
        even with nothing pending, from the next cycle), a NAK with the status flag
        GAP (``gflag[s]``); both restart when the source is chosen.

    Ports
    -----
    ev : In(stream.Signature(ack_event_layout, always_ready=True))
        A store frame of ``src`` finished at the receiver (``NicRx.ack``): written, or
        ``dropped`` at the address or window check. At most one per cycle.
    node_id : In(8)
    o : Out(packet_signature(width))
        Completion frames without FCS (:func:`spec.formats.nic.completion_bytes` bytes:
        the framing's header with the completion header, L2 padded to 60 bytes), to
        NicTx's completion input. Held until taken.
    cpl_sent : Out(32)
        Completion frames sent (counted at the last beat's handshake).
    ack_req_seen : Out(32)
        Events of tracked sources (``src < peers``) with ``ack_req``: every store frame
        that asked for its completion at once, honest or forged (a sender that flags
        every frame shows here; it costs it no more than a completion per frame, each
        sent when the generator is free, the rest coalesced meanwhile). Events of other
        sources are ignored, flag or not.

    Timing
    ------
    Per source ``s``: ``count[s]`` and ``dropped[s]`` (modulo ``2**16``) count its
    events from the cycle after each; ``pending[s]`` (saturating at ``coalesce``) the
    events since its last completion, ``age[s]`` the cycles since its last event,
    ``asked[s]`` whether one of those events had ``ack_req``. In a cycle where no
    completion is being offered, the lowest ``s`` with ``pending[s] >= coalesce``, or
    with ``pending[s] > 0`` and (``asked[s]`` or ``age[s] >= flush_idle``), is chosen:
    a frame with ``ack_req`` finished in cycle ``t`` makes its source eligible in
    ``t + 1`` (the idle flush stays the backstop of frames without it). The chosen
    source's counts (as of the start of that cycle) and the DROPPED status (a drop since
    its last completion) are latched, ``pending[s]`` and ``asked[s]`` restart from that
    cycle's event, and the
    frame is offered from the next cycle, one beat a cycle while ``o.ready``; the next
    choice is made in the cycle after its last beat is taken. Never stalls ``ev``.
    """

    def __init__(self, width, framing, peers, coalesce, flush_idle, peer_retry=False):
        self.peer_retry = bool(peer_retry)
        self.width = check_width(width, self)
        try:
            self.framing = Framing(framing)
        except ValueError:
            reject(self, f"framing must be 'l2' or 'compact', not {framing!r}")
        self.peers = check_int(self, "peers", peers, 1, 256)
        self.coalesce = check_int(self, "coalesce", coalesce, 1, 255)
        self.flush_idle = check_int(self, "flush_idle", flush_idle, 1, 65535)
        self.nbytes = completion_bytes(self.framing)
        self.nbeats = -(-self.nbytes // width)
        super().__init__({
            "ev": In(stream.Signature(peer_ack_layout if self.peer_retry
                                      else ack_event_layout, always_ready=True)),
            "node_id": In(8),
            "o": Out(packet_signature(width)),
            "cpl_sent": Out(32),
            "ack_req_seen": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        w, b, n = self.width, COMPLETION_COUNT_BITS, self.peers
        ev = self.ev
        cnt = [Signal(b, name=f"count{s}") for s in range(n)]
        drp = [Signal(b, name=f"dropped{s}") for s in range(n)]
        pend = [Signal(range(self.coalesce + 1), name=f"pending{s}") for s in range(n)]
        age = [Signal(range(self.flush_idle + 1), name=f"age{s}") for s in range(n)]
        dflag = [Signal(name=f"dflag{s}") for s in range(n)]
        asked = [Signal(name=f"asked{s}") for s in range(n)]
        busy = Signal()
        idx = Signal(range(self.nbeats + 1))
        l_dst, l_cnt, l_drp, l_st = Signal(8), Signal(b), Signal(b), Signal(5)

        elig = [Signal(name=f"elig{s}") for s in range(n)]
        chosen = [Signal(name=f"chosen{s}") for s in range(n)]
        owe = [Signal(name=f"owe{s}") for s in range(n)] if self.peer_retry else None
        gflag = [Signal(name=f"gflag{s}") for s in range(n)] if self.peer_retry else None
        for s in range(n):
            e = ((pend[s] >= self.coalesce)
                 | ((pend[s] != 0) & (asked[s] | (age[s] >= self.flush_idle))))
            m.d.comb += elig[s].eq(e | owe[s] if owe else e)
            earlier = Cat(*elig[:s]).any() if s else Const(0)
            m.d.comb += chosen[s].eq(~busy & elig[s] & ~earlier)
        for s in range(n):
            hit = ev.valid & (ev.payload.src == s)
            if owe:                      # a duplicate or a NAK: owed, not counted
                vhit = hit & (ev.payload.verdict != 0)
                hit = hit & (ev.payload.verdict == 0)
                with m.If(chosen[s]):
                    m.d.sync += [owe[s].eq(0), gflag[s].eq(0)]
                with m.If(vhit):
                    m.d.sync += [owe[s].eq(1), gflag[s].eq(
                        Mux(chosen[s], 0, gflag[s]) | (ev.payload.verdict == 2))]
            drop = hit & ev.payload.dropped
            req = hit & ev.payload.ack_req
            m.d.sync += [cnt[s].eq(cnt[s] + hit), drp[s].eq(drp[s] + drop)]
            with m.If(chosen[s]):
                m.d.sync += [pend[s].eq(hit), dflag[s].eq(drop), asked[s].eq(req),
                             l_dst.eq(s), l_cnt.eq(cnt[s]), l_drp.eq(drp[s]),
                             l_st.eq(Cat(dflag[s], gflag[s]) if gflag else dflag[s]),
                             busy.eq(1)]
            with m.Elif(hit & (pend[s] != self.coalesce)):
                m.d.sync += pend[s].eq(pend[s] + 1)
            with m.If(~chosen[s] & drop):
                m.d.sync += dflag[s].eq(1)
            with m.If(~chosen[s] & req):
                m.d.sync += asked[s].eq(1)
            with m.If(hit):
                m.d.sync += age[s].eq(0)
            with m.Elif(age[s] != self.flush_idle):
                m.d.sync += age[s].eq(age[s] + 1)

        tracked = ev.valid & ev.payload.ack_req & (ev.payload.src < n)
        m.d.sync += self.ack_req_seen.eq(self.ack_req_seen + tracked)

        hdr = Signal(completion_layout(self.framing))
        cpl = hdr.cpl
        m.d.comb += [cpl.opcode.eq(NicOp.COMPLETION), cpl.ack_req.eq(0), cpl.status.eq(l_st),
                     cpl.count.eq(l_cnt), cpl.dropped.eq(l_drp), cpl.reserved.eq(0)]
        if self.framing is Framing.L2:
            for i in range(5):
                m.d.comb += [hdr.dst_mac[i].eq(MAC_PREFIX[i]), hdr.src_mac[i].eq(MAC_PREFIX[i])]
            m.d.comb += [hdr.dst_mac[5].eq(l_dst), hdr.src_mac[5].eq(self.node_id),
                         hdr.ethertype[0].eq(ETHERTYPE >> 8),
                         hdr.ethertype[1].eq(ETHERTYPE & 0xFF)]
        else:
            m.d.comb += [hdr.dst.eq(l_dst), hdr.src.eq(self.node_id)]
        frame = Cat(hdr.as_value(), Const(0, 8 * w * self.nbeats - hdr.shape().size))
        last = idx == self.nbeats - 1
        tail = self.nbytes - (self.nbeats - 1) * w
        o = self.o.payload
        m.d.comb += [
            self.o.valid.eq(busy),
            o.data.eq(frame.word_select(idx, 8 * w)),
            o.nbytes.eq(Mux(last, tail, w)),
            o.first.eq(idx == 0),
            o.last.eq(last),
        ]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += idx.eq(idx + 1)
            with m.If(last):
                m.d.sync += [busy.eq(0), idx.eq(0), self.cpl_sent.eq(self.cpl_sent + 1)]
        return m

