"""Cycle-exact golden model of :class:`rtl.tops.rdma_top.RdmaTop`.

It follows the timing rules written in the docstrings of
:class:`rtl.rdma.requester.Requester`, :class:`rtl.rdma.responder.Responder` and
:class:`rtl.rdma.qpc_cache.QpcCache`: every state has a fixed cost, memory reads take
``mem_latency`` cycles, links ``link_latency``; the requester retires ACKs before it
takes a doorbell; the responder handles frames in arrival order once they are whole.
Because the responder's work on a frame depends only on earlier frames, the model runs
the requester in time order and hands each frame to the responder as it is sent.
"""

import bisect
import dataclasses
import zlib
from collections import deque

from pymodel.fabric.faulty_link import FaultSettings
from pymodel.rdma.fields import pack, unpack
from pymodel.rdma.frames import Endpoint, ack_frame, icrc, write_frame
from pymodel.rdma.links import LinkStream
from pymodel.stall import stall_pattern
from spec.formats.roce import (
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
from spec.rdma import (
    ACK_QUEUE,
    DROP_REASONS,
    LINK_FIFO_BEATS,
    LINK_FRAME_BEATS,
    OUTSTANDING,
    REQUESTER_COUNTERS,
    RX_FIFO_BEATS,
    RX_FRAME_ROOM,
    RX_FRAMES,
    SEQUENCE_COUNTERS,
)
from spec.rdma import DEFAULTS as TOP_DEFAULTS

__all__ = ["Config", "HostMemory", "QpcCacheModel", "simulate", "beats_of"]

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
    """The top's parameters (defaults: :data:`spec.rdma.DEFAULTS`) and run-time
    ports (see :class:`RdmaTop`); ``faults_ab``/``faults_ba`` are the settings of the
    A->B and B->A links (``ab_*``/``ba_*`` ports)."""
    cache_entries: int = TOP_DEFAULTS["cache_entries"]
    depth: int = TOP_DEFAULTS["depth"]
    mem_latency: int = TOP_DEFAULTS["mem_latency"]
    link_latency: int = TOP_DEFAULTS["link_latency"]
    mr_entries: int = TOP_DEFAULTS["mr_entries"]
    qpc_base_a: int = 0
    qpc_base_b: int = 0
    cq_base: int = 0
    cq_log2: int = 10
    timeout: int = TOP_DEFAULTS["timeout"]
    retry_limit: int = TOP_DEFAULTS["retry_limit"]
    faults_ab: FaultSettings = dataclasses.field(default_factory=FaultSettings)
    faults_ba: FaultSettings = dataclasses.field(default_factory=FaultSettings)


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


class ResponderModel:
    """Twin of :class:`rtl.rdma.responder.Responder`."""

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


def _ack_ok(frame):
    """What the requester's AckReceiver accepts: a good RoCEv2 ACKNOWLEDGE frame."""
    return (len(frame) == 66
            and zlib.crc32(frame[:-4]) == int.from_bytes(frame[-4:], "little")
            and icrc(frame[:-8]) == frame[-8:-4]
            and _be16(frame, 16) == 48 and _be16(frame, 12) == ETHERTYPE_IPV4
            and frame[23] == IP_PROTO_UDP and _be16(frame, 36) == ROCE_UDP_PORT
            and frame[42] == OpCode.RC_ACKNOWLEDGE.value)


class _Requester:
    """Node A: the sequencer, the go-back-N window, the ACK queue and the timer.

    The rules (from :class:`rtl.rdma.requester.Requester`'s contract): in each IDLE
    cycle the sequencer does one thing, in this order: handle the oldest queued ACK
    event, rewind on an expired timer, send the next message of a rewind, resume a QP
    that waited for room in the window, take a doorbell. A message costs a fixed
    schedule of cycles from the lookup to DONE (the same for a first send and a
    resend).
    """

    def __init__(self, cfg, ma, send_ab, doorbells, db_stall):
        self.cfg, self.ma, self.send_ab = cfg, ma, send_ab
        self.cache = QpcCacheModel(cfg.cache_entries, ma, cfg.qpc_base_a)
        self.cnt = dict.fromkeys(REQUESTER_COUNTERS, 0)
        self.doorbells = doorbells
        self.db_stall = tuple(db_stall)
        self.db_st = stall_pattern(db_stall[0], db_stall[1], 1 << 20) if doorbells \
            else None
        self.db_stamps, self.completed = [], []
        self.window = deque()          # records, oldest (head) first
        self.replay = 0                # index in the window of the next resend
        self.arrivals = deque()        # (cycle the event is written, event) not yet queued
        self.queue = deque()           # queued events
        self.writes, self.pops = [], []  # ACK-queue write and pop cycles
        self.used = False
        self.retries = 0               # timer expiries since the last retirement
        self.cq_index = 0
        self.last_clear = 0            # last cycle the timer was held at 0
        self.resume = None
        self.trace = []                # (cycle, what) of the sequencer's decisions

    # ---- the ACK queue ----
    def ack_arrives(self, cycle, frame):
        """An ACK/NAK frame's last beat reaches the requester in ``cycle``."""
        if not _ack_ok(frame):
            self.cnt["ack_dropped"] += 1
            return
        self.cnt["acks"] += 1
        h = unpack(ACK_HEADER, int.from_bytes(frame[:58], "little"))
        ev = dict(qpn=bswap(h["bth"]["dest_qp"], 3), psn=bswap(h["bth"]["psn"], 3),
                  syndrome=h["aeth"]["syndrome"])
        if self.arrivals and cycle <= self.arrivals[-1][0]:
            raise AssertionError("ACK events out of order")
        self.arrivals.append((cycle, ev))

    def _admit(self, t):
        """Write the events of cycles before ``t`` into the queue (or lose them)."""
        while self.arrivals and self.arrivals[0][0] < t:
            a, ev = self.arrivals.popleft()
            level = bisect.bisect_left(self.writes, a) - bisect.bisect_left(self.pops, a)
            if level >= ACK_QUEUE:
                self.cnt["ack_lost"] += 1
                continue
            self.writes.append(a)
            self.queue.append(ev)

    # ---- the window ----
    @property
    def replaying(self):
        return self.replay < len(self.window)

    def _expired(self, t):
        return (self.window and not self.replaying
                and t - self.last_clear - 1 >= self.cfg.timeout)

    def _retire(self, t, status):
        out = self.window.popleft()
        if self.replay > 0:
            self.replay -= 1
        owner = 1 ^ ((self.cq_index >> self.cfg.cq_log2) & 1)
        cqe = pack(CQE_LAYOUT, wr_id=out["wr_id"], status=status,
                   opcode=WqeOpcode.RDMA_WRITE, owner=owner, qpn=out["qpn"],
                   byte_len=out["length"], sq_index=out["sq_index"])
        self.ma.write(self.cfg.cq_base + (self.cq_index & ((1 << self.cfg.cq_log2) - 1)),
                      cqe)
        self.cq_index += 1
        self.cnt["cqe_writes"] += 1
        self.completed.append((t, out["qpn"]))
        self.last_clear = t
        self.retries = 0
        self.trace.append((t, f"CQE {status.name} qpn {out['qpn']} psn {out['psn']}"))

    def _event(self, t):
        """Handle the oldest queued event in IDLE cycle ``t``."""
        ev = self.queue[0]
        h = self.window[0] if self.window else None
        same = h is not None and ev["qpn"] == h["qpn"]
        d_last = (ev["psn"] - h["psn"]) & _M24 if h else 0
        d_first = (ev["psn"] - h["first_psn"]) & _M24 if h else 0
        past = same and 0 < d_last < PSN_WINDOW
        at_last = same and d_last == 0
        within = same and d_first < PSN_WINDOW and (d_last == 0 or d_last >= PSN_WINDOW)
        syn = ev["syndrome"]
        is_ack = syn == Syndrome.ACK.value
        is_seq = syn == Syndrome.NAK_PSN_SEQUENCE.value
        if past:
            # A later PSN of the head's QP: the head arrived (ACKs are cumulative).
            self._retire(t, CqeStatus.SUCCESS)
            self.used = True
            return
        self.queue.popleft()
        self.pops.append(t)
        if is_ack and at_last:
            self._retire(t, CqeStatus.SUCCESS)
        elif not is_ack and not is_seq and within:
            self._retire(t, CqeStatus.REM_ACCESS_ERR
                         if syn == Syndrome.NAK_REMOTE_ACCESS.value
                         else CqeStatus.RETRY_EXC_ERR)
        elif is_seq and h is not None and (within or not same):
            self._rewind(t, "seq_naks")
        elif not self.used:
            self.cnt["ack_unexpected"] += 1
            self.trace.append((t, f"unexpected event psn {ev['psn']}"))
        self.used = False

    def _rewind(self, t, counter):
        self.trace.append((t, f"rewind ({counter}) to psn {self.window[0]['first_psn']}"))
        self.cnt[counter] += 1
        self.replay = 0
        self.last_clear = t

    # ---- messages ----
    def _lookup(self, t, qpn):
        """IDLE in ``t`` starts a lookup; returns (context, first cycle after LOOKUP)."""
        raw, hit = self.cache.lookup(qpn)
        r = t + 1 if hit else t + 1 + self.cfg.mem_latency
        return unpack(QPC_LAYOUT, raw), r + 1

    def _message(self, x, qpn, ctx, sq_index, psn, resend):
        """WQE_RD in cycle ``x`` .. DONE: returns (DONE cycle, PSN after the last frame,
        WQE)."""
        L, cfg, ma = self.cfg.mem_latency, self.cfg, self.ma
        self.cnt["wqe_reads"] += 1
        slot = sq_index & ((1 << ctx["sq_size_log2"]) - 1)
        wqe = unpack(WQE_LAYOUT, ma.read(ctx["sq_base"] + slot))
        s = x + L + 1
        remaining, sent = wqe["length"], 0
        laddr = (wqe["laddr"] >> 6) % cfg.depth
        pmtu = 1 << ctx["pmtu_log2"]
        while True:
            seg = min(remaining, pmtu)
            nw = beats_of(seg)
            data = b"".join(ma.read(laddr + k).to_bytes(64, "little")
                            for k in range(nw))[:seg]
            laddr += nw
            self.cnt["payload_reads"] += nw
            first, last = sent == 0, remaining == seg
            op = ((OpCode.RC_RDMA_WRITE_ONLY if last else OpCode.RC_RDMA_WRITE_FIRST)
                  if first else
                  (OpCode.RC_RDMA_WRITE_LAST if last else OpCode.RC_RDMA_WRITE_MIDDLE))
            frame = write_frame(op, Endpoint(ctx["smac"], ctx["sip"]),
                                Endpoint(ctx["dmac"], ctx["dip"]), qpn,
                                ctx["dest_qp"], psn, last, data, va=wqe["raddr"],
                                rkey=wqe["rkey"], dma_length=wqe["length"])
            d = s + nw + L + 1                 # SEND
            self.cnt["frames"] += 1
            self.cnt["retransmissions"] += resend
            self.send_ab(d + 1, frame)
            f_len = (70 if op.value in _RETH else 54) + seg + (-seg % 4)
            s = d + beats_of(f_len) + 2
            remaining -= seg
            sent += seg
            psn = (psn + 1) & _M24
            if last:
                return s, psn, wqe

    def _new_messages(self, t, qpn, tail):
        """A doorbell (``tail`` given) or a resume (``tail`` None) in IDLE cycle ``t``;
        returns the next IDLE cycle."""
        ctx, x = self._lookup(t, qpn)
        if tail is not None:
            ctx["sq_tail"] = tail
        while ctx["sq_head"] != ctx["sq_tail"]:
            y, psn, wqe = self._message(x, qpn, ctx, ctx["sq_head"], ctx["next_psn"], 0)
            if not self.window:
                self.last_clear = y            # the window was empty up to DONE
            self.window.append(dict(wr_id=wqe["wr_id"], qpn=qpn, first_psn=ctx["next_psn"],
                                    psn=(psn - 1) & _M24, length=wqe["length"],
                                    sq_index=ctx["sq_head"]))
            self.replay = len(self.window)
            ctx["sq_head"] = (ctx["sq_head"] + 1) & _M16
            ctx["next_psn"] = psn
            x = y + 1
            if ctx["sq_head"] != ctx["sq_tail"] and len(self.window) >= OUTSTANDING:
                self.resume = qpn              # the rest waits for room in the window
                break
        self.cache.update(pack(QPC_LAYOUT, ctx))
        return x + 1                           # UPDATE in x, IDLE in x + 1

    def _resend(self, t):
        rec = self.window[self.replay]
        self.trace.append((t, f"resend qpn {rec['qpn']} psn {rec['first_psn']}"))
        ctx, x = self._lookup(t, rec["qpn"])
        y, _, _ = self._message(x, rec["qpn"], ctx, rec["sq_index"], rec["first_psn"], 1)
        self.replay += 1
        self.last_clear = y
        return y + 1

    def _db_ready(self, t):
        return self.db_st is not None and not self._stalled(t)

    def _stalled(self, t):
        if t >= len(self.db_st):
            self.db_st = stall_pattern(*self.db_stall, 2 * t)
        return self.db_st[t]

    def run(self, limit):
        """Run until nothing is left to do; returns the last cycle."""
        t, di, n_db = 0, 0, len(self.doorbells)
        room = True
        while True:
            if t > limit:
                raise RuntimeError(f"the model ran past {limit} cycles")
            self._admit(t)
            room = len(self.window) < OUTSTANDING
            if self.queue:
                self._event(t)
                t += 1
            elif self._expired(t):
                if self.retries == self.cfg.retry_limit:
                    self.cnt["timeouts"] += 1
                    self._retire(t, CqeStatus.RETRY_EXC_ERR)
                else:
                    self._rewind(t, "timeouts")
                    self.retries += 1
                t += 1
            elif self.replaying:
                t = self._resend(t)
            elif self.resume is not None:
                if room:
                    qpn, self.resume = self.resume, None
                    t = self._new_messages(t, qpn, None)
                else:
                    t = self._wait(t, di, n_db, room)
            elif di < n_db and room and self._db_ready(t):
                qpn, tail = self.doorbells[di]
                di += 1
                self.cnt["doorbells"] += 1
                self.db_stamps.append(t)
                self.trace.append((t, f"doorbell qpn {qpn}"))
                t = self._new_messages(t, qpn, tail)
            else:
                nxt = self._wait(t, di, n_db, room)
                if nxt is None:
                    break
                t = nxt
        return t

    def _wait(self, t, di, n_db, room):
        """The next cycle anything can happen in, or None."""
        nxt = []
        if self.arrivals:
            nxt.append(self.arrivals[0][0] + 1)
        if self.window and not self.replaying:
            nxt.append(self.last_clear + 1 + self.cfg.timeout)
        if di < n_db and room and self.resume is None:
            c = t + 1
            while self._stalled(c):
                c += 1
            nxt.append(c)
        if not nxt:
            return None
        return max(t + 1, min(nxt))


def simulate(cfg, mem_a, mem_b, mr_table, doorbells, db_stall=(1, 0), inject=(),
             inject_stall=(1, 0), limit=1 << 28):
    """Run the model.

    ``mem_a``/``mem_b`` map word addresses to 512-bit integers (initial host memories),
    ``mr_table`` lists MR_LAYOUT integers, ``doorbells`` lists ``(qpn, sq_tail)``;
    ``inject`` lists frames (bytes with FCS) played on the A->B link instead (then
    ``doorbells`` should be empty). The links fault as ``cfg.faults_ab`` and
    ``cfg.faults_ba`` say. Returns a dict of everything the RTL records: frames sent on
    each link with their beat cycles (``wire_ab``, ``wire_ba``), doorbell accept cycles,
    ``written`` and ``completed`` events, the counters of both engines (``req``,
    ``resp``) and of both links (``links``), and both host memories.
    """
    LL = cfg.link_latency
    ma, mb = HostMemory(cfg.depth, mem_a), HostMemory(cfg.depth, mem_b)
    resp = ResponderModel(cfg, mb, mr_table)
    links = {name: LinkStream(LL, settings, LINK_FRAME_BEATS, LINK_FIFO_BEATS)
             for name, settings in (("ab", cfg.faults_ab), ("ba", cfg.faults_ba))}
    wire_ab = []
    req = None

    def send_ab(first_cycle, frame, beat_cycles=None):
        cycles = beat_cycles or list(range(first_cycle, first_cycle + beats_of(len(frame))))
        wire_ab.append((cycles, frame))
        for arrived, fr in links["ab"].send(cycles, frame):
            ack = resp.receive(fr, arrived)
            if ack is not None:
                h, fr_ack = ack
                for at, fr_back in links["ba"].send([h, h + 1], fr_ack):
                    req.ack_arrives(at[-1], fr_back)

    req = _Requester(cfg, ma, send_ab, doorbells, db_stall)

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

    req.run(limit)
    cnt = dict(req.cnt, lookups=req.cache.lookups, misses=req.cache.misses,
               writebacks=req.cache.writebacks)
    rcnt = dict(resp.count, lookups=resp.cache.lookups, misses=resp.cache.misses,
                writebacks=resp.cache.writebacks)
    return dict(wire_ab=wire_ab, wire_ba=[([h, h + 1], fr) for h, fr in resp.acks],
                doorbell_stamps=req.db_stamps, written=resp.written,
                completed=req.completed, req=cnt, resp=rcnt,
                links={name: dict(link.counters) for name, link in links.items()},
                window_left=len(req.window), trace=req.trace, mem_a=ma.words,
                mem_b=mb.words)
