"""Twin of :class:`rtl.nic.mem_tx.MemTx`."""

from pymodel.credit_counter import CreditCounterModel
from pymodel.fcs import fcs_bytes
from pymodel.packet import frame_chunks
from spec.formats.nic_mem import MEM_WIDTH

__all__ = ["MemTxModel"]


class MemTxModel:
    """Merge responses, requests and raw frames; FCS; credits.

    ``step(c, side)``: ``side["rsp"]`` the responder's offer (``{"has", "need", "o"}``),
    ``side["req"]`` and ``side["raw"]`` the beats offered (or None), ``side["give"]``
    the credit returned in ``c``, ``side["ready"]`` the link's ``ready`` (default True;
    while low nothing is taken or sent, the spill beat waits). Returns ``{"taken":
    "rsp"/"req"/"raw"/None, "o": the wire beat (data, nbytes, first, last) or None}``.
    :attr:`credits` is the count at the start of the cycle (read it before ``step`` for
    the responder's ``start_ok``).
    """

    def __init__(self, credits):
        self.counter = CreditCounterModel(credits)
        self.busy = False
        self.spill = None
        self.acc = b""

    @property
    def credits(self):
        return self.counter.credits

    @property
    def credit_error(self):
        return self.counter.underflow or self.counter.overflow

    def step(self, c, side):
        taken, out = None, None
        if not side.get("ready", True):
            pass
        elif self.spill is not None:
            out, self.spill = self.spill, None
        else:
            rsp = side.get("rsp") or {}
            credits = self.counter.credits
            if self.busy or rsp.get("has"):
                beat = rsp.get("o")
                taken = "rsp" if beat is not None else None
            elif credits >= 1 and side.get("req") is not None:
                taken, beat = "req", side["req"]
            elif credits >= 1 and side.get("raw") is not None:
                taken, beat = "raw", side["raw"]
            if taken is not None:
                data, nbytes, first, last = beat
                if taken == "rsp":
                    self.busy = not last
                body = data.to_bytes(64, "little")[:nbytes]
                self.acc = (b"" if first else self.acc) + body
                if last:
                    frame = self.acc + fcs_bytes(self.acc)
                    chunks = frame_chunks(frame, MEM_WIDTH)[(len(self.acc) - 1) // MEM_WIDTH:]
                    out = chunks[0]
                    if len(chunks) > 1:
                        self.spill = chunks[1]
                else:
                    out = beat
        self.counter.cycle(out is not None, side.get("give", 0))
        return {"taken": taken, "o": out}

    def commit(self):
        pass
