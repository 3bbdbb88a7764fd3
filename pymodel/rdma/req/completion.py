"""Twin of :class:`rtl.rdma.req.completion.CompletionUnit`."""

from collections import deque

from pymodel.cycle import Staged, StagedLog, StagedNonzero
from pymodel.rdma.req.read_walk import ReadWalk
from pymodel.rdma.req.rewind_queue import RewindQueue, one_message
from spec.formats.roce import PSN_BITS, CqeStatus, Syndrome
from spec.rdma_engine import check_cache_shape
from spec.rdma_responder import SR_WINDOW
from spec.rdma_stages import COUNT_BITS

__all__ = ["CompletionUnitModel"]

_COUNT_MASK, _PSN_MASK = (1 << COUNT_BITS) - 1, (1 << PSN_BITS) - 1
_M32, _FLUSH, _HALF = 0xFFFFFFFF, CqeStatus.WR_FLUSH_ERR.value, 1 << 23
_ACK, _NAK_SEQ, _NAK_ACCESS = (Syndrome.ACK.value, Syndrome.NAK_PSN_SEQUENCE.value,
                               Syndrome.NAK_REMOTE_ACCESS.value)
_SUCCESS = CqeStatus.SUCCESS.value
_KEPT = ("qpn", "first_psn", "last_psn", "wr_id", "sq_index", "msg_length", "signalled", "op")


class CompletionUnitModel:
    """Per-QP windows of records (in window slots), ACK matching, timers and rewinds; one action
    a cycle. ``windows``: the slots (0: one per cache entry, the slot is the QP's entry).
    ``present(qpn)``: the cache's probe (its context is in the cache and filled); None for a unit
    whose contexts are always present. ``entry_of(qpn)``: the probe's ``entry`` (None: the
    direct-mapped ``qpn % used``). ``cache``: the context cache's ``ContextCacheShape``
    (a modify record forgets its QP's ERR mark in every entry of its set of ``ways``)."""

    def __init__(self, cache, records, retry_limit, rec, ev, cqe, resend, used=None,
                 windows=0, present=None, entry_of=None):
        cache = check_cache_shape(cache)
        entries = cache.entries
        self.n, self.ways, self.R, self.retry_limit = entries, cache.ways, records, retry_limit
        self.cache_used = used or entries   # cache entries in use
        self.shared = not windows
        self.W = windows or entries         # slots built (the scan visits them all)
        self.present = present or (lambda qpn: True)
        self.entry_of = entry_of
        self.rec, self.ev, self.cqe, self.resend = rec, ev, cqe, resend
        self.recs = {}                               # id -> stored record
        self.nxt = {}                                # id -> next id of the QP
        log = self._staged = StagedLog()     # the registers to commit (end of a cycle)
        w = self.W
        self.head = Staged(0, size=w, name="head", log=log)
        self.tail = Staged(0, size=w, name="tail", log=log)
        self.win = StagedNonzero(0, size=w, name="win", log=log)
        self.pinned = Staged(0, size=w, name="pinned", log=log)
        self.done = Staged(0, size=entries, name="done", log=log)
        self.tstart = Staged(0, size=w, name="tstart", log=log)
        self.retries = Staged(0, size=w, name="retries", log=log)
        # The timer held from a walk's start to its QP's first resent frame or progress.
        self.held = Staged(0, name="held", log=log)
        self.held_slot = Staged(0, name="held_slot", log=log)
        self.look_qpn, self.looked = None, False     # the LOOK (registers)
        self._looked_next = None
        self.done_total = Staged(0, name="done_total", log=log)
        self.win_total = Staged(0, name="win_total", log=log)
        self.appended = Staged(0, name="appended", log=log)   # records taken from ``rec``
        self.state = Staged(0, name="state", log=log)   # 0 normal, 2 walk, 3 flush, 4 look
        self.rwp = Staged(0, size=w, name="rwp", log=log)   # a rewind is pending
        self.rwq = RewindQueue()
        self.errq = Staged(None, size=entries, name="errq", log=log)   # the QP in ERR
        self.err_out = self._err_next = None    # the notice the sequencer sees (an entry)
        self.free, self._freed, self.fresh = deque(), [], 0
        self.e_rw = self.cur = self.walk_left = 0
        self.reads = ReadWalk(log, w)       # with READs: takes, evict, ops
        self.solo = None     # (qpn, PSN after it) the last rewind resent alone; None: GBN
        self.selective = 0
        self.used, self.timeout = False, 0
        self.count = dict(ack_unexpected=0, seq_naks=0, timeouts=0, rewinds=0, retired=0,
                          records_max=0, qp_errors=0, flushed=0, recovery_fills=0)
        self.trace = []

    def slot(self, qpn):
        """The window slot of ``qpn``."""
        return qpn % self.cache_used if self.shared else qpn % self.W

    def entry(self, qpn):
        return self.entry_of(qpn) if self.entry_of is not None else qpn % self.cache_used

    def query(self, qpn, victim, c):
        """The front's question in cycle ``c`` (``victim``: the QP in the entry, or None):
        ``(keep, victim_open)``. ``keep`` also while a rewind or error of the victim may be
        decided in this cycle (the NAK at the head of ``ev``, the due timer at the scan
        slot)."""
        sq = self.slot(qpn)
        keep = self.win[sq] != 0 and self.recs[self.head[sq]]["qpn"] != qpn
        vopen = False
        if victim is not None:
            sv = self.slot(victim)
            vopen = self.win[sv] != 0
            keep = keep or (vopen and bool(self.pinned[sv]))
            if not keep and self.ev.can_read() and self.ev.head()["qpn"] == victim:
                d = self._classify(self.ev.head())
                keep = d["rewind"] or d["error"]
            sp = c % self.W
            if (not keep and self.win[sp] != 0 and not self._held(sp) and not self.rwp[sp]
                    and ((c - self.tstart[sp]) & _M32) >= self.timeout):
                keep = self.recs[self.head[sp]]["qpn"] == victim
        return keep, vopen

    def need(self):
        """The LOOK's lookup the front presents (a QPN), or None."""
        return self.look_qpn if self.state.value == 4 and not self.looked else None

    def need_taken(self):
        """The front's lookup of :meth:`need` was taken in this cycle."""
        self._looked_next = True

    def next_timer(self, c):
        """The first cycle after ``c`` a timer may expire (scan, ``now - start >=
        timeout``), or None if no window is open."""
        best = None
        tstart, n, rwp = self.tstart.value, self.W, self.rwp
        held = self.held_slot.value if self.held.value else -1
        for e in self.win.nonzero:              # (the registers' current values)
            if e != held and not rwp[e]:
                due = max(c + 1, tstart[e] + self.timeout)
                due += (e - due) % n
                best = due if best is None else min(best, due)
        return best

    def hold(self, qpn):
        """``hold`` for ``hold_qpn`` = ``qpn``: a rewind of its slot is pending."""
        return bool(self.rwp[self.slot(qpn)])

    def busy(self):
        """A rewind, walk, flush or LOOK is under way."""
        return self.state.value != 0 or self.rwq.busy()

    def _start_rewind(self, c, s, one, h):
        self.pinned.set(s, 1)
        self.rwp.set(s, 1)
        self.rwq.decide(s, one)
        self.solo = (h["qpn"], (h["last_psn"] + 1) & _PSN_MASK) if one else None
        self.count["rewinds"] += 1

    def _enter_error(self, c, s, qpn):
        """The QP ``qpn`` (window slot ``s``) enters ERR: flush the rest of its window."""
        e = self.entry(qpn)
        self.state.set(3)
        self.e_rw = s
        self.errq.set(e, qpn)
        self._err_next = e
        self.count["qp_errors"] += 1
        self.trace.append((c, f"qp {qpn} enters ERR"))

    def _retire(self, c, e, status, need_cqe):
        h_id = self.head[e]
        h = self.recs[h_id]
        if need_cqe:
            self.cqe.write(dict(wr_id=h["wr_id"], status=status, qpn=h["qpn"],
                                byte_len=h["msg_length"], sq_index=h["sq_index"],
                                **{k: h[k] for k in ("op",) if k in h}))
        self._freed.append(h_id)
        self.reads.counted(e, h, -1)
        self.head.set(e, self.nxt.get(h_id, 0))
        self.win.set(e, (self.win[e] - 1) & _COUNT_MASK)
        self.tstart.set(e, c)
        self.retries.set(e, 0)
        if e == self.held_slot.value:
            self.held.set(0)
        if self.win[e] == 1:
            self.pinned.set(e, 0)
        self.win_total.set((self.win_total.value - 1) & _COUNT_MASK)
        self.count["retired"] += 1
        self.trace.append((c, f"retire qpn {h['qpn']} psn {h['last_psn']} status {status}"))

    def step(self, c, side):
        """Cycle ``c``; ``side``: ``issued`` (the WQE fetch stage's count of records promised),
        ``timeout`` (cycles), ``selective`` (0 if absent) and ``resent`` (None, or ``{"qpn":
        q}``: a resent frame of ``q`` leaves, its timer restarts if its window is open), the
        ports of the same names, and with READs those of :class:`ReadWalk`. One action a cycle,
        in priority order: the rewind walk, the flush of a QP in ERR, the start of a walk, a
        record appended, an ACK event, a timer of the slot the scan pointer (``c mod`` the slots
        built) is at; a rewind or error of a QP whose context is not present starts a LOOK
        instead (:meth:`need`, :meth:`need_taken`), which ends, at the start of a cycle, once the
        context is present or its slot unpinned. No side outputs: :meth:`hold`, :attr:`err_out`
        and the registers (``done``, ``win``, ``done_total``, ``win_total``, ``appended``) are
        the outputs, as they are at the start of the cycle."""
        issued = side["issued"]
        self.timeout = timeout = side["timeout"]
        self.selective = side.get("selective", 0)
        resent, unhold = side.get("resent"), False
        self.reads.enter(side)
        if resent is not None:          # a resent frame leaves: its own tstart write
            s = self.slot(resent["qpn"])
            if self.win[s] != 0 and self.recs[self.head[s]]["qpn"] == resent["qpn"]:
                self.tstart.set(s, c)
                unhold = s == self.held_slot.value
        self._walk_started = False
        self.rwq.enter(issued)
        self._act(c, issued, timeout)
        self.reads.finish()
        if unhold and not self._walk_started:   # a walk starting holds its QP's timer
            self.held.set(0)

    def _held(self, s):
        return bool(self.held.value) and self.held_slot.value == s

    def _act(self, c, issued, timeout):
        """The one action of cycle ``c`` (see :meth:`step`)."""
        state = self.state.value
        sp = c % self.W                     # the scan pointer counts every cycle
        if state == 4 and self.looked:      # the LOOK ends (a register of its own)
            if self.present(self.look_qpn) or not self.pinned[self.slot(self.look_qpn)]:
                self.state.set(0)
        # 1. walk
        if state == 2:
            if self.walk_left == 0:
                self.state.set(0)
                self.rwp.set(self.e_rw, 0)
                if self.reads.release() and self.held_slot.value == self.e_rw:
                    self.held.set(0)        # nothing resent: its timer runs again
            elif self.resend.can_write():
                r = self.recs[self.cur]
                kind = self.reads.kind(r)           # (a WRITE's: "resend")
                if kind != "skip":
                    self.resend.write(self.reads.item(self.entry(r["qpn"]), r, kind))
                self.cur = self.nxt.get(self.cur, 0)
                self.walk_left -= 1
            elif self.reads.on():       # resends blocked: a record may be appended
                self._append(c)
            return
        if state == 3:
            if self.win[self.e_rw] == 0:
                self.state.set(0)
            elif self.cqe.can_write():
                self._retire(c, self.e_rw, CqeStatus.WR_FLUSH_ERR.value, True)
                self.count["flushed"] += 1
            return
        # 2. start the walk of the oldest pending rewind, once its QP's work is appended
        ready = self.rwq.ready(self.appended.value) if state == 0 and self.rwq.q else None
        if ready is not None and self.reads.may_start():
            s, one = ready
            self.rwq.pop()
            self.state.set(2)
            self.e_rw = s
            self._walk_started = True
            self.held.set(int(self.win[s] != 0))
            self.held_slot.set(s)
            self.cur, win = self.head[s], self.win[s]
            self.reads.start()
            self.walk_left = min(win, 1) if one else win
            return
        if self.rec.q and self._append(c):      # 3. append
            return
        # 4. event
        if self.ev.can_read() and self._event(c, state):
            return
        # 5. timer
        if (state == 0 and self.win.value[sp] != 0 and ((c - self.tstart.value[sp]) & _M32)
                >= timeout and not self._held(sp) and not self.rwp.value[sp]):
            give_up = self.retries[sp] == self.retry_limit
            qpn = self.recs[self.head[sp]]["qpn"]
            here = self.present(qpn)
            if give_up and here and not self.cqe.can_write():
                return
            if not give_up and not self.rwq.room():
                return
            if not here:
                self._start_look(c, sp, qpn)
                return
            self.count["timeouts"] += 1
            if give_up:
                self._retire(c, sp, CqeStatus.RETRY_EXC_ERR.value, True)
                self._enter_error(c, sp, qpn)
            else:
                self.retries.set(sp, self.retries[sp] + 1)
                h = self.recs[self.head[sp]]
                self._start_rewind(c, sp, self._one(sp, h["first_psn"]), h)
                self.trace.append((c, f"timer rewind slot {sp}"))

    def _append(self, c):
        """Append the record at the head of ``rec`` if it can be (True if it was)."""
        if not self.rec.can_read():
            return False
        r = self.rec.head()
        e, s = r["entry"] % self.n, self.slot(r["qpn"])
        id_ok = bool(self.free) or self.fresh < self.R
        flush = bool(r["flush"] or (not r["null"] and self.errq[e] == r["qpn"]))
        if (self.cqe.can_write() if flush else (r["null"] or id_ok)):
            self.rec.read()
            self.appended.set((self.appended.value + 1) & _COUNT_MASK)
            if r["last_of_item"] or (r["null"] and not r["flush"]):
                self.done.set(e, (self.done[e] + 1) & _COUNT_MASK)
                self.done_total.set((self.done_total.value + 1) & _COUNT_MASK)
            if r["modify"]:         # its ERR mark, in every way of its set
                for k in range(e - e % self.ways, e - e % self.ways + self.ways):
                    if self.errq[k] == r["qpn"]:
                        self.errq.set(k, None)
            if flush:
                self.cqe.write({k: r[k] for k in ("wr_id", "qpn", "sq_index", "op") if k in r}
                               | dict(status=_FLUSH, byte_len=r["msg_length"]))
                self.count["flushed"] += 1
            elif not r["null"]:
                new = self.free.popleft() if self.free else self.fresh
                self.fresh = max(self.fresh, new + 1)   # (freed ids are below it)
                self.recs[new] = {k: r[k] for k in _KEPT if k in r}
                if self.win[s] == 0:
                    self.head.set(s, new)
                    self.tstart.set(s, c)
                    if s == self.held_slot.value:
                        self.held.set(0)
                else:
                    self.nxt[self.tail[s]] = new
                self.tail.set(s, new)
                self.reads.counted(s, r, 1)
                self.win.set(s, (self.win[s] + 1) & _COUNT_MASK)
                self.win_total.set((self.win_total.value + 1) & _COUNT_MASK)
                self.count["records_max"] = max(self.count["records_max"], self.win_total.value + 1)
            return True
        return False

    def _one(self, s, psn):
        """:func:`one_message` for a rewind of slot ``s`` from ``psn``, unless a READ or
        atomic is in the window (:class:`ReadWalk`'s ``ops``): then go back N."""
        last = self.recs[self.tail[s]]["last_psn"]
        return one_message(self.selective, last, psn) and not self.reads.ops[s]

    def _start_look(self, c, s, qpn):
        self.state.set(4)
        self.pinned.set(s, 1)
        self.look_qpn, self._looked_next = qpn, False
        self.count["recovery_fills"] += 1
        self.trace.append((c, f"look qpn {qpn}"))

    def _classify(self, ev):
        """What event ``ev`` does against its QP's oldest record (no change made)."""
        e = self.slot(ev["qpn"])
        h = self.recs.get(self.head[e]) if self.win[e] else None
        same = h is not None and h["qpn"] == ev["qpn"]
        d_last = (ev["psn"] - h["last_psn"]) & _PSN_MASK if h else 0
        d_first = (ev["psn"] - h["first_psn"]) & _PSN_MASK if h else 0
        past = same and d_last != 0 and d_last < _HALF
        at = same and d_last == 0
        within = same and d_first < _HALF and (at or d_last >= _HALF)
        syn = ev["syndrome"]
        is_ack = syn == _ACK
        is_seq = syn == _NAK_SEQ
        is_access = syn == _NAK_ACCESS
        retire = past or (is_ack and at) or (not is_ack and not is_seq and within)
        if past or is_ack:
            status = _SUCCESS
        elif is_access:
            status = CqeStatus.REM_ACCESS_ERR.value
        else:
            status = CqeStatus.RETRY_EXC_ERR.value
        rewind = not past and is_seq and within
        error = retire and status != _SUCCESS
        need_cqe = retire and (h["signalled"] or error)
        return dict(e=e, h=h, past=past, retire=retire, status=status, rewind=rewind,
                    error=error, need_cqe=need_cqe)

    def _event(self, c, state):
        """Try the event at the head of ``ev``; True if it was the cycle's action."""
        ev = self.ev.head()
        d = self._classify(ev)
        e, h, past, retire, status = d["e"], d["h"], d["past"], d["retire"], d["status"]
        rewind, error, need_cqe = d["rewind"], d["error"], d["need_cqe"]
        new_rw = rewind and not self.rwp[e]     # (else the pending rewind covers it)
        if (state in (2, 3) or (need_cqe and not self.cqe.can_write())
                or ((new_rw or error) and state != 0)
                or (new_rw and not self.rwq.room())):
            return False
        if (new_rw or error) and not self.present(ev["qpn"]):
            self._start_look(c, e, ev["qpn"])
            return True
        if retire:
            self._retire(c, e, status, need_cqe)
        if error:
            self._enter_error(c, e, h["qpn"])
        if past:
            self.used = True
            return True
        self.ev.read()
        used, self.used = self.used, False
        if new_rw:
            after = (self.solo is not None and self.solo[0] == ev["qpn"]
                     and (ev["psn"] - self.solo[1]) & _PSN_MASK <= SR_WINDOW)
            self._start_rewind(c, e, self._one(e, ev["psn"]) and not after, h)
            self.trace.append((c, f"NAK rewind qpn {ev['qpn']} psn {ev['psn']}"))
        if rewind:
            self.count["seq_naks"] += 1
        elif not retire and not used:
            self.count["ack_unexpected"] += 1
        return True

    def commit(self):
        self._staged.commit()
        self.reads.commit()
        self.rwq.commit()
        if self._looked_next is not None:
            self.looked, self._looked_next = self._looked_next, None
        self.err_out, self._err_next = self._err_next, None
        if self._freed:
            self.free.extend(self._freed)
            self._freed = []
