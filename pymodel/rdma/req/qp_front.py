"""Twin of :class:`rtl.rdma.req.qp_front.QpFront`."""

from pymodel.cycle import Staged

__all__ = ["QpFrontModel"]

_M16 = 0xFFFF


class QpFrontModel:
    """One context lookup per work item, in order; entries pinned while busy."""

    def __init__(self, cache, items, fetch, rd_fill, wr_wb, log=None):
        """``log``: a :class:`pymodel.cycle.StagedLog` the registers enter, for an owner
        that commits them through it (:meth:`commit` commits them alone)."""
        self.cache, self.items, self.fetch = cache, items, fetch
        self.rd_fill, self.wr_wb = rd_fill, wr_wb
        self.adm = Staged(0, size=cache.n, name="adm", log=log)
        self.adm_total = Staged(0, name="adm_total", log=log)
        self.count = dict(items=0, ctx_stalls=0)
        self.stalled = False

    def step(self, completion, serial):
        """One cycle; ``completion`` is the completion unit's twin (its counts of the
        start of the cycle), ``serial`` the run-time port. ``stalled`` says whether the
        cycle counted a context stall (a system model that skips idle cycles adds one
        per skipped cycle: nothing changes while the item waits)."""
        self.stalled = False
        if not (self.items.can_read() and self.fetch.can_write()):
            return
        if completion.hold():
            return
        if serial and not (self.adm_total.value == completion.done_total.value
                           and completion.win_total.value == 0):
            return
        it = self.items.head()
        e = self.cache.entry_of(it["qpn"])
        busy = (self.adm[e] != completion.done[e] or completion.win[e] != 0
                or completion.err_out == e)
        taken, fill, wb = self.cache.lookup(it["qpn"], busy, self.rd_fill.can_write(),
                                            self.wr_wb.can_write())
        if not taken:
            self.count["ctx_stalls"] += 1
            self.stalled = True
            return
        self.items.read()
        self.fetch.write(dict(it, entry=e))
        self.adm.set(e, (self.adm[e] + 1) & _M16)
        self.adm_total.set((self.adm_total.value + 1) & _M16)
        self.count["items"] += 1
        if fill is not None:
            self.rd_fill.write(fill)
        if wb is not None:
            self.wr_wb.write(wb)

    def commit(self):
        self.adm.commit()
        self.adm_total.commit()
