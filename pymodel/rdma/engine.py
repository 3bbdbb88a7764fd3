"""Cycle-exact golden model of :class:`rtl.tops.rdma_top.RdmaTop`.

It follows the timing rules written in the docstrings of
:class:`rtl.rdma.requester.Requester`, :class:`rtl.rdma.responder.Responder` and
:class:`rtl.rdma.qpc_cache.QpcCache`: every state has a fixed cost, memory reads take
``mem_latency`` cycles, links ``link_latency``; the requester retires ACKs before it
takes a doorbell; the responder handles frames in arrival order once they are whole.
Because the responder's work on a frame depends only on earlier frames, the model runs
the requester in time order and hands each frame to the responder as it is sent.
"""

import dataclasses
import zlib
from collections import deque

from pymodel.rdma.fields import pack, unpack
from pymodel.rdma.frames import Endpoint, ack_frame, icrc, write_frame
from pymodel.stall import stall_pattern
from rtl.formats.roce import (
    ACK_HEADER,
    BTH_BYTES,
    CQE_LAYOUT,
    ETHERTYPE_IPV4,
    ICRC_BYTES,
    IP_PROTO_UDP,
    IPV4_BYTES,
    MR_LAYOUT,
    QPC_LAYOUT,
    RETH_BYTES,
    ROCE_UDP_PORT,
    UDP_BYTES,
    WQE_LAYOUT,
    WRITE_RETH_HEADER,
    CqeStatus,
    OpCode,
    Syndrome,
    WqeOpcode,
    bswap,
)
from rtl.rdma.responder import DROP_REASONS
from rtl.tops.rdma_top import DEFAULTS as TOP_DEFAULTS

__all__ = ["Config", "HostMemory", "QpcCacheModel", "simulate", "beats_of"]

_WRITES = {OpCode.RC_RDMA_WRITE_FIRST.value, OpCode.RC_RDMA_WRITE_MIDDLE.value,
           OpCode.RC_RDMA_WRITE_LAST.value, OpCode.RC_RDMA_WRITE_ONLY.value}
_RETH = {OpCode.RC_RDMA_WRITE_FIRST.value, OpCode.RC_RDMA_WRITE_ONLY.value}
_LAST = {OpCode.RC_RDMA_WRITE_LAST.value, OpCode.RC_RDMA_WRITE_ONLY.value}
_M24, _M16, _M32, _M64 = (1 << 24) - 1, (1 << 16) - 1, (1 << 32) - 1, (1 << 64) - 1


def beats_of(nbytes):
    return -(-nbytes // 64)


def _be16(b, k):
    return int.from_bytes(b[k:k + 2], "big")


@dataclasses.dataclass
class Config:
    """The top's parameters (defaults: :data:`rtl.tops.rdma_top.DEFAULTS`) and run-time
    ports (see :class:`RdmaTop`)."""
    cache_entries: int = TOP_DEFAULTS["cache_entries"]
    depth: int = TOP_DEFAULTS["depth"]
    mem_latency: int = TOP_DEFAULTS["mem_latency"]
    link_latency: int = TOP_DEFAULTS["link_latency"]
    mr_entries: int = TOP_DEFAULTS["mr_entries"]
    qpc_base_a: int = 0
    qpc_base_b: int = 0
    cq_base: int = 0
    cq_log2: int = 10


class HostMemory:
    """Words of 64 bytes with byte-enable writes (the LatencyMemory contents)."""

    def __init__(self, depth, init=None):
        self.depth = depth
        self.words = dict(init or {})

    def read(self, addr):
        return self.words.get(addr % self.depth, 0)

    def write(self, addr, value, be=_M64):
        addr %= self.depth
        if be == _M64:
            self.words[addr] = value
            return
        old = self.words.get(addr, 0)
        for k in range(64):
            if be >> k & 1:
                old = (old & ~(0xFF << 8 * k)) | (value & (0xFF << 8 * k))
        self.words[addr] = old


class QpcCacheModel:
    """Twin of :class:`rtl.rdma.qpc_cache.QpcCache` (contents and counters)."""

    def __init__(self, entries, mem, base):
        self.entries, self.mem, self.base = entries, mem, base
        self.tags = [None] * entries      # (qpn, dirty)
        self.data = [0] * entries
        self.lookups = self.misses = self.writebacks = 0
        self.cur = 0

    def lookup(self, qpn):
        """Returns ``(context, hit)``; does the write-back and the fill."""
        self.lookups += 1
        i = qpn % self.entries
        self.cur = qpn
        tag = self.tags[i]
        if tag is not None and tag[0] == qpn:
            return self.data[i], True
        self.misses += 1
        if tag is not None and tag[1]:
            self.writebacks += 1
            self.mem.write(self.base + tag[0], self.data[i])
        self.data[i] = self.mem.read(self.base + qpn)
        self.tags[i] = (qpn, False)
        return self.data[i], False

    def update(self, ctx):
        i = self.cur % self.entries
        self.data[i] = ctx
        self.tags[i] = (self.cur, True)


class ResponderModel:
    """Twin of :class:`rtl.rdma.responder.Responder`."""

    def __init__(self, cfg, mem, mr_table):
        self.cfg, self.mem = cfg, mem
        self.mr = [unpack(MR_LAYOUT, v) for v in mr_table]
        self.mr += [unpack(MR_LAYOUT, 0)] * (cfg.mr_entries - len(self.mr))
        self.cache = QpcCacheModel(cfg.cache_entries, mem, cfg.qpc_base_b)
        self.free = 0
        self.b1 = bytes(64)
        self.count = dict.fromkeys(("frames_ok", "acks", "words") + DROP_REASONS, 0)
        self.written = []           # (cycle, qpn)
        self.acks = []              # (first beat cycle, frame)

    def receive(self, frame, arrived):
        """Handle ``frame`` whose last beat entered the FIFO in cycle ``arrived``.

        Returns the ACK/NAK frame sent ``(cycle of its first beat, bytes)`` or None.
        """
        cfg, L = self.cfg, self.cfg.mem_latency
        nb = beats_of(len(frame))
        t0 = max(self.free, arrived + 1)
        b0 = frame[:64].ljust(64, b"\0")
        if nb >= 2:
            self.b1 = frame[64:128].ljust(64, b"\0")
        hdr = b0 + self.b1
        popped = min(nb, 2)
        check = t0 + 2
        fcs_ok = len(frame) >= 4 and zlib.crc32(frame[:-4]) == int.from_bytes(frame[-4:],
                                                                              "little")
        icrc_ok = len(frame) >= 48 and icrc(frame[:-8]) == frame[-8:-4]
        ip_len = _be16(hdr, 16)
        opcode = hdr[42]
        reth = opcode in _RETH
        pad = (hdr[43] >> 4) & 3
        overhead = (IPV4_BYTES + UDP_BYTES + BTH_BYTES + ICRC_BYTES + (RETH_BYTES if reth else 0)
                    + pad)
        header_ok = (_be16(hdr, 12) == ETHERTYPE_IPV4 and hdr[14] == 0x45
                     and hdr[23] == IP_PROTO_UDP and _be16(hdr, 36) == ROCE_UDP_PORT
                     and hdr[43] & 0xF == 0 and opcode in _WRITES and ip_len > overhead
                     and nb >= 2)
        reason = None
        if not fcs_ok:
            reason = "fcs_bad"
        elif len(frame) != 14 + ip_len + 4:
            reason = "truncated"
        elif not header_ok:
            reason = "malformed"
        elif not icrc_ok:
            reason = "icrc_bad"
        ack = None
        ctx_new = None
        if reason is not None:
            self.count[reason] += 1
            g = check + 1
        else:
            h = unpack(WRITE_RETH_HEADER, int.from_bytes(hdr[:70], "little"))
            qpn = bswap(h["bth"]["dest_qp"], 3)
            psn = bswap(h["bth"]["psn"], 3)
            ack_req = h["bth"]["ack_req"]
            va = bswap(h["reth"]["va"], 8)
            rkey = bswap(h["reth"]["rkey"], 4)
            dma_len = bswap(h["reth"]["dma_length"], 4)
            payload_len = ip_len - overhead
            raw, hit = self.cache.lookup(qpn)
            ctx = unpack(QPC_LAYOUT, raw)
            v = check + (1 if hit else 1 + L) + 1
            g = v + 1
            mr = self.mr[rkey % cfg.mr_entries]
            if reth:
                access_ok = (mr["valid"] and mr["key"] == rkey and mr["remote_write"]
                             and va >= mr["base"] and va + dma_len <= mr["base"] + mr["length"]
                             and va % 64 == 0 and payload_len <= dma_len)
            else:
                access_ok = payload_len <= ctx["resp_left"]
            last = opcode in _LAST
            fields = dict(src=Endpoint(ctx["smac"], ctx["sip"]),
                          dst=Endpoint(ctx["dmac"], ctx["dip"]), src_qp=qpn,
                          dest_qp=ctx["dest_qp"])
            if not ctx["valid"]:
                self.count["unknown_qp"] += 1
            elif psn != ctx["expected_psn"]:
                self.count["psn_nak"] += 1
                ack = ack_frame(psn=ctx["expected_psn"], syndrome=Syndrome.NAK_PSN_SEQUENCE,
                                msn=ctx["msn"], **fields)
            elif not access_ok:
                self.count["access_nak"] += 1
                ack = ack_frame(psn=psn, syndrome=Syndrome.NAK_REMOTE_ACCESS,
                                msn=ctx["msn"], **fields)
            else:
                self.count["frames_ok"] += 1
                base = va if reth else ctx["resp_va"]
                msn = (ctx["msn"] + last) & _M24
                if ack_req:
                    ack = ack_frame(psn=psn, syndrome=Syndrome.ACK, msn=msn, **fields)
                ctx_new = dict(ctx, expected_psn=(ctx["expected_psn"] + 1) & _M24, msn=msn,
                               resp_va=(base + payload_len) & _M64,
                               resp_left=((dma_len if reth else ctx["resp_left"])
                                          - payload_len) & _M32)
                # Payload words, and the beats the realigner pops on the way.
                start = 70 if reth else 54
                body = frame[start:start + payload_len]
                s = 58 if reth else 10
                nw = beats_of(payload_len)
                for j in range(nw):
                    left = payload_len - 64 * j
                    be = _M64 if left >= 64 else (1 << left) - 1
                    word = int.from_bytes(body[64 * j:64 * j + 64].ljust(64, b"\0"), "little")
                    self.mem.write((base >> 6) + j, word, be)
                    if left > s and (reth or j > 0):
                        popped += 1
                self.count["words"] += nw
                if last:
                    self.written.append((v + nw, qpn))
                g = v + nw + 1
        remaining = nb - popped
        nxt = g + max(1, remaining)
        if ack is not None:
            self.acks.append((nxt, ack))
            self.count["acks"] += 1
            sent = (nxt, ack)
            nxt += 1
        else:
            sent = None
        if ctx_new is not None:
            self.cache.update(pack(QPC_LAYOUT, ctx_new))
            nxt += 1
        self.free = nxt
        return sent


def simulate(cfg, mem_a, mem_b, mr_table, doorbells, db_stall=(1, 0), inject=(),
             inject_stall=(1, 0)):
    """Run the model.

    ``mem_a``/``mem_b`` map word addresses to 512-bit integers (initial host memories),
    ``mr_table`` lists MR_LAYOUT integers, ``doorbells`` lists ``(qpn, sq_tail)``;
    ``inject`` lists frames (bytes with FCS) played on the A->B link instead (then
    ``doorbells`` should be empty). Returns a dict of everything the RTL records.
    """
    L, LL = cfg.mem_latency, cfg.link_latency
    ma, mb = HostMemory(cfg.depth, mem_a), HostMemory(cfg.depth, mem_b)
    resp = ResponderModel(cfg, mb, mr_table)
    cache = QpcCacheModel(cfg.cache_entries, ma, cfg.qpc_base_a)
    cnt = dict.fromkeys(("doorbells", "wqe_reads", "payload_reads", "frames", "cqe_writes",
                         "acks", "ack_dropped", "ack_unexpected"), 0)
    wire_ab, db_stamps, completed, acks = [], [], [], deque()

    def send_ab(first_cycle, frame, beat_cycles=None):
        cycles = beat_cycles or list(range(first_cycle, first_cycle + beats_of(len(frame))))
        wire_ab.append((cycles, frame))
        ack = resp.receive(frame, cycles[-1] + LL)
        if ack is not None:
            h, fr = ack
            acks.append((h + 2 + LL, fr))

    # Injected frames: one beat per cycle the player is not stalled, from cycle 0.
    if inject:
        total = sum(beats_of(len(f)) for f in inject)
        stalls = stall_pattern(inject_stall[0], inject_stall[1], 8 * total + 64)
        go = [c for c in range(len(stalls)) if not stalls[c]]
        k = 0
        for fr in inject:
            n = beats_of(len(fr))
            send_ab(None, fr, go[k:k + n])
            k += n

    outq = deque()
    cq_index = 0
    n_db = len(doorbells)
    db_st = stall_pattern(db_stall[0], db_stall[1], 1 << 20) if n_db else None
    t, di = 0, 0
    while True:
        if acks and acks[0][0] <= t:
            _, fr = acks.popleft()
            cnt["acks"] += 1
            h = unpack(ACK_HEADER, int.from_bytes(fr[:58], "little"))
            qpn, psn = bswap(h["bth"]["dest_qp"], 3), bswap(h["bth"]["psn"], 3)
            syn = h["aeth"]["syndrome"]
            if outq:
                out = outq.popleft()
                if qpn != out["qpn"] or psn != out["psn"]:
                    cnt["ack_unexpected"] += 1
                status = (CqeStatus.SUCCESS if syn == Syndrome.ACK.value else
                          CqeStatus.REM_ACCESS_ERR if syn == Syndrome.NAK_REMOTE_ACCESS.value
                          else CqeStatus.RETRY_EXC_ERR)
                owner = 1 ^ ((cq_index >> cfg.cq_log2) & 1)
                cqe = pack(CQE_LAYOUT, wr_id=out["wr_id"], status=status,
                           opcode=WqeOpcode.RDMA_WRITE, owner=owner, qpn=out["qpn"],
                           byte_len=out["length"], sq_index=out["sq_index"])
                ma.write(cfg.cq_base + (cq_index & ((1 << cfg.cq_log2) - 1)), cqe)
                cq_index += 1
                cnt["cqe_writes"] += 1
                completed.append((t, out["qpn"]))
            else:
                cnt["ack_unexpected"] += 1
            t += 1
            continue
        if di < n_db and not db_st[t]:
            qpn, tail = doorbells[di]
            di += 1
            cnt["doorbells"] += 1
            db_stamps.append(t)
            raw, hit = cache.lookup(qpn)
            r = t + 1 if hit else t + 1 + L
            ctx = unpack(QPC_LAYOUT, raw)
            ctx["sq_tail"] = tail
            x = r + 1
            while ctx["sq_head"] != ctx["sq_tail"]:
                cnt["wqe_reads"] += 1
                slot = ctx["sq_head"] & ((1 << ctx["sq_size_log2"]) - 1)
                wqe = unpack(WQE_LAYOUT, ma.read(ctx["sq_base"] + slot))
                s = x + L + 1
                remaining, sent, psn = wqe["length"], 0, ctx["next_psn"]
                laddr = (wqe["laddr"] >> 6) % cfg.depth
                pmtu = 1 << ctx["pmtu_log2"]
                while True:
                    seg = min(remaining, pmtu)
                    nw = beats_of(seg)
                    data = b"".join(ma.read(laddr + k).to_bytes(64, "little")
                                    for k in range(nw))[:seg]
                    laddr += nw
                    cnt["payload_reads"] += nw
                    first, last = sent == 0, remaining == seg
                    op = ((OpCode.RC_RDMA_WRITE_ONLY if last else OpCode.RC_RDMA_WRITE_FIRST)
                          if first else
                          (OpCode.RC_RDMA_WRITE_LAST if last else OpCode.RC_RDMA_WRITE_MIDDLE))
                    frame = write_frame(op, Endpoint(ctx["smac"], ctx["sip"]),
                                        Endpoint(ctx["dmac"], ctx["dip"]), qpn,
                                        ctx["dest_qp"], psn, last, data, va=wqe["raddr"],
                                        rkey=wqe["rkey"], dma_length=wqe["length"])
                    d = s + nw + L + 1
                    cnt["frames"] += 1
                    send_ab(d + 1, frame)
                    f_len = (70 if op.value in _RETH else 54) + seg + (-seg % 4)
                    s = d + beats_of(f_len) + 2
                    remaining -= seg
                    sent += seg
                    psn = (psn + 1) & _M24
                    if last:
                        break
                y = s                         # DONE
                outq.append(dict(wr_id=wqe["wr_id"], qpn=qpn, psn=(psn - 1) & _M24,
                                 length=wqe["length"], sq_index=ctx["sq_head"]))
                ctx["sq_head"] = (ctx["sq_head"] + 1) & _M16
                ctx["next_psn"] = psn
                x = y + 1
            cache.update(pack(QPC_LAYOUT, ctx))
            t = x + 1
            continue
        # Nothing to do in this cycle: jump to the next event.
        nxt = []
        if acks:
            nxt.append(acks[0][0])
        if di < n_db:
            c = t + 1
            while db_st[c]:
                c += 1
            nxt.append(c)
        if not nxt:
            break
        t = max(t + 1, min(nxt))

    cnt.update(lookups=cache.lookups, misses=cache.misses, writebacks=cache.writebacks)
    rcnt = dict(resp.count, lookups=resp.cache.lookups, misses=resp.cache.misses,
                writebacks=resp.cache.writebacks)
    return dict(wire_ab=wire_ab, wire_ba=[([h, h + 1], fr) for h, fr in resp.acks],
                doorbell_stamps=db_stamps, written=resp.written, completed=completed,
                req=cnt, resp=rcnt, mem_a=ma.words, mem_b=mb.words)
