"""Twin of :class:`rtl.rdma.resp.wr_arbiter.WriteArbiter` (from its docstring)."""

__all__ = ["WriteArbiterModel"]

_ALL = (1 << 64) - 1


class WriteArbiterModel:
    """Payload words from ``pay`` and write-backs from ``wb`` (Fifos) onto ``wr``.

    In a system: :meth:`present` gives the word on ``wr`` at the start of the cycle,
    :meth:`advance` says whether it was taken. In a unit test, :meth:`step` does both
    with an output Fifo ``o`` as the taker.
    """

    def __init__(self, pay, wb, o=None):
        self.pay, self.wb, self.o = pay, wb, o
        self.lock = False
        self.held = None           # "wb" or "pay": presented and not taken

    def _source(self):
        if self.held is not None:
            return self.held
        return "wb" if not self.lock and self.wb.can_read() else "pay"

    def present(self):
        """The word presented this cycle (a dict of the ``wr`` layout) or None."""
        src = self._source()
        if src == "wb":
            if not self.wb.can_read():
                return None
            w = self.wb.head()
            return dict(addr=w["addr"], data=w["data"], be=_ALL, last=1, mark=0, tag=0)
        return dict(self.pay.head()) if self.pay.can_read() else None

    def advance(self, taken, shown=False):
        """End of the cycle's handshake: ``taken`` says whether the word presented was
        taken; ``shown``: that word, as :meth:`present` gave it in this cycle (given by a
        caller that kept it; by default asked again)."""
        word = self.present() if shown is False else shown
        if word is None:
            self.held = None
            return
        src = self._source()
        if not taken:
            self.held = src
            return
        self.held = None
        if src == "wb":
            self.wb.read()
        else:
            self.pay.read()
            self.lock = not word["last"]

    def step(self, c, side):
        word = self.present()
        taken = word is not None and self.o.can_write()
        if taken:
            self.o.write(word)
        self.advance(taken)
        return {}

    def commit(self):
        pass
