"""Twin of :class:`rtl.rdma.req.payload_fetch.PayloadFetch`."""

from pymodel.cycle import Staged
from spec.formats.roce import PSN_BITS, OpCode, WqeOpcode
from spec.rdma_stages import COUNT_BITS

__all__ = ["PayloadFetchModel"]

_COUNT_MASK, _PSN_MASK = (1 << COUNT_BITS) - 1, (1 << PSN_BITS) - 1
#: The request opcode of each READ or atomic WQE opcode.
_REQUEST = {WqeOpcode.RDMA_READ.value: OpCode.RC_RDMA_READ_REQUEST.value,
            WqeOpcode.ATOMIC_CMP_AND_SWP.value: OpCode.RC_CMP_SWAP.value,
            WqeOpcode.ATOMIC_FETCH_AND_ADD.value: OpCode.RC_FETCH_ADD.value}


class PayloadFetchModel:
    """Frames of each job: a read per frame, or inline words copied one a cycle."""

    def __init__(self, depth, job, inline, rd, seg, pay, fifo_words, log=None, reads=0):
        """``log``: a :class:`pymodel.cycle.StagedLog` the register enters, for an owner
        that commits it through it (:meth:`commit` commits it alone); ``reads``: the
        RTL's parameter."""
        self.reads = reads
        self.depth, self.job, self.inline, self.rd, self.seg = depth, job, inline, rd, seg
        self.pay, self.fifo_words = pay, fifo_words
        self.issued = Staged(0, name="issued", log=log)
        self.off = 0
        self.started = False
        self.psn_cur = self.laddr_cur = 0
        self.copied = 0
        self.count = dict(payload_reads=0, payload_words_max=0)
        #: The last step issued a read or copied a word. Without that, the words held
        #: (the FIFO's level plus the reads outstanding) can only stay or fall: a step
        #: without a job to work on then changes nothing and may be left out.
        self.grown = False

    def step(self, c, side):
        """Cycle ``c``; ``side["pay_arrived"]``: payload read words written into the
        payload FIFO (``pay``, whose level is ``pay_level``) before this cycle (mod
        2**16). No side outputs."""
        arrived = side["pay_arrived"]
        outstanding = (self.issued.value - arrived) & _COUNT_MASK
        level = len(self.pay.q)
        held = level + outstanding
        count = self.count
        if held > count["payload_words_max"]:
            count["payload_words_max"] = held
        self.grown = False
        job = self.job
        if not job.can_read():
            return
        j = job.head()
        rem = j["msg_length"] - self.off
        pmtu = 1 << j["pmtu_log2"]
        last = rem <= pmtu
        seg_len = rem if last else pmtu
        words = -(-seg_len // 64)
        psn = self.psn_cur if self.started else j["psn"]
        laddr = self.laddr_cur if self.started else j["laddr"]
        first = self.off == 0
        if j["null"]:                   # its descriptor as framed, without a read
            if self.seg.can_write():
                self.seg.write(self._seg(j, psn, seg_len, words, first, last))
                self.job.read()
            return
        if self.reads and j["op"] in _REQUEST:      # a READ or atomic request: one frame
            if self.seg.can_write():
                self.seg.write(dict(self._seg(j, psn, 0, 0, True, True),
                                    opcode=_REQUEST[j["op"]], ack_req=j["ack_req"]))
                self.job.read()
            return
        if j["inline"] and words:
            final = self.copied + 1 == words
            if (self.inline.can_read() and outstanding == 0 and level < self.fifo_words
                    and (not final or self.seg.can_write())):
                self.pay.write(self.inline.read())
                self.grown = True
                self.copied += 1
                if final:
                    self.seg.write(self._seg(j, psn, seg_len, words, first, last))
                    self._advance(j, seg_len, psn, laddr, words, last)
            return
        if (self.seg.can_write() and (words == 0 or self.rd.can_write())
                and held + words <= self.fifo_words):
            self.seg.write(self._seg(j, psn, seg_len, words, first, last))
            if words:
                self.rd.write(dict(addr=laddr, words=words))
                self.count["payload_reads"] += 1
            self.issued.set((self.issued.value + words) & _COUNT_MASK)
            self.grown = True
            self._advance(j, seg_len, psn, laddr, words, last)

    def _advance(self, j, seg_len, psn, laddr, words, last):
        self.off = 0 if last else self.off + seg_len
        self.psn_cur = (psn + 1) & _PSN_MASK
        self.laddr_cur = (laddr + words) % self.depth
        self.started = not last
        self.copied = 0
        if last:
            self.job.read()

    def _seg(self, j, psn, seg_len, words, first, last):
        if first:
            op = OpCode.RC_RDMA_WRITE_ONLY if last else OpCode.RC_RDMA_WRITE_FIRST
        else:
            op = OpCode.RC_RDMA_WRITE_LAST if last else OpCode.RC_RDMA_WRITE_MIDDLE
        ops = {}
        if self.reads:
            ops = dict(op=j["op"], swap_add=j["swap_add"], compare=j["compare"],
                       laddr=j["laddr"] * 64 + j["laddr_lo"], pmtu_log2=j["pmtu_log2"])
        return dict(**ops, entry=j["entry"], qpn=j["qpn"], opcode=op.value, psn=psn, length=seg_len,
                    va=j["raddr"], rkey=j["rkey"], ack_req=int(j["ack_req"] and last),
                    words=words, last_seg=int(last), wr_id=j["wr_id"],
                    sq_index=j["sq_index"], first_psn=j["first_psn"],
                    msg_length=j["msg_length"], signalled=j["signalled"],
                    resend=j["resend"], last_of_item=j["last_of_item"], null=j["null"],
                    flush=j["flush"], modify=j["modify"])

    def commit(self):
        self.issued.commit()
