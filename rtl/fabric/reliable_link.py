"""A faulty link made reliable by link-level retry: ReplayTx -> FaultyLink -> ReplayRx."""

from amaranth import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.fabric.faulty_link import FaultyLink
from rtl.fabric.link import DelayLine
from rtl.fabric.replay_rx import ReplayRx
from rtl.fabric.replay_tx import ReplayTx
from spec.checks import check_int
from spec.fabric import RX_COUNTERS, TX_COUNTERS, retry_sizes
from spec.formats.link_retry import TAG_BITS, ack_layout
from spec.formats.packet import check_width, packet_signature
from spec.ports import CountersSignature, PortView

__all__ = ["ReliableLink", "connect_wire"]


class ReliableLink(wiring.Component):
    """A :class:`rtl.fabric.faulty_link.FaultyLink` with link-level retry at its ends.

    Parameters
    ----------
    width, latency :
        As for ``Link``: datapath bytes and cycles of wire delay (each way).
    max_frame_beats : int
        The longest frame, in beats; sizes the buffers (:func:`spec.fabric.retry_sizes`).
    tx_depth, rx_depth, timeout : int, optional
        Override :func:`spec.fabric.retry_sizes`.

    Ports
    -----
    i : In(packet_signature(width))
        Frames with FCS; ``ready`` falls, between frames, while the replay buffer could
        not hold a whole frame more, and inside a frame while it could not hold a beat.
    o : Out(packet_signature(width))
        Every frame of ``i``, once, whole and in order (store and forward at the
        receiving end); ``o.ready`` is honoured.
    settings : In(SettingsSignature)
        The fault settings of the wire (:data:`spec.fabric.SETTINGS` and
        :data:`spec.fabric.RETRY_SETTINGS`: the wire also damages the frames' tags and
        drops or damages ACK/NAKs).
    counters : Out(...)
        ``counters.tx``, ``counters.rx``, ``counters.link`` (:meth:`port_signatures`;
        the names of :data:`spec.fabric.COUNTER_PORTS` with ``.`` for the first ``_``).

    Timing
    ------
    Without faults a frame of ``n`` beats taken on ``i`` in cycles ``c .. c+n-1`` (no
    gaps) leaves on ``o`` in cycles ``c + n + latency + 1 ..``: one cycle in the replay
    buffer, ``latency`` on the wire, ``n - 1`` cycles to receive the rest of the frame
    and one to judge it. ACKs and NAKs take ``latency`` cycles back, on a sideband of the
    wire (like the credits) that the wire may drop or damage; tags and ACK/NAKs carry a
    check bit, so a damaged one counts as lost and the timer or the next NAK recovers.
    Recovery: docs/recovery.md.
    """

    def __init__(self, width, latency, max_frame_beats, tx_depth=None, rx_depth=None,
                 timeout=None):
        self.width = check_width(width, self)
        self.latency = check_int(self, "link latency (cycles)", latency, 1, 1024)
        self.max_frame_beats = check_int(self, "max_frame_beats", max_frame_beats, 1, 1024)
        tx_d, rx_d, t = retry_sizes(latency, max_frame_beats)
        self.tx = ReplayTx(width, tx_depth or tx_d, timeout or t, max_frame_beats)
        self.rx = ReplayRx(width, rx_depth or rx_d)
        self.wire = FaultyLink(width, latency, max_frame_beats=max_frame_beats,
                               fifo_depth=2 * max_frame_beats + 2, tag_bits=TAG_BITS,
                               side_bits=ack_layout.size)
        settings, counters = self.port_signatures()
        super().__init__({"i": In(packet_signature(width)), "o": Out(packet_signature(width)),
                          "settings": In(settings), "counters": Out(counters)})

    @staticmethod
    def port_signatures():
        """The signatures of the ``settings`` port (the wire's: :data:`spec.fabric.SETTINGS`
        and :data:`spec.fabric.RETRY_SETTINGS`) and the ``counters`` port: members
        ``tx`` (:data:`spec.fabric.TX_COUNTERS`), ``rx``
        (:data:`spec.fabric.RX_COUNTERS`) and ``link`` (the wire's counters and flags),
        each a :class:`spec.ports.CountersSignature`."""
        wire_settings, wire_counters = FaultyLink.port_signatures(tag=True, side=True)
        return wire_settings, wiring.Signature({
            "tx": Out(CountersSignature(TX_COUNTERS)),
            "rx": Out(CountersSignature(RX_COUNTERS)),
            "link": Out(wire_counters)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.tx, m.submodules.wire, m.submodules.rx = self.tx, self.wire, self.rx
        wiring.connect(m, wiring.flipped(self.i), self.tx.i)
        wiring.connect(m, self.tx.o, self.wire.i)
        wiring.connect(m, self.wire.o, self.rx.i)
        wiring.connect(m, self.rx.o, wiring.flipped(self.o))
        wiring.connect(m, wiring.flipped(self.settings), self.wire.settings)
        # The ACK/NAK sideband: through the wire's faults, then ``latency`` cycles back
        m.d.comb += [self.wire.side_i.valid.eq(self.rx.ack.valid),
                     self.wire.side_i.payload.eq(self.rx.ack.payload)]
        # on a DelayLine (registers when short, a memory when long).
        m.submodules.ack_wire = back = DelayLine(
            data.StructLayout({"valid": 1, "payload": ack_layout}), self.latency)
        m.d.comb += [back.i.valid.eq(self.wire.side_o.valid),
                     back.i.payload.eq(self.wire.side_o.payload),
                     self.tx.ack.valid.eq(back.o.valid), self.tx.ack.payload.eq(back.o.payload)]
        counters = self.counters
        wiring.connect(m, PortView(counters.tx.signature, self.tx), wiring.flipped(counters.tx))
        wiring.connect(m, PortView(counters.rx.signature, self.rx), wiring.flipped(counters.rx))
        wiring.connect(m, self.wire.counters, wiring.flipped(counters.link))
        return m


def connect_wire(m, link, flt, counters, wire):
    """Drive ``link``'s (a :class:`ReliableLink`) fault settings from a top's shared
    run-time settings port ``flt`` with the wire's own seed, ``flt.seed + wire`` (16
    bits, a signal named ``flt_seed<wire>``), and its counters to the top's output port
    ``counters``. Combinational: no cycle of latency."""
    settings = PortView(wiring.flipped(flt).signature, flt)
    settings.seed = Signal(16, name=f"flt_seed{wire}")
    m.d.comb += settings.seed.eq((flt.seed + wire)[:16])
    wiring.connect(m, settings, link.settings)
    wiring.connect(m, link.counters, wiring.flipped(counters))
