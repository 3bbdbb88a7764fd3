"""NicRx's writer: the buffered beats of each checked frame into local memory, and the
``ack`` event of each finished frame (``e2e``)."""

from amaranth import Const, Mux, Signal

from spec.formats.nic import ID_BITS

__all__ = ["drain_writer"]


def drain_writer(self, m, descq, dq, desc_layout, wide):
    """Build into module ``m`` the writer of :class:`rtl.nic.nic_rx.NicRx` ``self``
    (its Timing: one buffered beat a cycle; a frame's descriptor from ``descq``, its
    realigned beats from ``dq``; ``wide``: the ``ack`` event carries the destination
    id)."""
    w = self.width
    shift = w.bit_length() - 1
    # Writer: one buffered beat a cycle into local memory.
    left = Signal(range(self.max_push + 2))
    waddr = Signal(range(self.depth))
    bleft = Signal(range(8192 + w))
    wgood = Signal()
    desc = Signal(desc_layout)
    m.d.comb += desc.eq(descq.r_data)
    drain = Signal()
    c_addr = Signal(range(self.depth))
    c_bleft = Signal(range(8192 + w))
    c_good = Signal()
    c_left = Signal(range(self.max_push + 2))
    idle = Signal()
    # Plain expressions (no conditional blocks): simulators evaluate them at time 0.
    m.d.comb += [
        idle.eq(left == 0),
        descq.r_en.eq(idle),
        drain.eq(Mux(idle, descq.r_rdy & (desc.nbeats != 0), 1)),
        c_addr.eq(Mux(idle, desc.addr, waddr)),
        c_bleft.eq(Mux(idle, desc.length, bleft)),
        c_good.eq(Mux(idle, desc.good, wgood)),
        c_left.eq(Mux(idle, desc.nbeats, left)),
    ]
    m.d.comb += dq.r_en.eq(drain)
    with m.If(drain):
        m.d.sync += [
            left.eq(c_left - 1),
            waddr.eq(c_addr + 1),
            bleft.eq(Mux(c_bleft > w, c_bleft - w, 0)),
            wgood.eq(c_good),
        ]
    if self.e2e:                     # the frame's last drained beat: it is finished
        wack, wdrop, wsrc, wreq = Signal(), Signal(), Signal(len(desc.src)), Signal()
        if wide:
            wdst = Signal(ID_BITS)
            with m.If(drain):
                m.d.sync += wdst.eq(Mux(idle, desc.dst, wdst))
            m.d.comb += self.ack.payload.dst.eq(Mux(idle, desc.dst, wdst))
        if self.check is not None:       # peer_retry: the verdict rides along
            wver = Signal(2)
            with m.If(drain):
                m.d.sync += wver.eq(Mux(idle, desc.verdict, wver))
            m.d.comb += self.ack.payload.verdict.eq(Mux(idle, desc.verdict, wver))
        with m.If(drain):
            m.d.sync += [wack.eq(Mux(idle, desc.ack, wack)),
                         wdrop.eq(Mux(idle, desc.dropped, wdrop)),
                         wsrc.eq(Mux(idle, desc.src, wsrc)),
                         wreq.eq(Mux(idle, desc.ack_req, wreq))]
        m.d.comb += [
            self.ack.valid.eq(drain & (c_left == 1) & Mux(idle, desc.ack, wack)),
            self.ack.payload.src.eq(Mux(idle, desc.src, wsrc)),
            self.ack.payload.dropped.eq(Mux(idle, desc.dropped, wdrop)),
            self.ack.payload.ack_req.eq(Mux(idle, desc.ack_req, wreq)),
        ]
    n = Signal(range(w + 1))
    m.d.comb += [
        n.eq(Mux(c_bleft > w, w, c_bleft)),
        self.wr.valid.eq(drain & c_good & (c_bleft != 0)),
        self.wr_last.eq(c_bleft <= w),
        self.wr.payload.addr.eq(c_addr),
        self.wr.payload.data.eq(dq.r_data),
        self.wr.payload.be.eq(Const((1 << w) - 1, w) >> (w - n)[:shift + 1]),
    ]
