"""Twin of :class:`rtl.rdma.resp.writer.PayloadWriter` (from its docstring)."""

from spec.formats.roce import RETH_BYTES

__all__ = ["PayloadWriterModel"]

_ALL = (1 << 64) - 1


class PayloadWriterModel:
    """Write jobs from ``i`` and payload beats from ``beats`` to words in ``o`` (Fifos).

    The payload of a frame is a byte stream: the job's ``head_bytes`` bytes (frame bytes
    54..127 with RoCEv2 headers, 22..127 with the scale-up header: from the payload of a
    frame without RETH on; a RETH frame's payload starts 16 bytes later) followed by the
    frame's beats from the payload FIFO. A word is written once all its bytes are in
    hand, popping at most one beat for it.
    """

    def __init__(self, i, beats, o, depth, head_bytes=74):
        self.i, self.beats, self.o, self.depth = i, beats, o, depth
        self.head_bytes = head_bytes
        self.k = 0                 # words written of the current job
        self.popped = 0            # beats popped of the current job
        self.buf = b""             # payload bytes in hand (from the job and popped beats)
        self.count = dict(words=0)

    def step(self, c, side):
        if not self.i.can_read():
            return {}
        job = self.i.head()
        if self.k == 0 and self.popped == 0 and job["write"]:
            head = job["data"].to_bytes(self.head_bytes, "little")
            self.buf = head[RETH_BYTES:] if job["reth"] else head
        plen = job["plen"] if job["write"] else 0
        nwords = -(-plen // 64)
        word_due = self.k < nwords
        need_beat = False
        if word_due:
            end = 64 * self.k + min(64, plen - 64 * self.k)
            need_beat = end > len(self.buf)
        pop = need_beat or (not word_due and self.popped < job["rest"])
        if (word_due and not self.o.can_write()) or (pop and not self.beats.can_read()):
            return {}
        if pop:
            self.buf += self.beats.read().to_bytes(64, "little")
            self.popped += 1
        if word_due:
            k = self.k
            left = plen - 64 * k
            nbytes = min(64, left)
            data = int.from_bytes(self.buf[64 * k:64 * k + nbytes], "little")
            last = k + 1 == nwords
            mark = int(bool(job["mark"]) and last)
            self.o.write(dict(addr=(job["addr"] + k) % self.depth, data=data,
                              be=_ALL if left >= 64 else (1 << left) - 1, last=int(last),
                              mark=mark, tag=job["qpn"] if mark else 0))
            self.k += 1
            self.count["words"] += 1
        if self.k == nwords and self.popped == job["rest"]:
            self.i.read()
            self.k = self.popped = 0
        return {}

    def commit(self):
        pass
