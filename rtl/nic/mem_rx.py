"""The receive side of memory frames: check each frame, hand requests to the responder,
land responses in local memory and free their tags."""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.common.fcs_checker import FcsChecker
from rtl.common.latency_memory import write_layout
from rtl.nic.tag_table import tag_entry_layout
from spec.checks import check_int, reject
from spec.formats.nic import ETHERTYPE, MAC_PREFIX, MIN_FRAME_BYTES, Framing
from spec.formats.nic_mem import (
    MEM_OPCODE,
    MEM_WIDTH,
    TAG_BITS,
    MemOp,
    MemStatus,
    mem_header_bytes,
    mem_layout,
    req_desc_layout,
    rsp_event_layout,
)
from spec.formats.packet import packet_signature

__all__ = ["MemRx"]


class MemRx(wiring.Component):
    """Check memory frames; requests go to the responder, responses land.

    Parameters
    ----------
    framing : str or Framing
    mem_words : int
        Words of 64 bytes of local memory.
    max_payload : int
        Longest response data (bytes); a longer response is malformed.

    Ports
    -----
    i : In(packet_signature(64))
        Frames with FCS from the link; always ready (never pushes back).
    node_id : In(8)
    req : Out(stream.Signature(req_desc_layout, always_ready=True))
        A good request (valid for one cycle, the verdict cycle).
    lookup_tag, lookup_pending, lookup_entry, answer : the tag table's lookup
    release, release_tag : the tag table's release (:class:`rtl.nic.tag_table.TagTable`)
    wr : Out(stream.Signature(write_layout(64, mem_words), always_ready=True))
        The responses' data into local memory (it has the memory's write port first).
    rsp : Out(stream.Signature(rsp_event_layout, always_ready=True))
        A response has landed (its tag is freed in the same cycle).
    drop_fcs, drop_malformed, drop_dst, drop_tag, rsp_ok, rsp_err : Out(32)
        Frames dropped by the first fault in this order: bad FCS; malformed (opcode not
        :data:`MEM_OPCODE`, an unknown op, a request with a status, an ERROR response
        with a length, a response longer than ``max_payload``, a wrong L2 EtherType, or a
        size that is not header + payload + FCS, L2 raised to 64); another node's frame;
        a response whose tag is not pending, that comes from another node than the one
        asked (compact ``src``, byte 5 of the L2 source MAC), or whose ``length`` is not
        the one asked (ERROR responses carry none). Then the responses landed, OK and ERROR.

    Timing
    ------
    Let ``T`` be the cycle of a frame's last beat. The verdict is taken in ``T + 1``
    (counters at its clock edge): a request is on ``req`` then; a response's tag is
    looked up then (the table as at the start of ``T + 1``) and, if it is pending,
    answered (a second response with the same tag is dropped from then on). The
    payload is realigned as it arrives and buffered; a frame of ``B`` beats has ``B``
    buffered words, drained one a cycle from ``T + 2`` (or after the frame before):
    word ``k`` is written in ``T + 2 + k`` when the response is OK, its tag pending and
    ``k`` below ``ceil(length / 64)``. The cycle of the frame's last drained word
    frees the tag (``release``) and signals ``rsp``. Dropped frames write nothing.
    """

    def __init__(self, framing, mem_words, max_payload):
        try:
            self.framing = Framing(framing)
        except ValueError:
            reject(self, f"framing must be 'l2' or 'compact', not {framing!r}")
        self.mem_words = check_int(self, "memory depth (words)", mem_words, 2, 2**20)
        self.max_payload = check_int(self, "max_payload", max_payload, 1, 8191)
        self.h = mem_header_bytes(self.framing)
        self.max_words = -(-(self.h + max_payload + 4) // MEM_WIDTH)
        super().__init__({
            "i": In(packet_signature(MEM_WIDTH)),
            "node_id": In(8),
            "req": Out(stream.Signature(req_desc_layout, always_ready=True)),
            "lookup_tag": Out(TAG_BITS), "lookup_pending": In(1),
            "lookup_entry": In(tag_entry_layout(mem_words)), "answer": Out(1),
            "release": Out(1), "release_tag": Out(TAG_BITS),
            "wr": Out(stream.Signature(write_layout(MEM_WIDTH, mem_words),
                                       always_ready=True)),
            "rsp": Out(stream.Signature(rsp_event_layout, always_ready=True)),
            **{n: Out(32) for n in ("drop_fcs", "drop_malformed", "drop_dst", "drop_tag",
                                    "rsp_ok", "rsp_err")},
        })

    def elaborate(self, platform):
        m = Module()
        w, h = MEM_WIDTH, self.h
        m.submodules.fcs = chk = FcsChecker(w)
        beat = self.i.payload
        got = self.i.valid
        m.d.comb += [chk.i.valid.eq(got), chk.i.payload.eq(beat), self.i.ready.eq(1),
                     chk.o.ready.eq(1)]

        # Arrival: byte count, header capture, realigned words into the buffer.
        count = Signal(16)
        hdr_raw = Signal(8 * w)
        prev = Signal(8 * w)
        pushed = Signal(range(self.max_words + 2))
        tail, tail_data = Signal(), Signal(8 * w)
        pend, fcs_good = Signal(), Signal()
        m.submodules.data_q = dq = fifo.SyncFIFO(width=8 * w, depth=2 * self.max_words + 2)
        room = Mux(beat.first, 0, pushed) < self.max_words
        push_beat = Signal()
        m.d.comb += [
            push_beat.eq(~tail & got & ~beat.first & room),
            dq.w_en.eq(tail | push_beat),
            dq.w_data.eq(Mux(tail, tail_data, Cat(prev[8 * h:], beat.data[:8 * h]))),
        ]
        m.d.sync += [tail.eq(0), pend.eq(got & beat.last)]
        with m.If(got):
            m.d.sync += [
                count.eq(Mux(beat.first, 0, count) + beat.nbytes),
                prev.eq(beat.data),
                pushed.eq(Mux(beat.first, 0, pushed) + push_beat),
            ]
            with m.If(beat.first):
                m.d.sync += hdr_raw.eq(beat.data)
            with m.If(beat.last):
                m.d.sync += [fcs_good.eq(chk.fcs_ok),
                             tail.eq(Mux(beat.first, 1, pushed + push_beat < self.max_words)),
                             tail_data.eq(beat.data >> (8 * h))]

        # Verdict, in the cycle after the last beat.
        hdr = Signal(mem_layout(self.framing))
        m.d.comb += hdr.eq(hdr_raw[:8 * h])
        mh = hdr.mem
        a, b = hdr_raw[8 * h:8 * h + 64], hdr_raw[8 * h + 64:8 * h + 128]
        is_rsp = mh.op == MemOp.RESPONSE
        is_req = (mh.op == MemOp.LOAD) | (mh.op == MemOp.FETCH_ADD) | (mh.op == MemOp.CMP_SWAP)
        err = mh.status == MemStatus.ERROR
        pay = Mux(mh.op == MemOp.CMP_SWAP, 16, Mux(mh.op == MemOp.FETCH_ADD, 8,
                  Mux(is_rsp & ~err, mh.length, 0)))
        least = MIN_FRAME_BYTES - 4 if self.framing is Framing.L2 else 0
        body = Signal(14)
        m.d.comb += body.eq(pay + h)
        expect = Mux(body < least, least, body) + 4
        malformed = Signal()
        fmt_bad = ((mh.opcode != MEM_OPCODE) | ~(is_rsp | is_req) | (count != expect)
                   | (is_req & err) | (is_rsp & err & (mh.length != 0))
                   | (is_rsp & (mh.length > self.max_payload)))
        if self.framing is Framing.L2:
            fmt_bad = fmt_bad | (Cat(hdr.ethertype[1], hdr.ethertype[0]) != ETHERTYPE)
            dst = Cat(*[hdr.dst_mac[i] for i in range(6)])
            mac = Cat(Const(int.from_bytes(MAC_PREFIX, "little"), 40), self.node_id)
            wrong_dst = dst != mac
            src = hdr.src_mac[5]
        else:
            wrong_dst = hdr.dst != self.node_id
            src = hdr.src
        m.d.comb += malformed.eq(fmt_bad)
        good = Signal()
        m.d.comb += good.eq(pend & fcs_good & ~malformed & ~wrong_dst)
        entry = self.lookup_entry
        tag_ok = Signal()
        m.d.comb += [
            self.lookup_tag.eq(mh.tag),
            tag_ok.eq(self.lookup_pending & (src == entry.dst)
                      & (err | (mh.length == entry.length))),
            self.answer.eq(good & is_rsp & tag_ok),
            self.req.valid.eq(good & is_req),
            self.req.payload.src.eq(src), self.req.payload.op.eq(mh.op),
            self.req.payload.tag.eq(mh.tag), self.req.payload.addr.eq(mh.addr),
            self.req.payload.length.eq(mh.length),
            self.req.payload.a.eq(a), self.req.payload.b.eq(b),
        ]
        with m.If(pend):
            with m.If(~fcs_good):
                m.d.sync += self.drop_fcs.eq(self.drop_fcs + 1)
            with m.Elif(malformed):
                m.d.sync += self.drop_malformed.eq(self.drop_malformed + 1)
            with m.Elif(wrong_dst):
                m.d.sync += self.drop_dst.eq(self.drop_dst + 1)
            with m.Elif(is_rsp & ~tag_ok):
                m.d.sync += self.drop_tag.eq(self.drop_tag + 1)

        desc_layout = data.StructLayout({
            "write": 1, "free": 1, "status": 1, "op": MemOp, "tag": TAG_BITS,
            "laddr": range(self.mem_words), "length": 13,
            "nwords": range(self.max_words + 2)})
        m.submodules.desc_q = descq = fifo.SyncFIFO(width=desc_layout.size,
                                                     depth=2 * self.max_words + 2)
        din = Signal(desc_layout)
        m.d.comb += [
            din.write.eq(self.answer & ~err), din.free.eq(self.answer),
            din.status.eq(mh.status), din.op.eq(entry.op), din.tag.eq(mh.tag),
            din.laddr.eq(entry.laddr), din.length.eq(Mux(err, 0, mh.length)),
            din.nwords.eq(pushed + tail),
            descq.w_en.eq(pend), descq.w_data.eq(din),
        ]

        # Writer: one buffered word a cycle.
        left = Signal(range(self.max_words + 2))
        cur = Signal(desc_layout)
        waddr = Signal(range(self.mem_words))
        bleft = Signal(13)
        desc = Signal(desc_layout)
        m.d.comb += desc.eq(descq.r_data)
        idle = left == 0
        drain = Signal()
        c = Signal(desc_layout)
        c_addr = Signal(range(self.mem_words))
        c_bleft = Signal(13)
        c_left = Signal(range(self.max_words + 2))
        m.d.comb += [
            descq.r_en.eq(idle),
            drain.eq(Mux(idle, descq.r_rdy & (desc.nwords != 0), 1)),
            c.eq(Mux(idle, desc.as_value(), cur.as_value())),
            c_addr.eq(Mux(idle, desc.laddr, waddr)),
            c_bleft.eq(Mux(idle, desc.length, bleft)),
            c_left.eq(Mux(idle, desc.nwords, left)),
            dq.r_en.eq(drain),
        ]
        with m.If(drain):
            m.d.sync += [
                left.eq(c_left - 1), cur.eq(c), waddr.eq(c_addr + 1),
                bleft.eq(Mux(c_bleft > w, c_bleft - w, 0)),
            ]
        n = Signal(range(w + 1))
        be = Signal(w)
        for i in range(w):
            m.d.comb += be[i].eq(n > i)
        done = drain & (c_left == 1) & c.free
        m.d.comb += [
            n.eq(Mux(c_bleft > w, w, c_bleft)),
            self.wr.valid.eq(drain & c.write & (c_bleft != 0)),
            self.wr.payload.addr.eq(c_addr),
            self.wr.payload.data.eq(dq.r_data),
            self.wr.payload.be.eq(be),
            self.release.eq(done), self.release_tag.eq(c.tag),
            self.rsp.valid.eq(done), self.rsp.payload.tag.eq(c.tag),
            self.rsp.payload.status.eq(c.status), self.rsp.payload.op.eq(c.op),
        ]
        with m.If(done):
            with m.If(c.status == MemStatus.OK):
                m.d.sync += self.rsp_ok.eq(self.rsp_ok + 1)
            with m.Else():
                m.d.sync += self.rsp_err.eq(self.rsp_err + 1)
        return m
