"""Twins of :class:`rtl.rdma.req.host_ports.ReadArbiter` and ``WriteArbiter``."""

from spec.rdma_engine import RD_FILL, RD_PAYLOAD, RD_WQE

__all__ = ["arbitrate_read", "arbitrate_write"]

_ALL = (1 << 64) - 1


def arbitrate_read(fill, wqe, pay, ready):
    """The read offered to the host interface this cycle (fixed priority fill, WQE,
    payload), popped from its FIFO if ``ready``; a dict or None."""
    for fifo, ident in ((fill, RD_FILL), (wqe, RD_WQE), (pay, RD_PAYLOAD)):
        if fifo.can_read():
            head = fifo.head()
            req = (dict(addr=head, words=1, id=ident) if ident == RD_FILL
                   else dict(addr=head["addr"], words=head["words"], id=ident))
            if ready:
                fifo.read()
            return req
    return None


def arbitrate_write(wb, cqe, ready):
    """The write word offered this cycle (write-backs first, then CQEs)."""
    if wb.can_read():
        addr, word = wb.head()
        if ready:
            wb.read()
        return dict(addr=addr, data=word, be=_ALL, last=1, mark=0, tag=0)
    if cqe.can_read():
        w = cqe.head()
        if ready:
            cqe.read()
        return dict(addr=w["addr"], data=w["data"], be=_ALL, last=1, mark=w["mark"],
                    tag=w["tag"])
    return None
