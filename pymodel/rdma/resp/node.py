"""The responder twin with the calling convention of the requester twin.

:class:`ResponderNode` wraps :class:`pymodel.rdma.resp.responder.ResponderModel` for a
system model that steps node B like node A's ``RequesterModel``: ``offers()`` before the
host interface steps, ``step(c, beat=..., rd_data=..., rd_ready=..., wr_ready=...)``
with what the host interface took, ``commit()``, ``busy()``, ``counters()``, and the
ACK frames handed to ``send(first beat cycle, frame)``. ``o`` is always ready, as in the
top (a link), so an ACK's two beats leave in consecutive cycles.
"""

from pymodel.rdma.resp.responder import ResponderModel

__all__ = ["ResponderNode"]


class ResponderNode:
    """Node B's responder for a system model.

    Parameters
    ----------
    cfg
        Has ``cache_entries``, ``depth``, ``mr_entries`` and ``qpc_base_b``.
    mr_table : iterable of int
        The MR table's entries (``MR_LAYOUT`` integers).
    send : callable
        ``send(first_beat_cycle, frame)``, called in the cycle of an ACK's last beat.
    **sizes
        FIFO depths (:class:`spec.rdma_responder.ResponderSizes`).
    """

    def __init__(self, cfg, mr_table, send, **sizes):
        self.model = ResponderModel(cfg.cache_entries, cfg.depth, cfg.mr_entries,
                                    qpc_base=cfg.qpc_base_b, mr_table=mr_table, **sizes)
        self.send = send
        self._frame, self._first = b"", None

    def offers(self):
        """``(read request, write word)`` presented this cycle (dicts or None)."""
        out = self.model.present()
        return out.rd_req, out.wr

    def step(self, c, beat=None, rd_data=None, rd_ready=False, wr_ready=False):
        """Cycle ``c``: ``beat`` arrives on ``i``, ``rd_data`` from the host interface;
        ``rd_ready``/``wr_ready``: the offered read request / write word was taken."""
        out = self.model.step(c, beat, rd_data, o_ready=True, rd_req_taken=rd_ready,
                              wr_taken=wr_ready)
        b = out.o
        if b is not None:
            if b["first"]:
                self._frame, self._first = b"", c
            self._frame += b["data"].to_bytes(64, "little")[:b["nbytes"]]
            if b["last"]:
                self.send(self._first, self._frame)

    def commit(self):
        self.model.commit()

    def busy(self):
        """Anything left to do without new input (for idle skipping)."""
        return self.model.next_event(0) is not None

    def counters(self):
        return dict(self.model.counters)
