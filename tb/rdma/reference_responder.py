"""A second, independent responder model: the store-and-forward responder of the first
round (one frame at a time, one FSM), kept as an oracle for the pipelined responder.

The pipelined responder (:mod:`rtl.rdma.resp`, twin :mod:`pymodel.rdma.resp`) must make
the same decisions on the same frames (every check, counter, ACK/NAK frame and memory
write), whatever its timing; this model was written for the earlier design, apart from
the pipelined twin, so a shared mistake is unlikely. Its cycle counts are those of the
old design and are not compared.
"""

import dataclasses
import zlib
from collections import deque

from pymodel.fields import pack, unpack
from pymodel.rdma.frames import Endpoint, ack_frame, icrc
from spec.formats.roce import (
    BTH_BYTES,
    ETHERTYPE_IPV4,
    ICRC_BYTES,
    IP_PROTO_UDP,
    IPV4_BYTES,
    MR_LAYOUT,
    QPC_LAYOUT,
    RETH_BYTES,
    ROCE_UDP_PORT,
    UDP_BYTES,
    WRITE_RETH_HEADER,
    OpCode,
    QpState,
    Syndrome,
    bswap,
)
from spec.rdma import DROP_REASONS, SEQUENCE_COUNTERS

__all__ = ["Config", "HostMemory", "StoreAndForwardResponder", "beats_of"]

#: The old design's receive buffers (beats, frames) and the room a frame needed.
RX_FIFO_BEATS, RX_FRAMES, RX_FRAME_ROOM = 256, 16, 66

_WRITES = {OpCode.RC_RDMA_WRITE_FIRST.value, OpCode.RC_RDMA_WRITE_MIDDLE.value,
           OpCode.RC_RDMA_WRITE_LAST.value, OpCode.RC_RDMA_WRITE_ONLY.value}
_RETH = {OpCode.RC_RDMA_WRITE_FIRST.value, OpCode.RC_RDMA_WRITE_ONLY.value}
_LAST = {OpCode.RC_RDMA_WRITE_LAST.value, OpCode.RC_RDMA_WRITE_ONLY.value}
_M24, _M16, _M32, _M64 = (1 << 24) - 1, (1 << 16) - 1, (1 << 32) - 1, (1 << 64) - 1
#: PSNs within this distance behind the expected one are duplicates (IBTA: half the
#: 24-bit PSN space).
PSN_WINDOW = 1 << 23


def beats_of(nbytes):
    return -(-nbytes // 64)


def _be16(b, k):
    return int.from_bytes(b[k:k + 2], "big")


@dataclasses.dataclass
class Config:
    """What the reference responder needs of a configuration."""
    cache_entries: int = 16
    depth: int = 1 << 15
    mem_latency: int = 64
    mr_entries: int = 16
    qpc_base_b: int = 0


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


class _FifoLevel:
    """The registered ``level`` of a SyncFIFO from the cycles of its writes and pops,
    each added in cycle order; asked for cycles that never decrease."""

    def __init__(self):
        self.writes, self.pops, self.count = deque(), deque(), 0

    def at(self, cycle):
        """Entries in ``cycle``: writes minus pops of earlier cycles."""
        for q, step in ((self.writes, 1), (self.pops, -1)):
            while q and q[0] < cycle:
                q.popleft()
                self.count += step
        return self.count


class StoreAndForwardResponder:
    """The first round's responder (store and forward)."""

    def __init__(self, cfg, mem, mr_table):
        self.cfg, self.mem = cfg, mem
        self.mr = [unpack(MR_LAYOUT, v) for v in mr_table]
        self.mr += [unpack(MR_LAYOUT, 0)] * (cfg.mr_entries - len(self.mr))
        self.cache = QpcCacheModel(cfg.cache_entries, mem, cfg.qpc_base_b)
        self.free = 0
        self.b1 = bytes(64)
        self.count = dict.fromkeys(("frames_ok", "acks", "words") + DROP_REASONS
                                   + SEQUENCE_COUNTERS, 0)
        self.written = []           # (cycle, qpn)
        self.acks = []              # (first beat cycle, frame)
        # The receive side: the beat FIFO and the verdict FIFO (one entry per frame).
        self.beats, self.verdicts = _FifoLevel(), _FifoLevel()

    def receive(self, frame, beat_cycles):
        """Handle ``frame`` whose beats reach the responder in ``beat_cycles``.

        A frame whose first beat finds fewer than :data:`RX_FRAME_ROOM` free beats in
        the receive FIFO, or :data:`RX_FRAMES` frames stored, is dropped (``overflow``).
        Returns the ACK/NAK frame sent ``(cycle of its first beat, bytes)`` or None.
        """
        first, arrived = beat_cycles[0], beat_cycles[-1]
        if (self.beats.at(first) > RX_FIFO_BEATS - RX_FRAME_ROOM
                or self.verdicts.at(first) >= RX_FRAMES):
            self.count["overflow"] += 1
            return None
        cfg, L = self.cfg, self.cfg.mem_latency
        nb = beats_of(len(frame))
        t0 = max(self.free, arrived + 1)
        self.verdicts.writes.append(arrived)
        self.verdicts.pops.append(t0)                     # IDLE
        beat_pops = self.beats.pops
        self.beats.writes.extend(beat_cycles)
        beat_pops.extend(range(t0, t0 + min(nb, 2)))      # IDLE, HDR
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
            elif ctx["state"] == QpState.ERR.value:
                self.count["qp_err"] += 1          # a QP in ERR takes no packet
            elif (psn - ctx["expected_psn"]) & _M24 >= PSN_WINDOW:
                # Behind the expected PSN: a duplicate, acknowledged again if it asks.
                self.count["duplicates"] += 1
                if ack_req:
                    ack = ack_frame(psn=psn, syndrome=Syndrome.ACK, msn=ctx["msn"],
                                    **fields)
            elif psn != ctx["expected_psn"]:
                # Ahead: one NAK per sequence error, then silence until the expected PSN.
                if ctx["nak_sent"]:
                    self.count["out_of_order"] += 1
                else:
                    self.count["psn_nak"] += 1
                    ack = ack_frame(psn=ctx["expected_psn"],
                                    syndrome=Syndrome.NAK_PSN_SEQUENCE, msn=ctx["msn"],
                                    **fields)
                    ctx_new = dict(ctx, nak_sent=1)
            elif not access_ok:
                # NAKed, and the PSN consumed: there is no QP error state.
                self.count["access_nak"] += 1
                ack = ack_frame(psn=psn, syndrome=Syndrome.NAK_REMOTE_ACCESS,
                                msn=ctx["msn"], **fields)
                ctx_new = dict(ctx, expected_psn=(psn + 1) & _M24, nak_sent=0)
            else:
                self.count["frames_ok"] += 1
                base = va if reth else ctx["resp_va"]
                msn = (ctx["msn"] + last) & _M24
                if ack_req:
                    ack = ack_frame(psn=psn, syndrome=Syndrome.ACK, msn=msn, **fields)
                ctx_new = dict(ctx, expected_psn=(ctx["expected_psn"] + 1) & _M24, msn=msn,
                               nak_sent=0,
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
                        beat_pops.append(v + 1 + j)
                self.count["words"] += nw
                if last:
                    self.written.append((v + nw, qpn))
                g = v + nw + 1
        remaining = nb - popped
        beat_pops.extend(range(g, g + remaining))
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


