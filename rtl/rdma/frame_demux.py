"""Downlink demux of a node of the RDMA fabric: ACK/NAK frames (with ``reads``, also READ
responses and ATOMIC ACKNOWLEDGEs) to the requester, the rest to the responder, by BTH
opcode."""

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from spec.checks import reject
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
        first beat) is RC ACKNOWLEDGE, and with ``reads`` every response to a requester:
        RC RDMA READ RESPONSE FIRST to ONLY (0x0D-0x10), ACKNOWLEDGE (0x11) and ATOMIC
        ACKNOWLEDGE (0x12) (:class:`spec.formats.roce.OpCode`): to the requester's input.
    data : Out(packet_signature(64))
        Every other frame: to the responder. ``ready`` of both outputs is ignored (both
        engines take a beat in every cycle).

    Parameters
    ----------
    reads : bool
        The node's requester posts RDMA READ and atomics (its input takes their
        responses). False: the demux of the writes-only fabric.

    Timing
    ------
    Zero latency: a beat on ``i`` is on its output in the same cycle. The output is
    chosen on the first beat and kept for the rest of the frame.
    """

    i: In(packet_signature(64))
    ack: Out(packet_signature(64))
    data: Out(packet_signature(64))

    def __init__(self, reads=False):
        if not isinstance(reads, bool):
            reject(self, f"reads must be True or False, not {reads!r}")
        self.reads = reads
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        k = 8 * OPCODE_BYTE
        held = Signal()           # the frame in progress goes to ``ack``
        is_ack = Signal()
        beat = self.i.payload
        op = beat.data[k:k + 8]
        if self.reads:
            to_req = ((op >= OpCode.RC_RDMA_READ_RESPONSE_FIRST.value)
                      & (op <= OpCode.RC_ATOMIC_ACKNOWLEDGE.value))
        else:
            to_req = op == OpCode.RC_ACKNOWLEDGE.value
        m.d.comb += [
            self.i.ready.eq(1),
            is_ack.eq(Mux(beat.first, to_req, held)),
            self.ack.payload.eq(beat), self.data.payload.eq(beat),
            self.ack.valid.eq(self.i.valid & is_ack),
            self.data.valid.eq(self.i.valid & ~is_ack),
        ]
        with m.If(self.i.valid & beat.first):
            m.d.sync += held.eq(is_ack)
        return m
