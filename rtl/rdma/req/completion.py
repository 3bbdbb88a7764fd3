"""Completion unit: the per-QP go-back-N windows, ACK matching, timers, rewinds."""

from amaranth import Const, Module, Mux, Signal
from amaranth.lib import enum, memory, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from rtl.rdma.context_cache import CACHE_LOG2_BITS, entry_of
from spec.checks import check_int
from spec.formats.roce import PSN_BITS, QPN_BITS, CqeStatus, Syndrome
from spec.ports import CompletionQuerySignature
from spec.rdma_engine import (
    COMPLETION_COUNTERS,
    REQUESTER_DEFAULTS,
    RETRY_LIMIT_RANGE,
    TIMEOUT_BITS,
)
from spec.rdma_stages import (
    COUNT_BITS,
    ack_event_layout,
    cqe_req_layout,
    record_layout,
    resend_layout,
    window_record_layout,
)

__all__ = ["CompletionUnit"]


class _Mode(enum.Enum, shape=2):
    """What the unit is doing besides appending, events and timers: nothing
    (``NORMAL``); a rewind waiting for the pipeline to empty (``WAIT``); walking a
    rewind, resending one record a cycle (``WALK``); walking a flush, completing one
    record a cycle with WR_FLUSH_ERR (``FLUSH``)."""
    NORMAL = 0
    WAIT = 1
    WALK = 2
    FLUSH = 3


class CompletionUnit(wiring.Component):
    """Keep every sent message until its ACK, per QP; complete, rewind, time out.

    Each QP with messages waiting for their ACK has its own window: a list of records
    in sending order (a pool of ``records`` records shared by all QPs, linked per QP),
    its own transport timer and its own retry count, kept per cache entry (the entry is
    pinned while its window is not empty, see :class:`~rtl.rdma.req.qp_front.QpFront`).

    Parameters
    ----------
    entries : int
        Context-cache entries.
    records : int
        Records in the pool (messages from their WQE read to their ACK, all QPs; the
        WQE fetch stage keeps the promise that one is free for each record that arrives).
    retry_limit : int
        Timer expiries without progress for which a QP's window is resent (0 to 7); at
        the next one its oldest message completes with RETRY_EXC_ERR.

    Ports
    -----
    rec : In(stream.Signature(record_layout()))
        Records of messages sent (and null records of items without a message).
    ev : In(stream.Signature(ack_event_layout()))
        ACK/NAK events, from the ACK queue.
    cqe : Out(stream.Signature(cqe_req_layout()))
        Completions to write, to the CQE writer's FIFO.
    resend : Out(stream.Signature(resend_layout()))
        Messages to send again, to the WQE fetch stage's FIFO.
    hold : Out(1)
        A rewind is in progress: the front takes no new work.
    err_valid : Out(1), err_entry : Out(range(entries))
        A one-cycle notice to the sequencer, the cycle after a QP entered ERR: its
        entry (the sequencer writes ``state = ERR`` into its context).
    query : In(CompletionQuerySignature(entries, COUNT_BITS))
        Items done and messages in the window of entry ``query.entry``, and whether this
        cycle's ERR notice is for it (for the front: the entry must not be evicted
        before the sequencer has written its state).
    issued : In(16)
        Records the WQE fetch stage has promised (mod 2**16); appended : Out(16)
        records taken from ``rec`` (mod 2**16); done_total : Out(16) items done (their
        last record, or null record, appended); win_total : Out(16) records in use.
    timeout : In(TIMEOUT_BITS)
        Transport timeout in cycles.
    cache_log2 : In(4)
        Cache entries in use (an event's entry: its ``qpn % 2**cache_log2``); the
        timer's ``scan`` visits all ``entries`` entries, used or not.
    ack_unexpected, seq_naks, timeouts, rewinds, retired, records_max : Out(32)
        Events that matched nothing; rewinds by a PSN sequence NAK; timer expiries
        (rewinds and RETRY_EXC_ERR completions); rewinds; records retired; the most
        records in use at once.
    qp_errors, flushed : Out(32)
        QPs moved to ERR; WQEs completed with WR_FLUSH_ERR.

    Timing
    ------
    One action per cycle, the first that can complete in that cycle, in this order:

    1. walking a rewind: send the QP's next record to ``resend`` (or, when all are
       sent, restart its timer and end the rewind); or walking a flush: complete the
       QP's oldest record with WR_FLUSH_ERR (it needs room in ``cqe``; when the window
       is empty, end the flush);
    2. starting the walk of a waiting rewind, once every record the WQE fetch stage
       promised is appended (the pipeline between it and the window is empty; it serves
       no new work while ``hold`` is high);
    3. appending the record at the head of ``rec`` to its QP's window (a record is
       always free: the WQE fetch stage promises no more than the pool holds); a null
       record only counts its item done. A ``flush`` record (the
       sequencer flushed its WQE), or a record of the QP that entered ERR at this
       entry (sent before the sequencer learned it), is not appended: it completes at
       once with WR_FLUSH_ERR (it needs room in ``cqe``). A ``modify`` record of that
       QP forgets the entry's ERR QP;
    4. the event at the head of ``ev`` against the oldest record ``h`` of its QP
       (PSNs modulo 2**24 with a 2**23 window): a PSN after ``h``'s last (any
       syndrome) retires ``h`` with SUCCESS and keeps the event (ACKs are cumulative);
       an ACK of ``h``'s last PSN retires it; a remote access NAK (another NAK) within
       ``h`` completes it with REM_ACCESS_ERR (RETRY_EXC_ERR); a PSN sequence NAK within
       ``h`` starts a rewind of the QP (not while another rewind is under way: the
       event waits); anything else is dropped (``ack_unexpected``, unless it retired a
       message before). Not during a walk; an event that completes ``h`` with an
       error waits while a rewind is under way;
    5. the timer of entry ``scan`` (a pointer that visits one entry per cycle): if its
       window is not empty and ``now - start >= timeout``, rewind it, or complete its
       oldest message with RETRY_EXC_ERR when ``retry_limit`` expiries have rewound it
       since its last progress. Only while no rewind is under way.

    Retiring a record writes a CQE if it is signalled or failed (it needs room in
    ``cqe``), frees it, restarts the QP's timer and clears its retry count. A failed
    completion (REM_ACCESS_ERR, RETRY_EXC_ERR) moves the QP to ERR (as Linux rxe does;
    IBTA Vol 1 table 91, Any State to Error: pending work requests complete in error):
    the entry remembers the QP, the sequencer is told in the next cycle (``err_valid``,
    the entry stays busy for the front in that cycle) and a flush walks the rest of its
    window from the next cycle on, one record a cycle; no event or timer action
    meanwhile. A QP's timer starts when its window becomes non-empty. A rewind waits
    (``hold`` high) until the pipeline is empty, then resends the QP's window from its
    oldest record, one record per cycle, and ends.
    """

    def __init__(self, entries, records=REQUESTER_DEFAULTS["records"], retry_limit=7):
        self.entries = entries
        self.records = check_int(self, "window records", records, 2, 4096)
        self.retry_limit = check_int(self, "retry limit", retry_limit, *RETRY_LIMIT_RANGE)
        super().__init__({
            "rec": In(stream.Signature(record_layout())),
            "ev": In(stream.Signature(ack_event_layout())),
            "cqe": Out(stream.Signature(cqe_req_layout())),
            "resend": Out(stream.Signature(resend_layout())),
            "hold": Out(1),
            "err_valid": Out(1), "err_entry": Out(range(entries)),
            "query": In(CompletionQuerySignature(entries, COUNT_BITS)),
            "issued": In(COUNT_BITS), "appended": Out(COUNT_BITS),
            "done_total": Out(COUNT_BITS), "win_total": Out(COUNT_BITS),
            "timeout": In(TIMEOUT_BITS),
            "cache_log2": In(CACHE_LOG2_BITS, init=(entries - 1).bit_length()),
            **{n: Out(32) for n in COMPLETION_COUNTERS},
        })

    def elaborate(self, platform):
        m = Module()
        n, n_records = self.entries, self.records
        ibits = (n - 1).bit_length()
        rbits = (n_records - 1).bit_length()
        lay = window_record_layout()

        def mem(name, shape, depth):
            m.submodules[name] = mm = memory.Memory(shape=shape, depth=depth, init=[])
            return mm
        recs = mem("recs", lay, n_records)
        nxt = mem("nxt", rbits, n_records)
        head = mem("head", rbits, n)
        tail = mem("tail", rbits, n)
        win = mem("win", COUNT_BITS, n)
        done = mem("done", COUNT_BITS, n)
        tstart = mem("tstart", 32, n)
        retries = mem("retries", 3, n)
        # The QP that entered ERR, per entry: its QPN (a memory) and a valid bit (a
        # register, cleared by reset as the rest of the QP state is reloaded then).
        errq = mem("errq", QPN_BITS, n)
        errq_valid = Signal(n)
        m.submodules.free = free = SyncFIFO(width=rbits, depth=n_records)

        def rd(mm, addr):
            p = mm.read_port(domain="comb")
            m.d.comb += p.addr.eq(addr)
            return p.data

        now = Signal(32)
        m.d.sync += now.eq(now + 1)
        fresh = Signal(range(n_records + 1))
        scan = Signal(ibits)
        m.d.sync += scan.eq(scan + 1)
        mode = Signal(_Mode)
        walk_entry = Signal(ibits)
        cur = Signal(rbits)
        walk_left = Signal(16)
        used = Signal()
        m.d.comb += self.hold.eq((mode == _Mode.WAIT) | (mode == _Mode.WALK))
        m.d.sync += self.err_valid.eq(0)

        # Reads for each candidate.
        r, ev = self.rec.payload, self.ev.payload
        e_rec, e_ev, scan_entry = Signal(ibits), Signal(ibits), Signal(ibits)
        m.d.comb += [e_rec.eq(r.entry[:ibits]),
                     e_ev.eq(entry_of(ev.qpn, self.cache_log2, ibits)), scan_entry.eq(scan)]
        win_rec, tail_rec, done_rec = rd(win, e_rec), rd(tail, e_rec), rd(done, e_rec)
        errq_qpn = rd(errq, e_rec)
        win_ev, head_ev = rd(win, e_ev), rd(head, e_ev)
        oldest = Signal(lay)
        m.d.comb += oldest.eq(rd(recs, head_ev))
        next_ev = rd(nxt, head_ev)
        win_sp, head_sp = rd(win, scan_entry), rd(head, scan_entry)
        tstart_sp, retries_sp = rd(tstart, scan_entry), rd(retries, scan_entry)
        scan_oldest = Signal(lay)
        m.d.comb += scan_oldest.eq(rd(recs, head_sp))
        next_sp = rd(nxt, head_sp)
        head_rw, win_rw = rd(head, walk_entry), rd(win, walk_entry)
        wr_rec = Signal(lay)
        m.d.comb += wr_rec.eq(rd(recs, cur))
        next_cur = rd(nxt, cur)
        q = self.query
        m.d.comb += [q.done.eq(rd(done, q.entry)), q.win.eq(rd(win, q.entry)),
                     q.err.eq(self.err_valid & (self.err_entry == q.entry))]

        # Write ports, driven by the chosen action.
        w = {name: mm.write_port() for name, mm in (("recs", recs), ("nxt", nxt),
             ("head", head), ("tail", tail), ("win", win), ("done", done),
             ("tstart", tstart), ("retries", retries), ("errq", errq))}

        def put(name, addr, value):
            m.d.comb += [w[name].addr.eq(addr), w[name].data.eq(value), w[name].en.eq(1)]

        # The candidates.
        id_ok = free.r_rdy | (fresh < n_records)
        err_qp = Signal()              # the record's QP is the one in ERR at its entry
        m.d.comb += err_qp.eq(errq_valid.bit_select(e_rec, 1) & (errq_qpn == r.qpn))
        flush_rec = Signal()
        m.d.comb += flush_rec.eq(r.flush | (~r.null & err_qp))
        new_id = Signal(rbits)
        m.d.comb += new_id.eq(Mux(free.r_rdy, free.r_data, fresh))
        same = Signal()
        d_last, d_first = Signal(PSN_BITS), Signal(PSN_BITS)
        m.d.comb += [same.eq((win_ev != 0) & (oldest.qpn == ev.qpn)),
                     d_last.eq(ev.psn - oldest.last_psn), d_first.eq(ev.psn - oldest.first_psn)]
        past = same & (d_last != 0) & ~d_last[PSN_BITS - 1]
        at = same & (d_last == 0)
        within = same & ~d_first[PSN_BITS - 1] & (at | d_last[PSN_BITS - 1])
        is_ack = ev.syndrome == Syndrome.ACK.value
        is_seq = ev.syndrome == Syndrome.NAK_PSN_SEQUENCE.value
        is_access = ev.syndrome == Syndrome.NAK_REMOTE_ACCESS.value
        ev_retire = past | (is_ack & at) | (~is_ack & ~is_seq & within)
        ev_status = Signal(8)
        m.d.comb += ev_status.eq(Mux(past | is_ack, CqeStatus.SUCCESS.value,
                                     Mux(is_access, CqeStatus.REM_ACCESS_ERR.value,
                                         CqeStatus.RETRY_EXC_ERR.value)))
        ev_rewind = ~past & is_seq & within
        ev_err = ev_retire & (ev_status != CqeStatus.SUCCESS.value)
        ev_cqe = ev_retire & (oldest.signalled | ev_err)
        ev_ok = ((mode != _Mode.WALK) & (mode != _Mode.FLUSH) & (~ev_cqe | self.cqe.ready)
                 & (~(ev_rewind | ev_err) | (mode == _Mode.NORMAL)))
        expired = (mode == _Mode.NORMAL) & (win_sp != 0) & (now - tstart_sp >= self.timeout)
        give_up = retries_sp == self.retry_limit
        tm_ok = expired & (~give_up | self.cqe.ready)

        def retire(e, rec_id, rec, nxt_id, win_e, status, cqe_needed):
            with m.If(cqe_needed):
                c = self.cqe.payload
                m.d.comb += [self.cqe.valid.eq(1), c.wr_id.eq(rec.wr_id), c.status.eq(status),
                             c.qpn.eq(rec.qpn), c.byte_len.eq(rec.msg_length),
                             c.sq_index.eq(rec.sq_index)]
            m.d.comb += [free.w_en.eq(1), free.w_data.eq(rec_id)]
            put("head", e, nxt_id)
            put("win", e, win_e - 1)
            put("tstart", e, now)
            put("retries", e, 0)
            m.d.sync += [self.win_total.eq(self.win_total - 1), self.retired.eq(self.retired + 1)]

        def enter_error(e, nxt_id, qpn):
            """The QP of entry ``e`` enters ERR; flush its window from ``nxt_id``."""
            m.d.sync += [mode.eq(_Mode.FLUSH), walk_entry.eq(e), cur.eq(nxt_id),
                         self.err_valid.eq(1), self.err_entry.eq(e),
                         self.qp_errors.eq(self.qp_errors + 1)]
            put("errq", e, qpn)
            m.d.sync += errq_valid.eq(errq_valid | (Const(1, n) << e))

        def start_rewind(e, counter):
            m.d.sync += [mode.eq(_Mode.WAIT), walk_entry.eq(e), counter.eq(counter + 1),
                         self.rewinds.eq(self.rewinds + 1)]

        with m.If(mode == _Mode.WALK):                            # 1. walk
            with m.If(walk_left == 0):
                put("tstart", walk_entry, now)
                m.d.sync += mode.eq(_Mode.NORMAL)
            with m.Elif(self.resend.ready):
                s = self.resend.payload
                m.d.comb += [self.resend.valid.eq(1), s.entry.eq(walk_entry), s.qpn.eq(wr_rec.qpn),
                             s.sq_index.eq(wr_rec.sq_index), s.first_psn.eq(wr_rec.first_psn)]
                m.d.sync += [cur.eq(next_cur), walk_left.eq(walk_left - 1)]
        with m.Elif(mode == _Mode.FLUSH):                         # 1. flush
            with m.If(win_rw == 0):
                m.d.sync += mode.eq(_Mode.NORMAL)
            with m.Elif(self.cqe.ready):
                retire(walk_entry, cur, wr_rec, next_cur, win_rw, CqeStatus.WR_FLUSH_ERR.value,
                       Const(1))
                m.d.sync += [cur.eq(next_cur), self.flushed.eq(self.flushed + 1)]
        with m.Elif((mode == _Mode.WAIT) & (self.issued == self.appended)):  # 2. start walk
            m.d.sync += [mode.eq(_Mode.WALK), cur.eq(head_rw), walk_left.eq(win_rw)]
        with m.Elif(self.rec.valid & Mux(flush_rec, self.cqe.ready, r.null | id_ok)):  # 3.
            m.d.comb += self.rec.ready.eq(1)
            m.d.sync += self.appended.eq(self.appended + 1)
            with m.If(r.last_of_item | (r.null & ~r.flush)):
                put("done", e_rec, done_rec + 1)
                m.d.sync += self.done_total.eq(self.done_total + 1)
            with m.If(r.modify & err_qp):
                m.d.sync += errq_valid.eq(errq_valid & ~(Const(1, n) << e_rec))
            with m.If(flush_rec):
                c = self.cqe.payload
                m.d.comb += [self.cqe.valid.eq(1), c.wr_id.eq(r.wr_id),
                             c.status.eq(CqeStatus.WR_FLUSH_ERR.value), c.qpn.eq(r.qpn),
                             c.byte_len.eq(r.msg_length), c.sq_index.eq(r.sq_index)]
                m.d.sync += self.flushed.eq(self.flushed + 1)
            with m.Elif(~r.null):
                m.d.comb += free.r_en.eq(free.r_rdy)
                with m.If(~free.r_rdy):
                    m.d.sync += fresh.eq(fresh + 1)
                stored = Signal(lay)
                m.d.comb += [stored.qpn.eq(r.qpn), stored.first_psn.eq(r.first_psn),
                             stored.last_psn.eq(r.last_psn), stored.wr_id.eq(r.wr_id),
                             stored.sq_index.eq(r.sq_index),
                             stored.msg_length.eq(r.msg_length),
                             stored.signalled.eq(r.signalled)]
                put("recs", new_id, stored)
                with m.If(win_rec == 0):
                    put("head", e_rec, new_id)
                    put("tstart", e_rec, now)
                with m.Else():
                    put("nxt", tail_rec, new_id)
                put("tail", e_rec, new_id)
                put("win", e_rec, win_rec + 1)
                m.d.sync += self.win_total.eq(self.win_total + 1)
                with m.If(self.win_total + 1 > self.records_max):
                    m.d.sync += self.records_max.eq(self.win_total + 1)
        with m.Elif(self.ev.valid & ev_ok):                          # 4. event
            with m.If(ev_retire):
                retire(e_ev, head_ev, oldest, next_ev, win_ev, ev_status, ev_cqe)
            with m.If(ev_err):
                enter_error(e_ev, next_ev, oldest.qpn)
            with m.If(past):
                m.d.sync += used.eq(1)
            with m.Else():
                m.d.comb += self.ev.ready.eq(1)
                m.d.sync += used.eq(0)
                with m.If(ev_rewind):
                    start_rewind(e_ev, self.seq_naks)
                with m.Elif(~ev_retire & ~used):
                    m.d.sync += self.ack_unexpected.eq(self.ack_unexpected + 1)
        with m.Elif(tm_ok):                                          # 5. timer
            m.d.sync += self.timeouts.eq(self.timeouts + 1)
            with m.If(give_up):
                retire(scan_entry, head_sp, scan_oldest, next_sp, win_sp,
                       CqeStatus.RETRY_EXC_ERR.value, Const(1))
                enter_error(scan_entry, next_sp, scan_oldest.qpn)
            with m.Else():
                put("retries", scan_entry, retries_sp + 1)
                m.d.sync += [mode.eq(_Mode.WAIT), walk_entry.eq(scan_entry),
                             self.rewinds.eq(self.rewinds + 1)]
        return m
