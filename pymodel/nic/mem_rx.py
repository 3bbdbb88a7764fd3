"""Twin of :class:`rtl.nic.mem_rx.MemRx`."""

from collections import deque

from pymodel.fcs import fcs_ok
from pymodel.nic.mem_frames import parse_mem_header
from spec.formats.nic import MAC_PREFIX, MIN_FRAME_BYTES, Framing
from spec.formats.nic_mem import MEM_OPCODE, MEM_WIDTH, MemOp, MemStatus, mem_header_bytes

__all__ = ["MemRxModel"]

_REQS = (MemOp.LOAD.value, MemOp.FETCH_ADD.value, MemOp.CMP_SWAP.value)
_RSP, _FADD, _CAS = MemOp.RESPONSE.value, MemOp.FETCH_ADD.value, MemOp.CMP_SWAP.value
_WORD = (1 << 512) - 1


class MemRxModel:
    """Check memory frames, hand requests on, land responses.

    :meth:`writer` is the combinational side of the landing in cycle ``c`` (call it
    first: the responder waits while it writes): ``{"wr": (addr, data, be) or None,
    "done": (tag, status, op) or None}``. ``step(c, side)`` is the rest of cycle ``c``
    and its clock edge: ``side["beat"]`` the beat arriving (``(data, nbytes, first,
    last)`` or None), ``side["tt"]`` the :class:`~pymodel.nic.tag_table.TagTableModel`
    (as at the start of the cycle). Returns ``{"req": request dict or None, "answer":
    tag or None}``.
    """

    def __init__(self, framing, node_id, mem_words, max_payload):
        self.framing, self.node_id = Framing(framing), node_id
        self.mem_words, self.max_payload = mem_words, max_payload
        self.h = mem_header_bytes(framing)
        self.max_words = -(-(self.h + max_payload + 4) // MEM_WIDTH)
        self.counters = dict.fromkeys(("drop_fcs", "drop_malformed", "drop_dst", "drop_tag",
                                       "rsp_ok", "rsp_err"), 0)
        self.count = self.pushed = self.prev = 0
        self.frame = b""
        self.hdr = b""
        self.tail = None                  # the tail word due next cycle
        self.pend = False
        self.fcs_good = False
        self.dq = deque()
        self.descq = deque()              # (visible from cycle, desc)
        self.left = 0
        self.cur = None
        self.waddr = self.bleft = 0
        self._drain = None

    def writer(self, c):
        self._drain = None
        if self.left == 0:
            if not (self.descq and self.descq[0][0] <= c and self.descq[0][1]["nwords"]):
                return {"wr": None, "done": None}
            d = self.descq[0][1]
            cur, addr, bleft, left = d, d["laddr"], d["length"], d["nwords"]
        else:
            cur, addr, bleft, left = self.cur, self.waddr, self.bleft, self.left
        word = self.dq[0]
        n = min(bleft, MEM_WIDTH)
        wr = (addr, word, (1 << n) - 1) if cur["write"] and bleft else None
        done = (cur["tag"], cur["status"], cur["op"]) if left == 1 and cur["free"] else None
        self._drain = (cur, addr, bleft, left)
        return {"wr": wr, "done": done}

    def _verdict(self, tt):
        h, raw = self.h, self.hdr
        f = parse_mem_header(self.framing, raw)
        mh = f["mem"]
        op, err = mh["op"], mh["status"] == MemStatus.ERROR
        is_rsp, is_req = op == _RSP, op in _REQS
        pay = {_CAS: 16, _FADD: 8}.get(op, mh["length"]
                                                           if is_rsp and not err else 0)
        least = MIN_FRAME_BYTES - 4 if self.framing is Framing.L2 else 0
        expect = max(pay + h, least) + 4
        malformed = (mh["opcode"] != MEM_OPCODE or not (is_rsp or is_req)
                     or self.count != expect or (is_req and err)
                     or (is_rsp and err and mh["length"] != 0)
                     or (is_rsp and mh["length"] > self.max_payload)
                     or not f["ethertype_ok"])
        if self.framing is Framing.L2:
            wrong_dst = f["dst_mac"] != MAC_PREFIX + bytes([self.node_id])
        else:
            wrong_dst = f["dst"] != self.node_id
        good = self.fcs_good and not malformed and not wrong_dst
        tag = mh["tag"]
        entry = tt.entries[tag] if tag < tt.tags else None
        tag_ok = (tt.pending(tag) and f["src"] == entry[3]
                  and (err or mh["length"] == entry[1]))
        answer = good and is_rsp and tag_ok
        if not self.fcs_good:
            self.counters["drop_fcs"] += 1
        elif malformed:
            self.counters["drop_malformed"] += 1
        elif wrong_dst:
            self.counters["drop_dst"] += 1
        elif is_rsp and not tag_ok:
            self.counters["drop_tag"] += 1
        req = None
        if good and is_req:
            a = int.from_bytes(raw[h:h + 8].ljust(8, b"\0"), "little")
            b = int.from_bytes(raw[h + 8:h + 16].ljust(8, b"\0"), "little")
            req = {"src": f["src"], "op": op, "tag": tag, "addr": mh["addr"],
                   "length": mh["length"], "a": a, "b": b}
        # The entry read for a tag that is not pending is whatever the table holds.
        laddr, eop = (entry[0], entry[2]) if entry is not None else (0, 0)
        desc = {"write": answer and not err, "free": answer, "status": mh["status"],
                "op": eop, "tag": tag, "laddr": laddr, "length": 0 if err else mh["length"],
                "nwords": self.pushed + (self.tail is not None)}
        return req, (tag if answer else None), desc

    def step(self, c, side):
        out = {"req": None, "answer": None}
        tt, beat = side["tt"], side.get("beat")
        push = []
        # The landing's drain (decided in writer()).
        if self._drain is not None:
            cur, addr, bleft, left = self._drain
            if self.left == 0:
                self.descq.popleft()
            self.dq.popleft()
            self.left, self.cur, self.waddr = left - 1, cur, (addr + 1) % self.mem_words
            self.bleft = bleft - MEM_WIDTH if bleft > MEM_WIDTH else 0
            if left == 1 and cur["free"]:
                key = "rsp_ok" if cur["status"] == MemStatus.OK else "rsp_err"
                self.counters[key] += 1
        if self.pend:
            req, answer, desc = self._verdict(tt)
            out["req"], out["answer"] = req, answer
            self.descq.append((c + 1, desc))
        # Arrival (the tail word of the frame before goes in first: never both).
        h = self.h
        tail, self.tail = self.tail, None
        if tail is not None:
            push.append(tail)
        self.pend = False
        if beat is not None:
            data, nbytes, first, last = beat
            pushed = 0 if first else self.pushed
            room = pushed < self.max_words
            push_beat = tail is None and not first and room
            if push_beat:
                push.append(((self.prev >> (8 * h)) | (data << (8 * (MEM_WIDTH - h))))
                            & _WORD)
            self.count = (0 if first else self.count) + nbytes
            self.frame = (b"" if first else self.frame) + data.to_bytes(64, "little")[:nbytes]
            if first:
                self.hdr = data.to_bytes(64, "little")
            self.pushed = pushed + push_beat
            if last:
                self.fcs_good = fcs_ok(self.frame)
                if first or self.pushed < self.max_words:
                    self.tail = data >> (8 * h)
                self.pend = True
            self.prev = data
        self.dq.extend(push)
        return out

    def commit(self):
        pass
