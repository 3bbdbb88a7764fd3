"""The target: answer load and atomic requests from the local memory."""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.common.latency_memory import write_layout
from rtl.nic.mem_requester import fill_routing
from spec.checks import check_int, reject
from spec.formats.nic import MIN_FRAME_BYTES, Framing
from spec.formats.nic_mem import (
    MEM_OPCODE,
    MEM_WIDTH,
    MemOp,
    MemStatus,
    mem_header_bytes,
    mem_layout,
    req_desc_layout,
)
from spec.formats.packet import packet_signature
from spec.nic_mem import MAX_TARGET_LATENCY, MAX_TARGET_READS, TARGET_LEVEL_READS

__all__ = ["MemResponder"]


class MemResponder(wiring.Component):
    """Queue requests; for each, read (and for an atomic, update) the local memory and
    send the response frame.

    Parameters
    ----------
    framing : str or Framing
    mem_words : int
        Words of 64 bytes of local memory.
    max_payload : int
        Longest load (bytes, 1 to 8191).
    queue : int
        Requests the queue holds (:func:`spec.nic_mem.request_queue_depth`: every tag of
        every other node, so that honest requesters never fill it).
    target_latency : int
        Cycles of a read of the target memory (0 to 4,096; 0, the default: the responder
        as without it, the memory read in the cycle the beat leaves).
        :data:`spec.nic_mem.TARGET_LEVEL_LATENCY` is the engine's ``on_die`` host read.
    target_reads : int
        Reads of the target memory in flight at most (1 to 16; used only with a
        ``target_latency``). :data:`spec.nic_mem.TARGET_LEVEL_READS` is what the engine's
        responder keeps in flight at its host.

    Ports
    -----
    req : In(stream.Signature(req_desc_layout, always_ready=True))
        Requests from the receiver; one a cycle at most. A request that finds the queue
        full is dropped and counted in ``drop_full`` (only a node sending more requests
        than it has tags can cause it).
    o : Out(packet_signature(64))
        Response frames without FCS (bytes above ``nbytes`` zero; L2 padded to 60 bytes).
    has : Out(1)
        A request is at the head of the queue (whether or not its frame may start).
    need : Out(8)
        Wire beats (FCS included) of the head request's response: its credits.
    start_ok : In(1)
        A response's first beat is offered only while ``start_ok`` is high.
    node_id : In(8)
    rd0_addr, rd1_addr : Out(range(mem_words))
    rd0_data, rd1_data : In(512)
        Two combinational read ports of the local memory (the data word of the beat and
        the word before it).
    wr : Out(stream.Signature(write_layout(64, mem_words), always_ready=True))
        The atomic's write of its new value (8 byte lanes).
    wr_block : In(1)
        The local memory's write port is taken this cycle (the landing of responses has
        it first): an atomic's response waits.
    req_ok, req_err, drop_full : Out(32)
        Requests answered OK, answered ERROR, dropped at a full queue.

    Checks of a request (ERROR response, no data, memory untouched, when one fails):
    LOAD: ``1 <= length <= max_payload``, ``addr`` a multiple of 64, ``addr + length``
    within the memory; FETCH_ADD and CMP_SWAP: ``addr`` a multiple of 8, ``length`` 8,
    ``addr + 8`` within the memory.

    Response: the request's ``src`` is its destination, its ``tag`` and ``addr`` echoed,
    ``length`` the data bytes (LOAD: the bytes asked; atomics: 8, the old value of the 8
    bytes at ``addr``; ERROR: 0). FETCH_ADD writes ``old + a`` (mod 2**64); CMP_SWAP
    writes ``b`` when ``old == a`` (no write otherwise).

    Timing
    ------
    A request given in cycle ``t`` is at the head from ``t + 1``. The response's beat
    ``j`` is combinational from the head and the memory as it is in the cycle the beat
    leaves (a write landing in that cycle is not seen). The first beat waits for
    ``start_ok`` and, for an atomic that passed its checks, for ``wr_block`` low; the
    atomic's read, its write and its one-beat response are in the same cycle. The
    head leaves the queue with its response's last beat; the next response can start
    in the next cycle. ``o.ready`` low holds everything.

    With a ``target_latency`` L: the queue's head issues its read into one of
    ``target_reads`` in-flight slots (in order; a load when no atomic is in flight, an
    atomic when nothing is: the atomic fences, so that its read-modify-write sees every
    earlier atomic's write without a per-address hazard check), and it is the response
    side's head L cycles after the cycle it issued, once every request issued before it
    has been answered (``has`` only from then). A request given in cycle ``t`` issues
    from ``t + 1``; its slot is freed with its response's last beat. The latency is
    timing only: the bytes are the memory's in the cycle each beat leaves, as above
    (the responses leave in issue order, so no read sees a write it would not have
    seen).
    """

    def __init__(self, framing, mem_words, max_payload, queue, target_latency=0,
                 target_reads=TARGET_LEVEL_READS):
        try:
            self.framing = Framing(framing)
        except ValueError:
            reject(self, f"framing must be 'l2' or 'compact', not {framing!r}")
        self.mem_words = check_int(self, "memory depth (words)", mem_words, 2, 2**20)
        self.max_payload = check_int(self, "max_payload", max_payload, 1, 8191)
        self.queue = check_int(self, "queue", queue, 1, 1 << 16)
        self.target_latency = check_int(self, "target_latency", target_latency, 0,
                                        MAX_TARGET_LATENCY)
        self.target_reads = check_int(self, "target_reads", target_reads, 1,
                                      MAX_TARGET_READS)
        self.h = mem_header_bytes(self.framing)
        self.max_beats = -(-(self.h + max_payload) // MEM_WIDTH)
        super().__init__({
            "req": In(stream.Signature(req_desc_layout, always_ready=True)),
            "o": Out(packet_signature(MEM_WIDTH)),
            "has": Out(1), "need": Out(8), "start_ok": In(1), "node_id": In(8),
            "rd0_addr": Out(range(mem_words)), "rd1_addr": Out(range(mem_words)),
            "rd0_data": In(8 * MEM_WIDTH), "rd1_data": In(8 * MEM_WIDTH),
            "wr": Out(stream.Signature(write_layout(MEM_WIDTH, mem_words),
                                       always_ready=True)),
            "wr_block": In(1),
            "req_ok": Out(32), "req_err": Out(32), "drop_full": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        w, h = MEM_WIDTH, self.h
        m.submodules.q = q = fifo.SyncFIFO(width=req_desc_layout.size, depth=self.queue)
        m.d.comb += [q.w_en.eq(self.req.valid), q.w_data.eq(self.req.payload)]
        with m.If(self.req.valid & ~q.w_rdy):
            m.d.sync += self.drop_full.eq(self.drop_full + 1)
        r = Signal(req_desc_layout)
        if self.target_latency:
            head_ok, pop = self._in_flight(m, q, r)
        else:
            head_ok, pop = q.r_rdy, q.r_en
            m.d.comb += r.eq(q.r_data)
        m.d.comb += self.has.eq(head_ok)

        size = self.mem_words * w
        end = Signal(34)
        load = r.op == MemOp.LOAD
        m.d.comb += end.eq(r.addr + Mux(load, r.length, 8))
        ok = Signal()
        m.d.comb += ok.eq(Mux(load,
                              (r.length != 0) & (r.length <= self.max_payload)
                              & (r.addr[:6] == 0),
                              (r.addr[:3] == 0) & (r.length == 8)) & (end <= size))
        atomic_ok = ok & ~load
        length = Signal(13)
        m.d.comb += length.eq(Mux(ok, Mux(load, r.length, 8), 0))
        least = MIN_FRAME_BYTES - 4 if self.framing is Framing.L2 else 0
        total = Signal(14)
        m.d.comb += total.eq(Mux(length + h < least, least, length + h))
        m.d.comb += self.need.eq((total + 4 + w - 1) >> 6)

        hdr = Signal(mem_layout(self.framing))
        fill_routing(m, hdr, self.framing, r.src, self.node_id)
        m.d.comb += [
            hdr.mem.opcode.eq(MEM_OPCODE), hdr.mem.op.eq(MemOp.RESPONSE),
            hdr.mem.status.eq(Mux(ok, MemStatus.OK, MemStatus.ERROR)),
            hdr.mem.tag.eq(r.tag), hdr.mem.length.eq(length), hdr.mem.addr.eq(r.addr),
        ]

        j = Signal(range(self.max_beats + 1))
        base = r.addr[6:]
        m.d.comb += [self.rd0_addr.eq(base + j), self.rd1_addr.eq(base + j - 1)]
        lane = r.addr[3:6]
        old = self.rd0_data.word_select(lane, 64)
        new = Mux(r.op == MemOp.FETCH_ADD, (old + r.a)[:64], r.b)
        writes = atomic_ok & ((r.op == MemOp.FETCH_ADD) | (old == r.a))
        word = Mux(load, self.rd0_data, old)
        lo = Mux(j == 0, hdr.as_value(), self.rd1_data[8 * (w - h):])
        raw = Cat(lo, word[:8 * (w - h)])
        left, content = Signal(14), Signal(14)
        m.d.comb += [left.eq(total - (j << 6)), content.eq(length + h - (j << 6))]
        last = left <= w
        nbytes = Mux(last, left, w)
        mask = Signal(8 * w)           # header and data bytes; the L2 padding is zero
        for i in range(w):
            m.d.comb += mask[8 * i:8 * i + 8].eq(Mux(content > i, 0xFF, 0))
        beat = self.o.payload
        take = Signal()
        m.d.comb += [
            self.o.valid.eq(head_ok & ((j != 0) | self.start_ok)
                            & ~(atomic_ok & self.wr_block)),
            beat.data.eq(raw & mask), beat.nbytes.eq(nbytes),
            beat.first.eq(j == 0), beat.last.eq(last),
            take.eq(self.o.valid & self.o.ready),
            pop.eq(take & last),
            self.wr.valid.eq(take & writes),
            self.wr.payload.addr.eq(base),
            self.wr.payload.data.eq((new << (lane * 64))[:8 * w]),
            self.wr.payload.be.eq((Const(0xFF, w) << (lane * 8))[:w]),
        ]
        with m.If(take):
            m.d.sync += j.eq(Mux(last, 0, j + 1))
            with m.If(last):
                with m.If(ok):
                    m.d.sync += self.req_ok.eq(self.req_ok + 1)
                with m.Else():
                    m.d.sync += self.req_err.eq(self.req_err + 1)
        return m

    def _in_flight(self, m, q, r):
        """The reads in flight: ``target_reads`` slots (request and cycles left) in a
        ring, filled from the queue's head in order. Returns (the response side's head
        is ready, its pop)."""
        k, lat = self.target_reads, self.target_latency
        reqs = [Signal(req_desc_layout, name=f"fl_req{i}") for i in range(k)]
        left = [Signal(range(lat), name=f"fl_left{i}") for i in range(k)]
        hp = Signal(range(k))
        n = Signal(range(k + 1))
        pop = Signal()
        fenced = (n != 0) & (r.op != MemOp.LOAD)
        incoming = Signal(req_desc_layout)
        m.d.comb += incoming.eq(q.r_data)
        issue = Signal()
        m.d.comb += issue.eq(q.r_rdy & (n < k) & ~fenced
                             & ((incoming.op == MemOp.LOAD) | (n == 0)))
        m.d.comb += q.r_en.eq(issue)
        tail = Signal(range(k))
        m.d.comb += tail.eq(Mux(hp + n >= k, hp + n - k, hp + n))
        for i in range(k):
            with m.If(issue & (tail == i)):
                m.d.sync += [reqs[i].eq(incoming), left[i].eq(lat - 1)]
            with m.Elif(left[i] != 0):
                m.d.sync += left[i].eq(left[i] - 1)
        with m.Switch(hp):
            for i in range(k):
                with m.Case(i):
                    m.d.comb += r.eq(reqs[i])
        head_left = Signal(range(lat))
        with m.Switch(hp):
            for i in range(k):
                with m.Case(i):
                    m.d.comb += head_left.eq(left[i])
        m.d.sync += n.eq(n + issue - pop)
        with m.If(pop):
            m.d.sync += hp.eq(Mux(hp == k - 1, 0, hp + 1))
        return (n != 0) & (head_left == 0), pop
