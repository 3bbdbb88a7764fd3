"""The requester with READs and atomics (``reads``) against its twin, cycle by cycle.

The bench of tests/requester_lockstep.py (a test-bench host answering reads after a
fixed latency; every read request, write word, MMIO handshake and frame beat compared in
every cycle), with a test-bench responder that also executes READ requests (the READ
RESPONSE frames IBTA prescribes, from its own memory) and atomics (once each; a repeated
one answered from its saved result). Expected outcomes come from IBTA, not from the
code: the bytes at a READ's local address are the remote bytes, an atomic's local 8
bytes the remote original value and the remote value its arithmetic leaves, one CQE per
signalled WQE with the WQE's opcode, written after the data.
"""

import random

import pytest

from pymodel.fields import pack, unpack
from pymodel.rdma.frames import Endpoint, ack_frame
from pymodel.rdma.read_frames import atomic_ack_frame, read_response_frame
from rtl.rdma.req.doorbell_intake import DOORBELL_OFFSET
from rtl.rdma.req.requester import Requester
from spec.formats.roce import (
    CQE_LAYOUT,
    QPC_LAYOUT,
    WQE_LAYOUT,
    WQE_SIGNALLED,
    CqeStatus,
    OpCode,
    Syndrome,
    WqeOpcode,
)
from spec.rdma_read_req import packets_of
from tests.requester_lockstep import DEPTH, run_lockstep
from tests.test_unit_requester import IP_A, IP_B, MAC_A, MAC_B, Cfg

#: The responder's memory: REMOTE_BYTES bytes from virtual address REMOTE_VA.
REMOTE_VA, REMOTE_BYTES = 0x100000, 1 << 16
_MASK64 = (1 << 64) - 1
_RESP = dict(first=OpCode.RC_RDMA_READ_RESPONSE_FIRST, middle=OpCode.RC_RDMA_READ_RESPONSE_MIDDLE,
             last=OpCode.RC_RDMA_READ_RESPONSE_LAST, only=OpCode.RC_RDMA_READ_RESPONSE_ONLY)


def scenario(seed, qps, ops, pmtu_log2=8):
    """Host memory image, MMIO doorbells and the list of operations: ``ops`` a list of
    ``(kind, length)``, kind ``write``, ``read``, ``cas`` or ``faa``, round robin over the
    QPs; every WQE signalled. Each operation has a remote range of its own."""
    rng = random.Random(seed)
    mem, sq, heap = {}, {}, 256
    for q in range(qps):
        base = heap
        heap += 64
        sq[q] = dict(base=base, tail=0)
        mem[q] = pack(QPC_LAYOUT, valid=1, pmtu_log2=pmtu_log2, dest_qp=q + 100,
                      next_psn=rng.randrange(1 << 24), sq_size_log2=6, sq_base=base,
                      sq_stride_log2=0, dmac=MAC_B, smac=MAC_A, dip=IP_B, sip=IP_A)
    mmio, plan = [], []
    opcode = dict(write=WqeOpcode.RDMA_WRITE, read=WqeOpcode.RDMA_READ,
                  cas=WqeOpcode.ATOMIC_CMP_AND_SWP, faa=WqeOpcode.ATOMIC_FETCH_AND_ADD)
    for k, (kind, length) in enumerate(ops):
        q = k % qps
        s = sq[q]
        words = max(1, -(-length // 64))
        laddr = heap * 64 + (8 * rng.randrange(8) if kind in ("cas", "faa") else 0)
        heap += words
        if kind == "write":
            payload = rng.randbytes(length)
            for w in range(words):
                mem[heap - words + w] = int.from_bytes(
                    payload[64 * w:64 * w + 64].ljust(64, b"\0"), "little")
        raddr = REMOTE_VA + 2048 * k + (8 * rng.randrange(4) if kind in ("cas", "faa")
                                        else 0)
        swap_add, compare = rng.randrange(1 << 64), rng.randrange(1 << 64)
        hdr = pack(WQE_LAYOUT, wr_id=0x1000 + k, opcode=opcode[kind], flags=WQE_SIGNALLED,
                   sq_index=s["tail"], length=length, laddr=laddr, raddr=raddr, rkey=0x77,
                   qpn=q, swap_add=swap_add, compare=compare)
        mem[s["base"] + (s["tail"] & 63)] = hdr
        s["tail"] += 1
        plan.append(dict(kind=kind, length=length, laddr=laddr, raddr=raddr, qpn=q,
                         wr_id=0x1000 + k, swap_add=swap_add, compare=compare))
        mmio.append(dict(addr=DOORBELL_OFFSET, nbytes=8, data=q | s["tail"] << 24,
                         first=1, last=1))
    assert heap < DEPTH
    return mem, mmio, plan


class ReadPeer:
    """A test-bench responder (go-back-N, one NAK per sequence error) that executes
    WRITEs, READs (one READ RESPONSE per path MTU: FIRST/MIDDLE/LAST or ONLY, the PSNs
    from the request's; IBTA Vol 1 9.7.1 and table 38) and atomics (IBTA 9.4.5: executed
    once; a repeated one, its PSN behind, answered from the saved original value).
    ``lose``: numbers of reply frames dropped (counted from 1)."""

    def __init__(self, seed, pmtu_log2, lose=()):
        self.mem = bytearray(random.Random(seed).randbytes(REMOTE_BYTES))
        self.initial = bytes(self.mem)
        self.pmtu = 1 << pmtu_log2
        self.lose = set(lose)
        self.expected, self.nak_sent, self.msn, self.saved = {}, {}, {}, {}
        self.replies = 0
        self.executed = 0

    def _reply(self, frames):
        out = []
        for f in frames:
            self.replies += 1
            if self.replies not in self.lose:
                out.append(f)
        return out

    def frame(self, raw, number):
        """The replies to ``raw``, the ``number``-th frame (unused: this peer loses
        replies by their own number)."""
        op = raw[42]
        qpn = int.from_bytes(raw[47:50], "big") - 100
        psn = int.from_bytes(raw[51:54], "big")
        ack_req = raw[50] >> 7
        exp = self.expected.setdefault(qpn, psn)
        diff = (psn - exp) & 0xFFFFFF
        a, b = Endpoint(MAC_B, IP_B), Endpoint(MAC_A, IP_A)
        if diff and diff < 1 << 23:                      # ahead: one NAK
            if self.nak_sent.get(qpn):
                return []
            self.nak_sent[qpn] = True
            return self._reply([ack_frame(a, b, qpn + 100, qpn, exp,
                                          Syndrome.NAK_PSN_SEQUENCE, self.msn.get(qpn, 0))])
        dup = diff != 0
        if op == OpCode.RC_RDMA_READ_REQUEST.value:
            va = int.from_bytes(raw[54:62], "big") - REMOTE_VA
            length = int.from_bytes(raw[66:70], "big")
            n = packets_of(length, self.pmtu.bit_length() - 1)
            if not dup:
                self.expected[qpn] = (psn + n) & 0xFFFFFF
                self.nak_sent[qpn] = False
                self.msn[qpn] = self.msn.get(qpn, 0) + 1
            frames = []
            for k in range(n):
                kind = "only" if n == 1 else ("first" if k == 0 else
                                              "last" if k == n - 1 else "middle")
                chunk = bytes(self.mem[va + k * self.pmtu:va + min(length, (k + 1) * self.pmtu)])
                frames.append(read_response_frame(_RESP[kind], a, b, qpn + 100, qpn,
                                                  (psn + k) & 0xFFFFFF, Syndrome.ACK,
                                                  self.msn[qpn], chunk))
            return self._reply(frames)
        if op in (OpCode.RC_CMP_SWAP.value, OpCode.RC_FETCH_ADD.value):
            va = int.from_bytes(raw[54:62], "big") - REMOTE_VA
            swap_add = int.from_bytes(raw[66:74], "big")
            compare = int.from_bytes(raw[74:82], "big")
            if dup:
                orig = self.saved[(qpn, psn)]
            else:
                orig = int.from_bytes(self.mem[va:va + 8], "little")
                if op == OpCode.RC_FETCH_ADD.value:
                    new = (orig + swap_add) & _MASK64
                else:
                    new = swap_add if orig == compare else orig
                self.mem[va:va + 8] = new.to_bytes(8, "little")
                self.saved[(qpn, psn)] = orig
                self.executed += 1
                self.expected[qpn] = (psn + 1) & 0xFFFFFF
                self.nak_sent[qpn] = False
                self.msn[qpn] = self.msn.get(qpn, 0) + 1
            return self._reply([atomic_ack_frame(a, b, qpn + 100, qpn, psn, Syndrome.ACK,
                                                 self.msn[qpn], orig)])
        # A WRITE frame.
        if not dup:
            self.expected[qpn] = (psn + 1) & 0xFFFFFF
            self.nak_sent[qpn] = False
            if op in (OpCode.RC_RDMA_WRITE_LAST.value, OpCode.RC_RDMA_WRITE_ONLY.value):
                self.msn[qpn] = self.msn.get(qpn, 0) + 1
        if not ack_req:
            return []
        return self._reply([ack_frame(a, b, qpn + 100, qpn, psn, Syndrome.ACK,
                                      self.msn.get(qpn, 0))])


def _local_bytes(host, addr, n):
    """``n`` bytes of the host memory at byte address ``addr``."""
    words = range(addr // 64, (addr + n + 63) // 64 + 1)
    raw = b"".join(host.get(w, 0).to_bytes(64, "little") for w in words)
    return raw[addr % 64:addr % 64 + n]


def check_outcome(out, host, plan, peer):
    """IBTA's outcome: every READ's bytes and every atomic's original value at its local
    address, each atomic executed once at the responder, one successful CQE per WQE
    with its opcode, after the last write of its data."""
    cqes = [(c, unpack(CQE_LAYOUT, w["data"])) for c, w in out["writes"] if w["mark"]]
    assert sorted(q["wr_id"] for _, q in cqes) == sorted(p["wr_id"] for p in plan)
    opcode = dict(write=WqeOpcode.RDMA_WRITE, read=WqeOpcode.RDMA_READ,
                  cas=WqeOpcode.ATOMIC_CMP_AND_SWP, faa=WqeOpcode.ATOMIC_FETCH_AND_ADD)
    atomics = 0
    for p in plan:
        c_cqe, q = next((c, q) for c, q in cqes if q["wr_id"] == p["wr_id"])
        assert q["status"] == CqeStatus.SUCCESS.value
        assert q["opcode"] == opcode[p["kind"]].value
        va = p["raddr"] - REMOTE_VA
        if p["kind"] == "read":
            assert _local_bytes(host, p["laddr"], p["length"]) == \
                peer.initial[va:va + p["length"]]
        elif p["kind"] in ("cas", "faa"):
            atomics += 1
            orig = int.from_bytes(peer.initial[va:va + 8], "little")
            assert int.from_bytes(_local_bytes(host, p["laddr"], 8), "little") == orig
            if p["kind"] == "faa":
                new = (orig + p["swap_add"]) & _MASK64
            else:
                new = p["swap_add"] if orig == p["compare"] else orig
            assert int.from_bytes(peer.mem[va:va + 8], "little") == new
        else:
            continue
        lo, hi = p["laddr"] // 64, (p["laddr"] + max(p["length"], 1) - 1) // 64
        last_data = max(c for c, w in out["writes"] if lo <= w["addr"] <= hi)
        assert last_data < c_cqe, f"the CQE of {p} before its data"
    assert peer.executed == atomics


@pytest.mark.slow_variants("lost_response", reason=(
    "a second elaboration of the requester with reads (about 15 s); the loss is "
    "co-simulated by test_cosim_rdma_posted_read.py and modelled by "
    "test_rdma_system_model.py's posted_reads case"))
@pytest.mark.parametrize("case", ["mixed", "lost_response"])
def test_requester_reads_match_model(case):
    pmtu_log2 = 8
    ops = [("write", 128), ("read", 600), ("faa", 8), ("read", 64), ("cas", 8),
           ("write", 300), ("read", 256), ("faa", 8), ("read", 1)]
    lose = ()
    if case == "lost_response":
        lose = (4,)       # the second response of the 600-byte READ (replies 2 to 4)
    cfg = Cfg(timeout=3000)
    mem, mmio, plan = scenario(3, 2, ops, pmtu_log2)
    peer = ReadPeer(5, pmtu_log2, lose)
    # (Every CQE is written by cycle 250 in both cases; the rest would be idle cycles.)
    out, host, _ = run_lockstep(cfg, mem, mmio, 600 if lose else 400, peer, reads=4)
    check_outcome(out, host, plan, peer)
    reads = sum(packets_of(p["length"], pmtu_log2) for p in plan if p["kind"] == "read")
    # Every READ and atomic went out as a request frame (once, or again after the loss),
    # none lost at the output mux: the frame sender's READ counters, RTL = twin above.
    requests = sum(p["kind"] != "write" for p in plan)
    c = out["counters"]
    assert c["read_lost_frames"] == 0 and c["read_req_unframed"] == 0
    assert c["read_req_frames"] >= requests if lose else c["read_req_frames"] == requests
    if lose:
        assert out["counters"]["read_gaps"] >= 1
        assert out["counters"]["read_responses"] > reads - 1
    else:
        assert out["counters"]["read_responses"] == reads + 3


def test_requester_reads_bad_parameter():
    with pytest.raises(ValueError, match="reads"):
        Requester(reads=65)
    with pytest.raises(ValueError, match="reads"):
        Requester(reads=4, header="scaleup")
