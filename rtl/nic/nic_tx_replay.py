"""NicTx's transmit merge with the per-peer retry (``peer_retry``; docs/nic.md,
"Per-peer retry"): completions, resends from the replay memory and new store frames onto
one link."""

from amaranth import Array, Mux, Signal
from amaranth.lib import memory, wiring

from rtl.common.fcs_inserter import FcsInserter
from spec.formats.nic import PSN_BYTES, completion_beats, frame_beats
from spec.formats.packet import packet_layout

__all__ = ["merge_replay"]


def merge_replay(tx, m, st, dst, cnt, framer):
    """Build the merge into module ``m`` of :class:`rtl.nic.nic_tx.NicTx` ``tx`` (with
    ``peer_retry``); ``st`` the store frames with FCS, ``dst`` their destination, ``cnt``
    the credit counter, ``framer`` the framer (``ext`` = PSN bytes). Returns the
    framer's ``start_ok``.

    The replay memory holds ``window`` slots of ``B`` beats (``B`` the beats of the
    longest frame, :func:`spec.formats.nic.frame_beats` of ``max_payload`` with the
    PSN): a new frame's wire beats are written, one a cycle as they leave, into the
    slot the sender gives at its first beat (``slot``), its beats count beside it. A
    resend reads the slot the sender offers, combinationally (no latency), beat after
    beat. Priority between frames (no frame half sent): a completion offered or
    leaving, then a resend offered or leaving, then a new store frame (only with the
    sender's ``can_send`` and enough credits; the sender's ``psn`` is held from its
    first beat for the beats that carry it). The sender sees ``send`` at a new frame's
    first beat, ``resend.ready`` at a resend's first beat, ``ack`` from the port."""
    peer = tx.peer
    m.submodules.peer = peer
    w = tx.width
    nb = frame_beats(w, tx.framing, tx.segmenter.max_payload + PSN_BYTES)
    window = peer.window
    layout = packet_layout(w)
    m.submodules.replay = mem = memory.Memory(shape=layout, depth=window * nb, init=[])
    wr, rd = mem.write_port(), mem.read_port(domain="comb")
    rneed = Array(Signal(range(nb + 1), name=f"rneed{k}") for k in range(window))
    wiring.connect(m, wiring.flipped(tx.ack), peer.ack)

    m.submodules.cpl_fcs = cf = FcsInserter(w)
    wiring.connect(m, wiring.flipped(tx.cpl), cf.i)
    st_busy, cpl_busy, rs_busy = Signal(), Signal(), Signal()
    sel, go, rsel, rgo = Signal(), Signal(), Signal(), Signal()
    need = completion_beats(w, tx.framing)
    # The store frame's slot and beat index, its PSN held after the first beat.
    wslot, widx = Signal(range(window)), Signal(range(nb))
    psn = Signal(len(peer.psn))
    # The resend's slot and beat index.
    rslot, ridx = Signal(range(window)), Signal(range(nb))
    cur_slot = Mux(rs_busy, rslot, peer.resend.payload.slot)
    rbeat = Signal(layout)
    m.d.comb += [
        sel.eq(cpl_busy | (~st_busy & ~rs_busy & cf.o.valid)),
        go.eq(sel & (cpl_busy | (cnt.credits >= need))),
        rsel.eq(~sel & (rs_busy | (~st_busy & peer.resend.valid))),
        rgo.eq(rsel & (rs_busy | (cnt.credits >= rneed[peer.resend.payload.slot]))),
        rd.addr.eq(cur_slot * nb + Mux(rs_busy, ridx, 0)),
        rbeat.eq(rd.data),
        tx.o.valid.eq(Mux(sel, cf.o.valid & go, Mux(rsel, rgo, st.valid))),
        tx.o.payload.eq(Mux(sel, cf.o.payload.as_value(),
                            Mux(rsel, rbeat.as_value(), st.payload.as_value()))),
        cf.o.ready.eq(go & tx.o.ready),
        st.ready.eq(~sel & ~rsel & tx.o.ready),
        peer.resend.ready.eq(rsel & ~rs_busy & rgo & tx.o.ready),
        tx.sent.valid.eq(st.valid & st.ready & st.payload.first),
        tx.sent.payload.dst.eq(dst),
        peer.send.valid.eq(tx.sent.valid),
        peer.send.payload.dst.eq(dst),
        framer.psn.eq(Mux(st_busy, psn, peer.psn)),
    ]
    st_take = st.valid & st.ready
    m.d.comb += [
        wr.en.eq(st_take),
        wr.addr.eq(Mux(st_busy, wslot, peer.slot) * nb + Mux(st_busy, widx, 0)),
        wr.data.eq(st.payload.as_value()),
    ]
    with m.If(cf.o.valid & cf.o.ready):
        m.d.sync += cpl_busy.eq(~cf.o.payload.last)
    with m.If(st_take):
        m.d.sync += [st_busy.eq(~st.payload.last), widx.eq(widx + 1)]
        with m.If(~st_busy):
            m.d.sync += [wslot.eq(peer.slot), widx.eq(1), psn.eq(peer.psn),
                         rneed[peer.slot].eq(framer.need)]
    with m.If(rsel & rgo & tx.o.ready):
        m.d.sync += [rs_busy.eq(~rbeat.last), ridx.eq(ridx + 1)]
        with m.If(~rs_busy):
            m.d.sync += [rslot.eq(peer.resend.payload.slot), ridx.eq(1)]
    return (cnt.credits >= framer.need) & ~sel & ~rsel & peer.can_send

