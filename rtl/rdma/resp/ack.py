"""ACK sender of the responder: ACK/NAK jobs to frames with ICRC and FCS."""

from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.common.fcs_inserter import FcsInserter
from rtl.rdma.ack_framer import AckFramer
from rtl.rdma.icrc_inserter import IcrcInserter
from spec.formats.packet import packet_signature
from spec.rdma_stages import ack_layout

__all__ = ["AckSender"]


class AckSender(wiring.Component):
    """Send one ACKNOWLEDGE frame (66 bytes: 2 beats) per job.

    Ports
    -----
    i : In(stream.Signature(ack_layout()))
        ACK/NAK jobs from the verify stage.
    o : Out(packet_signature(64))
        The frames (:class:`~rtl.rdma.ack_framer.AckFramer`,
        :class:`~rtl.rdma.icrc_inserter.IcrcInserter`,
        :class:`~rtl.common.fcs_inserter.FcsInserter`).
    acks : Out(32)
        Jobs taken.

    Timing
    ------
    A job at the head of ``i`` is taken in a cycle with ``o.ready``: beat 0 (64 bytes)
    leaves in that cycle, beat 1 (the last 2 bytes of the FCS) in the next cycle with
    ``o.ready``, during which no job is taken. So one ACK every 2 cycles at best.
    With ``header="scaleup"`` the frame is 34 bytes, one beat: one ACK a cycle.
    """

    def __init__(self, header="roce"):
        self.header = header
        super().__init__({"i": In(stream.Signature(ack_layout())),
                          "o": Out(packet_signature(64)), "acks": Out(32)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.framer = framer = AckFramer(self.header)
        m.submodules.icrc = icrc = IcrcInserter(header=self.header)
        m.submodules.fcs = fcs = FcsInserter(64)
        wiring.connect(m, wiring.flipped(self.i), framer.i)
        wiring.connect(m, framer.o, icrc.i)
        wiring.connect(m, icrc.o, fcs.i)
        wiring.connect(m, fcs.o, wiring.flipped(self.o))
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += self.acks.eq(self.acks + 1)
        return m
