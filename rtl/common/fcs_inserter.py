"""Append the Ethernet FCS to each packet of a stream."""

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.common.crc32 import Crc32Core
from spec.formats.packet import check_width, packet_signature

__all__ = ["FcsInserter", "fcs_at"]


def fcs_at(crc, n, w):
    """``crc`` (32 bits) placed at byte ``n`` of ``w + 4`` bytes: ``(crc << 8 * n)`` cut to
    ``8 * w + 32`` bits, for every value of ``n``.

    The shift amount is ``n`` with three zero bits below it rather than ``n * 8``: the
    same value, one bit narrower, and a shift is ``32 + 2 ** len(amount) - 1`` bits wide
    before the cut (1,055 bits rather than 2,079 at ``w = 64``), which a Verilated model
    evaluates word by word every cycle (docs/bench.md, "Shifts that a Verilated model
    evaluates cheaply"). Ref: Amaranth language guide, "Shift operators" (the width of
    ``a << b`` is ``len(a) + 2 ** len(b) - 1``).
    """
    return (crc << Cat(Const(0, 3), n))[:8 * w + 32]


class FcsInserter(wiring.Component):
    """Pass packets through and append their 4-byte FCS (``zlib.crc32``, little endian).

    Ports
    -----
    i : In(packet_signature(width))
        Frames without FCS.
    o : Out(packet_signature(width))
        The same frames with the FCS appended after the last byte.

    Timing
    ------
    Zero latency: ``o`` follows ``i`` combinationally and ``i.ready`` is ``o.ready``.
    When the last input beat holds more than ``width - 4`` bytes the FCS spills into one
    extra output beat, during which ``i.ready`` is low (one cycle of backpressure per
    such packet, none otherwise)::

        clk      _/~\\_/~\\_/~\\_/~\\_
        i.valid  ___/~~~~~~~~~~~\\___      packet of 2 beats, the last one full
        i.ready  ~~~~~~~~~~~~~~\\___/~
        o.beat       | B0  | B1' | X |    B1' = B1 + first FCS bytes, X = the rest
        o.last   _____________/~~~~\\_

    Bytes above ``nbytes`` on the last input beat are replaced by zeros.
    """

    def __init__(self, width):
        self.width = check_width(width, self)
        super().__init__({"i": In(packet_signature(width)), "o": Out(packet_signature(width))})

    def elaborate(self, platform):
        m = Module()
        w = self.width
        m.submodules.crc = crc = Crc32Core(w)

        spill = Signal()                     # an extra beat with the FCS tail is pending
        spill_data = Signal(32)
        spill_n = Signal(range(5))

        beat = self.i.payload
        n = beat.nbytes
        mask = Signal(8 * w)
        m.d.comb += mask.eq(Const((1 << (8 * w)) - 1, 8 * w) >> ((w - n) * 8)[:16])
        merged = Signal(8 * w + 32)
        m.d.comb += merged.eq(Cat(beat.data & mask, Const(0, 32)) | fcs_at(crc.crc, n, w))

        m.d.comb += [crc.beat.eq(beat), crc.en.eq(self.i.valid & self.i.ready)]

        with m.If(spill):
            m.d.comb += [
                self.o.valid.eq(1),
                self.o.payload.data.eq(spill_data),
                self.o.payload.nbytes.eq(spill_n),
                self.o.payload.first.eq(0),
                self.o.payload.last.eq(1),
            ]
            with m.If(self.o.ready):
                m.d.sync += spill.eq(0)
        with m.Else():
            m.d.comb += [
                self.o.valid.eq(self.i.valid),
                self.i.ready.eq(self.o.ready),
                self.o.payload.first.eq(beat.first),
            ]
            with m.If(~beat.last):
                m.d.comb += [
                    self.o.payload.data.eq(beat.data),
                    self.o.payload.nbytes.eq(beat.nbytes),
                ]
            with m.Elif(n <= w - 4):
                m.d.comb += [
                    self.o.payload.data.eq(merged[:8 * w]),
                    self.o.payload.nbytes.eq(n + 4),
                    self.o.payload.last.eq(1),
                ]
            with m.Else():
                m.d.comb += [
                    self.o.payload.data.eq(merged[:8 * w]),
                    self.o.payload.nbytes.eq(w),
                    self.o.payload.last.eq(0),
                ]
                with m.If(self.i.valid & self.o.ready):
                    m.d.sync += [
                        spill.eq(1),
                        spill_data.eq(merged[8 * w:]),
                        spill_n.eq(n + 4 - w),
                    ]
        return m
