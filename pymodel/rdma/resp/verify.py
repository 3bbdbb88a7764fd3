"""Twin of :class:`rtl.rdma.resp.verify.Verify` (from its docstring)."""

from pymodel.cycle import Staged
from spec.formats.roce import MSN_BITS, PSN_BITS, QpState, Syndrome
from spec.rdma_responder import ATOMIC_QPS, IRD, RESP_GROUP, SR_WINDOW, read_packets

__all__ = ["VerifyModel", "VERIFY_COUNTERS", "WRITE_JOB_FIELDS"]

VERIFY_COUNTERS = ("frames_ok", "unknown_qp", "duplicates", "psn_nak", "out_of_order",
                   "access_nak", "qp_err", "sr_placed")
WRITE_JOB_FIELDS = ("write", "rest", "reth", "addr", "plen", "mark", "qpn", "data")
_PSN_MASK, _MSN_MASK = (1 << PSN_BITS) - 1, (1 << MSN_BITS) - 1
_M32, _M64 = (1 << 32) - 1, (1 << 64) - 1
#: PSNs up to this far behind the expected one are duplicates (half the PSN space).
PSN_WINDOW = 1 << 23


def _ones(bits, k):
    """Set bits of ``bits`` from bit ``k`` on without a gap (0 if ``k`` is past the
    window)."""
    run = 0
    while k + run < SR_WINDOW and bits >> (k + run) & 1:
        run += 1
    return run


class VerifyModel:
    """Verify jobs from ``i`` to write jobs in ``w`` and ACK jobs in ``ack`` (Fifos).

    ``env`` gives the context and the MR table as the stage sees them at the start of
    the cycle: ``ready(e, side)``, ``static(e, side)`` (a QPC dict), ``group(e, side)``
    (a dict of :data:`RESP_GROUP`), ``write_group(e, values)`` (staged), ``mr(index,
    side)`` (an MR dict). In a system these are the context-cache twin and the MR
    table; in a unit test, the test's side inputs.
    """

    def __init__(self, i, w, ack, entries, jobs, depth, env, used=None, log=None,
                 selective=0, mr=None, reads=False):
        """``log``: a :class:`pymodel.cycle.StagedLog` the register file enters, for an
        owner that commits it through it (:meth:`commit` commits it alone);
        ``selective``: the port of that name (0 go-back-N, 1 selective repeat);
        ``mr``: None (the MR table on chip, ``env.mr``) or the twin of the responder's
        MR cache (``look``, ``take``), which the stage looks MRs up in with the table in
        host memory (it holds a FIRST/ONLY job until its MR hits)."""
        self.mrc, self._mr = mr, None
        self.reads = bool(reads)
        if selective not in (0, 1):
            raise ValueError(f"selective must be 0 or 1, not {selective!r}")
        self.selective = selective
        #: Per entry, the PSNs after the expected one placed out of order (bit k: PSN
        #: expected + 1 + k); 0 is the RTL's cleared valid bit.
        self.bits = Staged(0, size=entries, name="sr_bits", log=log)
        #: Per entry, "discarded ahead": a frame ahead of the expected PSN was discarded
        #: (not placed) since the last NAK after consuming.
        self.dah = Staged(0, size=entries, name="sr_dah", log=log)
        #: Per entry, "NAK after consuming pending": the requester goes back N on it, so
        #: frames ahead discarded meanwhile are resent without a NAK of their own.
        self.nac = Staged(0, size=entries, name="sr_nac", log=log)
        self.used = used or entries
        self.i, self.w, self.ack, self.env = i, w, ack, env
        self.entries, self.depth = entries, depth
        self.mod = 1 << (jobs.bit_length() + 1)
        self.done = Staged(0, size=entries, name="done", log=log)
        self.count = dict.fromkeys(VERIFY_COUNTERS + (
            ("read_reqs", "atomics", "atomic_replays") if reads else ()), 0)
        #: Saved atomic results per row ``qpn % ATOMIC_QPS``: ``IRD`` slots of ``(qpn,
        #: psn, orig)`` (None: empty) and the row's next slot to replace; the fence (an
        #: atomic decided, not yet executed).
        self.saved = {}
        self.saved_next = {}
        self.fence = False
        self._fence_next = False
        self._save = None

    def held(self, e):
        """Has entry ``e`` frames placed out of order, or discarded ahead (start of the
        cycle)?"""
        return self.bits[e] != 0 or self.dah[e] != 0

    def done_of(self, e):
        """Frames of entry ``e`` done (the header check's read; start of the cycle)."""
        return self.done[e]

    def save(self, qpn, psn, orig):
        """The response sender executed an atomic in this cycle (the RTL's ``save_*``
        ports): its result goes into the next slot and the fence opens, from the next
        cycle."""
        self._save = (qpn, psn, orig)

    def _saved(self, qpn, psn):
        row = qpn % ATOMIC_QPS
        slots, nxt = self.saved.get(row, ()), self.saved_next.get(row, 0)
        for age in range(len(slots) - 1, -1, -1):     # the newest slot that matches
            slot = slots[(nxt + age) % IRD]
            if slot is not None and slot[0] == qpn and slot[1] == psn:
                return slot[2]
        return None

    def step(self, c, side):
        out = {"g_we": 0}
        if self.fence:
            return out
        mr_hit = True
        if self.mrc is not None and self.i.can_read():
            h = self.i.head()
            if h["check"] and h["reth"]:         # the RTL's mr_look
                self._mr = self.mrc.look(h["rkey"])
                mr_hit = self._mr is not None
        if "done_addr" in side:
            out["done_data"] = self.done[side["done_addr"]]
        if "held_addr" in side:
            out["held"] = int(self.held(side["held_addr"]))
        if not (self.i.can_read() and self.w.can_write() and self.ack.can_write()):
            return out
        j = self.i.head()
        wjob = dict.fromkeys(WRITE_JOB_FIELDS, 0)
        wjob["rest"] = j["rest"]
        if not j["check"]:
            self.i.read()
            self.w.write(wjob)
            return out
        e = j["entry"]                   # the header check's lookup placed it
        if not self.env.ready(e, side) or not mr_hit:
            return out
        if self.mrc is not None and j["reth"]:
            self.mrc.take()
        ctx, g = self.env.static(e, side), self.env.group(e, side)
        ack = dict(dmac=ctx["dmac"], smac=ctx["smac"], sip=ctx["sip"], dip=ctx["dip"],
                   src_qp=j["qpn"], dest_qp=ctx["dest_qp"], msn=g["msn"], psn=j["psn"],
                   syndrome=Syndrome.ACK.value)
        due, new, bits_new, dah_new, nac_new = False, None, None, None, None
        psn, exp = j["psn"], g["expected_psn"]
        read = bool(self.reads and j.get("read"))
        atomic = bool(self.reads and j.get("atomic"))
        if self.reads:
            ack.update(read=0, atomic=0, replay=0)
        bits = self.bits[e]
        slot = ((psn - exp) & _PSN_MASK) - 1          # the bit of a PSN ahead
        in_window = 0 <= slot < SR_WINDOW
        if not ctx["valid"]:
            verdict = "unknown_qp"
        elif ctx.get("state", 0) == QpState.ERR.value:
            verdict = "qp_err"
        elif psn != exp:
            if (psn - exp) & _PSN_MASK >= PSN_WINDOW:
                verdict, due = "duplicates", bool(j["ack_req"])
                if self.selective:      # a cumulative ACK: everything before expected
                    ack.update(psn=(exp - 1) & _PSN_MASK)
                if atomic:              # answered from its saved result, or dropped
                    orig = self._saved(j["qpn"], psn)
                    due = orig is not None
                    if due:
                        ack.update(psn=psn, atomic=1, replay=1, swap=orig)
                        self.count["atomic_replays"] += 1
                if read:                # answered again, or NAKed
                    due = True
                    ack.update(psn=psn)
                    if self._access_ok(j, g, side):
                        self._read_job(ack, j, ctx, g["msn"])
                    else:
                        ack.update(syndrome=Syndrome.NAK_REMOTE_ACCESS.value)
            elif self.selective and in_window and bits >> slot & 1:
                verdict = "duplicates"
            elif (self.selective and in_window and j["reth"] and j["last"] and not read
                  and self._access_ok(j, g, side)):
                verdict, bits_new = "sr_placed", bits | 1 << slot
                wjob.update(write=1, reth=1, addr=(j["va"] >> 6) % self.depth,
                            plen=j["plen"], mark=1, qpn=j["qpn"], data=j["data"])
                if not g["nak_sent"]:
                    due = True
                    ack.update(psn=exp, syndrome=Syndrome.NAK_PSN_SEQUENCE.value)
                    new = dict(g, nak_sent=1)
            elif not g["nak_sent"]:
                verdict, due = "psn_nak", True
                ack.update(psn=exp, syndrome=Syndrome.NAK_PSN_SEQUENCE.value)
                new = dict(g, nak_sent=1)
            else:
                verdict = "out_of_order"
            if (self.selective and verdict in ("psn_nak", "out_of_order")
                    and not self.nac[e]):
                dah_new = 1             # a frame ahead discarded: it will be missing
        elif not self._access_ok(j, g, side) or (atomic and j["va"] % 8):
            verdict, due = "access_nak", True
            misaligned = atomic and self._access_ok(j, g, side)
            ack.update(syndrome=Syndrome.NAK_INVALID_REQUEST.value if misaligned
                       else Syndrome.NAK_REMOTE_ACCESS.value)
            new = dict(g, expected_psn=(exp + 1) & _PSN_MASK, nak_sent=0)
            if bits:
                bits_new = 0
            if self.dah[e]:
                dah_new = 0
            if self.nac[e]:
                nac_new = 0
        elif atomic:                          # executed by the response sender, fenced
            verdict, due = "frames_ok", True
            msn = (g["msn"] + 1) & _MSN_MASK
            data = j["data"].to_bytes(128, "little")
            ack.update(psn=psn, msn=msn, atomic=1, cmp=j["cmp"], va=j["va"],
                       swap=int.from_bytes(data[12:20], "big"),
                       compare=int.from_bytes(data[20:28], "big"),
                       syndrome=Syndrome.ACK.value)
            run = _ones(bits, 0)            # placed PSNs after it, consumed
            new = dict(g, expected_psn=(exp + 1 + run) & _PSN_MASK, nak_sent=0,
                       msn=(msn + run) & _MSN_MASK)
            if bits:
                bits_new = bits >> run >> 1
            self.count["atomics"] += 1
            self._fence_next = True
        elif read:                            # its response packets' PSNs, no write
            verdict, due = "frames_ok", True
            n = read_packets(j["dma_len"], ctx["pmtu_log2"])
            msn = (g["msn"] + 1) & _MSN_MASK
            self._read_job(ack, j, ctx, msn)
            run = _ones(bits, n - 1)        # placed PSNs after its last, consumed
            new = dict(g, expected_psn=(exp + n + run) & _PSN_MASK, nak_sent=0,
                       msn=(msn + run) & _MSN_MASK)
            if bits:
                bits_new = bits >> n >> run if n < SR_WINDOW else 0
        else:
            run = 0         # placed PSNs that follow without a gap (ONLYs: messages)
            while run < SR_WINDOW and bits >> run & 1:
                run += 1
            verdict, due = "frames_ok", bool(j["ack_req"]) or run > 0
            base = j["va"] if j["reth"] else g["resp_va"]
            msn = (g["msn"] + j["last"] + run) & _MSN_MASK
            ack.update(msn=msn, psn=(psn + run) & _PSN_MASK)
            if bits:
                bits_new = bits >> run >> 1
            # The new expected PSN starts a message and a later one was placed or
            # discarded: it is known lost, NAK it (after a FIRST or MIDDLE it is the rest
            # of the same message, still on its way).
            nak = bool(bits_new or self.dah[e]) and bool(j["last"] or run)
            if nak and self.dah[e]:
                dah_new = 0
            if nak != bool(self.nac[e]):
                nac_new = int(nak)
            due = due or nak
            if nak:
                ack.update(psn=(exp + 1 + run) & _PSN_MASK,
                           syndrome=Syndrome.NAK_PSN_SEQUENCE.value)
            left = j["dma_len"] if j["reth"] else g["resp_left"]
            new = dict(g, expected_psn=(exp + 1 + run) & _PSN_MASK, nak_sent=int(nak),
                       msn=msn,
                       resp_va=(base + j["plen"]) & _M64,
                       resp_left=(left - j["plen"]) & _M32)
            wjob.update(write=1, reth=j["reth"], addr=(base >> 6) % self.depth,
                        plen=j["plen"], mark=j["last"], qpn=j["qpn"], data=j["data"])
        self.count[verdict] += 1
        self.i.read()
        self.w.write(wjob)
        if due:
            self.ack.write(ack)
        g_wdata = None
        if new is not None:
            g_wdata = {f: new[f] for f in RESP_GROUP}
            self.env.write_group(e, g_wdata)
        self.done.set(e, (self.done[e] + 1) % self.mod)
        if bits_new is not None:
            self.bits.set(e, bits_new)
        if dah_new is not None:
            self.dah.set(e, dah_new)
        if nac_new is not None:
            self.nac.set(e, nac_new)
        out.update(g_we=int(new is not None), g_wdata=g_wdata)
        return out

    def _read_job(self, ack, j, ctx, msn):
        """Make the ACK job ``ack`` a READ to answer (from job ``j``, context ``ctx``)."""
        ack.update(read=1, va=j["va"], length=j["dma_len"], pmtu_log2=ctx["pmtu_log2"],
                   msn=msn, syndrome=Syndrome.ACK.value)
        self.count["read_reqs"] += 1

    def _access_ok(self, j, g, side):
        if self.reads and j.get("atomic"):
            mr = self.env.mr(j["rkey"], side)
            return bool(mr["valid"] and mr["key"] == j["rkey"] and mr.get("remote_atomic", 0)
                        and j["va"] >= mr["base"] and j["va"] + 8 <= mr["base"] + mr["length"])
        if not j["reth"]:
            return j["plen"] <= g["resp_left"]
        mr = self._mr if self.mrc is not None else self.env.mr(j["rkey"], side)
        va = j["va"]
        right = mr.get("remote_read", 0) if self.reads and j.get("read") else mr["remote_write"]
        return bool(mr["valid"] and mr["key"] == j["rkey"] and right
                    and va >= mr["base"] and va + j["dma_len"] <= mr["base"] + mr["length"]
                    and va % 64 == 0 and j["plen"] <= j["dma_len"])

    def commit_atomics(self):
        """End of the cycle for the fence and the saved results (registers of their
        own, outside the staged log)."""
        if self._fence_next:
            self.fence, self._fence_next = True, False
        if self._save is not None:
            row = self._save[0] % ATOMIC_QPS
            slots = self.saved.setdefault(row, [None] * IRD)
            k = self.saved_next.get(row, 0)
            slots[k] = self._save
            self.saved_next[row] = (k + 1) % IRD
            self.fence, self._save = False, None

    def commit(self):
        self.commit_atomics()
        self.done.commit()
        self.bits.commit()
        self.dah.commit()
        self.nac.commit()
