"""Twin of :class:`rtl.rdma.req.frame_sender.FrameSender` and its framer chain
(WriteFramer, IcrcInserter, FcsInserter)."""

import functools

from pymodel.rdma.frames import Endpoint, write_frame
from pymodel.rdma.req.request_framer import request_frame
from spec.formats.roce import HOST_WORD_BYTES, ICRC_BYTES, PSN_BITS, OpCode, WqeOpcode
from spec.formats.scaleup import Header, framing
from spec.rdma_fabric import FCS_BYTES
from spec.rdma_read_req import packets_of

__all__ = ["FrameSenderModel", "frame_timing"]

_RETH = (OpCode.RC_RDMA_WRITE_FIRST.value, OpCode.RC_RDMA_WRITE_ONLY.value)
_WRITE, _READ = WqeOpcode.RDMA_WRITE.value, WqeOpcode.RDMA_READ.value
_PSN_MASK = (1 << PSN_BITS) - 1


@functools.lru_cache(maxsize=4096)
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

    With ``reads`` (the RTL's parameter) READ and atomic descriptors go to the request
    framer, and a first send or a *take* resend (``resend`` and ``last_of_item``: the
    rewind's walk found the operation holding no slot) is offered to ``intake`` (the
    response intake's twin: its :meth:`issue_ready` on the table of the start of the
    cycle, and :meth:`offer`, which the intake takes in its step of the same cycle).
    Such a descriptor, when ``issue_ready`` is low and no issue was taken for
    ``side["timeout"]`` cycles (:meth:`since`), is consumed without a frame (a first
    send still writes its record; ``count["req_unframed"]`` counts them, with the
    other :data:`spec.rdma_read_req.SENDER_COUNTERS`). Side output
    :attr:`took`: a take resend was consumed.
    """

    def __init__(self, cache, seg, pay, rec, send, header="roce", reads=0, intake=None):
        self.reads, self.intake = reads, intake
        self.r_end = -1                    # the request framer's last beat
        self.w_end = -1                    # the WRITE chain's last beat
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
        if reads:                          # spec.rdma_read_req.SENDER_COUNTERS
            self.count.update(req_frames=0, req_unframed=0, lost_frames=0)
        self.last_take = -1                # the cycle of the last issue taken
        self.resent = None
        self.took = False

    def clear(self):
        """Start of a cycle: no resent frame taken yet."""
        self.resent = None
        self.took = False

    def step(self, c, side):
        pops = self.pops
        pending = len(pops)                # words of the frame in progress not yet taken
        if pops and pops[0] == c:
            pops.pop(0)
            self.pay.read()
        seg = self.seg
        if not seg.can_read():
            return
        d = seg.head()
        if d["null"]:
            if self.rec.can_write():
                self.seg.read()
                self.rec.write(self._record(d))
            return
        record = d["last_seg"] and not d["resend"]
        if self.reads and d["op"] != _WRITE:
            self._request(c, d, record, side)
            return
        if self.reads and c < self.r_end:
            return
        if not (side.get("go", 1) and c >= self.free_at and len(self.pay.q) >= d["words"] + pending
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
        if self.reads and f <= self.r_end:      # a beat beside a request's: lost
            self.count["lost_frames"] += 1
        self.end = self.w_end = f + beats - 1
        self.send(f, frame)
        self.count["frames"] += 1
        self.count["retransmissions"] += d["resend"]
        if d["resend"]:
            self.resent = dict(qpn=d["qpn"])
        if record:
            self.rec.write(self._record(d))

    def _request(self, c, d, record, side):
        """A READ or atomic descriptor at the head of ``seg``."""
        take = bool(d["resend"] and d["last_of_item"])
        need = take or not d["resend"]          # it takes a slot in the intake
        if not (side.get("go", 1) and c >= self.w_end and c >= self.r_end
                and (self.rec.can_write() or not record)):
            return
        if need and not self.intake.issue_ready(d["qpn"]):
            limit = side.get("timeout")
            if limit is None or self.since(c) < limit:
                return
            self.seg.read()                     # waited a timeout: no frame
            self.count["req_unframed"] += 1
            if take:
                self.took = True
                self.resent = dict(qpn=d["qpn"])
            if record:
                self.rec.write(dict(self._record(d), last_psn=self._last_psn(d)))
            return
        if need:
            self.last_take = c
            self.took = take
        self.seg.read()
        ctx = self.cache.static_of(d["entry"])
        frame = request_frame(dict(
            opcode=d["opcode"], dmac=ctx["dmac"], smac=ctx["smac"], sip=ctx["sip"],
            dip=ctx["dip"], src_qp=d["qpn"], dest_qp=ctx["dest_qp"], psn=d["psn"],
            ack_req=d["ack_req"], va=d["va"], rkey=d["rkey"], dma_length=d["msg_length"],
            swap_add=d["swap_add"], compare=d["compare"]))
        if c + 1 <= self.w_end:            # the WRITE frame in flight loses a beat
            self.count["lost_frames"] += 1
        self.r_end = c + 2                 # its 2 beats: c + 1, c + 2
        self.end = max(self.end, c + 2)
        self.send(c + 1, frame)
        self.count["frames"] += 1
        self.count["retransmissions"] += d["resend"]
        self.count["req_frames"] += 1
        if d["resend"]:
            self.resent = dict(qpn=d["qpn"])
        if need:
            atomic = d["op"] != _READ
            self.intake.offer(dict(atomic=int(atomic), qpn=d["qpn"], psn=d["psn"],
                                   pmtu_log2=d["pmtu_log2"], laddr=d["laddr"],
                                   length=d["msg_length"]))
        if record:
            self.rec.write(dict(self._record(d), last_psn=self._last_psn(d)))

    @staticmethod
    def _last_psn(d):
        """A READ's last response PSN, an atomic's PSN."""
        n = 1 if d["op"] != _READ else packets_of(d["msg_length"], d["pmtu_log2"])
        return (d["psn"] + n - 1) & _PSN_MASK

    def since(self, c):
        """The ``since`` register in cycle ``c``: cycles since the last issue taken."""
        return c - self.last_take - 1

    def _record(self, d):
        ops = {"op": d["op"]} if self.reads else {}
        return dict(**ops, entry=d["entry"], qpn=d["qpn"], last_psn=d["psn"], wr_id=d["wr_id"],
                    sq_index=d["sq_index"], first_psn=d["first_psn"],
                    msg_length=d["msg_length"], signalled=d["signalled"],
                    resend=d["resend"], last_of_item=d["last_of_item"], null=d["null"],
                    flush=d["flush"], modify=d["modify"])

    def busy(self):
        return bool(self.pops)     # (a request frame's beats are sent by then: see send)

    def next_event(self, c, timeout=None):
        """The cycle after ``c`` in which the framer becomes free for a waiting
        descriptor, or (with ``timeout``, the side input) a READ or atomic waiting for a
        slot is consumed without one (the only changes of this stage that no FIFO
        announces), or None."""
        if not self.seg.can_read():
            return None
        due = (self.free_at, self.r_end, self.w_end) if self.reads else (self.free_at,)
        if self.reads and timeout is not None:
            due += (self.last_take + 1 + timeout,)
        later = [t for t in due if t > c]
        return min(later) if later else None

    def commit(self):
        """End of the cycle: nothing staged (the stage has no registers of its own that
        others read)."""
