"""The NIC's receive side: check each store frame, write its payload to local memory."""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.common.fcs_checker import FcsChecker
from rtl.common.latency_memory import write_layout
from rtl.nic.completion_gen import ack_event_layout, peer_ack_layout
from rtl.nic.completion_keyed import keyed_event_layout
from rtl.nic.nic_rx_writer import drain_writer
from rtl.nic.outstanding_tracker import cpl_event_layout
from rtl.nic.peer_retry_check import PeerRetryCheck
from rtl.nic.tracker_memory import wide_cpl_layout
from rtl.nic.window_table import WindowTable, window_write_layout
from spec.checks import check_int, reject
from spec.formats.nic import (
    ETHERTYPE,
    ID_BITS,
    MAC_PREFIX,
    MIN_FRAME_BYTES,
    PSN_BYTES,
    Framing,
    NicOp,
    completion_bytes,
    completion_layout,
    header_bytes,
    header_layout,
)
from spec.formats.packet import check_width, packet_signature
from spec.nic import COMPLETIONS

__all__ = ["NicRx", "DropReason", "source_byte"]


class DropReason:
    """Counter names (``drop_<name>``), in the priority order used when a frame has
    several faults."""
    ORDER = ("fcs", "malformed", "dst", "addr", "window")


def source_byte(framing):
    """Wire byte of the source node id: 1 (compact ``src``) or 11 (byte 5 of the L2
    source MAC)."""
    layout = header_layout(framing)
    if Framing(framing) is Framing.L2:
        return layout["src_mac"].offset // 8 + len(MAC_PREFIX)
    return layout["src"].offset // 8


class NicRx(wiring.Component):
    """Check store frames (FCS, format, destination, memory bound, the source's window);
    write good ones.

    Parameters
    ----------
    width : int
        Datapath bytes.
    framing : str or Framing
    max_payload : int
        Largest payload accepted (bytes, 1 to 8191); longer frames are malformed.
    depth : int
        Words of ``width`` bytes of local memory: the window is ``depth * width`` bytes
        from address 0.
    completion : str
        ``"credit"`` (default: stores only; a completion frame is malformed) or
        ``"e2e"`` (:data:`spec.nic.COMPLETIONS`): the ``ack`` and ``cpl`` ports below.
    stands_for : tuple or None
        A receiver of a NIC with many destinations (L2, ``e2e``; docs/nic.md, "4,096
        destinations"): ``(destinations, receivers, port)``. The ids are 16 bits in the
        MACs' bytes 4..5 (``node_id`` In(16), the MAC prefix its first four bytes); a
        frame is for this node when its destination id is ``node_id`` or an id ``d <
        destinations`` with ``1 + d mod receivers == port`` (the switch table's rule);
        ``ack`` carries the frame's destination id and 16-bit source
        (:data:`rtl.nic.completion_keyed.keyed_event_layout`), ``cpl`` a 16-bit source
        (:data:`rtl.nic.tracker_memory.wide_cpl_layout`). The window is the source
        id's low byte's.
    peer_retry : int or None
        The per-peer retry (``e2e``, 8-bit ids; docs/nic.md, "Per-peer retry"): the
        sources tracked (ids ``0 .. peer_retry - 1``, :class:`~rtl.nic.peer_retry_check.
        PeerRetryCheck`, attribute ``check``). A store frame carries its PSN in the
        :data:`~spec.formats.nic.PSN_BYTES` after the header (counted by the length
        check; the payload follows it). A store frame of a known source that passed
        FCS, format and destination is checked in its verdict cycle: in order, taken as
        without retry; a duplicate or a gap is not written nor counted here (the check
        counts it), ``dropped`` in its descriptor; ``ack`` (:data:`rtl.nic.
        completion_gen.peer_ack_layout`) carries the verdict, and a gap after the first
        (verdict 3) has no ``ack``.

    Ports
    -----
    i : In(packet_signature(width))
        Frames with FCS from the link; ``ready`` is always 1 (the receiver never pushes
        back: its buffer holds two maximum frames and drains at one beat a cycle).
    node_id : In(8)
    win_wr : In(stream.Signature(window_write_layout(depth), always_ready=True))
        Writes of the per-source window table (:class:`WindowTable`): source ``src``
        may write the words ``[base, base + size)``. Configuration, written at setup;
        power-up: every source may write the whole memory; a reset keeps the table.
    wr : Out(stream.Signature(write_layout(width, depth), always_ready=True))
        Writes into local memory (``addr`` in words, byte enables).
    wr_last : Out(1)
        With ``wr.valid``: the frame's last write (a host interface's posted-write TLP
        ends there).
    frames_ok, drop_fcs, drop_malformed, drop_dst, drop_addr, drop_window : Out(32)
        Frames written, and frames dropped by reason (each frame counted once, by the
        first fault in this order, :attr:`DropReason.ORDER`): bad FCS; malformed
        (received length differs from header + ``length`` + FCS, raised to 64 for L2 (a
        short L2 frame is padded, so a ``length`` that still fits in its padding cannot
        be told from it and is written as given), ``length`` 0 or above
        ``max_payload``, address not a multiple of ``width``, wrong opcode, wrong
        EtherType); destination not this node; ``addr + length`` beyond the local
        memory (33-bit sum: no wrap); unauthorised: ``[addr, addr + length)`` not inside
        the window of the frame's source (compact ``src`` byte, or byte 5 of the L2
        source MAC; an L2 source MAC whose first five bytes are not ``MAC_PREFIX`` is
        no node and is unauthorised).
    ack : Out(stream.Signature(ack_event_layout, always_ready=True))
        ``e2e`` only: a store frame from a node (compact ``src``; an L2 source MAC with
        ``MAC_PREFIX``) that passed the FCS, format and destination checks is finished:
        valid in the cycle its last buffered beat is drained (after its last memory
        write), ``dropped`` if it was dropped at the address or window check,
        ``ack_req`` the header's flag (spec.formats.nic, "Ack request"). Without
        ``e2e`` the flag is ignored: a store frame with it is checked, written and
        counted (``frames_ok`` or its drop reason) exactly like one without.
    cpl : Out(stream.Signature(cpl_event_layout, always_ready=True))
        ``e2e`` only: a completion frame (opcode COMPLETION, ``completion_bytes + 4``
        bytes, right EtherType for L2) with a good FCS for this node: valid in the
        verdict cycle. Completion frames are not written and not counted in
        ``frames_ok``; a bad one counts under ``drop_fcs``/``drop_malformed``/``drop_dst``.

    Timing
    ------
    The payload is realigned (header bytes removed) and buffered as it arrives. The
    window of the frame's source is read (registered) in the cycle of the beat that
    carries the source byte (:func:`source_byte`; beat 0, or beat 1 for L2 at
    ``width`` 8): a window written in that cycle or later does not apply to the frame.
    In the cycle after a frame's last beat (``T``) the verdict is taken and counted (at
    the clock edge ending ``T + 1``). The writer takes a frame in the cycle after its
    verdict, or right after the previous frame's last buffered beat if that is later,
    and then moves one buffered beat a cycle: beat ``j`` of a frame is written in cycle
    ``T + 2 + j`` when the writer was idle. Beats holding only FCS bytes and beats of
    dropped frames are drained without a write. Bad input is never written: nothing of
    a dropped frame reaches ``wr``.
    """

    def __init__(self, width, framing, max_payload, depth, completion="credit",
                 stands_for=None, peer_retry=None):
        self.width = check_width(width, self)
        try:
            self.framing = Framing(framing)
        except ValueError:
            reject(self, f"framing must be 'l2' or 'compact', not {framing!r}")
        self.max_payload = check_int(self, "max_payload", max_payload, 1, 8191)
        self.depth = check_int(self, "memory depth (words)", depth, 2, 2**20)
        if completion not in COMPLETIONS:
            reject(self, f"completion must be one of {list(COMPLETIONS)}, "
                         f"not {completion!r}")
        self.e2e = completion == "e2e"
        self.stands_for = stands_for
        ack_layout, cpl_layout, id_bits = ack_event_layout, cpl_event_layout, 8
        if stands_for is not None:
            if not self.e2e or self.framing is not Framing.L2:
                reject(self, "stands_for needs completion 'e2e' and framing 'l2'")
            ack_layout, cpl_layout, id_bits = keyed_event_layout, wide_cpl_layout, ID_BITS
        self.check = None
        if peer_retry is not None:
            if not self.e2e or stands_for is not None:
                reject(self, "peer_retry needs completion 'e2e' and 8-bit ids")
            self.check = PeerRetryCheck(peer_retry)
            ack_layout = peer_ack_layout
        self.h0 = header_bytes(self.framing)
        self.hbytes = self.h0 + (PSN_BYTES if peer_retry is not None else 0)
        self.max_push = -(-(max_payload + 4) // width)
        super().__init__({
            "i": In(packet_signature(width)),
            "node_id": In(id_bits),
            "win_wr": In(stream.Signature(window_write_layout(depth), always_ready=True)),
            "wr": Out(stream.Signature(write_layout(width, depth), always_ready=True)),
            "wr_last": Out(1),
            "frames_ok": Out(32),
            "drop_fcs": Out(32),
            "drop_malformed": Out(32),
            "drop_dst": Out(32),
            "drop_addr": Out(32),
            "drop_window": Out(32),
            **({"ack": Out(stream.Signature(ack_layout, always_ready=True)),
                "cpl": Out(stream.Signature(cpl_layout, always_ready=True))}
               if self.e2e else {}),
        })

    def elaborate(self, platform):
        m = Module()
        w, h = self.width, self.hbytes
        q, r = divmod(h, w)
        nh = -(-h // w)
        shift = w.bit_length() - 1
        m.submodules.fcs = chk = FcsChecker(w)
        m.d.comb += [chk.i.valid.eq(self.i.valid), chk.i.payload.eq(self.i.payload),
                     self.i.ready.eq(1), chk.o.ready.eq(1)]
        beat = self.i.payload
        got = Signal()
        m.d.comb += got.eq(self.i.valid)

        # Arrival: beat index, byte count, header capture, realignment.
        bidx = Signal(range(q + 2))
        k = Signal(range(q + 2))
        m.d.comb += k.eq(Mux(beat.first, 0, bidx))

        # The source's window, read from the beat that carries the source byte.
        m.submodules.windows = win = WindowTable(w, self.depth)
        sb = source_byte(self.framing)
        m.d.comb += [
            win.wr.valid.eq(self.win_wr.valid),
            win.wr.payload.eq(self.win_wr.payload),
            win.src.eq(beat.data.word_select(sb % w, 8)),
            win.lookup.eq(got & (k == sb // w)),
        ]
        count = Signal(16)
        hdr_raw = Signal(8 * nh * w)
        prev = Signal(8 * w)
        pushed = Signal(range(self.max_push + 2))
        tail = Signal()
        tail_data = Signal(8 * w)
        pend = Signal()
        fcs_good = Signal()

        m.submodules.data_q = dq = fifo.SyncFIFO(width=8 * w, depth=2 * self.max_push + 2)
        push_beat = Signal()
        room = Signal()
        m.d.comb += room.eq(Mux(beat.first, 0, pushed) < self.max_push)
        m.d.comb += [
            push_beat.eq(~tail & got & (k > q) & room),
            dq.w_en.eq(tail | push_beat),
            dq.w_data.eq(Mux(tail, tail_data,
                             Cat(prev[8 * r:], beat.data[:8 * r]) if r else prev)),
        ]
        m.d.sync += tail.eq(0)
        with m.If(got):
            m.d.sync += [
                bidx.eq(Mux(k > q, k, k + 1)),
                count.eq(Mux(beat.first, 0, count) + beat.nbytes),
                prev.eq(beat.data),
                pushed.eq(Mux(beat.first, 0, pushed) + push_beat),
            ]
            for j in range(nh):
                with m.If(k == j):
                    m.d.sync += hdr_raw.word_select(j, 8 * w).eq(beat.data)
            with m.If(beat.last & (k >= q) & (beat.nbytes > r) & room):
                m.d.sync += [tail.eq(1), tail_data.eq(beat.data >> (8 * r))]
        m.d.sync += pend.eq(got & beat.last)
        with m.If(got & beat.last):
            m.d.sync += fcs_good.eq(chk.fcs_ok)

        # Verdict, in the cycle after the last beat.
        hdr = Signal(header_layout(self.framing))
        h0 = self.h0
        m.d.comb += hdr.eq(hdr_raw[:8 * h0])
        st = hdr.store
        malformed = Signal()
        wrong_dst = Signal()
        out_of_window = Signal()
        unauthorised = Signal()
        expect = st.length + (h + 4)
        if self.framing is Framing.L2:       # padded to the Ethernet minimum frame
            expect = Mux(st.length + h < MIN_FRAME_BYTES - 4, MIN_FRAME_BYTES, expect)
        fmt_bad = ((count != expect) | (st.length == 0)
                   | (st.length > self.max_payload) | (st.addr[:shift] != 0)
                   | (st.opcode != NicOp.STORE))
        is_cpl = Signal() if self.e2e else Const(0, 1)
        if self.e2e:
            chdr = Signal(completion_layout(self.framing))
            m.d.comb += [chdr.eq(hdr_raw[:8 * h0]),
                         is_cpl.eq(chdr.cpl.opcode == NicOp.COMPLETION)]
            fmt_bad = Mux(is_cpl, count != completion_bytes(self.framing) + 4, fmt_bad)
        wide = self.stands_for is not None
        if wide:
            fmt_bad = fmt_bad | (Cat(hdr.ethertype[1], hdr.ethertype[0]) != ETHERTYPE)
            n_dst, n_recv, me = self.stands_for
            prefix = Const(int.from_bytes(MAC_PREFIX[:4], "little"), 32)
            dst_id = Signal(ID_BITS)
            m.d.comb += dst_id.eq(Cat(hdr.dst_mac[5], hdr.dst_mac[4]))
            mine = dst_id == self.node_id
            if me:
                mine = mine | ((dst_id < n_dst) & (dst_id % n_recv == me - 1))
            m.d.comb += wrong_dst.eq((Cat(*[hdr.dst_mac[i] for i in range(4)]) != prefix)
                                     | ~mine)
            src_known = Cat(*[hdr.src_mac[i] for i in range(4)]) == prefix
        elif self.framing is Framing.L2:
            fmt_bad = fmt_bad | (Cat(hdr.ethertype[1], hdr.ethertype[0]) != ETHERTYPE)
            dst = Cat(*[hdr.dst_mac[i] for i in range(6)])
            prefix = Const(int.from_bytes(MAC_PREFIX, "little"), 8 * len(MAC_PREFIX))
            mac = Cat(prefix, self.node_id)
            m.d.comb += wrong_dst.eq(dst != mac)
            src_prefix = Cat(*[hdr.src_mac[i] for i in range(len(MAC_PREFIX))])
            src_known = src_prefix == prefix
        else:
            m.d.comb += wrong_dst.eq(hdr.dst != self.node_id)
            src_known = Const(1, 1)
        m.d.comb += [
            malformed.eq(fmt_bad),
            out_of_window.eq(~is_cpl & (st.addr + st.length > self.depth * w)),
            win.addr.eq(st.addr),
            win.length.eq(st.length),
            unauthorised.eq(~is_cpl & (~src_known | ~win.inside)),
        ]
        fields = {"good": 1, "addr": range(self.depth), "length": 13,
                  "nbeats": range(self.max_push + 2)}
        if self.e2e:
            fields.update({"ack": 1, "dropped": 1, "src": 8, "ack_req": 1})
            src = hdr.src_mac[5] if self.framing is Framing.L2 else hdr.src
            if wide:
                fields.update({"src": ID_BITS, "dst": ID_BITS})
                src = Cat(hdr.src_mac[5], hdr.src_mac[4])
            passed = Signal()
            m.d.comb += [
                passed.eq(pend & fcs_good & ~malformed & ~wrong_dst),
                self.cpl.valid.eq(passed & is_cpl),
                self.cpl.payload.src.eq(src),
                self.cpl.payload.known.eq(src_known),
                self.cpl.payload.status.eq(chdr.cpl.status),
                self.cpl.payload.count.eq(chdr.cpl.count),
                self.cpl.payload.dropped.eq(chdr.cpl.dropped),
            ]
        peer_drop = None
        if self.check is not None:
            m.submodules.check = chk_p = self.check
            verdict, peer_drop = chk_p.verdict, Signal()
            m.d.comb += [
                chk_p.i.valid.eq(passed & ~is_cpl & src_known),
                chk_p.i.payload.src.eq(src),
                chk_p.i.payload.psn.eq(hdr_raw[8 * h0:8 * h]),
                peer_drop.eq(chk_p.i.valid & (verdict != 0)),
            ]
            fields["verdict"] = 2
        desc_layout = data.StructLayout(fields)
        m.submodules.desc_q = descq = fifo.SyncFIFO(width=desc_layout.size,
                                                     depth=2 * self.max_push + 2)
        desc_in = Signal(desc_layout)
        good = Signal()
        m.d.comb += [
            good.eq(fcs_good & ~malformed & ~wrong_dst & ~out_of_window & ~unauthorised
                    & ~is_cpl),
            desc_in.good.eq(good),
            desc_in.addr.eq(st.addr >> shift),
            desc_in.length.eq(st.length),
            desc_in.nbeats.eq(pushed + tail),
            descq.w_en.eq(pend),
            descq.w_data.eq(desc_in),
        ]
        if self.e2e:
            m.d.comb += [
                desc_in.ack.eq(fcs_good & ~malformed & ~wrong_dst & ~is_cpl & src_known),
                desc_in.dropped.eq(out_of_window | unauthorised),
                desc_in.src.eq(src),
                desc_in.ack_req.eq(st.ack_req),
            ]
            if wide:
                m.d.comb += desc_in.dst.eq(dst_id)
            if peer_drop is not None:    # a gap after the first: no ack
                m.d.comb += [
                    desc_in.verdict.eq(Mux(peer_drop, verdict, 0)),
                    desc_in.ack.eq(fcs_good & ~malformed & ~wrong_dst & ~is_cpl & src_known
                                   & ~(peer_drop & (verdict == 3))),
                    desc_in.dropped.eq(out_of_window | unauthorised | peer_drop),
                ]
        ok_at, oow_at, unauth_at = ~is_cpl, out_of_window, unauthorised
        if peer_drop is not None:           # counted by the check, not here
            ok_at, oow_at, unauth_at = (x & ~peer_drop for x in (ok_at, oow_at, unauth_at))
            m.d.comb += good.eq(fcs_good & ~malformed & ~wrong_dst & ~out_of_window
                                & ~unauthorised & ~is_cpl & ~peer_drop)
        with m.If(pend):
            with m.If(~fcs_good):
                m.d.sync += self.drop_fcs.eq(self.drop_fcs + 1)
            with m.Elif(malformed):
                m.d.sync += self.drop_malformed.eq(self.drop_malformed + 1)
            with m.Elif(wrong_dst):
                m.d.sync += self.drop_dst.eq(self.drop_dst + 1)
            with m.Elif(oow_at):
                m.d.sync += self.drop_addr.eq(self.drop_addr + 1)
            with m.Elif(unauth_at):
                m.d.sync += self.drop_window.eq(self.drop_window + 1)
            with m.Elif(ok_at):
                m.d.sync += self.frames_ok.eq(self.frames_ok + 1)

        drain_writer(self, m, descq, dq, desc_layout, wide)
        return m
