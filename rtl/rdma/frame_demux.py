"""Downlink demux of a node of the RDMA fabric: ACK/NAK frames to the requester, the rest
to the responder, by BTH opcode."""

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from spec.formats.packet import packet_signature
from spec.formats.roce import OpCode
from spec.rdma_fabric import OPCODE_BYTE

__all__ = ["FrameDemux"]


class FrameDemux(wiring.Component):
    """Split one frame stream by the BTH opcode of each frame.

    Ports
    -----
    i : In(packet_signature(64))
        The downlink; always ready (a link can not be held).
    ack : Out(packet_signature(64))
        Frames whose BTH opcode (frame byte :data:`spec.rdma_fabric.OPCODE_BYTE`, in the
        first beat) is RC ACKNOWLEDGE: to the requester's ACK input.
    data : Out(packet_signature(64))
        Every other frame: to the responder. ``ready`` of both outputs is ignored (both
        engines take a beat in every cycle).

    Timing
    ------
    Zero latency: a beat on ``i`` is on its output in the same cycle. The output is
    chosen on the first beat and kept for the rest of the frame.
    """

    i: In(packet_signature(64))
    ack: Out(packet_signature(64))
    data: Out(packet_signature(64))

    def elaborate(self, platform):
        m = Module()
        k = 8 * OPCODE_BYTE
        held = Signal()           # the frame in progress goes to ``ack``
        is_ack = Signal()
        beat = self.i.payload
        m.d.comb += [
            self.i.ready.eq(1),
            is_ack.eq(Mux(beat.first, beat.data[k:k + 8] == OpCode.RC_ACKNOWLEDGE.value,
                          held)),
            self.ack.payload.eq(beat), self.data.payload.eq(beat),
            self.ack.valid.eq(self.i.valid & is_ack),
            self.data.valid.eq(self.i.valid & ~is_ack),
        ]
        with m.If(self.i.valid & beat.first):
            m.d.sync += held.eq(is_ack)
        return m
