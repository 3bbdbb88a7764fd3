"""Twin of :class:`rtl.nic.mem_responder.MemResponder`."""

from collections import deque

from pymodel.nic.mem_frames import build_mem_frame
from spec.formats.nic import Framing
from spec.formats.nic_mem import MEM_WIDTH, MemOp, MemStatus, mem_header_bytes
from spec.nic_mem import TARGET_LEVEL_READS, check_target

__all__ = ["MemResponderModel"]

_MASK64 = (1 << 64) - 1
_LOAD, _FADD = MemOp.LOAD.value, MemOp.FETCH_ADD.value


class MemResponderModel:
    """The request queue and the response frames.

    :meth:`offer` (``c``, the sender's ``credits``, ``wr_block``, the
    :class:`~pymodel.nic.local_memory.LocalMemoryModel`) is the combinational side of
    cycle ``c``: ``{"has", "need", "o"}`` with ``o`` the beat offered ``(data, nbytes,
    first, last)`` or None, and ``wr`` the atomic's write if the beat is taken.
    ``step(c, side)`` is the clock edge: ``side["taken"]`` (the offered beat left),
    ``side["req"]`` a request from the receiver (a dict of ``req_desc_layout`` fields).
    ``target_latency`` and ``target_reads``: the reads of the target memory (the RTL's
    docstring), in ``fl`` (ready from cycle, request) when the latency is not 0.
    """

    def __init__(self, framing, node_id, mem_words, max_payload, queue, target_latency=0,
                 target_reads=TARGET_LEVEL_READS):
        self.framing, self.node_id = Framing(framing), node_id
        self.mem_words, self.max_payload, self.queue = mem_words, max_payload, queue
        self.lat, self.reads = check_target(target_latency, target_reads)
        self.h = mem_header_bytes(framing)
        self.q = deque()                 # (visible from cycle, request)
        self.fl = deque()                # reads in flight: (ready from cycle, request)
        self.j = 0
        self.req_ok = self.req_err = self.drop_full = 0
        self._offer = None

    def check(self, r):
        """``(ok, data length)`` of request ``r``."""
        end = r["addr"] + (r["length"] if r["op"] == _LOAD else 8)
        if r["op"] == _LOAD:
            ok = 1 <= r["length"] <= self.max_payload and r["addr"] % 64 == 0
        else:
            ok = r["addr"] % 8 == 0 and r["length"] == 8
        ok = ok and end <= self.mem_words * MEM_WIDTH
        return ok, (r["length"] if r["op"] == _LOAD else 8) if ok else 0

    def head(self, c):
        q = self.fl if self.lat else self.q
        return q[0][1] if q and q[0][0] <= c else None

    def offer(self, c, credits, wr_block, mem):
        r = self.head(c)
        self._offer = None
        if r is None:
            return {"has": False, "need": 0, "o": None}
        ok, length = self.check(r)
        atomic = r["op"] != _LOAD
        least = 60 if self.framing is Framing.L2 else 0
        total = max(length + self.h, least)
        need = -(-(total + 4) // MEM_WIDTH)
        j, w, h = self.j, MEM_WIDTH, self.h
        valid = (j != 0 or credits >= need) and not (ok and atomic and wr_block)
        base = r["addr"] >> 6
        word = mem.read(base + j)
        wr = None
        if atomic:
            lane = (r["addr"] >> 3) & 7
            old = (word >> (64 * lane)) & _MASK64
            word = old
            if ok and (r["op"] == _FADD or old == r["a"]):
                new = (old + r["a"]) & _MASK64 if r["op"] == _FADD else r["b"]
                wr = (base % self.mem_words, new << (64 * lane), 0xFF << (8 * lane))
        if j == 0:
            hdr = build_mem_frame(self.framing, self.node_id, r["src"], MemOp.RESPONSE,
                                  r["tag"], length, r["addr"],
                                  status=MemStatus.OK if ok else MemStatus.ERROR)[:h]
            lo = int.from_bytes(hdr, "little")
        else:
            lo = mem.read(base + j - 1) >> (8 * (w - h))
        raw = (lo | (word << (8 * h))) & ((1 << (8 * w)) - 1)
        left = total - 64 * j
        last = left <= w
        nbytes = left if last else w
        content = min(max(length + h - 64 * j, 0), w)      # the L2 padding is zero
        data = raw & ((1 << (8 * content)) - 1)
        o = (data, nbytes, j == 0, last) if valid else None
        self._offer = (o, wr, last, ok)
        return {"has": True, "need": need, "o": o, "wr": wr}

    def step(self, c, side):
        issued = False
        if self.lat and self.q and self.q[0][0] <= c and len(self.fl) < self.reads:
            fenced = self.fl and self.fl[0][1]["op"] != _LOAD
            if not fenced and (self.q[0][1]["op"] == _LOAD or not self.fl):
                self.fl.append((c + self.lat, self.q.popleft()[1]))
                issued = True
        if side.get("taken"):
            o, wr, last, ok = self._offer
            if last:
                self.j = 0
                (self.fl if self.lat else self.q).popleft()
                if ok:
                    self.req_ok += 1
                else:
                    self.req_err += 1
            else:
                self.j += 1
        req = side.get("req")
        if req is not None:
            # The FIFO's room as at the start of the cycle (a pop in the same cycle
            # does not make room for it).
            if self.lat:
                popped = issued
            else:
                popped = side.get("taken") and self._offer[2]
            if len(self.q) + (1 if popped else 0) >= self.queue:
                self.drop_full += 1
            else:
                self.q.append((c + 1, req))
        return {}

    def commit(self):
        pass
