"""The transmit side of memory frames: responses, requests and raw frames onto one link,
with FCS and the link's credit gate."""

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.common.credit_counter import CreditCounter
from rtl.common.fcs_inserter import FcsInserter
from spec.checks import check_int
from spec.formats.nic_mem import MEM_WIDTH
from spec.formats.packet import packet_signature

__all__ = ["MemTx"]


class MemTx(wiring.Component):
    """Merge three frame sources onto the uplink, append the FCS, spend credits.

    Parameters
    ----------
    credits : int
        Beats of receive buffer at the far end of the link (the switch's ingress FIFO).

    Ports
    -----
    rsp : In(packet_signature(64))
        The responder's frames without FCS (:class:`rtl.nic.mem_responder.MemResponder`).
    rsp_has : In(1)
        The responder has a response to send (whether or not it may start).
    rsp_need : In(8)
        Its wire beats, FCS included.
    rsp_start_ok : Out(1)
        ``credits >= rsp_need``: the responder may offer its first beat.
    req : In(packet_signature(64))
        The requester's one-beat request frames without FCS.
    raw : In(packet_signature(64))
        Further one-beat frames without FCS (at most 60 bytes: any content, the
        testbench's hostile frames).
    o : Out(packet_signature(64))
        To the link. A plain link is always ready; a reliable link (NicMemTop's
        ``link_retry``) lowers ``ready`` while its replay buffer is full: then no source
        is taken, nothing changes (the FCS's spill beat waits too), and no credit is
        spent.
    give : In(1)
        One credit returned by the far end this cycle.
    credits : Out(range(credits + 1))
    underflow, overflow : Out(1)
        The credit counter's sticky errors (stay low while the protocol is kept).

    Timing
    ------
    Zero latency from a source to ``o``. A response frame once started is never
    interrupted. Between frames the responder comes first: while it has a response
    (``rsp_has``) no other frame starts, and its first beat leaves once ``credits >=
    rsp_need``; otherwise a request leaves when ``credits >= 1``, and a raw frame when
    there is no request either. Each beat on ``o`` (the FCS's spill beat included)
    takes one credit; a credit given in cycle ``t`` counts from ``t + 1``.
    """

    def __init__(self, credits):
        self.max_credits = check_int(self, "credits", credits, 1, 65535)
        sig = packet_signature(MEM_WIDTH)
        super().__init__({
            "rsp": In(sig), "rsp_has": In(1), "rsp_need": In(8), "rsp_start_ok": Out(1),
            "req": In(sig), "raw": In(sig), "o": Out(sig), "give": In(1),
            "credits": Out(range(credits + 1)), "underflow": Out(1), "overflow": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.fcs = fcs = FcsInserter(MEM_WIDTH)
        m.submodules.counter = cnt = CreditCounter(self.max_credits)
        busy = Signal()
        sel_rsp = Signal()
        one = Signal()
        m.d.comb += [
            sel_rsp.eq(busy | self.rsp_has),
            one.eq(~sel_rsp & (cnt.credits >= 1)),
            self.rsp_start_ok.eq(cnt.credits >= self.rsp_need),
        ]
        use_req = one & self.req.valid
        use_raw = one & ~self.req.valid & self.raw.valid
        m.d.comb += [
            fcs.i.valid.eq(Mux(sel_rsp, self.rsp.valid, use_req | use_raw)),
            fcs.i.payload.eq(Mux(sel_rsp, self.rsp.payload.as_value(),
                                 Mux(self.req.valid, self.req.payload.as_value(),
                                     self.raw.payload.as_value()))),
            self.rsp.ready.eq(sel_rsp & fcs.i.ready),
            self.req.ready.eq(one & fcs.i.ready),
            self.raw.ready.eq(one & ~self.req.valid & fcs.i.ready),
        ]
        with m.If(self.rsp.valid & self.rsp.ready):
            m.d.sync += busy.eq(~self.rsp.payload.last)
        wiring.connect(m, fcs.o, wiring.flipped(self.o))
        m.d.comb += [
            cnt.take.eq(self.o.valid & self.o.ready),
            cnt.give.eq(self.give),
            self.credits.eq(cnt.credits),
            self.underflow.eq(cnt.underflow),
            self.overflow.eq(cnt.overflow),
        ]
        return m
