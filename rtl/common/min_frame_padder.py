"""Pad packets shorter than a minimum length with zero bytes (the Ethernet minimum frame)."""

from amaranth import Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from spec.checks import check_int
from spec.formats.packet import check_width, packet_signature

__all__ = ["MinFramePadder"]


class MinFramePadder(wiring.Component):
    """Pass packets through, padding each to at least ``min_bytes`` with zero bytes.

    Parameters
    ----------
    width : int
        Datapath bytes (8, 16, 32, 64).
    min_bytes : int
        Smallest packet length out (60 in front of an FCS inserter: IEEE 802.3 clause
        3.2.8, a 64-byte minimum frame with its FCS).

    Ports
    -----
    i : In(packet_signature(width))
        Packets (every beat full but the last).
    o : Out(packet_signature(width))
        The same packets, bytes above ``nbytes`` on each last beat set to zero; a packet
        of ``n < min_bytes`` bytes leaves with ``min_bytes``: its last beat is filled
        with zeros, then ``ceil(min_bytes / width) - ceil(n / width)`` zero beats follow.

    Timing
    ------
    Zero latency, ``i.ready = o.ready`` except while pad beats leave: the input beat
    that ends a short packet is taken with the first output beat it makes, and the
    extra zero beats hold ``i.ready`` low (one cycle each). A packet of at least
    ``min_bytes`` passes without any idle cycle.
    """

    def __init__(self, width, min_bytes):
        self.width = check_width(width, self)
        self.min_bytes = check_int(self, "min_bytes", min_bytes, 1, 8191)
        super().__init__({"i": In(packet_signature(width)), "o": Out(packet_signature(width))})

    def elaborate(self, platform):
        m = Module()
        w, mb = self.width, self.min_bytes
        beat, out = self.i.payload, self.o.payload
        count = Signal(range(8192 + w))      # bytes of the packet sent before this beat
        padding = Signal()                   # zero beats are due
        before = Mux(beat.first, 0, count)
        short = beat.last & (before + beat.nbytes < mb)
        mask = Const((1 << (8 * w)) - 1, 8 * w) >> ((w - beat.nbytes) * 8)[:16]
        want = Mux(before + w >= mb, mb - before, w)   # bytes of a padded beat
        pad_n = Mux(count + w >= mb, mb - count, w)
        m.d.comb += [
            self.o.valid.eq(padding | self.i.valid),
            self.i.ready.eq(~padding & self.o.ready),
            out.data.eq(Mux(padding, 0, beat.data & mask)),
            out.first.eq(~padding & beat.first),
            out.nbytes.eq(Mux(padding, pad_n, Mux(short, want, beat.nbytes))),
            out.last.eq(Mux(padding, count + w >= mb,
                            beat.last & (~short | (before + w >= mb)))),
        ]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += count.eq(Mux(padding, count, before) + out.nbytes)
            with m.If(padding):
                m.d.sync += padding.eq(count + w < mb)
            with m.Else():
                m.d.sync += padding.eq(short & (before + w < mb))
        return m
