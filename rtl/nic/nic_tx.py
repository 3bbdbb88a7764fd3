"""The NIC's transmit side: segmenter, framer, FCS and the link's credit gate."""

from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.common.credit_counter import CreditCounter
from rtl.common.fcs_inserter import FcsInserter
from rtl.common.min_frame_padder import MinFramePadder
from rtl.nic.store_segmenter import StoreSegmenter
from rtl.nic.tx_framer import NicTxFramer
from spec.checks import check_int
from spec.formats.nic import MIN_FRAME_BYTES, Framing, store_cmd_layout
from spec.formats.packet import packet_signature

__all__ = ["NicTx"]


class NicTx(wiring.Component):
    """Store commands in, framed store frames with FCS out onto one link.

    Parameters
    ----------
    width, framing
        As :class:`NicTxFramer`.
    credits : int
        Beats of receive buffer at the far end of the link (the switch's ingress FIFO).
    max_payload : int
        Largest payload of one frame (a multiple of ``width``): longer stores are cut
        into several frames by a :class:`StoreSegmenter`.

    Ports
    -----
    cmd : In(stream.Signature(store_cmd_layout(width)))
        Store commands of 1 to 8191 bytes (accepted: the handshake of their first beat).
    o : Out(packet_signature(width))
        To the link (which is always ready).
    node_id : In(8)
    give : In(1)
        One credit (one buffer beat) returned by the far end this cycle.
    credits : Out(...)
        The credit count: the only state this NIC keeps about its link (no per-peer,
        per-message state).
    underflow, overflow : Out(1)
        Sticky protocol errors of the counter (stay low while both ends follow it).

    Timing
    ------
    Zero latency from ``cmd`` to ``o`` (segmenter, framer, L2 minimum-frame padder and
    FCS inserter are combinational; a padded frame's zero beats take one cycle each).
    Each segment of a long store is a frame of its own, gated like any other frame.
    A frame starts only when ``credits >= need`` (its whole length in beats, FCS and
    padding included); each beat sent takes one credit, so the far end never overflows.
    A credit given in cycle ``t`` counts from ``t + 1``. With enough credits, frames
    leave back to back, one every ``ceil((max(H + L, P) + 4) / W)`` cycles (``P`` = 60
    for L2, 0 for compact): no idle cycle between frames or segments.
    """

    def __init__(self, width, framing, credits, max_payload):
        self.max_credits = check_int(self, "credits", credits, 1, 65535)
        self.segmenter = StoreSegmenter(width, max_payload)
        self.framer = NicTxFramer(width, framing)
        self.width, self.framing = self.framer.width, self.framer.framing
        self.counter = CreditCounter(credits)
        super().__init__({
            "cmd": In(stream.Signature(store_cmd_layout(width))),
            "o": Out(packet_signature(width)),
            "node_id": In(8),
            "give": In(1),
            "credits": Out(range(credits + 1)),
            "underflow": Out(1),
            "overflow": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.segmenter = seg = self.segmenter
        m.submodules.framer = framer = self.framer
        m.submodules.fcs = fcs = FcsInserter(self.width)
        m.submodules.counter = cnt = self.counter
        wiring.connect(m, wiring.flipped(self.cmd), seg.i)
        wiring.connect(m, seg.o, framer.cmd)
        if self.framing is Framing.L2:
            m.submodules.pad = pad = MinFramePadder(self.width, MIN_FRAME_BYTES - 4)
            wiring.connect(m, framer.o, pad.i)
            wiring.connect(m, pad.o, fcs.i)
        else:
            wiring.connect(m, framer.o, fcs.i)
        wiring.connect(m, fcs.o, wiring.flipped(self.o))
        m.d.comb += [
            framer.node_id.eq(self.node_id),
            framer.start_ok.eq(cnt.credits >= framer.need),
            cnt.take.eq(self.o.valid & self.o.ready),
            cnt.give.eq(self.give),
            self.credits.eq(cnt.credits),
            self.underflow.eq(cnt.underflow),
            self.overflow.eq(cnt.overflow),
        ]
        return m
