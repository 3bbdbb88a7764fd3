"""A host-driver model of the RDMA engine, like a small verbs library.

It never touches the simulator cycle by cycle: ``create_qp``, ``reg_mr`` and
``post_write`` build the host-memory images (QP contexts, send queues, payload
buffers, the CQ) and the MR table, ``ring`` queues a doorbell write for the doorbell
player, and ``poll_cq`` reads CQEs out of a dumped memory image. The testbench loads the
images in bulk before reset (:func:`tb.harness.load_image`); the golden model takes
them as they are.
"""

import dataclasses

from pymodel.rdma.engine import Config
from pymodel.rdma.fields import pack, unpack
from spec.formats.roce import CQE_LAYOUT, MR_LAYOUT, QPC_LAYOUT, WQE_LAYOUT, WqeOpcode

__all__ = ["Verbs", "QpPair", "MAC_A", "MAC_B", "IP_A", "IP_B"]

MAC_A, MAC_B = 0x02_00_00_00_00_0A, 0x02_00_00_00_00_0B
IP_A, IP_B = 0x0A_00_00_01, 0x0A_00_00_02


@dataclasses.dataclass
class QpPair:
    """A connected pair: ``qpn_a`` on the requester node, ``qpn_b`` on the responder."""
    qpn_a: int
    qpn_b: int
    sq_base: int
    sq_log2: int
    tail: int = 0


class _Heap:
    """A bump allocator of 64-byte words in one host memory."""

    def __init__(self, start, depth):
        self.next, self.depth = start, depth

    def alloc(self, words):
        base = self.next
        self.next += words
        if self.next > self.depth:
            raise ValueError(f"host memory of {self.depth} words is full")
        return base


class Verbs:
    """Both nodes' host images for one scenario (requester A, responder B)."""

    def __init__(self, cfg: Config, max_qps=4096, cq_log2=10):
        self.cfg = cfg
        cfg.qpc_base_a = cfg.qpc_base_b = 0
        self.mem_a, self.mem_b = {}, {}
        self.heap_a = _Heap(max_qps, cfg.depth)
        self.heap_b = _Heap(max_qps, cfg.depth)
        cfg.cq_log2 = cq_log2
        cfg.cq_base = self.heap_a.alloc(1 << cq_log2)
        self.mr_table = [0] * cfg.mr_entries
        self.doorbells = []
        self.qps = {}
        self.cq_next = 0
        self.posted = []             # (raddr, payload) of every WRITE posted, in order
        self.mrs = []                # (base byte address, bytes) of every MR registered

    def create_qp(self, qpn_a, qpn_b, sq_log2=0, pmtu_log2=12, psn_a=0, psn_b=0):
        """Create and connect QP ``qpn_a`` (node A) to ``qpn_b`` (node B), both RTS."""
        sq_base = self.heap_a.alloc(1 << sq_log2)
        self.mem_a[self.cfg.qpc_base_a + qpn_a] = pack(
            QPC_LAYOUT, valid=1, pmtu_log2=pmtu_log2, dest_qp=qpn_b, next_psn=psn_a,
            sq_size_log2=sq_log2, sq_base=sq_base, dmac=MAC_B, smac=MAC_A, dip=IP_B,
            sip=IP_A)
        self.mem_b[self.cfg.qpc_base_b + qpn_b] = pack(
            QPC_LAYOUT, valid=1, pmtu_log2=pmtu_log2, dest_qp=qpn_a, expected_psn=psn_b,
            dmac=MAC_A, smac=MAC_B, dip=IP_A, sip=IP_B)
        qp = self.qps[qpn_a] = QpPair(qpn_a, qpn_b, sq_base, sq_log2)
        return qp

    def reg_mr(self, nbytes, index, remote_write=True, key_tag=0xA5):
        """Register a buffer of ``nbytes`` on node B; returns ``(byte address, rkey)``."""
        base = self.heap_b.alloc(-(-nbytes // 64)) * 64
        self.mrs.append((base, nbytes))
        rkey = key_tag << 8 | index
        self.mr_table[index % self.cfg.mr_entries] = pack(
            MR_LAYOUT, valid=1, remote_write=int(remote_write), key=rkey, base=base,
            length=nbytes)
        return base, rkey

    def post_write(self, qp, payload, raddr, rkey, wr_id):
        """Copy ``payload`` into a fresh local buffer and post an RDMA WRITE WQE."""
        words = -(-len(payload) // 64)
        laddr = self.heap_a.alloc(words) * 64
        padded = payload + bytes(64 * words - len(payload))
        for k in range(words):
            self.mem_a[laddr // 64 + k] = int.from_bytes(padded[64 * k:64 * k + 64], "little")
        slot = qp.tail & ((1 << qp.sq_log2) - 1)
        self.mem_a[qp.sq_base + slot] = pack(
            WQE_LAYOUT, wr_id=wr_id, opcode=WqeOpcode.RDMA_WRITE, length=len(payload),
            laddr=laddr, raddr=raddr, rkey=rkey)
        qp.tail = (qp.tail + 1) & 0xFFFF
        self.posted.append((raddr, bytes(payload)))

    def expected_mr_bytes(self, landed=None):
        """``{MR base: bytes}``: what node B's registered buffers must hold once every
        posted WRITE (or those whose indices are in ``landed``) has landed exactly once,
        zeros elsewhere. Built from the posted work requests only, not from the engine
        model."""
        out = {}
        for base, nbytes in self.mrs:
            buf = bytearray(nbytes)
            for k, (raddr, payload) in enumerate(self.posted):
                if landed is not None and k not in landed:
                    continue
                if base <= raddr and raddr + len(payload) <= base + nbytes:
                    buf[raddr - base:raddr - base + len(payload)] = payload
            out[base] = bytes(buf)
        return out

    def ring(self, qp):
        """The MMIO doorbell write: the send queue's new tail."""
        self.doorbells.append((qp.qpn_a, qp.tail))

    def poll_cq(self, mem_a_words, count):
        """The next ``count`` CQEs whose owner bit says they are new (as dicts)."""
        out = []
        for _ in range(count):
            size = 1 << self.cfg.cq_log2
            word = mem_a_words.get(self.cfg.cq_base + self.cq_next % size, 0)
            cqe = unpack(CQE_LAYOUT, word)
            if cqe["owner"] != 1 ^ ((self.cq_next // size) & 1):
                break
            out.append(cqe)
            self.cq_next += 1
        return out
