"""The requester's READ and atomic response path (its ``reads``): a receive stage and
the response intake on the frames from the link, the intake's data into the write
arbiter, and the completion unit's events.

The sequencer gives a READ the PSNs of its responses; the frame sender frames a READ or
atomic with a :class:`~rtl.rdma.req.request_framer.RequestFramer` and, at its first send
(or a take resend of the completion unit's walk), issues it into a
:class:`~rtl.rdma.req.response_intake.ResponseIntake` (held while the intake has no slot
or the QP is at its ORD, for at most the transport timeout: then it goes without a
frame). The completion unit's walk asks the intake whether a slot holds the operation
it resends (``held``), frees the slots a take makes useless (``evict``) and waits for
no ``done`` pending (the intake's or its FIFO's). Here: every frame on ``i`` goes to the ACK
receiver and to a :class:`~rtl.rdma.resp.rx.Receive` stage whose FIFOs (the responder's
sizes, :data:`spec.rdma_responder.RX_FRAMES` and ``RX_BEATS``) feed the intake; the
intake's host writes join the write arbiter (after write-backs, before CQEs; a frame's
words are one TLP, not interleaved). The completion unit's events come, in this
priority, from the intake's ``done`` (an ACK of the operation's last PSN: it retires the
READ or atomic, and cumulatively what the QP sent before it), its ``rewind`` (a PSN
sequence NAK of the PSN missing: the go-back-N or selective-repeat resend path), then
the ACK queue, whose head waits while it is an ACK reaching the PSN of the QP's oldest
unanswered READ or atomic (the intake's ``limit``), or a NAK past it (a NAK acknowledges
the PSNs before its own, so it would complete the READ without its data). The intake's
own timer is off: a lost last response, request or ATOMIC ACKNOWLEDGE is recovered by
the completion unit's transport timer, which resends the window. Twin:
:mod:`pymodel.rdma.req.read_path`.
"""

from amaranth import Signal
from amaranth.lib import wiring

from rtl.rdma.req.response_intake import ResponseIntake
from rtl.rdma.resp.rx import Receive
from spec.formats.roce import HOST_WORD_BITS, PSN_BITS, Syndrome
from spec.ports import CountersSignature, PortView
from spec.rdma_engine import FIFO_DEPTHS
from spec.rdma_read_req import (
    INTAKE_COUNTERS,
    ORD_DEFAULT,
    REQUESTER_READ_COUNTERS,
    SENDER_COUNTERS,
    done_layout,
    rewind_layout,
)
from spec.rdma_responder import RX_BEATS, RX_FRAMES
from spec.rdma_stages import header_entry_layout

__all__ = ["wire_read_path"]


def wire_read_path(m, req, fifo, link, q_events, ack_rx, comp, wr_arb):
    """Build the path into ``m`` for the requester ``req`` (``fifo(name, shape, depth)``
    and ``link(src, fifo, dst)`` its FIFO helpers; ``q_events`` the ACK queue,
    ``ack_rx`` the ACK receiver, ``comp`` the completion unit, ``wr_arb`` the write
    arbiter built with ``reads``)."""
    m.submodules.rx = rx = Receive(RX_BEATS, RX_FRAMES)
    m.submodules.read_intake = ri = ResponseIntake(req.reads, min(ORD_DEFAULT, req.reads),
                                                   req.depth)
    # Every frame to both the ACK receiver and the receive stage (both always ready).
    i = req.i
    for dst in (ack_rx.i, rx.i):
        m.d.comb += [dst.valid.eq(i.valid), dst.payload.eq(i.payload)]
    m.d.comb += i.ready.eq(1)
    q_hdr = fifo("rx_hdr", header_entry_layout(), RX_FRAMES)
    q_pay = fifo("rx_pay", HOST_WORD_BITS, RX_BEATS)
    link(rx.hdr, q_hdr, ri.hdr)
    link(rx.pay, q_pay, ri.beats)
    m.d.comb += [rx.hdr_level.eq(q_hdr.level), rx.pay_level.eq(q_pay.level),
                 ri.timeout.eq(0)]
    wiring.connect(m, req.sender.issue, ri.issue)
    wiring.connect(m, comp.evict, ri.evict)
    m.d.comb += [ri.held_qpn.eq(comp.held_qpn), ri.held_psn.eq(comp.held_psn),
                 comp.held.eq(ri.held), comp.took.eq(req.sender.took),
                 comp.take_dropped.eq(req.sequencer.take_dropped),
                 req.sender.timeout.eq(comp.timeout)]
    q_data = fifo("rd_resp", ri.o.payload.shape(), FIFO_DEPTHS["wr_cqe"])
    link(ri.o, q_data, wr_arb.data)
    q_done = fifo("ops_done", done_layout(), FIFO_DEPTHS["cqes"])
    q_rw = fifo("ops_rewind", rewind_layout(), FIFO_DEPTHS["cqes"])
    wiring.connect(m, ri.done, q_done.w_stream)
    wiring.connect(m, ri.rewind, q_rw.w_stream)
    m.d.comb += comp.done_pending.eq(ri.done_pending | q_done.r_rdy)
    # The events: done, then rewind, then the ACK queue's head unless it is an ACK
    # reaching the QP's oldest unanswered READ or atomic, or a NAK past it.
    ev, ack = comp.ev, q_events.o
    dn, rw = q_done.r_stream, q_rw.r_stream
    dn_p, rw_p = Signal(done_layout()), Signal(rewind_layout())
    m.d.comb += [dn_p.eq(dn.payload), rw_p.eq(rw.payload), ri.limit_qpn.eq(ack.payload.qpn)]
    ahead = Signal(PSN_BITS)
    m.d.comb += ahead.eq(ack.payload.psn - ri.limit_psn)
    held = Signal()             # an ACK reaching the limit, a NAK past it
    m.d.comb += held.eq(ri.limit & ~ahead[PSN_BITS - 1]
                        & ((ack.payload.syndrome == Syndrome.ACK.value) | (ahead != 0)))
    e = ev.payload
    with m.If(dn.valid):
        m.d.comb += [ev.valid.eq(1), e.qpn.eq(dn_p.qpn), e.psn.eq(dn_p.psn),
                     e.syndrome.eq(Syndrome.ACK.value), dn.ready.eq(ev.ready)]
    with m.Elif(rw.valid):
        m.d.comb += [ev.valid.eq(1), e.qpn.eq(rw_p.qpn), e.psn.eq(rw_p.psn),
                     e.syndrome.eq(Syndrome.NAK_PSN_SEQUENCE.value), rw.ready.eq(ev.ready)]
    with m.Elif(ack.valid & ~held):
        m.d.comb += [ev.valid.eq(1), e.eq(ack.payload), ack.ready.eq(ev.ready)]
    # The intake's counters, then the frame sender's (REQUESTER_READ_COUNTERS).
    ports = {n: getattr(ri, n) for n in INTAKE_COUNTERS}
    ports.update({n: getattr(req.sender, n) for n in SENDER_COUNTERS})
    sig = CountersSignature(REQUESTER_READ_COUNTERS)
    wiring.connect(m, PortView(sig, ports), wiring.flipped(req.read))
