"""Twins of :class:`rtl.rdma.req.host_ports.ReadArbiter` and ``RequesterWriteArbiter``."""

from spec.rdma_engine import RD_FILL, RD_PAYLOAD, RD_WQE

__all__ = ["arbitrate_read", "arbitrate_write", "read_offer", "write_offer"]

_ALL = (1 << 64) - 1


def read_offer(fill, wqe, pay, fill_words=1):
    """``(fifo, request)``: the read offered to the host interface this cycle (fixed
    priority fill, WQE, payload; a dict) and the FIFO whose head it is, or
    ``(None, None)``. A fill reads a whole context, ``fill_words`` words."""
    if fill.can_read():
        return fill, dict(addr=fill.head(), words=fill_words, id=RD_FILL)
    if wqe.can_read():
        head = wqe.head()
        return wqe, dict(addr=head["addr"], words=head["words"], id=RD_WQE)
    if pay.can_read():
        head = pay.head()
        return pay, dict(addr=head["addr"], words=head["words"], id=RD_PAYLOAD)
    return None, None


def write_offer(wb, cqe, data=None, locked=False):
    """``(fifo, word)``: the write word offered this cycle (write-backs first, then
    CQEs; a dict) and the FIFO whose head it is, or ``(None, None)``. With ``data``
    (the RTL's ``reads``): its words, unmarked, after write-backs and before CQEs, and
    only they while ``locked`` (a data TLP has begun and not ended)."""
    if data is not None and (locked or not wb.can_read()) and data.can_read():
        return data, dict(data.head(), mark=0, tag=0)
    if locked:
        return None, None
    if wb.can_read():
        addr, word = wb.head()
        return wb, dict(addr=addr, data=word, be=_ALL, last=1, mark=0, tag=0)
    if cqe.can_read():
        w = cqe.head()
        return cqe, dict(addr=w["addr"], data=w["data"], be=_ALL, last=1, mark=w["mark"],
                         tag=w["tag"])
    return None, None


def arbitrate_read(fill, wqe, pay, ready, fill_words=1):
    """The read offered to the host interface this cycle (:func:`read_offer`), popped
    from its FIFO if ``ready``; a dict or None."""
    fifo, req = read_offer(fill, wqe, pay, fill_words)
    if ready and fifo is not None:
        fifo.read()
    return req


def arbitrate_write(wb, cqe, ready):
    """The write word offered this cycle (:func:`write_offer`), popped if ``ready``."""
    fifo, word = write_offer(wb, cqe)
    if ready and fifo is not None:
        fifo.read()
    return word
