"""Write arbiter of the responder: payload words and context write-backs onto ``wr``."""

from amaranth import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from spec.host import wr_layout
from spec.rdma_stages import writeback_layout

__all__ = ["WriteArbiter"]


class WriteArbiter(wiring.Component):
    """Merge two write sources into the host interface's ``wr``, whole TLPs at a time.

    Parameters
    ----------
    depth : int
        Host-memory words.

    Ports
    -----
    pay : In(stream.Signature(wr_layout(depth)))
        Payload words (a TLP ends at a word with ``last``).
    wb : In(stream.Signature(writeback_layout(depth)))
        Context write-backs, one word each; sent as a one-word TLP (``be`` all ones,
        ``last``, no ``mark``).
    o : Out(stream.Signature(wr_layout(depth)))
        To the host interface's ``wr``.

    Timing
    ------
    Zero latency, fixed priority at TLP boundaries: in a cycle where no TLP is open, a
    waiting write-back goes first, else a payload word; once a payload word without
    ``last`` has been taken, only payload words follow until one with ``last`` (the
    host interface gathers a TLP's words in order). A word presented and not taken is
    presented again in the next cycle whatever else arrives (``o.valid`` and
    ``o.payload`` depend only on registers and on the input FIFOs' heads). Write-backs
    go first so that an evicted context is in host memory long before any later fill of
    it is read (a fill of the same QP needs another miss on that entry, after the
    current fill's whole read latency).
    """

    def __init__(self, depth):
        self.depth = depth
        super().__init__({
            "pay": In(stream.Signature(wr_layout(depth))),
            "wb": In(stream.Signature(writeback_layout(depth))),
            "o": Out(stream.Signature(wr_layout(depth))),
        })

    def elaborate(self, platform):
        m = Module()
        lock = Signal()        # a payload TLP is open
        hold = Signal()        # the word of the previous cycle was not taken
        held_wb = Signal()     # ... and it was a write-back
        sel_wb = Signal()
        m.d.comb += sel_wb.eq(Mux(hold, held_wb, ~lock & self.wb.valid))
        out = self.o.payload
        with m.If(sel_wb):
            m.d.comb += [self.o.valid.eq(self.wb.valid), out.addr.eq(self.wb.payload.addr),
                         out.data.eq(self.wb.payload.data), out.be.eq((1 << 64) - 1),
                         out.last.eq(1), self.wb.ready.eq(self.o.ready)]
        with m.Else():
            m.d.comb += [self.o.valid.eq(self.pay.valid), out.eq(self.pay.payload),
                         self.pay.ready.eq(self.o.ready)]
        m.d.sync += [hold.eq(self.o.valid & ~self.o.ready), held_wb.eq(sel_wb)]
        with m.If(self.o.valid & self.o.ready & ~sel_wb):
            m.d.sync += lock.eq(~self.pay.payload.last)
        return m
