"""The NIC's transmit side: segmenter, framer, FCS and the link's credit gate."""

from amaranth import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.common.credit_counter import CreditCounter
from rtl.common.fcs_inserter import FcsInserter
from rtl.common.min_frame_padder import MinFramePadder
from rtl.nic.nic_tx_replay import merge_replay
from rtl.nic.outstanding_tracker import sent_event_layout
from rtl.nic.peer_retry_sender import PeerRetrySender, ack_event_layout
from rtl.nic.store_segmenter import StoreSegmenter
from rtl.nic.tracker_memory import wide_sent_layout
from rtl.nic.tx_framer import NicTxFramer
from spec.checks import check_int, reject
from spec.formats.nic import (
    MIN_FRAME_BYTES,
    PSN_BYTES,
    Framing,
    completion_beats,
    store_cmd_layout,
)
from spec.formats.packet import packet_signature
from spec.nic import COMPLETIONS

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
    completion : str
        ``"credit"`` (default) or ``"e2e"``: completion frames from a
        :class:`rtl.nic.completion_gen.CompletionGen` share the link (ports ``cpl`` and
        ``sent`` below).
    id_bits : int
        8, or 16 for a NIC with many destinations (L2): the store command's ``dst``,
        ``node_id`` and the ``sent`` event's ``dst`` of 16 bits (:class:`NicTxFramer`).
    peer_retry : dict, optional
        ``e2e`` only: ``{"peers": P, "window": N, "timeout": T}`` for the per-peer retry
        (docs/nic.md, "Per-peer retry"; :mod:`rtl.nic.nic_tx_replay`): the framer puts
        each store frame's PSN after the header, a :class:`~rtl.nic.peer_retry_sender.
        PeerRetrySender` (attribute ``peer``) gives the PSNs and slots, and a replay
        memory holds each frame's wire beats by slot; port ``ack`` (the completions
        that reached the node) goes to the sender.

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
    cpl : In(packet_signature(width))
        ``e2e`` only: completion frames without FCS (an FCS inserter of their own).
    sent : Out(stream.Signature(sent_event_layout, always_ready=True))
        ``e2e`` only: a store frame's first beat left for ``dst`` this cycle.

    ack : In(stream.Signature(ack_event_layout, always_ready=True))
        ``peer_retry`` only: the sender's ``ack``.

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

    ``e2e``: between store frames (no store frame half sent), a completion frame offered
    at ``cpl`` has the link first: in that cycle no store frame starts, and the
    completion's first beat leaves once ``credits >= completion_beats`` (stores wait
    too), its later beats back to back. A store frame is never interrupted.

    ``peer_retry``: between frames a completion first, then the resend the sender offers
    (its first beat with ``credits >= `` the frame's beats, the rest back to back from
    the replay memory, no command beat needed), then a new store frame, which starts
    only with the sender's ``can_send``. The twin: :class:`pymodel.nic.nic_tx.
    NicTxModel` with a ``sender``.
    """

    def __init__(self, width, framing, credits, max_payload, completion="credit",
                 id_bits=8, peer_retry=None):
        if completion not in COMPLETIONS:
            reject(self, f"completion must be one of {list(COMPLETIONS)}, "
                         f"not {completion!r}")
        self.e2e = completion == "e2e"
        self.max_credits = check_int(self, "credits", credits, 1, 65535)
        self.peer_retry = peer_retry
        if peer_retry is not None and (not self.e2e or id_bits != 8):
            reject(self, "peer_retry needs completion 'e2e' and 8-bit ids")
        self.framer = NicTxFramer(width, framing, id_bits, PSN_BYTES if peer_retry else 0)
        self.peer = (PeerRetrySender(peer_retry["peers"], peer_retry["window"],
                                     peer_retry["timeout"]) if peer_retry else None)
        self.segmenter = StoreSegmenter(width, max_payload, id_bits)
        sent_layout = sent_event_layout if id_bits == 8 else wide_sent_layout
        self.width, self.framing = self.framer.width, self.framer.framing
        self.counter = CreditCounter(credits)
        super().__init__({
            "cmd": In(stream.Signature(store_cmd_layout(width, id_bits))),
            "o": Out(packet_signature(width)),
            "node_id": In(id_bits),
            "give": In(1),
            "credits": Out(range(credits + 1)),
            "underflow": Out(1),
            "overflow": Out(1),
            **({"cpl": In(packet_signature(width)),
                "sent": Out(stream.Signature(sent_layout, always_ready=True))}
               if self.e2e else {}),
            **({"ack": In(stream.Signature(ack_event_layout, always_ready=True))}
               if peer_retry else {}),
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
        if self.peer is not None:
            start_ok = merge_replay(self, m, fcs.o, seg.o.payload.dst, cnt, framer)
        elif self.e2e:
            start_ok = self._merge(m, fcs.o, seg.o.payload.dst, cnt, framer)
        else:
            wiring.connect(m, fcs.o, wiring.flipped(self.o))
            start_ok = cnt.credits >= framer.need
        m.d.comb += [
            framer.node_id.eq(self.node_id),
            framer.start_ok.eq(start_ok),
            cnt.take.eq(self.o.valid & self.o.ready),
            cnt.give.eq(self.give),
            self.credits.eq(cnt.credits),
            self.underflow.eq(cnt.underflow),
            self.overflow.eq(cnt.overflow),
        ]
        return m

    def _merge(self, m, st, dst, cnt, framer):
        """``e2e``: the store frames ``st`` and the completion frames onto ``o``; returns
        the framer's ``start_ok``."""
        m.submodules.cpl_fcs = cf = FcsInserter(self.width)
        wiring.connect(m, wiring.flipped(self.cpl), cf.i)
        st_busy, cpl_busy, sel, go = Signal(), Signal(), Signal(), Signal()
        need = completion_beats(self.width, self.framing)
        m.d.comb += [
            sel.eq(cpl_busy | (~st_busy & cf.o.valid)),
            go.eq(sel & (cpl_busy | (cnt.credits >= need))),
            self.o.valid.eq(Mux(sel, cf.o.valid & go, st.valid)),
            self.o.payload.eq(Mux(sel, cf.o.payload.as_value(), st.payload.as_value())),
            cf.o.ready.eq(go & self.o.ready),
            st.ready.eq(~sel & self.o.ready),
            self.sent.valid.eq(st.valid & st.ready & st.payload.first),
            self.sent.payload.dst.eq(dst),
        ]
        with m.If(cf.o.valid & cf.o.ready):
            m.d.sync += cpl_busy.eq(~cf.o.payload.last)
        with m.If(st.valid & st.ready):
            m.d.sync += st_busy.eq(~st.payload.last)
        return (cnt.credits >= framer.need) & ~sel
