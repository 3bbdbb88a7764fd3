"""Twin of :class:`rtl.rdma.req.response_intake.ResponseIntake` (from its docstring)."""

from spec.formats.roce import ETHERTYPE_IPV4, IP_PROTO_UDP, PSN_BITS, ROCE_UDP_PORT, OpCode
from spec.rdma_read_req import INTAKE_COUNTERS, packets_of

__all__ = ["ResponseIntakeModel", "parse_response"]

_MASK, _HALF = (1 << PSN_BITS) - 1, 1 << (PSN_BITS - 1)
_ALL = (1 << 64) - 1
_FIRST, _MIDDLE, _LAST, _ONLY = (OpCode.RC_RDMA_READ_RESPONSE_FIRST.value,
                                 OpCode.RC_RDMA_READ_RESPONSE_MIDDLE.value,
                                 OpCode.RC_RDMA_READ_RESPONSE_LAST.value,
                                 OpCode.RC_RDMA_READ_RESPONSE_ONLY.value)
_ATOMIC_ACK = OpCode.RC_ATOMIC_ACKNOWLEDGE.value
_RESPONSES = (_FIRST, _MIDDLE, _LAST, _ONLY, _ATOMIC_ACK)


def _be(b, k, n):
    return int.from_bytes(b[k:k + n], "big")


def parse_response(entry):
    """The fields of a header entry's frame: ``good`` (the frame checks), ``opcode``,
    ``qpn``, ``psn``, ``aeth``, ``syndrome``, ``plen`` (payload bytes)."""
    b = entry["b0"].to_bytes(64, "little")
    ip_len = _be(b, 16, 2)
    opcode = b[42]
    aeth = opcode != _MIDDLE
    head = 20 + 8 + 12 + 4 + 4 * aeth + ((b[43] >> 4) & 3)
    good = (entry["fcs_ok"] and entry["icrc_ok"] and not entry["too_long"]
            and _be(b, 12, 2) == ETHERTYPE_IPV4 and b[14] == 0x45
            and b[23] == IP_PROTO_UDP and _be(b, 36, 2) == ROCE_UDP_PORT
            and entry["length"] == ip_len + 18 and ip_len >= head)
    return dict(good=good, opcode=opcode, qpn=_be(b, 47, 3), psn=_be(b, 51, 3),
                aeth=aeth, syndrome=b[54], plen=(ip_len - head) & 0xFFFF)


class ResponseIntakeModel:
    """``step(c, side)`` with ``side["timeout"]`` (and ``side["limit_qpn"]``, and
    ``side["evict"]``: None or the ``evict`` port's ``{"qpn", "psn"}``); FIFOs
    ``hdr``, ``beats``, ``issue`` (inputs) and ``o``, ``done``, ``rewind`` (outputs).
    Returns the counters at the start of the cycle (the RTL's registers) and, with
    ``limit_qpn``, ``limit`` and ``limit_psn``."""

    def __init__(self, fifos, slots=16, ord=16, depth=1 << 14):
        self.f = fifos
        self.nslots, self.ord, self.depth = slots, ord, depth
        self.slot = [None] * slots          # dicts of slot_layout's fields, or None
        self._mask = 0                      # bit k: slot k holds one (:meth:`_put`)
        self._per_qp = {}                   # QPN -> slots holding its operations
        self.age = [0] * slots              # bit k: slot k is older
        self.timer = 0
        self.job = None
        self.k = self.popped = 0
        self.buf = b""
        self.count = dict.fromkeys(INTAKE_COUNTERS, 0)

    # ---- the table ----
    def _valid(self):
        return self._mask

    def _put(self, j, s):
        """Slot ``j`` holds ``s`` (None: it is freed)."""
        per_qp, old = self._per_qp, self.slot[j]
        if old is not None:
            per_qp[old["qpn"]] -= 1
        if s is not None:
            per_qp[s["qpn"]] = per_qp.get(s["qpn"], 0) + 1
        self.slot[j] = s
        self._mask = self._mask | 1 << j if s is not None else self._mask & ~(1 << j)

    def _oldest(self, members):
        for j in range(self.nslots):
            if members >> j & 1 and not self.age[j] & members:
                return j
        return None

    def _decision(self, entry):
        """What the frame at the head of ``hdr`` does: its class, the head slot, the
        rewind it asks for."""
        r = parse_response(entry)
        out = dict(r, cls="bad", head=None, accept=False, need_rw=False)
        if not r["good"]:
            return out
        if r["opcode"] not in _RESPONSES:
            out["cls"] = "other"
            return out
        same = sum(1 << j for j, s in enumerate(self.slot)
                   if s is not None and s["qpn"] == r["qpn"])
        if not same:
            out["cls"] = "unmatched"
            return out
        h = self._oldest(same)
        s = self.slot[h]
        out["head"] = h
        d = (r["psn"] - s["next_psn"]) & _MASK
        if d >= _HALF:
            out["cls"] = "duplicates"
        elif d:
            out["cls"] = "gaps"
            out["need_rw"] = not s["rewound"]
        else:
            last = s["next_psn"] == s["last_psn"]
            if s["atomic"]:
                ok = r["opcode"] == _ATOMIC_ACK and r["plen"] == 8
            else:
                fresh = _ONLY if last else _FIRST
                want = (_LAST if last else _MIDDLE) if s["started"] else fresh
                size = s["left"] if last else 1 << s["pmtu_log2"]
                ok = ((r["opcode"] == want or (s["rewound"] and r["opcode"] == fresh))
                      and r["plen"] == size)
            ok = ok and (not r["aeth"] or r["syndrome"] >> 5 == 0)
            out["cls"] = "responses" if ok else "malformed"
            out["accept"] = ok
            out["last"] = last
        return out

    def issue_ready(self, qpn):
        """``issue.ready`` for an issue of QP ``qpn``: a free slot and the QP below
        ORD."""
        return self._mask != (1 << self.nslots) - 1 and self._per_qp.get(qpn, 0) < self.ord

    def holds(self, qpn, last_psn):
        """``held`` for ``held_qpn``, ``held_psn``: a slot holds the operation of QP
        ``qpn`` whose last response PSN is ``last_psn`` (the table of the start of the
        cycle)."""
        return any(s is not None and s["qpn"] == qpn and s["last_psn"] == last_psn
                   for s in self.slot)

    def done_pending(self):
        """``done_pending``: the job in hand writes an operation's last word (its
        ``done`` is still to come)."""
        return self.job is not None and self.job["write"] and self.job["done"]

    def limit(self, qpn):
        """``(limit, limit_psn)`` for QP ``qpn`` (the ports of the same names)."""
        job = self.job
        if job is not None and job["write"] and job["done"] and job["qpn"] == qpn:
            return 1, job["psn"]        # its last response is being written
        same = sum(1 << j for j, s in enumerate(self.slot)
                   if s is not None and s["qpn"] == qpn)
        if not same:
            return 0, 0
        return 1, self.slot[self._oldest(same)]["next_psn"]

    def step(self, c, side):
        f, cnt = self.f, self.count
        snapshot = dict(cnt)
        if "limit_qpn" in side:
            snapshot["limit"], snapshot["limit_psn"] = self.limit(side["limit_qpn"])
        timeout = side.get("timeout") or 0
        valid = self._valid()
        # Decisions, all from the start of the cycle.
        decide = None
        if self.job is None and f["hdr"].can_read():
            dec = self._decision(f["hdr"].head())
            if not dec["need_rw"] or f["rewind"].can_write():
                decide = dec
        expired = timeout != 0 and self.timer >= timeout and valid != 0
        fire = expired and decide is None and f["rewind"].can_write()
        take = None
        if f["issue"].can_read():
            iss = f["issue"].head()
            if valid != (1 << self.nslots) - 1 and self._per_qp.get(iss["qpn"], 0) < self.ord:
                take = f["issue"].read()
        # Execution of the job in hand (before the decision's job exists).
        if self.job is not None:
            self._execute()
        # The decision.
        if decide is not None:
            cnt[decide["cls"]] += 1
            h = decide["head"]
            if decide["need_rw"]:
                s = self.slot[h]
                f["rewind"].write(dict(qpn=s["qpn"], psn=s["next_psn"]))
                cnt["rewinds"] += 1
            job = dict(write=False, plen=0, aeth=decide["aeth"], atomic=False, done=False,
                       addr=0, qpn=decide["qpn"], psn=0)
            if h is not None:
                s = self.slot[h]
                job.update(atomic=bool(s["atomic"]), addr=s["addr"], psn=s["next_psn"],
                           done=s["next_psn"] == s["last_psn"])
            if decide["accept"]:
                job.update(write=True, plen=decide["plen"])
            self.job = job
        elif fire:
            o = self._oldest(valid)
            s = self.slot[o]
            f["rewind"].write(dict(qpn=s["qpn"], psn=s["next_psn"]))
            cnt["rewinds"] += 1
            cnt["timeouts"] += 1
        # The table's updates.
        if decide is not None and decide["head"] is not None:
            s = self.slot[decide["head"]]
            if decide["accept"]:
                p = decide["plen"]
                s.update(next_psn=(s["next_psn"] + 1) & _MASK, addr=s["addr"] + p,
                         left=s["left"] - p, started=1, rewound=0)
                if decide["last"]:
                    self._put(decide["head"], None)
            elif decide["need_rw"]:
                s.update(rewound=1)
        if fire:
            self.slot[self._oldest(valid)].update(rewound=1)
        ev = side.get("evict")
        if ev is not None:          # the QP's operations after PSN ``psn`` lose their slots
            for j, s in enumerate(self.slot):
                if (s is not None and s["qpn"] == ev["qpn"]
                        and 0 < (s["last_psn"] - ev["psn"]) & _MASK < _HALF):
                    self._put(j, None)
        if take is not None:
            free = (~valid) & ((1 << self.nslots) - 1)
            j = (free & -free).bit_length() - 1
            for k in range(self.nslots):
                self.age[k] &= ~(1 << j)
            self.age[j] = valid
            n = 1 if take["atomic"] else packets_of(take["length"], take["pmtu_log2"])
            self._put(j, dict(atomic=take["atomic"], qpn=take["qpn"], next_psn=take["psn"],
                              last_psn=(take["psn"] + n - 1) & _MASK,
                              pmtu_log2=take["pmtu_log2"], addr=take["laddr"],
                              left=8 if take["atomic"] else take["length"], started=0,
                              rewound=0))
        # The timer.
        if valid == 0 or (decide is not None and decide["accept"]) or take is not None:
            self.timer = 0
        elif fire:
            self.timer = 0
        elif self.timer < timeout:
            self.timer += 1
        return snapshot

    def _execute(self):
        f, job, cnt = self.f, self.job, self.count
        entry = f["hdr"].head()
        if self.k == 0 and self.popped == 0:
            s = 58 if job["aeth"] else 54
            self.buf = (entry["b0"].to_bytes(64, "little")[s:]
                        + entry["b1"].to_bytes(64, "little"))
        plen = job["plen"]
        nwords = max(1, -(-plen // 64)) if job["write"] else -(-plen // 64)
        word_due = self.k < nwords
        need = False
        last = False
        if word_due:
            left = plen - 64 * self.k
            need = 64 * self.k + min(64, left) > len(self.buf)
            last = self.k + 1 == nwords
        pop = need or (not word_due and self.popped < entry["rest"])
        want_done = word_due and last and job["done"]
        if ((word_due and not f["o"].can_write()) or (want_done and not f["done"].can_write())
                or (pop and not f["beats"].can_read())):
            return
        if pop:
            self.buf += f["beats"].read().to_bytes(64, "little")
            self.popped += 1
        if word_due:
            k = self.k
            mark = bool(job["done"] and last)
            if job["atomic"]:
                off = job["addr"] % 64
                value = int.from_bytes(self.buf[:8], "big")
                data, be = value << (8 * off), 0xFF << off
            else:
                n = min(64, plen - 64 * k)
                data = int.from_bytes(self.buf[64 * k:64 * k + n], "little")
                be = _ALL if n == 64 else (1 << n) - 1
            f["o"].write(dict(addr=(job["addr"] // 64 + k) % self.depth, data=data, be=be,
                              last=int(last), mark=int(mark),
                              tag=job["qpn"] if mark else 0))
            if want_done:
                f["done"].write(dict(qpn=job["qpn"], psn=job["psn"], atomic=int(job["atomic"])))
            self.k += 1
            cnt["words"] += 1
        if self.k == nwords and self.popped == entry["rest"]:
            f["hdr"].read()
            self.job = None
            self.k = self.popped = 0

    def commit(self):
        pass

    def idle(self):
        return self.job is None
