"""Twin of :class:`rtl.rdma.req.sequencer.Sequencer`."""

from pymodel.cycle import Staged
from pymodel.fields import unpack
from spec.formats.roce import (
    PSN_BITS,
    WQE_ACK_REQ,
    WQE_INLINE,
    WQE_LAYOUT,
    WQE_SIGNALLED,
    QpState,
    WqeOpcode,
)
from spec.rdma_engine import MAX_INLINE_WORDS
from spec.rdma_stages import ACK_FRAMES_BITS, ACK_MSGS_BITS, COUNT_BITS, SQ_INDEX_BITS

__all__ = ["SequencerModel"]

_COUNT_MASK, _SQ_MASK = (1 << COUNT_BITS) - 1, (1 << SQ_INDEX_BITS) - 1
_PSN_MASK = (1 << PSN_BITS) - 1
_ACK_MSGS_MASK, _ACK_FRAMES_MASK = (1 << ACK_MSGS_BITS) - 1, (1 << ACK_FRAMES_BITS) - 1
_ERR = QpState.ERR.value
_WRITE = WqeOpcode.RDMA_WRITE.value


class SequencerModel:
    """WQEs to send jobs, one source word per cycle."""

    def __init__(self, cache, batch, wqe, bfq, job, inline, log=None, reads=0):
        """``log``: a :class:`pymodel.cycle.StagedLog` the register enters, for an owner
        that commits it through it (:meth:`commit` commits it alone); ``reads``: the
        RTL's parameter (the jobs carry ``op``, the operands and ``laddr_lo``)."""
        self.reads = reads
        self.cache, self.batch, self.wqe, self.bfq = cache, batch, wqe, bfq
        self.job, self.inline = job, inline
        self.state = "HDR"
        self.idx = 0
        self.inl_left = self.pad_left = 0
        self.released = Staged(0, name="released", log=log)
        self.count = dict(sequenced=0, doorbell_err_qp=0)
        self._next = None
        #: Side output ``take_dropped``: a take resend (``last_of_item``) of a QP in ERR
        #: was dropped in this cycle (the caller clears it each cycle).
        self.take_dropped = False

    def _src(self, b):
        return self.bfq if b["bf"] else self.wqe

    def _pop(self, b):
        word = self._src(b).read()
        if not b["bf"]:
            self.released.set((self.released.value + 1) & _COUNT_MASK)
        return word

    def _wqe_done(self, b):
        if self.idx + 1 == b["count"]:
            self.batch.read()
            self._next_idx = 0
        else:
            self._next_idx = self.idx + 1

    def step(self, c, side):
        """Cycle ``c``; ``side``: the ports ``ack_every``, ``ack_frames``, ``err_valid``
        and ``err_entry`` (the completion unit's notice: an entry whose QP entered ERR,
        seen this cycle). No side outputs."""
        if side["err_valid"]:
            err_entry = side["err_entry"]
            g = self.cache.group_view("seq", err_entry)
            self.cache.write_group("seq", err_entry, dict(g, state=QpState.ERR.value))
            return
        self._next_idx = self.idx
        self._next_state = self.state
        if self.batch.can_read():
            self._step(self.batch.head(), side["ack_every"], side["ack_frames"])
        self.idx, self.state = self._next_idx, self._next_state

    def _ops(self, w):
        """The job fields of ``reads`` from WQE ``w`` (None: a null job's)."""
        if not self.reads:
            return {}
        if w is None:
            return dict(op=0, laddr_lo=0, swap_add=0, compare=0)
        return dict(op=w["opcode"], laddr_lo=w["laddr"] & 63, swap_add=w["swap_add"],
                    compare=w["compare"])

    def _step(self, b, ack_every, ack_frames):
        src = self._src(b)
        if self.state == "HDR":
            e = b["entry"]
            if not (b["null"] or src.can_read()):
                return                  # (the WQE's first word is not here yet)
            g = self.cache.group_view("seq", e)
            flush = g["state"] == _ERR
            if b["null"]:
                if self.job.can_write():
                    self.job.write(dict(entry=e, qpn=b["qpn"], null=1, last_of_item=1,
                                        psn=0, laddr=0, raddr=0, rkey=0, inline=0, ack_req=0,
                                        pmtu_log2=0, wr_id=0, sq_index=0, first_psn=0,
                                        msg_length=0, signalled=0, resend=0, flush=0,
                                        modify=b["modify"], **self._ops(None)))
                    self.batch.read()
                    if b["modify"]:
                        self.cache.write_group("seq", e, dict(g, state=QpState.RTS.value))
                    elif flush:
                        self.count["doorbell_err_qp"] += 1
                return
            drop = flush and b["resend"]
            if not (src.can_read() and (self.job.can_write() or drop)):
                return
            w = unpack(WQE_LAYOUT, src.head())
            self._pop(b)
            ctx = self.cache.static_of(e)
            length = w["length"]
            inline = bool(w["flags"] & WQE_INLINE) and (not self.reads
                                                         or w["opcode"] == _WRITE)
            signalled = bool(w["flags"] & WQE_SIGNALLED)
            slot_words = 1 << b["stride_log2"]
            cap = MAX_INLINE_WORDS if b["bf"] else min(slot_words - 1, MAX_INLINE_WORDS)
            n_inl_raw = min(-(-length // 64), cap) if inline else 0
            if flush:
                n_inl = 0
                n_pad = n_inl_raw if b["bf"] else slot_words - 1
                last = bool(b["last_of_item"] and self.idx + 1 == b["count"])
                self.take_dropped = bool(drop and b["last_of_item"])
                if not drop:
                    self.job.write(dict(
                        entry=e, qpn=b["qpn"], psn=g["next_psn"],
                        laddr=(w["laddr"] >> 6) % self.cache.depth, raddr=w["raddr"],
                        rkey=w["rkey"], inline=int(inline), ack_req=0,
                        pmtu_log2=ctx["pmtu_log2"], wr_id=w["wr_id"],
                        sq_index=(b["first"] + self.idx) & _SQ_MASK, first_psn=g["next_psn"],
                        msg_length=length, signalled=int(signalled), resend=0,
                        last_of_item=int(last), null=1, flush=1, modify=0, **self._ops(w)))
                    if last:
                        self.count["doorbell_err_qp"] += 1
                self._after_header(b, n_inl, n_pad)
                return
            n_inl, n_pad = n_inl_raw, (0 if b["bf"] else slot_words - 1 - n_inl_raw)
            pmtu = 1 << ctx["pmtu_log2"]
            frames = 1 if length == 0 else -(-length // pmtu)
            msgs = g["ack_msgs"] + 1
            fsum = g["ack_frames"] + frames
            asks = bool(w["flags"] & WQE_ACK_REQ)
            want = bool(b["resend"] or signalled or asks or ack_every <= 1
                        or msgs >= ack_every or (ack_frames != 0 and fsum >= ack_frames))
            psn = b["first_psn"] if b["resend"] else g["next_psn"]
            self.job.write(dict(
                entry=e, qpn=b["qpn"], psn=psn, laddr=(w["laddr"] >> 6) % self.cache.depth,
                raddr=w["raddr"], rkey=w["rkey"], inline=int(inline), ack_req=int(want),
                pmtu_log2=ctx["pmtu_log2"], wr_id=w["wr_id"],
                sq_index=(b["first"] + self.idx) & _SQ_MASK, first_psn=psn, msg_length=length,
                signalled=int(signalled), resend=b["resend"],
                last_of_item=int(b["last_of_item"] and self.idx + 1 == b["count"]), null=0,
                flush=0, modify=0, **self._ops(w)))
            self.count["sequenced"] += 1
            if not b["resend"]:
                self.cache.write_group("seq", e, dict(
                    g, next_psn=(g["next_psn"] + frames) & _PSN_MASK,
                    ack_msgs=0 if want else msgs & _ACK_MSGS_MASK,
                    ack_frames=0 if want else fsum & _ACK_FRAMES_MASK))
            self._after_header(b, n_inl, n_pad)
        elif self.state == "INLINE":
            if src.can_read() and self.inline.can_write():
                self.inline.write(self._pop(b))
                self.inl_left -= 1
                if self.inl_left == 0:
                    if self.pad_left:
                        self._next_state = "PAD"
                    else:
                        self._wqe_done(b)
                        self._next_state = "HDR"
        elif self.state == "PAD":
            if src.can_read():
                self._pop(b)
                self.pad_left -= 1
                if self.pad_left == 0:
                    self._wqe_done(b)
                    self._next_state = "HDR"

    def _after_header(self, b, n_inl, n_pad):
        self.inl_left, self.pad_left = n_inl, n_pad
        if n_inl:
            self._next_state = "INLINE"
        elif n_pad:
            self._next_state = "PAD"
        else:
            self._wqe_done(b)

    def commit(self):
        self.released.commit()
