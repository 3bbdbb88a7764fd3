"""The pipelined requester against its twin, cycle by cycle, in the Amaranth simulator.

The bench of tests/requester_lockstep.py (a test-bench host answering reads after a
fixed latency and taking every write; every read request, write word, MMIO handshake and
frame beat compared in every cycle), with a test-bench responder (:class:`Peer`) that
acknowledges each frame that asks for it after a fixed delay.
"""

import dataclasses
import random

import pytest

from pymodel.fields import pack, unpack
from pymodel.rdma.fabric_system import FabricConfig
from pymodel.rdma.frames import Endpoint, ack_frame
from rtl.rdma.req.doorbell_intake import BLUEFLAME_OFFSET, DOORBELL_OFFSET
from rtl.rdma.req.requester import Requester
from spec.formats.roce import (
    CQE_LAYOUT,
    QPC_LAYOUT,
    WQE_ACK_REQ,
    WQE_INLINE,
    WQE_LAYOUT,
    WQE_SIGNALLED,
    OpCode,
    QpState,
    Syndrome,
    WqeOpcode,
)
from spec.rdma_engine import MODIFY_QP_OFFSET, ContextCacheShape
from tests.requester_lockstep import DEPTH, run_lockstep

MAC_A, MAC_B, IP_A, IP_B = 0x02000000000A, 0x02000000000B, 0x0A000001, 0x0A000002


def Cfg(**fields):
    """The requester's sizes and run-time ports for these tests: the model's typed and
    checked configuration (:class:`pymodel.rdma.fabric_system.FabricConfig`, frozen: a
    case changes a field with ``dataclasses.replace``) with a 16-entry cache, a host
    memory of ``DEPTH`` words, a 64-entry CQ at word 64 and one-word contexts at
    ``qpc_base + qpn`` (``qpc_bytes`` 64, as :func:`scenario` lays them out); ``fields``
    override."""
    return FabricConfig(**{"cache_capacity": 16, "depth": DEPTH, "cq_base": 64,
                           "cq_log2": 6, "qpc_bytes": 64, **fields})


def scenario(seed, qps, messages, sizes, inline=False, bf=False, ring_every=1,
             signal_every=1, pmtu_log2=8, stride_log2=0, ack_req_every=0):
    """Host memory image and MMIO writes of ``messages`` WRITEs round robin over QPs."""
    rng = random.Random(seed)
    mem = {}
    heap = 256
    sq = {}
    for q in range(qps):
        sq_log2 = 6
        base = heap
        heap += (1 << sq_log2) << stride_log2
        sq[q] = dict(base=base, tail=0, log2=sq_log2, pending=0)
        mem[q] = pack(QPC_LAYOUT, valid=1, pmtu_log2=pmtu_log2, dest_qp=q + 100,
                      next_psn=rng.randrange(1 << 24), sq_size_log2=sq_log2, sq_base=base,
                      sq_stride_log2=stride_log2, dmac=MAC_B, smac=MAC_A, dip=IP_B, sip=IP_A)
    mmio = []
    for k in range(messages):
        q = k % qps
        s = sq[q]
        size = rng.choice(sizes)
        words = -(-size // 64)
        laddr = heap
        heap += words
        payload = rng.randbytes(size)
        for w in range(words):
            mem[laddr + w] = int.from_bytes(payload[64 * w:64 * w + 64].ljust(64, b"\0"),
                                            "little")
        last = k >= messages - qps
        flags = WQE_SIGNALLED if (k % signal_every == signal_every - 1 or last) else 0
        if inline:
            flags |= WQE_INLINE
        if ack_req_every and k % ack_req_every == ack_req_every - 1:
            flags |= WQE_ACK_REQ
        hdr = pack(WQE_LAYOUT, wr_id=0x1000 + k, opcode=WqeOpcode.RDMA_WRITE, flags=flags,
                   sq_index=s["tail"], length=size, laddr=laddr * 64,
                   raddr=0x10000 + 4096 * k, rkey=0x77, qpn=q)
        slot = (s["tail"] & ((1 << s["log2"]) - 1)) << stride_log2
        mem[s["base"] + slot] = hdr
        inl = [mem[laddr + w] for w in range(words)] if inline else []
        for w, word in enumerate(inl):
            mem[s["base"] + slot + 1 + w] = word
        s["tail"] = (s["tail"] + 1) & 0xFFFF
        s["pending"] += 1
        if bf:
            wqe = [hdr] + inl
            for w, word in enumerate(wqe):
                mmio.append(dict(addr=BLUEFLAME_OFFSET, nbytes=64 * len(wqe), data=word,
                                 first=int(w == 0), last=int(w == len(wqe) - 1)))
            s["pending"] = 0
        elif s["pending"] >= ring_every or last:
            mmio.append(dict(addr=DOORBELL_OFFSET, nbytes=8, data=q | s["tail"] << 24,
                             first=1, last=1))
            s["pending"] = 0
    assert heap < DEPTH
    return mem, mmio


class Peer:
    """A test-bench responder: go-back-N receive rules (one NAK per sequence error),
    frames lost by their number (``lose``), ACKs lost (``lose_acks``), remote access
    errors for a set of PSNs (``deny``); with ``selective``, the selective-repeat rules
    (docs/recovery.md): a frame ahead is kept (its PSN remembered), and the expected
    one then moves past every kept PSN that follows it and is ACKed."""

    def __init__(self, lose=(), lose_acks=(), deny=(), selective=False):
        self.lose, self.lose_acks, self.deny = set(lose), set(lose_acks), set(deny)
        self.selective, self.kept = selective, {}
        self.expected = {}
        self.nak_sent = {}
        self.acks_sent = 0
        self.va = []                # RETH virtual address of each frame received

    def frame(self, raw, number):
        """The replies (none or one ACK/NAK) to ``raw``, the ``number``-th frame."""
        if number in self.lose:
            return []
        if raw[42] in (OpCode.RC_RDMA_WRITE_FIRST.value, OpCode.RC_RDMA_WRITE_ONLY.value):
            self.va.append(int.from_bytes(raw[54:62], "big"))
        ack_req = raw[50] >> 7
        psn = int.from_bytes(raw[51:54], "big")
        qpn = int.from_bytes(raw[34:36], "big") & 0x3FFF
        exp = self.expected.setdefault(qpn, psn)
        diff = (psn - exp) & 0xFFFFFF
        syndrome = Syndrome.ACK
        kept = self.kept.setdefault(qpn, set())
        if diff == 0:
            self.expected[qpn] = (exp + 1) & 0xFFFFFF
            self.nak_sent[qpn] = False
            while self.expected[qpn] in kept:       # selective repeat: kept PSNs
                kept.discard(self.expected[qpn])
                psn, ack_req = self.expected[qpn], 1
                self.expected[qpn] = (psn + 1) & 0xFFFFFF
            if psn in self.deny:
                syndrome, ack_req = Syndrome.NAK_REMOTE_ACCESS, 1
        elif diff >= 1 << 23 or psn in kept:
            pass                                     # duplicate: ACK again if asked
        elif self.selective:
            kept.add(psn)
            if self.nak_sent.get(qpn):
                return []
            self.nak_sent[qpn] = True
            syndrome, ack_req, psn = Syndrome.NAK_PSN_SEQUENCE, 1, exp
        elif not self.nak_sent.get(qpn):
            self.nak_sent[qpn] = True
            syndrome, ack_req, psn = Syndrome.NAK_PSN_SEQUENCE, 1, exp
        else:
            return []
        if not ack_req:
            return []
        self.acks_sent += 1
        if self.acks_sent in self.lose_acks:
            return []
        return [ack_frame(Endpoint(MAC_B, IP_B), Endpoint(MAC_A, IP_A), qpn + 100, qpn, psn,
                          syndrome, 0)]


@pytest.mark.slow_variants("batched", "bf_inline", reason=(
    "co-simulated by the ladder rungs (test_cosim_rdma.py)"))
@pytest.mark.slow_variants("multi_qp", reason="co-simulated by test_rdma_many_qps")
@pytest.mark.parametrize("case", ["doorbells", "batched", "bf_inline", "multi_qp",
                                  "ack_flag"])
def test_requester_matches_model(case):
    cfg = Cfg()
    if case == "doorbells":
        mem, mmio = scenario(1, 1, 12, [128])
    elif case == "batched":
        cfg = dataclasses.replace(cfg, ack_every=4)
        mem, mmio = scenario(2, 1, 20, [1, 64, 65, 128, 300, 700], ring_every=8,
                             signal_every=4)
    elif case == "bf_inline":
        mem, mmio = scenario(3, 1, 16, [1, 63, 64, 128, 192], inline=True, bf=True,
                             stride_log2=2)
    elif case == "multi_qp":
        cfg = Cfg(cache_capacity=64)                       # 16 of 64 entries in use
        mem, mmio = scenario(4, 40, 60, [128, 256], ring_every=1)
    else:
        # Coalescing never asks by count: only signalled WQEs (every 8th and each QP's
        # last) and those with WQE_ACK_REQ (every 3rd) ask for an ACK.
        cfg = dataclasses.replace(cfg, ack_every=255)
        mem, mmio = scenario(7, 2, 24, [128], signal_every=8, ack_req_every=3)
    peer = Peer()
    stats, host, model = run_lockstep(cfg, mem, mmio, cycles=1600, peer=peer)
    if case == "ack_flag":
        asked = [k for k in range(24) if k % 8 == 7 or k >= 22 or k % 3 == 2]
        assert peer.acks_sent == len(asked)
    n = sum(1 for w in mmio if w["first"]) if case == "bf_inline" else None
    assert stats["frames"] > 0 and stats["cqes"], stats
    cqes = [unpack(CQE_LAYOUT, host[a]) for _, a in stats["cqes"]]
    assert all(q["status"] == 0 for q in cqes)
    assert n is None or model.counters()["bf_writes"] == n


@pytest.mark.slow_variants("retry_limit", "window", reason=(
    "co-simulated by test_cosim_rdma_recovery.py"))
@pytest.mark.slow_variants("serial", reason="co-simulated by the sequential rung")
@pytest.mark.parametrize("case", ["nak", "timeout", "retry_limit", "access", "window",
                                  "pool", "serial", "nak_sr", "timeout_sr"])
def test_requester_recovery_matches_model(case):
    cfg = Cfg(timeout=300)
    records = 32
    if case == "nak":                # frame 3 lost: the next frame draws a NAK
        mem, mmio = scenario(5, 1, 10, [128])
        peer = Peer(lose={3})
    elif case == "timeout":          # the last frames' ACKs lost: the timer resends
        mem, mmio = scenario(6, 2, 8, [128, 600])
        peer = Peer(lose_acks={7, 8, 9})
    elif case == "retry_limit":      # every frame lost
        cfg = dataclasses.replace(cfg, retry_limit=1, timeout=100)
        mem, mmio = scenario(7, 1, 2, [128])
        peer = Peer(lose=set(range(1, 100)))
    elif case == "access":
        mem, mmio = scenario(8, 1, 6, [128])
        first = unpack(QPC_LAYOUT, mem[0])["next_psn"]
        peer = Peer(deny={(first + 2) & 0xFFFFFF})
    elif case == "window":           # more messages than records, ACKs slow
        records = 4
        mem, mmio = scenario(9, 2, 16, [64], ring_every=8)
        peer = Peer()
    elif case == "pool":             # a rewind while every record waits for a lost ACK
        records = 4
        mem, mmio = scenario(12, 1, 16, [64], ring_every=8)
        peer = Peer(lose_acks=set(range(1, 17)))
    elif case == "nak_sr":           # as "nak", selective repeat at both ends
        mem, mmio = scenario(5, 1, 10, [128])
        peer = Peer(lose={3}, selective=True)
    elif case == "timeout_sr":       # as "timeout", selective repeat at both ends
        mem, mmio = scenario(6, 2, 8, [128, 600])
        peer = Peer(lose_acks={7, 8, 9}, selective=True)
    else:
        cfg = dataclasses.replace(cfg, serial=1)
        mem, mmio = scenario(10, 1, 6, [128])
        peer = Peer()
    stats, host, model = run_lockstep(cfg, mem, mmio, cycles=4000 if case == "pool" else 2200,
                                      peer=peer, records=records, reply_delay=40,
                                      selective=int(case.endswith("_sr")))
    c = model.counters()
    cqes = [unpack(CQE_LAYOUT, host[a]) for _, a in stats["cqes"]]
    if case == "nak":
        assert c["seq_naks"] == 1 and c["retransmissions"] >= 1
        assert [q["status"] for q in cqes] == [0] * 10
    elif case == "timeout":
        assert c["timeouts"] >= 1 and c["retransmissions"] >= 1
        assert len(cqes) == 8 and all(q["status"] == 0 for q in cqes)
    elif case == "retry_limit":
        # Both messages are in the window when the first exhausts its retries (one
        # rewind, then RETRY_EXC_ERR at the second expiry): the QP enters ERR and the
        # second is flushed (IBTA table 91; ibv_wc_status 12, then 5).
        assert [q["status"] for q in cqes] == [12, 5]
        assert c["timeouts"] == 2 and c["qp_errors"] == 1 and c["flushed"] == 1
    elif case == "access":
        # The third message draws a remote access NAK (10): the QP enters ERR and the
        # three WQEs behind it, rung before the error, complete with WR_FLUSH_ERR (5).
        assert [q["status"] for q in cqes] == [0, 0, 10, 5, 5, 5]
        assert c["qp_errors"] == 1 and c["flushed"] == 3
    elif case == "window":
        assert c["records_max"] == 4 and len(cqes) == 16
    elif case == "pool":
        # The first sixteen ACKs are lost, so the four records in windows never retire
        # by an ACK: the timer rewinds, again and again. Each rewind waits only for the
        # records the WQE fetch stage promised (the pool holds them), so it ends, and
        # the fifth round of resends draws the ACKs that complete everything. (An
        # engine whose rewind waited for every work item taken stood still here in its
        # first rewind: the other twelve records had nowhere to go.)
        assert c["timeouts"] == 4 and c["records_max"] == 4
        assert len(cqes) == 16 and all(q["status"] == 0 for q in cqes)
    elif case == "nak_sr":
        # One frame lost, one NAK: only the message holding its PSN is sent again (one
        # 128-byte frame); the peer kept the frames after it.
        assert c["seq_naks"] == 1 and c["retransmissions"] == 1 and c["rewinds"] == 1
        assert [q["status"] for q in cqes] == [0] * 10
    elif case == "timeout_sr":
        # Each timer rewind resends one message (the QP's oldest): at most 3 frames
        # (600 bytes at a 256-byte path MTU).
        assert c["timeouts"] >= 1 and 1 <= c["retransmissions"] <= 3 * c["rewinds"]
        assert len(cqes) == 8 and all(q["status"] == 0 for q in cqes)
    else:
        starts = [t for t, _ in stats["cqes"]]
        gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
        assert len(starts) == 6 and min(gaps) > 60


def test_requester_timer_restarts_when_resends_leave():
    """A NAK rewinds a window of sixteen 2 KiB messages (eight 256-byte frames each)
    over a host whose reads take 400 cycles; the first sends ask for one ACK (the last
    message), the resends for one per message. The first resent frame needs a WQE read
    and then a payload read issued after the walk (at least 800 cycles), so a timer
    restarted when the rewind is walked would expire (300 cycles, plus at most the 16
    slots of the scan) before any resent frame has left and rewind the window again.
    Held from the walk's start until the QP's first resent frame leaves, and restarted
    by every resent frame, it does not expire."""
    timeout, latency = 300, 400
    assert 2 * latency > timeout + 16
    cfg = Cfg(timeout=timeout, ack_every=255)
    mem, mmio = scenario(31, 1, 16, [2048], ring_every=16, signal_every=16)
    stats, host, model = run_lockstep(cfg, mem, mmio, cycles=5000, peer=Peer(lose={2}),
                                      reply_delay=40, latency=latency)
    c = model.counters()
    # From the wire, independently of the model: every frame is resent once (the lost
    # one too), and only once: no second rewind.
    seen, resent = set(), []
    for t, raw in stats["wire"]:
        psn = int.from_bytes(raw[51:54], "big")
        if psn in seen:
            resent.append(t)
        seen.add(psn)
    assert len(resent) == len(seen) == 16 * 8
    assert c["seq_naks"] == 1 and c["rewinds"] == 1 and c["timeouts"] == 0
    assert c["retransmissions"] == len(resent)
    cqes = [unpack(CQE_LAYOUT, host[a]) for _, a in stats["cqes"]]
    assert [q["status"] for q in cqes] == [0]


@pytest.mark.parametrize("case", ["held", "storm"])
def test_requester_ack_queue_never_drops(case):
    """The ACK queue coalesces per window slot and never holds the ACK receiver.
    ``held``: one lost frame of QP 0 draws a NAK; while the completion unit rewinds,
    the ACKs of both QPs wait and merge (``ack_coalesced``). ``storm``: four QPs each
    lose a frame, four NAKs and a stream of ACKs wait behind one rewind at a time (the
    old 2-event queue lost events here): no event is lost (``ack_lost`` 0), the receiver
    never waits (``ack_wait_cycles`` 0), every message completes with SUCCESS."""
    qps, messages, lose, cycles = ((2, 32, {3}, 1800) if case == "held"
                                   else (4, 48, {3, 4, 5, 6}, 2500))
    cfg = Cfg(timeout=2000)
    mem, mmio = scenario(41, qps, messages, [64], ring_every=1)
    stats, host, model = run_lockstep(cfg, mem, mmio, cycles=cycles, peer=Peer(lose=lose))
    c = model.counters()
    assert c["acks"] == stats["acks"] and c["ack_dropped"] == 0   # every frame was good
    assert c["ack_lost"] == 0 and c["ack_wait_cycles"] == 0
    assert c["ack_coalesced"] > 0                # events waited while a rewind was walked
    assert c["seq_naks"] >= 1
    cqes = [unpack(CQE_LAYOUT, host[a]) for _, a in stats["cqes"]]
    assert len(cqes) == messages and all(q["status"] == 0 for q in cqes)


@pytest.mark.slow_variants("32", reason=(
    "the 64-QP case runs the same eviction and recovery over more contexts"))
@pytest.mark.parametrize("windows", [32, 64])
def test_requester_evicts_in_flight_and_recovers(windows):
    """40 QPs round robin over 16 cache entries with a window slot per QP (64 slots) or
    per two QPs (32: QPs ``q`` and ``q + 32`` take turns), frames lost: contexts leave
    the cache while their messages wait for the ACK (``evict_inflight``), and a rewind
    of a QP whose context left first brings it back (``recovery_fills``, a LOOK). RTL
    equals the model cycle for cycle; every message completes with SUCCESS."""
    cfg = Cfg(timeout=300)
    mem, mmio = scenario(13, 40, 60, [128])
    peer = Peer(lose={6, 23, 41}, lose_acks={12, 30})
    stats, host, model = run_lockstep(cfg, mem, mmio, cycles=6000, peer=peer,
                                      windows=windows, reply_delay=40)
    c = model.counters()
    cqes = [unpack(CQE_LAYOUT, host[a]) for _, a in stats["cqes"]]
    assert len(cqes) == 60 and all(q["status"] == 0 for q in cqes)
    assert c["evict_inflight"] > 0 and c["recovery_fills"] > 0
    assert c["retransmissions"] >= 3


def test_requester_bad_windows():
    """``windows`` that is not 0 or a power of two from the cache entries to 4096 is
    refused, naming the parameter."""
    for bad in (8, 24, 8192, -1):
        with pytest.raises(ValueError, match="windows"):
            Requester(ContextCacheShape(16), DEPTH, windows=bad)


def test_requester_qp_error_flush_and_reset():
    """Two QPs; QP 0's second WRITE draws a remote access NAK. By the IBTA rules
    (Vol 1 table 91) QP 0 enters ERR: that WQE completes with REM_ACCESS_ERR (10), its third
    WQE (rung with it) with WR_FLUSH_ERR (5); the two WQEs rung at cycle 800 are
    flushed (5) without a frame, their doorbells counted (``doorbell_err_qp``); the
    modify command at cycle 1000 moves QP 0 back to RTS and its WQEs rung at cycle 1200
    are sent and succeed. QP 1's seven WRITEs all succeed."""
    cfg = Cfg()
    mem, mmio = scenario(11, 2, 14, [128])          # one 1-frame message per doorbell
    first0 = unpack(QPC_LAYOUT, mem[0])["next_psn"]
    first1 = unpack(QPC_LAYOUT, mem[1])["next_psn"]
    deny = (first0 + 1) & 0xFFFFFF                     # QP 0's second message
    assert (deny - first1) & 0xFFFFFF >= 7               # not a PSN of QP 1
    at = [0] * 6 + [800] * 4 + [1200] * 4              # message k is rung by mmio[k]
    words = [dict(w, at=t) for w, t in zip(mmio, at, strict=True)]
    modify = dict(addr=MODIFY_QP_OFFSET, nbytes=8, data=0, first=1, last=1, at=1000)
    words = words[:10] + [modify] + words[10:]
    peer = Peer(deny={deny})
    stats, host, model = run_lockstep(cfg, mem, words, cycles=1700, peer=peer,
                                      reply_delay=40)
    c = model.counters()
    cqes = [unpack(CQE_LAYOUT, host[a]) for _, a in stats["cqes"]]
    per_qp = {}
    for q in cqes:
        per_qp.setdefault(q["qpn"], []).append((q["sq_index"], q["status"],
                                                q["wr_id"] - 0x1000))
    assert per_qp[0] == [(0, 0, 0), (1, 10, 2), (2, 5, 4), (3, 5, 6), (4, 5, 8),
                         (5, 0, 10), (6, 0, 12)]
    assert per_qp[1] == [(k, 0, 2 * k + 1) for k in range(7)]
    assert (c["qp_errors"], c["flushed"], c["doorbell_err_qp"], c["qp_modifies"]) == \
        (1, 3, 2, 1)
    # No frame for the WQEs flushed after the error (message k targets 0x10000 + 4096 k).
    sent_va = set(peer.va)
    assert 0x10000 + 4096 * 6 not in sent_va and 0x10000 + 4096 * 8 not in sent_va
    assert {0x10000 + 4096 * k for k in (0, 2, 10, 12)} <= sent_va
    assert {0x10000 + 4096 * k for k in range(1, 14, 2)} <= sent_va


def test_requester_qp_error_survives_eviction():
    """The QP state lives in the context: QP 0 enters ERR (remote access NAK on its
    first WRITE), QP 16 (same cache entry of 16) then evicts it, and QP 0's context is
    written back with ``state`` ERR. QP 0's second WRITE, rung at cycle 800, refills the
    context, finds ERR and is flushed (WR_FLUSH_ERR, no frame, its doorbell counted);
    every other WRITE succeeds."""
    cfg = Cfg()
    mem, mmio = scenario(12, 17, 34, [128])          # QP q: messages q and q + 17
    psns = {q: unpack(QPC_LAYOUT, mem[q])["next_psn"] for q in range(17)}
    deny = psns[0]
    assert all((deny - psns[q]) & 0xFFFFFF >= 2 for q in range(1, 17))
    words = [dict(w, at=0 if k < 17 else 800) for k, w in enumerate(mmio)]
    peer = Peer(deny={deny})
    stats, host, model = run_lockstep(cfg, mem, words, cycles=1500, peer=peer,
                                      reply_delay=40)
    c = model.counters()
    cqes = [unpack(CQE_LAYOUT, host[a]) for _, a in stats["cqes"]]
    per_qp = {}
    for q in cqes:
        per_qp.setdefault(q["qpn"], []).append((q["sq_index"], q["status"]))
    assert per_qp.pop(0) == [(0, 10), (1, 5)]
    assert per_qp == {q: [(0, 0), (1, 0)] for q in range(1, 17)}
    assert c["writebacks"] >= 2 and c["doorbell_err_qp"] == 1 and c["flushed"] == 1
    assert unpack(QPC_LAYOUT, host[0])["state"] == QpState.ERR.value
    assert 0x10000 + 4096 * 17 not in set(peer.va)
