"""Completion unit: the per-QP go-back-N windows, ACK matching, timers, rewinds.

This file stays whole (one RTL block over 400 lines): the rewind and flush walks, the
record append, the ACK events and the timer scan all write the same window memories
(records, links, heads, tails, counts, timer starts, retries, pins), one write port
each (the timer starts have a second one, for the frame sender's resent notice), and
one of them acts per cycle by a single priority (:class:`CompletionUnit`, Timing);
split apart, that one schedule of the memory ports would be spread over files.
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, memory, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from rtl.rdma.context_cache import CACHE_LOG2_BITS, entry_of
from spec.checks import check_int, check_windows, reject
from spec.formats.roce import PSN_BITS, QPN_BITS, CqeStatus, Syndrome, WqeOpcode
from spec.ports import CacheProbeSignature, CompletionQuerySignature
from spec.rdma_engine import (
    COMPLETION_COUNTERS,
    REQUESTER_SIZES,
    RETRY_LIMIT_RANGE,
    REWIND_QUEUE,
    TIMEOUT_BITS,
    check_cache_shape,
)
from spec.rdma_read_req import rewind_layout
from spec.rdma_responder import SR_WINDOW
from spec.rdma_stages import (
    COUNT_BITS,
    ack_event_layout,
    cqe_req_layout,
    record_layout,
    resend_layout,
    window_record_layout,
)

__all__ = ["CompletionUnit"]


class _Mode(enum.Enum, shape=3):
    """What the unit is doing besides appending, events and timers: nothing
    (``NORMAL``, rewinds may be pending); walking a rewind, resending one record a
    cycle (``WALK``); walking a flush, completing one record a cycle with WR_FLUSH_ERR
    (``FLUSH``); bringing the context of a QP that needs a rewind or an error back into
    the cache (``LOOK``)."""
    NORMAL = 0
    WALK = 2
    FLUSH = 3
    LOOK = 4


class CompletionUnit(wiring.Component):
    """Keep every sent message until its ACK, per QP; complete, rewind, time out.

    Each QP with messages waiting for their ACK has its own window: a list of records
    in sending order (a pool of ``records`` records shared by all QPs, linked per QP),
    its own transport timer and its own retry count, kept in the QP's *window slot*
    (``qpn % windows``; with ``windows`` 0 the slot is the QP's cache entry). ACK
    processing reads the slot and its records, never the QP's context, so the context
    may leave the cache while the window is open (see
    :class:`~rtl.rdma.req.qp_front.QpFront` for the eviction rule). A rewind or an error
    needs the context (the resends are read and framed from it; the sequencer writes
    ERR into it): if it is not in the cache, the unit first asks the front to look it
    up (``need``) and waits for the fill (``LOOK``), and the QP's window is *pinned*
    from then (and from any rewind) until it is empty.

    Parameters
    ----------
    cache : ContextCacheShape
        The context cache's shape (:class:`spec.rdma_engine.ContextCacheShape`): its
        ``entries``, and its ``ways`` per set (a QP's entries are the ``ways`` adjacent
        entries of its set).
    records : int
        Records in the pool (messages from their WQE read to their ACK, all QPs; the
        WQE fetch stage keeps the promise that one is free for each record that arrives).
    retry_limit : int
        Timer expiries without progress for which a QP's window is resent (0 to 7); at
        the next one its oldest message completes with RETRY_EXC_ERR.
    windows : int
        Window slots: 0 (one per cache entry; a QP's context stays cached until its
        window is empty) or a power of two, ``entries`` to 4096 (QPs whose QPNs are
        equal modulo ``windows`` take turns: see ``query.keep``).
    reads : int
        1: records, window records and completions carry the WQE opcode ``op`` (the
        CQE's opcode); 0 (default): not.

    Ports
    -----
    rec : In(stream.Signature(record_layout()))
        Records of messages sent (and null records of items without a message).
    ev : In(stream.Signature(ack_event_layout()))
        ACK/NAK events, from the ACK queue.
    cqe : Out(stream.Signature(cqe_req_layout()))
        Completions to write, to the CQE writer's FIFO.
    resend : Out(stream.Signature(resend_layout(reads)))
        Messages to send again, to the WQE fetch stage's FIFO (with ``reads``, ``take``:
        see *READs and atomics* below).
    hold_qpn : In(QPN_BITS), hold : Out(1)
        A rewind of ``hold_qpn``'s window slot is pending (decided, its walk not ended):
        the WQE fetch stage serves no new work of that QP (the item at its head;
        combinational, on the registers of the start of the cycle).
    err_valid : Out(1), err_entry : Out(range(entries))
        A one-cycle notice to the sequencer, the cycle after a QP entered ERR: its
        entry (the sequencer writes ``state = ERR`` into its context).
    query : In(CompletionQuerySignature(entries, COUNT_BITS))
        For the front's lookup of ``query.qpn`` at entry ``query.entry`` holding
        ``query.victim_qpn``: items of the entry done; ``keep``, the lookup's window
        slot is open for another QP or the victim's window is open and pinned;
        ``keep`` also while a rewind or error of the victim may be decided in this cycle
        (the NAK at the head of ``ev``, the due timer at ``scan``);
        ``victim_open``, the victim's window is open; ``err``, this cycle's ERR notice
        is for the entry (it must not be evicted before the sequencer wrote its state).
    need : Out(stream.Signature({"qpn": QPN_BITS}))
        A lookup the front presents for the unit (a LOOK), ahead of its items.
    probe : Out(CacheProbeSignature()).array(5)
        Is the context of the event's QP, of the timer's QP, of the LOOK's QP present
        (in the cache and filled)? Probes 1, 3 and 4 also give the cache entry of the
        timer's QP, of the event's window head QP (an error) and of the record a
        rewind resends (the cache places the QPs).
    issued : In(16)
        Records the WQE fetch stage has promised (mod 2**16); appended : Out(16)
        records taken from ``rec`` (mod 2**16); done_total : Out(16) items done (their
        last record, or null record, appended); win_total : Out(16) records in use.
    resent : In(stream.Signature({"qpn": QPN_BITS}, always_ready=True))
        From the frame sender: a resent frame of QP ``qpn`` leaves in this cycle (its
        descriptor is taken). If the QP's window is open (its slot's oldest record is
        the QP's), its timer restarts (``now``, effective the next cycle), whatever the
        action of the cycle: ``tstart`` has a write port of its own for this, and as
        every write of ``tstart`` writes ``now``, two in one cycle agree.
    timeout : In(TIMEOUT_BITS)
        Transport timeout in cycles.
    selective : In(1)
        Selective repeat (held from reset): a rewind from PSN ``p`` (a PSN sequence
        NAK's, or the timer's oldest message's first) resends only the QP's oldest
        message (for a NAK, the one holding ``p``) when the QP's last PSN sent is at
        most :data:`~spec.rdma_responder.SR_WINDOW` after ``p`` (the responder kept
        what it could of them), else the whole window; 0, go-back-N: the whole window.
        When the last rewind (of any QP) resent one message, a NAK of the same QP naming
        a PSN 0 to ``SR_WINDOW`` after the PSN that follows that message (where the
        responder's NAK after consuming it falls) goes back N: the responder consumed
        the message and still misses what follows, which it NAKs when frames ahead
        were placed or discarded; the discarded ones no NAK will name, and resending
        the whole window once is simpler than a NAK per message (the placed frames it
        resends are silent duplicates). With ``reads``, a rewind of a QP with a READ or
        atomic in its window goes back N (a count per window slot, ``ops``): the
        response intake keeps no response out of order, so every response after a
        missing one was discarded, and an ACK past an unanswered READ waits for it.
    cache_log2 : In(4)
        Cache entries in use (with ``windows`` 0 a QP's window slot is its direct-mapped
        entry ``qpn % 2**cache_log2``; its entry otherwise comes from the probes); the
        timer's ``scan`` visits all slots built (``entries`` for ``windows`` 0), used or
        not.
    ack_unexpected, seq_naks, timeouts, rewinds, retired, records_max : Out(32)
        Events that matched nothing; rewinds by a PSN sequence NAK; timer expiries
        (rewinds and RETRY_EXC_ERR completions); rewinds; records retired; the most
        records in use at once.
    qp_errors, flushed, recovery_fills : Out(32)
        QPs moved to ERR; WQEs completed with WR_FLUSH_ERR; LOOKs (a rewind or error
        of a QP whose context had left the cache).
    held_qpn, held_psn : Out, held : In(1), done_pending : In(1)
        With ``reads``: the response intake's answer for the record the walk is at (a
        slot holds its operation) and its ``done_pending`` or'ed with its ``done`` FIFO
        not empty.
    took, take_dropped : In(1)
        With ``reads``: a take resend left the frame sender; the sequencer dropped one.
    evict : Out(stream.Signature(rewind_layout(), always_ready=True))
        With ``reads``: free the response intake's slots of QP ``qpn`` whose operation
        ends after PSN ``psn`` (a register: the cycle after the walk's first take).

    Timing
    ------
    One action per cycle, the first that can complete in that cycle, in this order:

    1. walking a rewind: send the QP's next record to ``resend`` (or, when all are
       sent, end the rewind); or walking a flush: complete the
       QP's oldest record with WR_FLUSH_ERR (it needs room in ``cqe``; when the window
       is empty, end the flush);
    2. starting the walk of the oldest pending rewind (see *Rewinds* below), once
       every record the WQE fetch stage had promised when the rewind was decided is
       appended; the QP's timer is held from then on (see below);
    3. appending the record at the head of ``rec`` to its QP's window (a record is
       always free: the WQE fetch stage promises no more than the pool holds); a null
       record only counts its item done. A ``flush`` record (the
       sequencer flushed its WQE), or a record of the QP that entered ERR at this
       entry (sent before the sequencer learned it), is not appended: it completes at
       once with WR_FLUSH_ERR (it needs room in ``cqe``). A ``modify`` record forgets
       its QP as the ERR QP of every entry of its set (the ``ways`` entries it may
       occupy: it may have entered ERR in another one before it was evicted and filled
       again; the records that mark was for all came before the modify, in order);
    4. the event at the head of ``ev`` against the oldest record ``h`` of its QP
       (PSNs modulo 2**24 with a 2**23 window): a PSN after ``h``'s last (any
       syndrome) retires ``h`` with SUCCESS and keeps the event (ACKs are cumulative);
       an ACK of ``h``'s last PSN retires it; a remote access NAK (another NAK) within
       ``h`` completes it with REM_ACCESS_ERR (RETRY_EXC_ERR); a PSN sequence NAK within
       ``h`` starts a rewind of the QP (if the queue of pending rewinds is full the
       event waits; if a rewind of the QP's slot is already pending, that one resends
       what the NAK names: the NAK is taken and counted in ``seq_naks``, no new
       rewind); anything else is dropped (``ack_unexpected``, unless it retired a
       message before). Not during a walk, a flush or a LOOK, except events that
       neither rewind nor fail a QP, which a LOOK lets through;
    5. the timer of slot ``scan`` (a pointer that visits one slot per cycle): if its
       window is not empty, no rewind of it is pending and ``now - start >=
       timeout``, rewind it (if the queue of pending rewinds has room), or complete its
       oldest message with RETRY_EXC_ERR when ``retry_limit`` expiries have rewound it
       since its last progress. Not during a walk, a flush or a LOOK.

    An event of 4. or a timer of 5. that would rewind or fail a QP whose context is not
    present instead starts a LOOK (the event stays at the head of ``ev``; the timer acts
    when the scan next reaches the slot): the window is pinned, ``need`` is valid until
    the front's lookup is taken, and the LOOK ends when the context is present (or the
    window emptied). During a LOOK events that need no context are served; no rewind,
    error or timer action starts. With ``windows`` 0 a QP with an open window is always
    present, so no LOOK happens.

    Retiring a record writes a CQE if it is signalled or failed (it needs room in
    ``cqe``), frees it, restarts the QP's timer and clears its retry count. A failed
    completion (REM_ACCESS_ERR, RETRY_EXC_ERR) moves the QP to ERR (as Linux rxe does;
    IBTA Vol 1 table 91, Any State to Error: pending work requests complete in error):
    the entry remembers the QP, the sequencer is told in the next cycle (``err_valid``,
    the entry stays busy for the front in that cycle) and a flush walks the rest of its
    window from the next cycle on, one record a cycle; no event or timer action
    meanwhile. A QP's timer starts when its window becomes non-empty.

    *Rewinds*, per QP and several at once. Deciding a rewind of slot ``s`` (in cycle
    ``t``) sets the slot's pending bit (``hold`` for its QPs from ``t + 1``: the WQE
    fetch stage serves no new work of theirs) and queues ``s`` with a *mark*, the
    fetch stage's ``issued`` of ``t + 1`` (every record promised up to ``t``, the last
    cycle the QP was not held), in a queue of :data:`~spec.rdma_engine.REWIND_QUEUE`
    pending rewinds (a rewind is only decided while it has room). The pipeline from the
    fetch stage to ``rec`` keeps its order, so once ``appended`` has reached the mark
    every record of the QP promised before the hold is in the window: the walk of the
    queue's head may start (marks grow in queue order, so the head is always the first
    ready). Meanwhile every other QP keeps sending, its records are appended, and its
    events and timer are served as usual. A walk resends the QP's window from its
    oldest record (with ``selective``, that record only, when decided so at the NAK or
    the expiry), one record per cycle, and clears the pending bit when it ends; walks
    are one at a time. Head-of-line: the fetch stage holds the item at its head, so
    items of other QPs queued behind a held QP's item (in the ``fetch`` FIFO or the
    miss queue) wait until that QP's walk ends; the items ahead of it, and everything
    already past the fetch stage, go on. The rewound QP's timer is *held*
    (never due) from the cycle its walk starts (if its window is not empty then) until
    the first restart of the timer of its slot: a resent frame of the QP leaves the
    frame sender (``resent``), its window makes progress (a record retired, by an ACK,
    an error or a flush), or a record is appended to its empty window. After that the
    timer runs from the last such event: every resent frame that leaves restarts it.
    So resends that wait long in the pipeline (slow host reads, or many of them) do not
    expire the timer again while they have not all left. One QP's timer is held at a
    time (the QP of the last walk started; a new walk moves the hold to its QP).

    *READs and atomics* (``reads``). A walk whose next resend finds ``resend`` full does
    not hold the cycle: a record may be appended then (of another QP: the walked QP's new
    work is held), so the pipeline the resends pass through drains. A rewind's walk also
    waits until no take resend is
    on its way to the frame sender (``takes``, counted from the walk to ``took`` or
    ``take_dropped``) and no ``done`` is pending, so that every READ or atomic in the
    window is either held by a response-intake slot or has not landed (its sends were
    all consumed without a frame, or its slot freed by ``evict``). The walk resends a
    held one as a WRITE is resent (the slot stays: the same operation); one that holds
    no slot is a *take* (``take``: the frame sender offers it to the intake as a first
    send) unless a ``done`` became pending during the walk (it could be an operation
    just landed): then it is skipped, not resent (a later rewind sends it; a walk that
    resent nothing releases its QP's timer when it ends). From the walk's first take
    on, every READ and atomic of the walk is a take, and ``evict`` frees the QP's slots
    of operations after the first take's PSN: node B has not executed them (it has not
    executed that one), so their slots would wait for responses that never come.
    """

    def __init__(self, cache, records=REQUESTER_SIZES["records"], retry_limit=7,
                 windows=0, reads=0):
        try:
            cache = check_cache_shape(cache)
        except ValueError as error:
            reject(self, str(error))
        entries = cache.entries
        self.entries, self.ways, self.reads = entries, cache.ways, reads
        self.records = check_int(self, "window records", records, 2, 4096)
        self.retry_limit = check_int(self, "retry limit", retry_limit, *RETRY_LIMIT_RANGE)
        self.windows = check_windows(self, windows, entries)
        self.shared = windows == 0
        super().__init__({
            "rec": In(stream.Signature(record_layout(bool(reads)))),
            "ev": In(stream.Signature(ack_event_layout())),
            "cqe": Out(stream.Signature(cqe_req_layout(bool(reads)))),
            "resend": Out(stream.Signature(resend_layout(bool(reads)))),
            "hold_qpn": In(QPN_BITS), "hold": Out(1),
            "err_valid": Out(1), "err_entry": Out(range(entries)),
            "query": In(CompletionQuerySignature(entries, COUNT_BITS)),
            "need": Out(stream.Signature(data.StructLayout({"qpn": QPN_BITS}))),
            "probe": Out(CacheProbeSignature()).array(5),
            "issued": In(COUNT_BITS), "appended": Out(COUNT_BITS),
            "done_total": Out(COUNT_BITS), "win_total": Out(COUNT_BITS),
            "resent": In(stream.Signature(data.StructLayout({"qpn": QPN_BITS}),
                                          always_ready=True)),
            "timeout": In(TIMEOUT_BITS), "selective": In(1),
            "cache_log2": In(CACHE_LOG2_BITS, init=(entries - 1).bit_length()),
            **{n: Out(32) for n in COMPLETION_COUNTERS},
            **({"held_qpn": Out(QPN_BITS), "held_psn": Out(PSN_BITS), "held": In(1),
                "done_pending": In(1), "took": In(1), "take_dropped": In(1),
                "evict": Out(stream.Signature(rewind_layout(), always_ready=True))}
               if reads else {}),
        })

    def elaborate(self, platform):
        m = Module()
        n, n_records, nw = self.entries, self.records, self.windows
        ibits = (n - 1).bit_length()
        wbits = (nw - 1).bit_length()
        rbits = (n_records - 1).bit_length()
        lay = window_record_layout(bool(self.reads))

        def mem(name, shape, depth):
            m.submodules[name] = mm = memory.Memory(shape=shape, depth=depth, init=[])
            return mm
        recs = mem("recs", lay, n_records)
        nxt = mem("nxt", rbits, n_records)
        # Per window slot (a QP's slot: see slot_of).
        head = mem("head", rbits, nw)
        tail = mem("tail", rbits, nw)
        win = mem("win", COUNT_BITS, nw)
        tstart = mem("tstart", 32, nw)
        retries = mem("retries", 3, nw)
        pinned = mem("pinned", 1, nw)
        rwp = mem("rwp", 1, nw)             # a rewind is pending
        ops = mem("ops", COUNT_BITS, nw) if self.reads else None   # READs, atomics
        # Per cache entry: items done; the QP that entered ERR (its QPN, a memory, and a
        # valid bit, a register cleared by reset as the rest of the QP state is reloaded).
        done = mem("done", COUNT_BITS, n)
        errq = mem("errq", QPN_BITS, n)
        errq_valid = Signal(n)
        m.submodules.free = free = SyncFIFO(width=rbits, depth=n_records)
        # Pending rewinds in the order decided: slot, one message (selective), mark.
        rw_lay = data.StructLayout({"slot": wbits, "one": 1, "mark": COUNT_BITS})
        m.submodules.rwq = rwq = SyncFIFO(width=rw_lay.size, depth=REWIND_QUEUE)

        def rd(mm, addr):
            p = mm.read_port(domain="comb")
            m.d.comb += p.addr.eq(addr)
            return p.data

        def slot_of(qpn):
            sl = Signal(wbits)
            m.d.comb += sl.eq(entry_of(qpn, self.cache_log2, ibits) if self.shared
                              else qpn[:wbits])
            return sl

        now = Signal(32)
        m.d.sync += now.eq(now + 1)
        fresh = Signal(range(n_records + 1))
        scan = Signal(wbits)
        m.d.sync += scan.eq(scan + 1)
        mode = Signal(_Mode)
        walk_slot = Signal(wbits)
        cur = Signal(rbits)
        walk_left = Signal(16)
        used = Signal()
        look_qpn, looked = Signal(QPN_BITS), Signal()
        m.d.comb += self.hold.eq(rd(rwp, slot_of(self.hold_qpn)))
        # A rewind decided in cycle t enters the queue in t + 1 with the mark ``issued``
        # of t + 1 (the records promised up to t, the last cycle its QP was not held).
        new_rw, new_slot, new_one = Signal(), Signal(wbits), Signal()
        rw_head = Signal(rw_lay)
        m.d.comb += [rwq.w_en.eq(new_rw),
                     rwq.w_data.eq(Cat(new_slot, new_one, self.issued)),
                     rw_head.eq(rwq.r_data)]
        m.d.sync += new_rw.eq(0)
        rw_room = rwq.level + new_rw < REWIND_QUEUE
        rw_after = Signal(COUNT_BITS)
        m.d.comb += rw_after.eq(self.appended - rw_head.mark)
        rw_ready = rwq.r_rdy & ~rw_after[COUNT_BITS - 1]     # its QP's work is appended
        m.d.sync += self.err_valid.eq(0)

        # Reads for each candidate.
        r, ev = self.rec.payload, self.ev.payload
        e_rec, s_rec = Signal(ibits), slot_of(r.qpn)
        m.d.comb += e_rec.eq(r.entry[:ibits])
        s_ev = slot_of(ev.qpn)
        win_rec, tail_rec, done_rec = rd(win, s_rec), rd(tail, s_rec), rd(done, e_rec)
        errq_qpn = rd(errq, e_rec)
        win_ev, head_ev = rd(win, s_ev), rd(head, s_ev)
        oldest = Signal(lay)
        m.d.comb += oldest.eq(rd(recs, head_ev))
        next_ev = rd(nxt, head_ev)
        win_sp, head_sp = rd(win, scan), rd(head, scan)
        tstart_sp, retries_sp = rd(tstart, scan), rd(retries, scan)
        scan_oldest = Signal(lay)
        m.d.comb += scan_oldest.eq(rd(recs, head_sp))
        next_sp = rd(nxt, head_sp)
        win_rw = rd(win, walk_slot)
        head_rq, win_rq = rd(head, rw_head.slot), rd(win, rw_head.slot)
        rwp_ev, rwp_sp = rd(rwp, s_ev), rd(rwp, scan)
        wr_rec = Signal(lay)
        m.d.comb += wr_rec.eq(rd(recs, cur))
        next_cur = rd(nxt, cur)
        s_look = slot_of(look_qpn)
        pinned_look = rd(pinned, s_look)
        # The front's question: may the entry's QP be evicted for this lookup?
        q = self.query
        s_q, s_v = slot_of(q.qpn), slot_of(q.victim_qpn)
        win_q, owner_q = rd(win, s_q), Signal(lay)
        m.d.comb += owner_q.eq(rd(recs, rd(head, s_q)))
        win_v, pinned_v = rd(win, s_v), rd(pinned, s_v)
        m.d.comb += [q.done.eq(rd(done, q.entry)),
                     q.victim_open.eq(q.victim_valid & (win_v != 0)),
                     q.err.eq(self.err_valid & (self.err_entry == q.entry))]
        # Is the context of the event's QP, the timer's QP, the looked-up QP present?
        m.d.comb += [self.probe[0].qpn.eq(ev.qpn), self.probe[1].qpn.eq(scan_oldest.qpn),
                     self.probe[2].qpn.eq(look_qpn), self.probe[3].qpn.eq(oldest.qpn),
                     self.probe[4].qpn.eq(wr_rec.qpn)]
        ev_here, sp_here, look_here = (self.probe[k].present for k in range(3))

        # A resent frame leaves: restart its QP's timer (a write port of its own).
        rs = self.resent.payload
        s_rs = slot_of(rs.qpn)
        win_rs, owner_rs = rd(win, s_rs), Signal(lay)
        m.d.comb += owner_rs.eq(rd(recs, rd(head, s_rs)))
        rs_port = tstart.write_port()
        rs_ok = self.resent.valid & (win_rs != 0) & (owner_rs.qpn == rs.qpn)
        m.d.comb += [rs_port.addr.eq(s_rs), rs_port.data.eq(now), rs_port.en.eq(rs_ok)]
        # The timer held from a walk's start to the QP's first resent frame or progress.
        held, held_slot = Signal(), Signal(wbits)
        with m.If(rs_ok & (s_rs == held_slot)):
            m.d.sync += held.eq(0)

        # Write ports, driven by the chosen action.
        w = {name: mm.write_port() for name, mm in (("recs", recs), ("nxt", nxt),
             ("head", head), ("tail", tail), ("win", win), ("done", done),
             ("tstart", tstart), ("retries", retries), ("errq", errq),
             ("pinned", pinned), ("rwp", rwp), ("ops", ops)) if mm is not None}

        def put(name, addr, value):
            m.d.comb += [w[name].addr.eq(addr), w[name].data.eq(value), w[name].en.eq(1)]

        # With READs, a slot's READs and atomics in the window, at the event's, the
        # timer's, the appended record's and the walked slot.
        ops_at = ([rd(ops, sl) for sl in (s_ev, scan, s_rec, walk_slot)] if self.reads
                  else [None] * 4)

        def count_op(sl, count, rec, k):
            """Record ``rec`` enters (``k`` = 1) or leaves (-1) slot ``sl``'s window
            (``count``: the slot's READs and atomics)."""
            if self.reads:
                with m.If(rec.op != WqeOpcode.RDMA_WRITE):
                    put("ops", sl, count + k)

        # The candidates.
        id_ok = free.r_rdy | (fresh < n_records)
        err_qp = Signal()              # the record's QP is the one in ERR at its entry
        m.d.comb += err_qp.eq(errq_valid.bit_select(e_rec, 1) & (errq_qpn == r.qpn))
        # The ERR marks a modify record of a QP forgets: with one way its entry's (if
        # err_qp), with more those of the entries of its set whose ERR QP it is.
        lw = (self.ways - 1).bit_length()
        errq_forget, forget_if = Const(1, n) << e_rec, err_qp
        if lw:
            errq_forget, forget_if = Signal(n), Const(1)
            for k in range(self.ways):
                e_k = Cat(Const(k, lw), e_rec[lw:])
                m.d.comb += errq_forget.bit_select(e_k, 1).eq(
                    errq_valid.bit_select(e_k, 1) & (rd(errq, e_k) == r.qpn))
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
        # A NAK of a QP whose rewind is pending: that rewind resends what it names.
        ev_new_rw = ev_rewind & ~rwp_ev
        ev_err = ev_retire & (ev_status != CqeStatus.SUCCESS.value)
        ev_cqe = ev_retire & (oldest.signalled | ev_err)
        ev_ok = ((mode != _Mode.WALK) & (mode != _Mode.FLUSH) & (~ev_cqe | self.cqe.ready)
                 & (~(ev_new_rw | ev_err) | (mode == _Mode.NORMAL))
                 & (~ev_new_rw | rw_room))
        ev_look = (ev_new_rw | ev_err) & ~ev_here       # its context must come back first
        due = ((win_sp != 0) & (now - tstart_sp >= self.timeout)
               & ~(held & (held_slot == scan)) & ~rwp_sp)
        expired = (mode == _Mode.NORMAL) & due
        # The victim must stay: its slot is shared with the looked-up QP's, or pinned,
        # or a rewind or error of it may be decided in this cycle (the event at the head
        # of ev, the timer at the scan slot): the decision needs its context next cycle.
        m.d.comb += q.keep.eq(((win_q != 0) & (owner_q.qpn != q.qpn))
                              | (q.victim_valid
                                 & (((win_v != 0) & pinned_v)
                                    | (self.ev.valid & (ev_rewind | ev_err)
                                       & (ev.qpn == q.victim_qpn))
                                    | (due & (scan_oldest.qpn == q.victim_qpn)))))
        give_up = retries_sp == self.retry_limit
        # Selective repeat: a rewind from PSN p resends one message (the oldest, which
        # holds p) when every PSN the QP sent after p is within the responder's bitmap
        # (SR_WINDOW); beyond it the responder discarded frames: go back N.
        tail_ev_rec, tail_sp_rec = Signal(lay), Signal(lay)
        m.d.comb += [tail_ev_rec.eq(rd(recs, rd(tail, s_ev))),
                     tail_sp_rec.eq(rd(recs, rd(tail, scan)))]
        span_ev, span_sp = Signal(PSN_BITS), Signal(PSN_BITS)
        m.d.comb += [span_ev.eq(tail_ev_rec.last_psn - ev.psn),
                     span_sp.eq(tail_sp_rec.last_psn - scan_oldest.first_psn)]
        # A NAK of a PSN at most SR_WINDOW after the message last resent alone (the
        # responder consumed it, and the bits after it, and still misses what follows,
        # perhaps discarded frames): go back N.
        solo_valid, solo_qpn, solo_psn = Signal(), Signal(QPN_BITS), Signal(PSN_BITS)
        solo_d = Signal(PSN_BITS)
        m.d.comb += solo_d.eq(ev.psn - solo_psn)
        one_ev = (self.selective & (span_ev <= SR_WINDOW)
                  & ~(solo_valid & (ev.qpn == solo_qpn) & (solo_d <= SR_WINDOW)))
        one_sp = self.selective & (span_sp <= SR_WINDOW)
        if self.reads:          # a READ or atomic in the window: go back N
            one_ev = one_ev & (ops_at[0] == 0)
            one_sp = one_sp & (ops_at[1] == 0)
        tm_ok = expired & Mux(give_up, self.cqe.ready | ~sp_here, rw_room)

        def retire(sl, rec_id, rec, nxt_id, win_s, status, cqe_needed, ops_s):
            with m.If(cqe_needed):
                c = self.cqe.payload
                m.d.comb += [self.cqe.valid.eq(1), c.wr_id.eq(rec.wr_id), c.status.eq(status),
                             c.qpn.eq(rec.qpn), c.byte_len.eq(rec.msg_length),
                             c.sq_index.eq(rec.sq_index)]
                if self.reads:
                    m.d.comb += c.op.eq(rec.op)
            m.d.comb += [free.w_en.eq(1), free.w_data.eq(rec_id)]
            count_op(sl, ops_s, rec, -1)
            put("head", sl, nxt_id)
            put("win", sl, win_s - 1)
            put("tstart", sl, now)
            put("retries", sl, 0)
            with m.If(sl == held_slot):
                m.d.sync += held.eq(0)
            with m.If(win_s == 1):
                put("pinned", sl, 0)
            m.d.sync += [self.win_total.eq(self.win_total - 1), self.retired.eq(self.retired + 1)]

        def enter_error(sl, nxt_id, qpn, e):
            """The QP ``qpn`` (window slot ``sl``, cache entry ``e``) enters ERR; flush its
            window from ``nxt_id``."""
            m.d.sync += [mode.eq(_Mode.FLUSH), walk_slot.eq(sl), cur.eq(nxt_id),
                         self.err_valid.eq(1), self.err_entry.eq(e),
                         self.qp_errors.eq(self.qp_errors + 1)]
            put("errq", e, qpn)
            m.d.sync += errq_valid.eq(errq_valid | (Const(1, n) << e))

        def start_rewind(sl, one, rec):
            put("pinned", sl, 1)
            m.d.sync += solo_valid.eq(one)
            with m.If(one):
                m.d.sync += [solo_qpn.eq(rec.qpn), solo_psn.eq(rec.last_psn + 1)]
            put("rwp", sl, 1)
            m.d.sync += [new_rw.eq(1), new_slot.eq(sl), new_one.eq(one),
                         self.rewinds.eq(self.rewinds + 1)]

        def start_look(sl, qpn):
            put("pinned", sl, 1)
            m.d.sync += [mode.eq(_Mode.LOOK), look_qpn.eq(qpn), looked.eq(0),
                         self.recovery_fills.eq(self.recovery_fills + 1)]

        # A LOOK asks the front for a lookup of the QP, then waits for its fill (or for
        # its window to empty, which unpins it).
        m.d.comb += [self.need.valid.eq((mode == _Mode.LOOK) & ~looked),
                     self.need.payload.qpn.eq(look_qpn)]
        with m.If(self.need.valid & self.need.ready):
            m.d.sync += looked.eq(1)
        with m.If((mode == _Mode.LOOK) & looked & (look_here | ~pinned_look)):
            m.d.sync += mode.eq(_Mode.NORMAL)

        # With READs: take resends on their way; the walk's first take seen, its sends.
        if self.reads:
            takes, evicting, emitted = Signal(COUNT_BITS), Signal(), Signal()
            take_w, skip_w = Signal(), Signal()
            is_op = wr_rec.op != WqeOpcode.RDMA_WRITE
            m.d.comb += [self.held_qpn.eq(wr_rec.qpn), self.held_psn.eq(wr_rec.last_psn),
                         take_w.eq(is_op & (evicting | (~self.held & ~self.done_pending))),
                         skip_w.eq(is_op & ~evicting & ~self.held & self.done_pending)]
            m.d.sync += [self.evict.valid.eq(0),
                         takes.eq(takes + (self.resend.valid & take_w) - self.took
                                  - self.take_dropped)]
            rw_ready = rw_ready & (takes == 0) & ~self.done_pending

        app_ok = self.rec.valid & Mux(flush_rec, self.cqe.ready, r.null | id_ok)
        walking = mode == _Mode.WALK
        if self.reads:          # a walk whose resend waits lets a record be appended
            walking = walking & ~((walk_left != 0) & ~self.resend.ready & app_ok)
        with m.If(walking):                                       # 1. walk
            with m.If(walk_left == 0):
                m.d.sync += mode.eq(_Mode.NORMAL)
                put("rwp", walk_slot, 0)
                if self.reads:          # nothing resent: its timer runs again
                    with m.If(~emitted & (held_slot == walk_slot)):
                        m.d.sync += held.eq(0)
            with m.Elif(self.resend.ready):
                s = self.resend.payload
                m.d.comb += [self.resend.valid.eq(1), s.entry.eq(self.probe[4].entry[:ibits]),
                             s.qpn.eq(wr_rec.qpn), s.sq_index.eq(wr_rec.sq_index),
                             s.first_psn.eq(wr_rec.first_psn)]
                m.d.sync += [cur.eq(next_cur), walk_left.eq(walk_left - 1)]
                if self.reads:          # (a skip sends nothing)
                    m.d.comb += [self.resend.valid.eq(~skip_w), s.take.eq(take_w)]
                    m.d.sync += emitted.eq(emitted | ~skip_w)
                    with m.If(take_w & ~evicting):
                        m.d.sync += [evicting.eq(1), self.evict.valid.eq(1),
                                     self.evict.payload.qpn.eq(wr_rec.qpn),
                                     self.evict.payload.psn.eq(wr_rec.first_psn)]
        with m.Elif(mode == _Mode.FLUSH):                         # 1. flush
            with m.If(win_rw == 0):
                m.d.sync += mode.eq(_Mode.NORMAL)
            with m.Elif(self.cqe.ready):
                retire(walk_slot, cur, wr_rec, next_cur, win_rw, CqeStatus.WR_FLUSH_ERR.value,
                       Const(1), ops_at[3])
                m.d.sync += [cur.eq(next_cur), self.flushed.eq(self.flushed + 1)]
        with m.Elif((mode == _Mode.NORMAL) & rw_ready):              # 2. start walk
            m.d.comb += rwq.r_en.eq(1)
            m.d.sync += [mode.eq(_Mode.WALK), cur.eq(head_rq), walk_slot.eq(rw_head.slot),
                         walk_left.eq(Mux(rw_head.one & (win_rq != 0), 1, win_rq)),
                         held.eq(win_rq != 0), held_slot.eq(rw_head.slot)]
            if self.reads:
                m.d.sync += [evicting.eq(0), emitted.eq(0)]
        with m.Elif(app_ok):                                       # 3. append
            m.d.comb += self.rec.ready.eq(1)
            m.d.sync += self.appended.eq(self.appended + 1)
            with m.If(r.last_of_item | (r.null & ~r.flush)):
                put("done", e_rec, done_rec + 1)
                m.d.sync += self.done_total.eq(self.done_total + 1)
            with m.If(r.modify & forget_if):
                m.d.sync += errq_valid.eq(errq_valid & ~errq_forget)
            with m.If(flush_rec):
                c = self.cqe.payload
                m.d.comb += [self.cqe.valid.eq(1), c.wr_id.eq(r.wr_id),
                             c.status.eq(CqeStatus.WR_FLUSH_ERR.value), c.qpn.eq(r.qpn),
                             c.byte_len.eq(r.msg_length), c.sq_index.eq(r.sq_index)]
                if self.reads:
                    m.d.comb += c.op.eq(r.op)
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
                if self.reads:
                    m.d.comb += stored.op.eq(r.op)
                put("recs", new_id, stored)
                with m.If(win_rec == 0):
                    put("head", s_rec, new_id)
                    put("tstart", s_rec, now)
                    with m.If(s_rec == held_slot):
                        m.d.sync += held.eq(0)
                with m.Else():
                    put("nxt", tail_rec, new_id)
                put("tail", s_rec, new_id)
                count_op(s_rec, ops_at[2], r, 1)
                put("win", s_rec, win_rec + 1)
                m.d.sync += self.win_total.eq(self.win_total + 1)
                with m.If(self.win_total + 1 > self.records_max):
                    m.d.sync += self.records_max.eq(self.win_total + 1)
        with m.Elif(self.ev.valid & ev_ok):                          # 4. event
            with m.If(ev_look):
                start_look(s_ev, ev.qpn)
            with m.Else():
                with m.If(ev_retire):
                    retire(s_ev, head_ev, oldest, next_ev, win_ev, ev_status, ev_cqe,
                           ops_at[0])
                with m.If(ev_err):
                    enter_error(s_ev, next_ev, oldest.qpn, self.probe[3].entry[:ibits])
                with m.If(past):
                    m.d.sync += used.eq(1)
                with m.Else():
                    m.d.comb += self.ev.ready.eq(1)
                    m.d.sync += used.eq(0)
                    with m.If(ev_new_rw):
                        start_rewind(s_ev, one_ev, oldest)
                    with m.If(ev_rewind):
                        m.d.sync += self.seq_naks.eq(self.seq_naks + 1)
                    with m.Elif(~ev_retire & ~used):
                        m.d.sync += self.ack_unexpected.eq(self.ack_unexpected + 1)
        with m.Elif(tm_ok):                                          # 5. timer
            with m.If(~sp_here):
                start_look(scan, scan_oldest.qpn)
            with m.Else():
                m.d.sync += self.timeouts.eq(self.timeouts + 1)
                with m.If(give_up):
                    retire(scan, head_sp, scan_oldest, next_sp, win_sp,
                           CqeStatus.RETRY_EXC_ERR.value, Const(1), ops_at[1])
                    enter_error(scan, next_sp, scan_oldest.qpn,
                                self.probe[1].entry[:ibits])
                with m.Else():
                    put("retries", scan, retries_sp + 1)
                    start_rewind(scan, one_sp, scan_oldest)
        return m
