"""Twin of :class:`rtl.rdma.resp.response.ResponseSender` (from its docstring)."""

from collections import deque

from pymodel.cycle import note_activity
from pymodel.rdma.frames import Endpoint, read_response_frame, read_response_headers
from pymodel.rdma.resp.ack import ack_beats
from spec.formats.roce import OpCode, Syndrome
from spec.formats.scaleup import framing
from spec.rdma_responder import READ_DATA_ID, read_packets

__all__ = ["ResponseSenderModel"]

_OP = OpCode


def _opcode(k, n):
    if n == 1:
        return _OP.RC_RDMA_READ_RESPONSE_ONLY
    if k == 0:
        return _OP.RC_RDMA_READ_RESPONSE_FIRST
    return _OP.RC_RDMA_READ_RESPONSE_LAST if k == n - 1 else _OP.RC_RDMA_READ_RESPONSE_MIDDLE


class _Frame:
    """A READ RESPONSE frame in progress: its headers, payload length and the words it
    has taken; beat ``k < nwords`` needs word ``k`` (the data FIFO's head)."""

    def __init__(self, head, plen, header):
        self.head, self.plen, self.header = head, plen, header
        self.nwords = -(-plen // 64)
        pad = -plen % 4
        self.framer_beats = -(-(len(head) + plen + pad) // 64)
        self.beats = -(-(len(head) + plen + pad + 8) // 64)
        self.words = []
        self.k = 0                 # beats sent
        self.args = None           # read_response_frame's arguments but the payload

    def beat(self, word=None):
        """Beat ``k`` (``word``: the data FIFO's head when beat ``k`` needs one)."""
        words = self.words + ([word] if word is not None else [])
        payload = b"".join(w.to_bytes(64, "little") for w in words)[:self.plen]
        if len(words) == self.nwords:
            frame = read_response_frame(*self.args, payload, header=self.header)
        else:
            frame = self.head + payload
        k = self.k
        chunk = frame[64 * k:64 * k + 64]
        last = k == self.beats - 1
        return dict(data=int.from_bytes(chunk, "little"), nbytes=len(chunk) if last else 64,
                    first=int(k == 0), last=int(last))


class ResponseSenderModel:
    """ACK and READ jobs from ``i`` (a Fifo) to beats on ``o``, reads on ``rd`` and words
    from ``data`` (a Fifo).

    In a system: :meth:`present` is the beat on ``o`` at the start of the cycle and
    :meth:`present_rd` the read on ``rd``; :meth:`advance` says whether each was taken.
    """

    def __init__(self, i, data, read_words, header="roce"):
        self.i, self.data, self.read_words = i, data, read_words
        self.header = framing(header).header.value
        self.frame = None          # the READ RESPONSE frame in progress
        self.spill = deque()       # beats after the last framer beat (ICRC/FCS, ACK beat 1)
        self.issued = self.framed = self.owed = 0
        self.count = dict(acks=0, read_frames=0)
        self._built = (None, None)
        self._next = None          # the descriptor taken in this cycle

    # ---- the head job ----
    def _read_head(self):
        if not self.i.can_read():
            return None
        job = self.i.head()
        return job if job["read"] else None

    def _packet(self, job, k):
        """Payload bytes of packet ``k`` of a READ job."""
        mtu = 1 << job["pmtu_log2"]
        return max(0, min(mtu, job["length"] - k * mtu))

    def _ack_beats(self, job):
        if self._built[0] is not job:
            self._built = (job, ack_beats(job, self.header))
        return self._built[1]

    # ---- what is presented ----
    def present(self):
        if self.spill:
            return self.spill[0]
        if self.frame is not None:
            f = self.frame
            if f.k < f.nwords:
                return f.beat(self.data.head()) if self.data.can_read() else None
            return f.beat()
        if self.i.can_read() and not self.i.head()["read"]:
            return self._ack_beats(self.i.head())[0]
        return None

    def present_rd(self):
        job = self._read_head()
        if job is None:
            return None
        n = read_packets(job["length"], job["pmtu_log2"])
        if self.issued >= n:
            return None
        words = -(-self._packet(job, self.issued) // 64)
        if words == 0 or self.owed + words > self.read_words:
            return None
        addr = (job["va"] >> 6) + ((self.issued << job["pmtu_log2"]) >> 6)
        return dict(addr=addr, words=words, id=READ_DATA_ID)

    # ---- the cycle ----
    def advance(self, o_taken, rd_taken, depth):
        """End the cycle's decisions: ``o_taken`` (the presented beat left), ``rd_taken``
        (the presented read was taken); ``depth``: host words (addresses wrap)."""
        job = self._read_head()
        popped = 0
        framer_done = False
        if o_taken:
            if self.spill:
                self.spill.popleft()
            elif self.frame is not None:
                f = self.frame
                if f.k < f.nwords:
                    f.words.append(self.data.read())
                    popped = 1
                f.k += 1
                if f.k == f.framer_beats:
                    framer_done = True
                    while f.k < f.beats:          # the ICRC/FCS beat, if any
                        self.spill.append(f.beat())
                        f.k += 1
                    self.frame = None
            else:
                beats = self._ack_beats(self.i.read())
                self.spill.extend(beats[1:])
                self.count["acks"] += 1
        # Issue: the packet at ``issued`` (from the start of the cycle).
        took_words = 0
        if job is not None:
            n = read_packets(job["length"], job["pmtu_log2"])
            if self.issued < n:
                words = -(-self._packet(job, self.issued) // 64)
                if self.owed + words <= self.read_words and (words == 0 or rd_taken):
                    took_words = words
                    self.issued += 1
                    issued_before = self.issued - 1
                else:
                    issued_before = self.issued
            else:
                issued_before = self.issued
            # Describe: the framer takes the next descriptor when it is idle or sent its
            # last beat in this cycle.
            idle = self.frame is None or framer_done
            if idle and self.framed < issued_before:
                k = self.framed
                plen = self._packet(job, k)
                src = Endpoint(job["smac"], job["sip"])
                dst = Endpoint(job["dmac"], job["dip"])
                args = (_opcode(k, n), src, dst, job["src_qp"], job["dest_qp"],
                        (job["psn"] + k) & 0xFFFFFF, Syndrome.ACK.value, job["msn"])
                f = _Frame(read_response_headers(*args, plen, header=self.header), plen,
                           self.header)
                f.args = args
                self._next = f
                self.framed += 1
                self.count["read_frames"] += 1
                if self.framed == n:
                    self.i.read()
                    self.framed = self.issued = 0
        self.owed += took_words - popped
        if o_taken or took_words or self._next is not None or self.issued or self.framed:
            note_activity()

    def commit(self):
        """The descriptor taken in this cycle starts its frame in the next cycle."""
        if self._next is not None:
            self.frame, self._next = self._next, None
