"""Twin of :class:`rtl.rdma.req.frame_sender.FrameSender` and its framer chain
(WriteFramer, IcrcInserter, FcsInserter)."""

from pymodel.rdma.frames import Endpoint, write_frame
from spec.formats.roce import OpCode

__all__ = ["FrameSenderModel", "frame_timing"]

_RETH = (OpCode.RC_RDMA_WRITE_FIRST.value, OpCode.RC_RDMA_WRITE_ONLY.value)


def frame_timing(opcode, length):
    """``(beats, busy)`` of a frame whose descriptor the framer takes in cycle ``t``:
    its beats leave in ``t + 1 .. t + beats`` and the framer takes the next descriptor
    from ``t + busy`` on (the inserters add a beat when the framer's last beat holds more
    than 56 bytes; that beat delays only the next frame)."""
    hdr = 70 if opcode in _RETH else 54
    body = hdr + length + (-length % 4)
    own = -(-body // 64)
    beats = -(-(body + 8) // 64)
    return beats, max(own + 1, beats)


class FrameSenderModel:
    """Descriptors to frames; the records of messages sent."""

    def __init__(self, cache, seg, pay, rec, send):
        self.cache, self.seg, self.pay, self.rec = cache, seg, pay, rec
        self.send = send                   # send(first beat cycle, frame bytes)
        self.free_at = 0                   # first cycle the framer takes a descriptor
        self.pops = []                     # cycles the framer takes payload words
        self.count = dict(frames=0, retransmissions=0)

    def step(self, c):
        while self.pops and self.pops[0] == c:
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
        if not (c >= self.free_at and len(self.pay) - len(self.pops) >= d["words"]
                and (self.rec.can_write() or not record)):
            return
        self.seg.read()
        ctx = self.cache.static_of(d["entry"])
        base = len(self.pops)
        data = b"".join(self.pay.head(base + k).to_bytes(64, "little")
                        for k in range(d["words"]))[:d["length"]]
        frame = write_frame(d["opcode"], Endpoint(ctx["smac"], ctx["sip"]),
                            Endpoint(ctx["dmac"], ctx["dip"]), d["qpn"], ctx["dest_qp"],
                            d["psn"], d["ack_req"], data, va=d["va"], rkey=d["rkey"],
                            dma_length=d["msg_length"])
        beats, busy = frame_timing(d["opcode"], d["length"])
        start = c + 2 if d["opcode"] in _RETH else c + 1
        self.pops += list(range(start, start + d["words"]))
        self.free_at = c + busy
        self.send(c + 1, frame)
        self.count["frames"] += 1
        self.count["retransmissions"] += d["resend"]
        if record:
            self.rec.write(self._record(d))

    @staticmethod
    def _record(d):
        return dict(entry=d["entry"], qpn=d["qpn"], last_psn=d["psn"], wr_id=d["wr_id"],
                    sq_index=d["sq_index"], first_psn=d["first_psn"],
                    msg_length=d["msg_length"], signalled=d["signalled"],
                    resend=d["resend"], last_of_item=d["last_of_item"], null=d["null"])

    def busy(self):
        return bool(self.pops)
