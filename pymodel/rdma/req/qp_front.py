"""Twin of :class:`rtl.rdma.req.qp_front.QpFront`."""

from types import MappingProxyType

from pymodel.cycle import Staged
from spec.rdma_stages import COUNT_BITS

__all__ = ["QpFrontModel"]

_COUNT_MASK = (1 << COUNT_BITS) - 1
#: The side outputs of a cycle without a lookup.
_NO_LOOKUP = MappingProxyType({"lookup.valid": 0, "need.ready": 0})


class QpFrontModel:
    """One context lookup per work item, in order; a victim kept while busy.

    Parameters
    ----------
    entries : int
        Entries of the context cache.
    items, fetch : pymodel.cycle.Fifo
        The ``item`` and ``fetch`` streams.
    entry_of : callable
        ``entry_of(qpn)``: the cache entry of a QP (``qpn % 2**cache_log2``).
    lookup : callable
        ``lookup(qpn, victim_busy, side)`` -> whether the cache takes the lookup
        (``lookup.ready``) in this cycle.
    query : callable
        ``query(e, qpn, side)`` -> ``(q_done, q_keep, q_victim_open, q_err)``: the
        completion unit's answers for the lookup of ``qpn`` at entry ``e`` (the
        ``completion`` port; the victim is the cache's).
    need : callable, optional
        ``need(side)`` -> the QPN of the completion unit's lookup (a LOOK), or None;
        ``need_taken()`` is then called in a cycle the cache takes it.
    hit : callable, optional
        ``hit(qpn, side)``: the cache's ``hit`` (for ``evict_inflight``).
    log : pymodel.cycle.StagedLog, optional
        The owner's log the registers enter (:meth:`commit` commits them alone).

    ``step(c, side)``: ``side["hold"]``, ``side["serial"]`` and ``side["idle"]`` are the
    ports of the same names. Returns the lookup presented (``lookup.valid``,
    ``lookup.payload``, ``victim_busy``, ``q_entry``: combinational, as the RTL shows
    them; only ``lookup.valid`` and ``need.ready`` when none is; ``need.ready`` when the
    completion unit's lookup is taken); ``stalled`` says whether the cycle counted a
    context stall (a system model that skips idle cycles adds one per skipped cycle:
    nothing changes while the item waits).
    """

    def __init__(self, entries, items, fetch, entry_of, lookup, query, log=None,
                 need=None, need_taken=None, hit=None):
        self.items, self.fetch = items, fetch
        self.entry_of, self.lookup, self.query = entry_of, lookup, query
        self.need = need or (lambda side: None)
        self.need_taken, self.hit = need_taken, hit or (lambda qpn, side: True)
        self.adm = Staged(0, size=entries, name="adm", log=log)
        self.adm_total = Staged(0, name="adm_total", log=log)
        self.count = dict(items=0, ctx_stalls=0, evict_inflight=0)
        self.stalled = False

    def step(self, c, side):
        self.stalled = False
        need = self.need(side)
        if need is not None:
            e = self.entry_of(need)
            done, keep, vopen, err = self.query(e, need, side)
            busy = self.adm[e] != done or keep or bool(err)
            hit = self.hit(need, side)
            taken = self.lookup(need, busy, side)
            if taken:
                self.need_taken()
                if vopen and not hit:
                    self.count["evict_inflight"] += 1
            return {"lookup.valid": 1, "lookup.payload": {"qpn": need}, "need.ready": int(taken),
                    "victim_busy": int(busy), "q_entry": e}
        if not (self.items.can_read() and self.fetch.can_write()):
            return _NO_LOOKUP
        if side["hold"]:
            return _NO_LOOKUP
        if side["serial"] and not side["idle"]:
            return _NO_LOOKUP
        it = self.items.head()
        e = self.entry_of(it["qpn"])
        done, keep, vopen, err = self.query(e, it["qpn"], side)
        busy = self.adm[e] != done or keep or bool(err)
        out = {"lookup.valid": 1, "lookup.payload": {"qpn": it["qpn"]}, "need.ready": 0,
               "victim_busy": int(busy), "q_entry": e}
        hit = self.hit(it["qpn"], side)
        if not self.lookup(it["qpn"], busy, side):
            self.count["ctx_stalls"] += 1
            self.stalled = True
            return out
        if vopen and not hit:
            self.count["evict_inflight"] += 1
        self.items.read()
        self.fetch.write(dict(it, entry=e))
        self.adm.set(e, (self.adm[e] + 1) & _COUNT_MASK)
        self.adm_total.set((self.adm_total.value + 1) & _COUNT_MASK)
        self.count["items"] += 1
        return out

    def commit(self):
        self.adm.commit()
        self.adm_total.commit()
