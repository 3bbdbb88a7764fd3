"""Twin of :class:`rtl.rdma.req.frame_sender.FrameSender` and its framer chain
(WriteFramer, IcrcInserter, FcsInserter)."""

from pymodel.rdma.frames import Endpoint, write_frame
from spec.formats.roce import HOST_WORD_BYTES, ICRC_BYTES, OpCode
from spec.formats.scaleup import Header, framing
from spec.rdma_fabric import FCS_BYTES

__all__ = ["FrameSenderModel", "frame_timing"]

_RETH = (OpCode.RC_RDMA_WRITE_FIRST.value, OpCode.RC_RDMA_WRITE_ONLY.value)


def frame_timing(opcode, length, header="roce"):
    """``(beats, own)``: the frame's beats with ICRC and FCS, and the framer's own beats
    (the inserters add one when the framer's last beat holds more than 56 bytes)."""
    f = framing(header)
    hdr = f.reth_bytes if opcode in _RETH else f.plain_bytes
    body = hdr + length + (-length % 4)
    return (-(-(body + ICRC_BYTES + FCS_BYTES) // HOST_WORD_BYTES),
            -(-body // HOST_WORD_BYTES))


class FrameSenderModel:
    """Descriptors to frames; the records of messages sent.

    ``step(c, side)`` (side input ``go``, 1 if absent; the context's addresses come
    from ``cache``'s ``static_of``, the ``s_data`` port) takes a descriptor from ``seg``
    when ``go`` is high, the framer is free and its payload words are in ``pay``, and
    calls ``send(f, frame)`` with the cycle of the frame's first beat on ``o``; the
    framer takes the frame's payload words from ``pay`` one a cycle (:attr:`pops`). Side
    output: :attr:`resent`, ``{"qpn": ...}`` in a cycle whose step took the descriptor
    of a resent frame, else None (the ``resent`` port; the caller clears it each cycle
    with :meth:`clear`, as a stage not stepped takes nothing).
    """

    def __init__(self, cache, seg, pay, rec, send, header="roce"):
        self.cache, self.seg, self.pay, self.rec = cache, seg, pay, rec
        self.header = framing(header).header.value
        #: A RETH frame's first beat is made of headers only (RoCEv2's 70 bytes), so its
        #: payload words are taken from the next beat on.
        self.reth_head = framing(header).header is Header.ROCE
        self.send = send                   # send(first beat cycle, frame bytes)
        self.free_at = 0                   # first cycle the framer takes a descriptor
        self.end = -1                      # the last beat of the frame in progress
        self.pops = []                     # cycles the framer takes payload words
        self.count = dict(frames=0, retransmissions=0)
        self.resent = None

    def clear(self):
        """Start of a cycle: no resent frame taken yet."""
        self.resent = None

    def step(self, c, side):
        pending = len(self.pops)           # words of the frame in progress not yet taken
        if self.pops and self.pops[0] == c:
            self.pops.pop(0)
            self.pay.read()
        if not self.seg.can_read():
            return
        d = self.seg.head()
        if d["null"]:
            if self.rec.can_write():
                self.seg.read()
                self.rec.write(self._record(d))
            return
        record = d["last_seg"] and not d["resend"]
        if not (side.get("go", 1) and c >= self.free_at and len(self.pay) >= d["words"] + pending
                and (self.rec.can_write() or not record)):
            return
        self.seg.read()
        ctx = self.cache.static_of(d["entry"])
        base = len(self.pops)              # words ahead of this frame's in the FIFO
        data = b"".join(self.pay.head(base + k).to_bytes(64, "little")
                        for k in range(d["words"]))[:d["length"]]
        frame = write_frame(d["opcode"], Endpoint(ctx["smac"], ctx["sip"]),
                            Endpoint(ctx["dmac"], ctx["dip"]), d["qpn"], ctx["dest_qp"],
                            d["psn"], d["ack_req"], data, va=d["va"], rkey=d["rkey"],
                            dma_length=d["msg_length"], header=self.header)
        beats, own = frame_timing(d["opcode"], d["length"], self.header)
        f = max(c + 1, self.end + 1)
        start = f + 1 if self.reth_head and d["opcode"] in _RETH else f
        self.pops += list(range(start, start + d["words"]))
        self.free_at = f + own - 1
        self.end = f + beats - 1
        self.send(f, frame)
        self.count["frames"] += 1
        self.count["retransmissions"] += d["resend"]
        if d["resend"]:
            self.resent = dict(qpn=d["qpn"])
        if record:
            self.rec.write(self._record(d))

    @staticmethod
    def _record(d):
        return dict(entry=d["entry"], qpn=d["qpn"], last_psn=d["psn"], wr_id=d["wr_id"],
                    sq_index=d["sq_index"], first_psn=d["first_psn"],
                    msg_length=d["msg_length"], signalled=d["signalled"],
                    resend=d["resend"], last_of_item=d["last_of_item"], null=d["null"],
                    flush=d["flush"], modify=d["modify"])

    def busy(self):
        return bool(self.pops)

    def next_event(self, c):
        """The cycle after ``c`` in which the framer becomes free for a waiting
        descriptor (the only change of this stage that no FIFO announces), or None."""
        if self.seg.can_read() and self.free_at > c:
            return self.free_at
        return None

    def commit(self):
        """End of the cycle: nothing staged (the stage has no registers of its own that
        others read)."""
