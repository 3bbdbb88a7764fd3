"""The responder of RDMA WRITEs: check, write the payload to host memory, acknowledge."""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from rtl.common.fcs_inserter import FcsInserter
from rtl.common.latency_memory import write_layout
from rtl.rdma.ack_framer import AckFramer
from rtl.rdma.frame_check import FrameCheck
from rtl.rdma.icrc_inserter import IcrcInserter
from rtl.rdma.qpc_cache import QpcCache
from spec.checks import check_int, reject
from spec.formats.packet import packet_layout, packet_signature
from spec.formats.roce import (
    BTH_BYTES,
    ETHERTYPE_IPV4,
    ICRC_BYTES,
    IP_PROTO_UDP,
    IPV4_BYTES,
    MR_LAYOUT,
    QPC_LAYOUT,
    RETH_BYTES,
    ROCE_UDP_PORT,
    UDP_BYTES,
    WRITE_RETH_HEADER,
    OpCode,
    Syndrome,
    bswap,
)
from spec.rdma import (
    DROP_REASONS,
    RX_FIFO_BEATS,
    RX_FRAME_ROOM,
    RX_FRAMES,
    SEQUENCE_COUNTERS,
)

__all__ = ["Responder"]


def _verdict_layout():
    return data.StructLayout({"fcs_ok": 1, "icrc_ok": 1, "length": 16})


class Responder(wiring.Component):
    """Receive RDMA WRITE frames, check them, DMA-write the payload, send ACK/NAK.

    Parameters
    ----------
    cache_entries : int
        Entries of the QP-context cache (:class:`QpcCache`).
    depth : int
        Host-memory words.
    mr_entries : int
        Entries of the on-chip memory-region table (a power of two, 2 to 256), indexed by
        ``rkey % mr_entries``. The testbench loads it as the verbs ``reg_mr`` would.

    Ports
    -----
    i : In(packet_signature(64))
        Frames from the link, with ICRC and FCS; always ready. A frame whose first beat
        finds more than ``RX_FIFO_BEATS - RX_FRAME_ROOM`` beats or :data:`RX_FRAMES`
        frames stored is dropped whole and counted as ``overflow`` (in the cycle of its
        last beat); stored frames are not touched. A FIFO level seen by a first beat
        counts the writes and pops of earlier cycles.
    o : Out(packet_signature(64))
        ACK/NAK frames with ICRC and FCS (66 bytes, 2 beats).
    qpc_base : In(range(depth))
        Word address of the QP-context table.
    rd_addr, rd_data, wr :
        The DMA ports into the host memory (context reads and write-backs, payload
        writes).
    written : Out(stream.Signature(24))
        One-cycle strobe (no backpressure) with the QPN, in the cycle the last payload
        word of a message (WRITE LAST or ONLY) is written.
    frames_ok, acks, words, <reason>, duplicates, out_of_order : Out(32)
        Frames accepted, ACK/NAK frames sent, payload words written, one drop counter
        per reason of :data:`DROP_REASONS`, and :data:`SEQUENCE_COUNTERS`.

    Timing (cycles; ``L`` is the memory latency)
    --------------------------------------------
    Store and forward: a frame is handled once its last beat is in the receive FIFO
    (the cycle after it arrives). Then, one state per cycle: IDLE (pop beat 0), HDR
    (pop beat 1), CHECK (FCS, length, header, ICRC; issue the context lookup), LOOKUP
    (1 cycle on a hit, ``1 + L`` on a miss), VERIFY (QP valid, PSN, MR), then WRITE
    (one payload word per cycle, ``ceil(payload / 64)`` cycles), DRAIN (pops the
    remaining beats, at least 1 cycle), ACK (1 cycle, if an ACK or NAK is due), UPDATE
    (1 cycle, the context write, after an accepted frame). A frame rejected in CHECK goes
    straight to DRAIN.

    Checks: FCS, then length (frame bytes = 14 + IP total length + 4, else
    ``truncated``), then header (IPv4/UDP 4791/WRITE opcode, else ``malformed``), then
    ICRC; these drop silently. A context whose ``valid`` is clear drops (``unknown_qp``).
    A PSN before ``expected_psn`` (within ``2**23``, modulo ``2**24``) is a duplicate
    (``duplicates``): nothing is written and, if the frame has AckReq, it is acknowledged
    again (ACK with its own PSN and the current MSN). A PSN after it is a sequence error:
    the first one gets a NAK (PSN sequence error carrying the expected PSN, ``psn_nak``)
    and sets the context's ``nak_sent`` bit (so the UPDATE state follows the NAK); while
    the bit is set, further frames ahead are dropped silently (``out_of_order``); an
    accepted frame (the expected PSN) clears it. A FIRST/ONLY whose rkey, access right or
    bounds fail, or whose VA is not 64-byte aligned, and a MIDDLE/LAST longer than what
    its RETH allowed, get a NAK (remote access error, the frame's PSN); the frame's PSN
    is consumed (``expected_psn + 1``, ``nak_sent`` cleared, UPDATE follows), since this
    engine has no QP error state: the QP goes on with its next frame. Nothing is
    written for a rejected frame. An accepted frame with AckReq gets an ACK (no
    coalescing: the requester asks for one per message, on its last frame).
    """

    def __init__(self, cache_entries=16, depth=1 << 14, mr_entries=16):
        check_int(self, "MR table entries", mr_entries, 2, 256)
        if mr_entries & (mr_entries - 1):
            reject(self, f"MR table entries must be a power of two, not {mr_entries!r}")
        self.cache = QpcCache(cache_entries, depth)
        self.depth, self.mr_entries = depth, mr_entries
        ports = {
            "i": In(packet_signature(64)),
            "o": Out(packet_signature(64)),
            "qpc_base": In(range(depth)),
            "rd_addr": Out(stream.Signature(range(depth))),
            "rd_data": In(stream.Signature(512)),
            "wr": Out(stream.Signature(write_layout(64, depth))),
            "written": Out(stream.Signature(24)),
            "frames_ok": Out(32), "acks": Out(32), "words": Out(32),
            "lookups": Out(32), "misses": Out(32), "writebacks": Out(32),
        }
        for reason in DROP_REASONS + SEQUENCE_COUNTERS:
            ports[reason] = Out(32)
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        m.submodules.cache = cache = self.cache
        m.submodules.check = chk = FrameCheck()
        m.submodules.beats = beats = SyncFIFO(width=packet_layout(64).size,
                                              depth=RX_FIFO_BEATS)
        m.submodules.verdicts = verdicts = SyncFIFO(width=18, depth=RX_FRAMES)
        m.submodules.mr_table = mr_table = memory.Memory(
            shape=MR_LAYOUT, depth=self.mr_entries, init=[])
        m.submodules.ack_framer = ack_framer = AckFramer()
        m.submodules.ack_icrc = ack_icrc = IcrcInserter()
        m.submodules.ack_fcs = ack_fcs = FcsInserter(64)
        wiring.connect(m, ack_framer.o, ack_icrc.i)
        wiring.connect(m, ack_icrc.o, ack_fcs.i)
        wiring.connect(m, ack_fcs.o, wiring.flipped(self.o))

        # ---- Receive side: check as the beats arrive, store whole frames. ----
        beat = self.i.payload
        dropping = Signal()          # the frame being received did not fit
        space = Signal()
        m.d.comb += [
            self.i.ready.eq(1),
            chk.beat.eq(beat), chk.en.eq(self.i.valid),
            space.eq((beats.w_level <= RX_FIFO_BEATS - RX_FRAME_ROOM) & verdicts.w_rdy),
        ]
        keep = Signal()
        m.d.comb += keep.eq(Mux(beat.first, space, ~dropping))
        with m.If(self.i.valid & beat.first):
            m.d.sync += dropping.eq(~space)
        m.d.comb += [
            beats.w_en.eq(self.i.valid & keep),
            beats.w_data.eq(beat),
            verdicts.w_en.eq(self.i.valid & keep & beat.last),
            verdicts.w_data.eq(Cat(chk.fcs_ok, chk.icrc_ok, chk.length)),
        ]
        with m.If(self.i.valid & beat.last & ~keep):
            m.d.sync += self.overflow.eq(self.overflow + 1)

        # ---- Frame handling. ----
        head = Signal(packet_layout(64))
        m.d.comb += head.eq(beats.r_data)
        verdict = Signal(_verdict_layout())
        b0 = Signal(packet_layout(64))
        b1 = Signal(packet_layout(64))
        popped_last = Signal()
        hdr = Signal(WRITE_RETH_HEADER)
        m.d.comb += hdr.eq(Cat(b0.data, b1.data)[:len(hdr.as_value())])
        opcode = hdr.bth.opcode
        ip_len = Signal(16)
        psn = Signal(24)
        qpn = Signal(24)
        va = Signal(64)
        rkey = Signal(32)
        dma_len = Signal(32)
        m.d.comb += [
            ip_len.eq(bswap(hdr.ip.total_length, 2)), psn.eq(bswap(hdr.bth.psn, 3)),
            qpn.eq(bswap(hdr.bth.dest_qp, 3)), va.eq(bswap(hdr.reth.va, 8)),
            rkey.eq(bswap(hdr.reth.rkey, 4)), dma_len.eq(bswap(hdr.reth.dma_length, 4)),
        ]
        reth = Signal()
        is_write = Signal()
        last_of_msg = Signal()
        m.d.comb += [
            reth.eq((opcode == OpCode.RC_RDMA_WRITE_FIRST)
                    | (opcode == OpCode.RC_RDMA_WRITE_ONLY)),
            is_write.eq(reth | (opcode == OpCode.RC_RDMA_WRITE_MIDDLE)
                        | (opcode == OpCode.RC_RDMA_WRITE_LAST)),
            last_of_msg.eq((opcode == OpCode.RC_RDMA_WRITE_LAST)
                           | (opcode == OpCode.RC_RDMA_WRITE_ONLY)),
        ]
        overhead = Signal(16)
        payload_len = Signal(17)
        m.d.comb += [
            overhead.eq(IPV4_BYTES + UDP_BYTES + BTH_BYTES + ICRC_BYTES + Mux(reth, RETH_BYTES, 0)
                        + hdr.bth.pad_count),
            payload_len.eq(ip_len - overhead),
        ]
        header_ok = Signal()
        m.d.comb += header_ok.eq(
            (hdr.eth.ethertype == bswap(Const(ETHERTYPE_IPV4, 16), 2))
            & (hdr.ip.version == 4) & (hdr.ip.ihl == 5)
            & (hdr.ip.protocol == IP_PROTO_UDP)
            & (hdr.udp.dport == bswap(Const(ROCE_UDP_PORT, 16), 2))
            & (hdr.bth.tver == 0) & is_write
            & (ip_len > overhead) & ~b0.last)

        ctx = Signal(QPC_LAYOUT)
        behind = Signal()            # PSN before the expected one (2**23 window): duplicate
        m.d.comb += behind.eq((psn - ctx.expected_psn)[23])
        mr_rd = mr_table.read_port()
        m.d.comb += mr_rd.addr.eq(rkey[:len(mr_rd.addr)])
        mr = mr_rd.data
        access_ok = Signal()
        end = Signal(66)
        m.d.comb += end.eq(va + dma_len)
        m.d.comb += access_ok.eq(Mux(
            reth,
            mr.valid & (mr.key == rkey) & mr.remote_write & (va >= mr.base)
            & (end <= mr.base + mr.length) & (va[:6] == 0) & (payload_len <= dma_len),
            payload_len <= ctx.resp_left))

        # Cache <-> DMA ports; the payload writes share the write port (never together).
        m.d.comb += [
            cache.base.eq(self.qpc_base),
            self.rd_addr.valid.eq(cache.rd_addr.valid),
            self.rd_addr.payload.eq(cache.rd_addr.payload),
            cache.rd_data.valid.eq(self.rd_data.valid),
            cache.rd_data.payload.eq(self.rd_data.payload),
            self.lookups.eq(cache.lookups), self.misses.eq(cache.misses),
            self.writebacks.eq(cache.writebacks),
        ]
        pay_wr = Signal(write_layout(64, self.depth))
        pay_wr_valid = Signal()
        m.d.comb += [
            self.wr.valid.eq(cache.wr.valid | pay_wr_valid),
            self.wr.payload.eq(Mux(cache.wr.valid, cache.wr.payload, pay_wr)),
        ]

        # The ACK/NAK to send after the frame, and the new context.
        ack_due = Signal()
        ack = Signal(ack_framer.i.payload.shape())
        new_ctx = Signal(QPC_LAYOUT)
        ctx_due = Signal()
        m.d.comb += [ack_framer.i.payload.eq(ack)]

        # Payload realignment: a word is ``carry`` (``s`` bytes) then ``64 - s`` bytes of
        # the next beat; s = 58 after a RETH header (70 bytes), 10 without (54 bytes).
        carry = Signal(58 * 8)
        left = Signal(17)
        addr = Signal(range(self.depth))
        use_b1 = Signal()
        src = Signal(512)
        m.d.comb += src.eq(Mux(use_b1, b1.data, head.data))
        word = Signal(512)
        m.d.comb += word.eq(Mux(reth, Cat(carry[:58 * 8], src[:6 * 8]),
                                Cat(carry[:10 * 8], src[:54 * 8])))
        need_next = Signal()
        m.d.comb += need_next.eq(left > Mux(reth, 58, 10))
        be = Signal(64)
        m.d.comb += be.eq(Mux(left >= 64, (1 << 64) - 1,
                              (Const(1, 65) << left[:7]) - 1))
        pop = Signal()
        m.d.comb += beats.r_en.eq(pop)
        with m.If(pop & head.last):
            m.d.sync += popped_last.eq(1)

        def drop(reason):
            counter = getattr(self, reason)
            return counter.eq(counter + 1)

        with m.FSM():
            with m.State("IDLE"):
                with m.If(verdicts.r_rdy):
                    m.d.comb += [pop.eq(1), verdicts.r_en.eq(1)]
                    m.d.sync += [b0.eq(head), verdict.eq(verdicts.r_data),
                                 popped_last.eq(head.last), ack_due.eq(0), ctx_due.eq(0),
                                 use_b1.eq(0)]
                    m.next = "HDR"
            with m.State("HDR"):
                with m.If(~popped_last):
                    m.d.comb += pop.eq(1)
                    m.d.sync += b1.eq(head)
                m.next = "CHECK"
            with m.State("CHECK"):
                with m.If(~verdict.fcs_ok):
                    m.d.sync += drop("fcs_bad")
                    m.next = "DRAIN"
                with m.Elif(verdict.length != 14 + ip_len + 4):
                    m.d.sync += drop("truncated")
                    m.next = "DRAIN"
                with m.Elif(~header_ok):
                    m.d.sync += drop("malformed")
                    m.next = "DRAIN"
                with m.Elif(~verdict.icrc_ok):
                    m.d.sync += drop("icrc_bad")
                    m.next = "DRAIN"
                with m.Else():
                    m.d.comb += [cache.req.valid.eq(1), cache.req.payload.eq(qpn)]
                    m.next = "LOOKUP"
            with m.State("LOOKUP"):
                with m.If(cache.resp.valid):
                    m.d.sync += ctx.eq(cache.resp.payload)
                    m.next = "VERIFY"
            with m.State("VERIFY"):
                m.d.sync += [
                    ack.dmac.eq(ctx.dmac), ack.smac.eq(ctx.smac), ack.sip.eq(ctx.sip),
                    ack.dip.eq(ctx.dip), ack.src_qp.eq(qpn), ack.dest_qp.eq(ctx.dest_qp),
                    ack.msn.eq(ctx.msn),
                ]
                with m.If(~ctx.valid):
                    m.d.sync += drop("unknown_qp")
                    m.next = "DRAIN"
                with m.Elif(psn != ctx.expected_psn):
                    with m.If(behind):
                        # A duplicate: not written; acknowledged again if it asks.
                        m.d.sync += [drop("duplicates"), ack_due.eq(hdr.bth.ack_req),
                                     ack.psn.eq(psn),
                                     ack.syndrome.eq(Syndrome.ACK.value)]
                    with m.Elif(~ctx.nak_sent):
                        m.d.sync += [drop("psn_nak"), ack_due.eq(1),
                                     ack.psn.eq(ctx.expected_psn),
                                     ack.syndrome.eq(Syndrome.NAK_PSN_SEQUENCE.value),
                                     ctx_due.eq(1), new_ctx.eq(ctx), new_ctx.nak_sent.eq(1)]
                    with m.Else():
                        m.d.sync += drop("out_of_order")
                    m.next = "DRAIN"
                with m.Elif(~access_ok):
                    # The PSN is consumed (no QP error state here): the QP goes on.
                    m.d.sync += [drop("access_nak"), ack_due.eq(1), ack.psn.eq(psn),
                                 ack.syndrome.eq(Syndrome.NAK_REMOTE_ACCESS.value),
                                 ctx_due.eq(1), new_ctx.eq(ctx),
                                 new_ctx.expected_psn.eq(ctx.expected_psn + 1),
                                 new_ctx.nak_sent.eq(0)]
                    m.next = "DRAIN"
                with m.Else():
                    base = Mux(reth, va, ctx.resp_va)
                    m.d.sync += [
                        self.frames_ok.eq(self.frames_ok + 1),
                        ack_due.eq(hdr.bth.ack_req), ack.psn.eq(psn),
                        ack.syndrome.eq(Syndrome.ACK.value),
                        ack.msn.eq(ctx.msn + last_of_msg),
                        ctx_due.eq(1),
                        new_ctx.eq(ctx),
                        new_ctx.expected_psn.eq(ctx.expected_psn + 1),
                        new_ctx.nak_sent.eq(0),
                        new_ctx.msn.eq(ctx.msn + last_of_msg),
                        new_ctx.resp_va.eq(base + payload_len),
                        new_ctx.resp_left.eq(Mux(reth, dma_len, ctx.resp_left) - payload_len),
                        addr.eq(base[6:]),
                        left.eq(payload_len),
                        carry.eq(Mux(reth, b1.data[6 * 8:], b0.data[54 * 8:])),
                        use_b1.eq(~reth),
                    ]
                    m.next = "WRITE"
            with m.State("WRITE"):
                m.d.comb += [
                    pay_wr_valid.eq(1), pay_wr.addr.eq(addr), pay_wr.data.eq(word),
                    pay_wr.be.eq(be),
                ]
                m.d.sync += [
                    self.words.eq(self.words + 1), addr.eq(addr + 1),
                    left.eq(Mux(left >= 64, left - 64, 0)),
                    carry.eq(Mux(reth, src[6 * 8:], src[54 * 8:])),
                ]
                with m.If(need_next):
                    m.d.sync += use_b1.eq(0)
                    m.d.comb += pop.eq(~use_b1)
                with m.If(left <= 64):
                    with m.If(last_of_msg):
                        m.d.comb += [self.written.valid.eq(1), self.written.payload.eq(qpn)]
                    m.next = "DRAIN"
            with m.State("DRAIN"):
                with m.If(~popped_last):
                    m.d.comb += pop.eq(1)
                with m.If(popped_last | head.last):
                    with m.If(ack_due):
                        m.next = "ACK"
                    with m.Elif(ctx_due):
                        m.next = "UPDATE"
                    with m.Else():
                        m.next = "IDLE"
            with m.State("ACK"):
                m.d.comb += ack_framer.i.valid.eq(1)
                with m.If(ack_framer.i.ready):
                    m.d.sync += self.acks.eq(self.acks + 1)
                    with m.If(ctx_due):
                        m.next = "UPDATE"
                    with m.Else():
                        m.next = "IDLE"
            with m.State("UPDATE"):
                m.d.comb += [cache.upd.valid.eq(1), cache.upd.payload.eq(new_ctx)]
                m.next = "IDLE"
        return m
