"""Receive ACK/NAK frames at the requester: check them and queue (QPN, PSN, syndrome)."""

from amaranth import Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.rdma.eth_ip_udp import framing_param
from rtl.rdma.frame_check import FrameCheck
from spec.formats.packet import packet_layout, packet_signature
from spec.formats.roce import (
    ACK_HEADER,
    ETHERTYPE_IPV4,
    IP_PROTO_UDP,
    ROCE_UDP_PORT,
    OpCode,
    bswap,
)
from spec.formats.scaleup import SU_ACK_HEADER, Header, ScaleUpType
from spec.rdma_stages import ack_event_layout

__all__ = ["AckReceiver"]


class AckReceiver(wiring.Component):
    """Check frames from the link and pass on the ACKNOWLEDGE ones as events.

    Ports
    -----
    i : In(packet_signature(64))
        Frames with ICRC and FCS; always ready (a link can not be held).
    o : Out(stream.Signature(ack_event_layout()))
        One event per good ACK/NAK frame, offered in the cycle of its last beat. If
        ``o.ready`` is low then, the receiver *holds* the event (one event register) and
        offers it in every following cycle until it is taken. The hold is the last
        buffer: a good frame whose last beat arrives while an event is held and not
        taken in that cycle is lost (``lost``); taken in that cycle, the new event
        takes its place in the hold.
    acks, dropped : Out(32)
        Good ACK/NAK frames; frames dropped (bad FCS or ICRC, wrong length, not an
        ACKNOWLEDGE of RoCEv2).
    lost, wait_cycles : Out(32)
        Good ACK/NAK frames lost because the hold was occupied; cycles in which an
        event was offered and not taken (backpressure).

    Timing: zero latency while ``o`` takes every event (the event leaves with the last
    beat); a held event leaves in the first cycle ``o.ready`` is high.

    ``header="scaleup"``: a good frame is 34 bytes (one beat) with the scale-up ``type``
    BTH, ``length`` 20 (BTH, AETH, ICRC), the scale-up ICRC and the ACKNOWLEDGE opcode;
    any other frame is ``dropped``.
    """

    def __init__(self, header="roce"):
        self.framing = framing_param(self, header)
        super().__init__({"i": In(packet_signature(64)),
                          "o": Out(stream.Signature(ack_event_layout())),
                          "acks": Out(32), "dropped": Out(32), "lost": Out(32),
                          "wait_cycles": Out(32)})

    def elaborate(self, platform):
        if self.framing.header is Header.SCALEUP:
            return self._elaborate_scaleup()
        m = Module()
        m.submodules.check = chk = FrameCheck()
        beat = self.i.payload
        m.d.comb += [self.i.ready.eq(1), chk.beat.eq(beat), chk.en.eq(self.i.valid)]
        b0 = Signal(packet_layout(64))
        with m.If(self.i.valid & beat.first):
            m.d.sync += b0.eq(beat)
        hdr = Signal(ACK_HEADER)
        m.d.comb += hdr.eq(b0.data[:ACK_HEADER.size])
        ok = Signal()
        ip_len = Signal(16)
        m.d.comb += [
            ip_len.eq(bswap(hdr.ip.total_length, 2)),
            ok.eq(chk.fcs_ok & chk.icrc_ok & ~beat.first & (chk.length == 66)
                  & (ip_len == 48)
                  & (hdr.eth.ethertype == bswap(Const(ETHERTYPE_IPV4, 16), 2))
                  & (hdr.ip.protocol == IP_PROTO_UDP)
                  & (hdr.udp.dport == bswap(Const(ROCE_UDP_PORT, 16), 2))
                  & (hdr.bth.opcode == OpCode.RC_ACKNOWLEDGE)),
        ]
        self._deliver(m, hdr, ok, self.i.valid & beat.last)
        return m

    def _elaborate_scaleup(self):
        m = Module()
        m.submodules.check = chk = FrameCheck(header="scaleup")
        beat = self.i.payload
        m.d.comb += [self.i.ready.eq(1), chk.beat.eq(beat), chk.en.eq(self.i.valid)]
        hdr = Signal(SU_ACK_HEADER)
        m.d.comb += hdr.eq(beat.data[:SU_ACK_HEADER.size])
        frame_bytes = self.framing.ack_bytes + 4 + 4
        ok = Signal()
        m.d.comb += [
            ok.eq(chk.fcs_ok & chk.icrc_ok & beat.first & (chk.length == frame_bytes)
                  & (bswap(hdr.su.length, 2) == frame_bytes - self.framing.outer - 4)
                  & (hdr.su.type == ScaleUpType.BTH.value)
                  & (hdr.bth.opcode == OpCode.RC_ACKNOWLEDGE)),
        ]
        self._deliver(m, hdr, ok, self.i.valid & beat.last)
        return m

    def _deliver(self, m, hdr, ok, frame_end):
        """The ACK's fields from ``hdr`` (its BTH and AETH) on ``o``, valid in the cycle
        of the frame's last beat (``frame_end``) when ``ok``, or held (see the class);
        ``acks`` or ``dropped`` counts the frame."""
        ev = Signal(ack_event_layout())
        m.d.comb += [
            ev.qpn.eq(bswap(hdr.bth.dest_qp, 3)),
            ev.psn.eq(bswap(hdr.bth.psn, 3)),
            ev.syndrome.eq(hdr.aeth.syndrome),
            ev.msn.eq(bswap(hdr.aeth.msn, 3)),
        ]
        new = Signal()
        m.d.comb += new.eq(frame_end & ok)
        held, held_ev = Signal(), Signal(ack_event_layout())
        m.d.comb += [self.o.valid.eq(held | new),
                     self.o.payload.eq(Mux(held, held_ev, ev))]
        with m.If(frame_end):
            with m.If(ok):
                m.d.sync += self.acks.eq(self.acks + 1)
            with m.Else():
                m.d.sync += self.dropped.eq(self.dropped + 1)
        # (The counters as sums, not branches: with a consumer that is always ready, as
        # the requester's ACK queue, the branches would be empty after constant folding.)
        m.d.sync += [self.wait_cycles.eq(self.wait_cycles + (self.o.valid & ~self.o.ready)),
                     self.lost.eq(self.lost + (held & ~self.o.ready & new))]
        with m.If(held):
            with m.If(self.o.ready):
                m.d.sync += [held.eq(new), held_ev.eq(ev)]
        with m.Elif(new & ~self.o.ready):
            m.d.sync += [held.eq(1), held_ev.eq(ev)]
