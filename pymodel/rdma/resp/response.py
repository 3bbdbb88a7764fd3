"""Twin of :class:`rtl.rdma.resp.response.ResponseSender` (from its docstring)."""

from collections import deque

from pymodel.cycle import note_activity
from pymodel.rdma.frames import Endpoint
from pymodel.rdma.read_frames import read_response_frame, read_response_headers
from pymodel.rdma.resp.ack import ack_beats
from spec.formats.roce import OpCode, Syndrome
from spec.formats.scaleup import framing
from spec.rdma_responder import READ_DATA_ID, read_packets

__all__ = ["ResponseSenderModel"]

_OP = OpCode
_M64 = (1 << 64) - 1


def _opcode(k, n):
    if n == 1:
        return _OP.RC_RDMA_READ_RESPONSE_ONLY
    if k == 0:
        return _OP.RC_RDMA_READ_RESPONSE_FIRST
    return _OP.RC_RDMA_READ_RESPONSE_LAST if k == n - 1 else _OP.RC_RDMA_READ_RESPONSE_MIDDLE


class _Frame:
    """A READ RESPONSE frame in progress: its headers, payload length and the words it
    has taken; beat ``k < nwords`` needs word ``k`` (the data FIFO's head)."""

    def __init__(self, head, plen, header, word=None):
        """``word``: the payload word of an ATOMIC ACKNOWLEDGE (a register, not the data
        FIFO)."""
        self.head, self.plen, self.header, self.own = head, plen, header, word
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

    def __init__(self, i, data, read_words, header="roce", writes_idle=lambda: True,
                 wr=None, save=None):
        """``writes_idle()``: the RTL's port of that name at the start of the cycle;
        ``wr``: the Fifo an atomic's write goes to; ``save(qpn, psn, orig)``: the verify
        stage's saved results (the ``save_*`` ports)."""
        self.i, self.data, self.read_words = i, data, read_words
        self.writes_idle, self.wr, self.save = writes_idle, wr, save
        self.executed, self.kept = False, 0
        self.header = framing(header).header.value
        self.frame = None          # the READ RESPONSE frame in progress
        self.spill = deque()       # beats after the last framer beat (ICRC/FCS, ACK beat 1)
        self.issued = self.framed = self.owed = 0
        self.count = dict(acks=0, read_frames=0)
        self._built = (None, None)
        self._next = None          # the descriptor taken in this cycle

    # ---- the head job ----
    def _read_head(self):
        """The head job if it is a READ or an atomic."""
        if not self.i.can_read():
            return None
        job = self.i.head()
        return job if job["read"] or job["atomic"] else None

    def _packet(self, job, k):
        """Payload bytes of packet ``k`` of a READ job (an atomic: its 8 bytes)."""
        if job["atomic"]:
            return 8
        mtu = 1 << job["pmtu_log2"]
        return max(0, min(mtu, job["length"] - k * mtu))

    @staticmethod
    def _n(job):
        return 1 if job["atomic"] else read_packets(job["length"], job["pmtu_log2"])

    def _words(self, job, k):
        """Words packet ``k``'s read fetches: an atomic its word (none when replayed)."""
        if job["atomic"]:
            return 0 if job["replay"] else 1
        return -(-self._packet(job, k) // 64)

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
                if f.own is not None:
                    return f.beat(f.own)
                return f.beat(self.data.head()) if self.data.can_read() else None
            return f.beat()
        if self.i.can_read() and not (self.i.head()["read"] or self.i.head()["atomic"]):
            return self._ack_beats(self.i.head())[0]
        return None

    def present_rd(self):
        job = self._read_head()
        if job is None:
            return None
        if self.issued >= self._n(job):
            return None
        words = self._words(job, self.issued)
        if words == 0 or not self._may_issue(words):
            return None
        addr = (job["va"] >> 6) + ((self.issued << job.get("pmtu_log2", 0)) >> 6)
        return dict(addr=addr, words=words, id=READ_DATA_ID)

    def _may_issue(self, words):
        return (self.owed + words <= self.read_words
                and (self.issued != 0 or self.writes_idle()))

    # ---- the cycle ----
    def advance(self, o_taken, rd_taken, depth):
        """End the cycle's decisions: ``o_taken`` (the presented beat left), ``rd_taken``
        (the presented read was taken); ``depth``: host words (addresses wrap)."""
        job = self._read_head()
        popped = 0
        framer_done = False
        busy0, executed0 = self.frame is not None, self.executed
        if (job is not None and job["atomic"] and not job["replay"] and self.issued == 1
                and not executed0 and not busy0 and self.data.can_read()
                and self.wr.can_write()):
            popped = self._execute(job, depth)
        if o_taken:
            if self.spill:
                self.spill.popleft()
            elif self.frame is not None:
                f = self.frame
                if f.k < f.nwords:
                    if f.own is not None:
                        f.words.append(f.own)
                    else:
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
            n = self._n(job)
            if self.issued < n:
                words = self._words(job, self.issued)
                if self._may_issue(words) and (words == 0 or rd_taken):
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
            ready = not job["atomic"] or job["replay"] or executed0
            if idle and self.framed < issued_before and ready:
                k = self.framed
                plen = self._packet(job, k)
                src = Endpoint(job["smac"], job["sip"])
                dst = Endpoint(job["dmac"], job["dip"])
                op = _OP.RC_ATOMIC_ACKNOWLEDGE if job["atomic"] else _opcode(k, n)
                args = (op, src, dst, job["src_qp"], job["dest_qp"],
                        (job["psn"] + k) & 0xFFFFFF, Syndrome.ACK.value, job["msn"])
                own = None
                if job["atomic"]:
                    orig = job["swap"] if job["replay"] else self.kept
                    own = int.from_bytes(orig.to_bytes(8, "big"), "little")
                else:
                    self.count["read_frames"] += 1
                f = _Frame(read_response_headers(*args, plen, header=self.header), plen,
                           self.header, own)
                f.args = args
                self._next = f
                self.framed += 1
                if self.framed == n:
                    self.i.read()
                    self.framed = self.issued = 0
                    self.executed = False
        self.owed += took_words - popped
        if o_taken or took_words or self._next is not None or self.issued or self.framed:
            note_activity()

    def _execute(self, job, depth):
        """Execute the head atomic on its word (the data FIFO's head): write the new
        value, save the original (the RTL's ``execute`` cycle); returns 1 (a pop)."""
        word = self.data.read()
        at = (job["va"] >> 3) & 7
        orig = word >> (64 * at) & _M64
        if job["cmp"]:
            new = job["swap"] if orig == job["compare"] else orig
        else:
            new = (orig + job["swap"]) & _M64
        self.wr.write(dict(addr=(job["va"] >> 6) % depth, data=new << (64 * at),
                           be=0xFF << (8 * at), last=1, mark=0, tag=0))
        self.save(job["src_qp"], job["psn"], orig)
        self.executed, self.kept = True, orig
        return 1

    def commit(self):
        """The descriptor taken in this cycle starts its frame in the next cycle."""
        if self._next is not None:
            self.frame, self._next = self._next, None
