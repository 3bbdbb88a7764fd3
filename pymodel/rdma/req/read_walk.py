"""The completion unit's walk with READs and atomics (part of its twin,
:class:`rtl.rdma.req.completion.CompletionUnit`, *READs and atomics*)."""

from pymodel.cycle import Staged
from spec.formats.roce import WqeOpcode
from spec.rdma_stages import COUNT_BITS

__all__ = ["ReadWalk"]

_WRITE = WqeOpcode.RDMA_WRITE.value
_COUNT_MASK = (1 << COUNT_BITS) - 1


class ReadWalk:
    """Take resends on their way (``takes``), the walk's first take seen (``evicting``)
    and whether it resent anything (``emitted``), the ``evict`` register the
    response intake reads in the next cycle, and per window slot the READs and atomics
    in the window (``ops``: selective repeat goes back N while it is not 0).
    :meth:`enter` at the start of each cycle with the unit's side inputs (``held``: a
    function of QPN and last PSN, on the intake's table of the start of the cycle;
    ``done_pending``; ``took``; ``take_dropped``), :meth:`finish` after the cycle's
    action, :meth:`commit` at its end; :meth:`counted` as records enter and leave."""

    def __init__(self, log, slots):
        self.takes = Staged(0, name="takes", log=log)
        self.ops = Staged(0, size=slots, name="ops", log=log)
        self.evicting = self.emitted = False
        self.evict = self._evict_next = None
        self.side = {}
        self._delta = 0

    def enter(self, side):
        self.side = side
        self._delta = -((1 if side.get("took") else 0)
                        + (1 if side.get("take_dropped") else 0))

    def on(self):
        """Built with READs (the side inputs carry ``held``)."""
        return "held" in self.side

    def may_start(self):
        """A walk may start: no take on its way, no ``done`` pending."""
        return not self.on() or not (self.takes.value or self.side["done_pending"])

    def start(self):
        self.evicting = self.emitted = False

    def kind(self, r):
        """What the walk does with record ``r`` (a resend to ``resend`` has room):
        ``resend``, ``take`` or ``skip``; see the RTL's docstring."""
        side = self.side
        if not self.on() or r.get("op", _WRITE) == _WRITE:
            out = "resend"
        elif self.evicting:
            out = "take"
        elif side["held"](r["qpn"], r["last_psn"]):
            out = "resend"
        elif not side["done_pending"]:
            self.evicting = True
            self._evict_next = dict(qpn=r["qpn"], psn=r["first_psn"])
            out = "take"
        else:
            out = "skip"
        self._delta += out == "take"
        self.emitted = self.emitted or out != "skip"
        return out

    @staticmethod
    def item(entry, r, kind):
        """The ``resend`` item of record ``r`` (cache entry ``entry``)."""
        take = {"take": 1} if kind == "take" else {}
        return dict(entry=entry, qpn=r["qpn"], sq_index=r["sq_index"],
                    first_psn=r["first_psn"], **take)

    def counted(self, s, r, k):
        """Record ``r`` enters (``k`` = 1) or leaves (``k`` = -1) window slot ``s``."""
        if r.get("op", _WRITE) != _WRITE:
            self.ops.set(s, (self.ops[s] + k) & _COUNT_MASK)

    def release(self):
        """The walk ends: does its QP's timer run again (with READs, nothing resent)?"""
        return self.on() and not self.emitted

    def finish(self):
        if self._delta:
            self.takes.set(self.takes.value + self._delta)

    def commit(self):
        if self.evict is not None or self._evict_next is not None:
            self.evict, self._evict_next = self._evict_next, None
