"""Twin of :class:`rtl.rdma.req.wqe_fetch.WqeFetch`."""

from pymodel.cycle import Staged
from spec.rdma_stages import COUNT_BITS, SQ_INDEX_BITS

__all__ = ["WqeFetchModel"]

_COUNT_MASK, _SQ_MASK = (1 << COUNT_BITS) - 1, (1 << SQ_INDEX_BITS) - 1
#: The fields of a batch entry that are 0 unless a branch sets them.
_BASE = dict(first_psn=0, bf=0, resend=0, null=0, last_of_item=0, modify=0)


class WqeFetchModel:
    """Reads the WQEs each item announces (or passes its MMIO WQE on), resends first (a
    resend's ``take``, with READs, becomes its batch's ``last_of_item``)."""

    def __init__(self, cache, fetch, resend, rd, batch, prefetch, ring_words, records,
                 log=None):
        """``log``: a :class:`pymodel.cycle.StagedLog` the registers enter, for an owner
        that commits them through it (:meth:`commit` commits them alone)."""
        self.cache, self.fetch, self.resend, self.rd, self.batch = \
            cache, fetch, resend, rd, batch
        self.prefetch, self.ring_words, self.records = prefetch, ring_words, records
        self.reserved = Staged(0, name="reserved", log=log)
        self.issued = Staged(0, name="issued", log=log)     # records promised (mod 2**16)
        self.count = dict(wqe_reads=0, wqes=0, wqe_words_max=0)

    def _issue(self, addr, words, n, batch):
        self.rd.write(dict(addr=addr, words=words))
        self.batch.write(batch)
        self.reserved.set((self.reserved.value + words) & _COUNT_MASK)
        self.count["wqe_reads"] += 1
        self.count["wqes"] += n

    def _promise(self, k):
        self.issued.set((self.issued.value + k) & _COUNT_MASK)

    def _held(self, side):
        hold = side["hold"]
        return bool(hold(self.fetch.head()["qpn"]) if callable(hold) else hold)

    def step(self, c, side):
        """Cycle ``c``; ``side``: ``released`` (the sequencer's count of WQE words taken),
        the completion unit's ``win_total`` and ``appended`` of the start of the cycle
        (the ports of the same names) and ``hold``: the port's value, or a function of a
        QPN, the completion unit's ``hold`` for ``hold_qpn`` = the QP of the item at the
        head of ``fetch``. No side outputs."""
        resend = self.resend.can_read()
        if not resend and (not self.fetch.can_read() or self._held(side)):
            return                              # (nothing to fetch: no state read)
        held = (self.reserved.value - side["released"]) & _COUNT_MASK
        if resend:
            r = self.resend.head()
            ctx = self.cache.static_of(r["entry"])
            words = 1 << ctx["sq_stride_log2"]
            if held + words <= self.ring_words and self.rd.can_write() \
                    and self.batch.can_write():
                mask = (1 << ctx["sq_size_log2"]) - 1
                self.resend.read()
                self._issue((ctx["sq_base"] + ((r["sq_index"] & mask) << ctx["sq_stride_log2"]))
                            % self.cache.depth, words, 1,
                            dict(_BASE, entry=r["entry"], qpn=r["qpn"], first=r["sq_index"],
                                 count=1, stride_log2=ctx["sq_stride_log2"], resend=1,
                                 first_psn=r["first_psn"], last_of_item=r.get("take", 0)))
                self._peak(held + words)
            return
        owed = (self.issued.value - side["appended"]) & _COUNT_MASK
        pool = side["win_total"] + owed         # records in windows or promised
        if not self.batch.can_write() or pool >= self.records:
            return      # (every branch below needs batch room and a record: n >= 1 WQEs)
        f = self.fetch.head()
        e = f["entry"]
        if not self.cache.ready(e):
            return
        ctx = self.cache.static_of(e)
        head = self.cache.group_field("fetch", e, "sq_head")
        if f["modify"]:
            if self.batch.can_write() and pool < self.records:
                self.fetch.read()
                self._promise(1)
                self.batch.write(dict(self._common(f, e, ctx), first=0, count=0, null=1,
                                      modify=1, last_of_item=1))
            return
        if f["bf"]:
            if self.batch.can_write() and pool < self.records:
                self.fetch.read()
                self._promise(1)
                self.batch.write(dict(self._common(f, e, ctx), first=(f["sq_tail"] - 1) & _SQ_MASK,
                                      count=1, bf=1, last_of_item=1))
                self.cache.write_group("fetch", e, {"sq_head": f["sq_tail"]})
            return
        count = (f["sq_tail"] - head) & _SQ_MASK
        if count == 0:
            if self.batch.can_write() and pool < self.records:
                self.fetch.read()
                self._promise(1)
                self.batch.write(dict(self._common(f, e, ctx), first=0, count=0, null=1,
                                      last_of_item=1))
            return
        size = 1 << ctx["sq_size_log2"]
        slot = head & (size - 1)
        n = min(count, self.prefetch, size - slot, self.records)
        words = n << ctx["sq_stride_log2"]
        if not (held + words <= self.ring_words and self.rd.can_write()
                and self.batch.can_write() and pool + n <= self.records):
            return
        self._promise(n)
        if n == count:
            self.fetch.read()
        self._issue((ctx["sq_base"] + (slot << ctx["sq_stride_log2"])) % self.cache.depth,
                    words, n, dict(self._common(f, e, ctx), first=head, count=n,
                                   last_of_item=int(n == count)))
        self.cache.write_group("fetch", e, {"sq_head": (head + n) & _SQ_MASK})
        self._peak(held + words)

    @staticmethod
    def _common(f, e, ctx):
        """The fields of a batch entry every branch of a fetched item sets alike."""
        return dict(_BASE, entry=e, qpn=f["qpn"], stride_log2=ctx["sq_stride_log2"])

    def _peak(self, value):
        self.count["wqe_words_max"] = max(self.count["wqe_words_max"], value)

    def commit(self):
        self.reserved.commit()
        self.issued.commit()
