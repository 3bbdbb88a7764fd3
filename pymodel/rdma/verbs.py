"""A host-driver model of the RDMA engine, like a small verbs library.

It never touches the simulator cycle by cycle: ``create_qp``, ``reg_mr`` and
``post_write`` build the host-memory images (QP contexts, send queues with their WQEs
and inline data, payload buffers, the CQ) and the MR table; ``ring`` (a doorbell) and
``blueflame`` (a WQE written by MMIO, which rings for it) append the host's MMIO writes,
as the words the host interface's ``mmio_in`` takes, each write with the cycle from
which the host may issue it. ``poll_cq`` reads CQEs out of a dumped memory image. The
testbench loads the images and the MMIO player in bulk before reset; the golden model
takes them as they are.
"""

import dataclasses

from pymodel.fields import pack, unpack
from spec.formats.roce import (
    CQE_LAYOUT,
    HOST_WORD_BYTES,
    MR_LAYOUT,
    MR_LAYOUT_RA,
    QPC_BYTES_DEFAULT,
    QPC_DYNAMIC_MASK,
    QPC_LAYOUT,
    WQE_ACK_REQ,
    WQE_INLINE,
    WQE_LAYOUT,
    WQE_SIGNALLED,
    QpState,
    WqeOpcode,
    qpc_image,
)
from spec.formats.roce import qpc_words as qpc_words_of
from spec.rdma import DOORBELL_BYTES
from spec.rdma_engine import (
    BLUEFLAME_OFFSET,
    DOORBELL_OFFSET,
    HOST_DEPTH,
    MAX_INLINE_WORDS,
    MODIFY_QP_OFFSET,
)
from spec.rdma_responder import mr_table_base
from spec.rdma_stages import DOORBELL_LAYOUT, SQ_INDEX_BITS

__all__ = ["Verbs", "QpPair", "QPC_WORDS_DEFAULT", "table_qps", "Message", "MAC_A", "MAC_B", "IP_A",
           "IP_B", "MIN_CQ_LOG2", "cq_log2_for", "inline_limit", "mr_table_in_host"]

#: Low bits of an rkey that index the MR table (the responder takes the low
#: log2(mr_entries) bits, and its table holds at most 256 entries:
#: :class:`rtl.rdma.resp.responder.Responder`); the key's tag sits above them.
_MR_INDEX_BITS = 8

#: log2 of the CQEs of the smallest CQ a scenario makes (1,024).
MIN_CQ_LOG2 = 10


def mr_table_in_host(mem, mr_table, depth):
    """Host image ``mem`` (``{word: int}``) of a responder whose MR table is in host memory:
    with the MR table ``mr_table`` (``MR_LAYOUT`` integers, its length the table's
    entries) in its last words (:func:`spec.rdma_responder.mr_table_base`). A new dict;
    ``ValueError`` if a word of ``mem`` or the bytes of a valid MR lie in the table (a
    WRITE there would change an MR the cache may hold)."""
    base = mr_table_base(depth, len(mr_table))
    taken = sorted(w for w in mem if w >= base)
    if taken:
        raise ValueError(f"MR table in host memory: host words {taken[:4]} hold data where "
                         f"the MR table goes (words {base} to {depth - 1})")
    for k, value in enumerate(mr_table):
        mr = unpack(MR_LAYOUT, value)
        if mr["valid"] and mr["base"] + mr["length"] > base * _W:
            raise ValueError(f"MR table in host memory: MR {k} (bytes {mr['base']:#x} + "
                             f"{mr['length']}) reaches into the MR table at word {base}")
    return {**mem, **{base + k: v for k, v in enumerate(mr_table) if v}}


def cq_log2_for(cqes):
    """log2 of the smallest CQ (at least ``2**MIN_CQ_LOG2`` entries) that holds ``cqes``
    CQEs without wrapping: the co-simulation polls the CQ only after the run."""
    return max(MIN_CQ_LOG2, (cqes - 1).bit_length())

def inline_limit(stride_log2=None):
    """Most payload bytes a WQE carries inline (:data:`spec.rdma_engine.MAX_INLINE_WORDS`
    words after the WQE's own word) in a send queue of ``2**stride_log2``-word slots
    (None: slots as large as a WQE gets, where only that limit counts)."""
    words = MAX_INLINE_WORDS
    if stride_log2 is not None:
        words = min(words, (1 << stride_log2) - 1)
    return words * HOST_WORD_BYTES


MAC_A, MAC_B = 0x02_00_00_00_00_0A, 0x02_00_00_00_00_0B
IP_A, IP_B = 0x0A_00_00_01, 0x0A_00_00_02
_W = HOST_WORD_BYTES


@dataclasses.dataclass
class QpPair:
    """A connected pair: ``qpn_a`` on the requester node, ``qpn_b`` on the responder."""
    qpn_a: int
    qpn_b: int
    sq_base: int
    sq_log2: int
    stride_log2: int
    tail: int = 0
    pending: list = dataclasses.field(default_factory=list)   # messages not yet rung


@dataclasses.dataclass
class Message:
    """One posted WRITE: its QP, send-queue index, flags, and the MMIO write (index in
    :attr:`Verbs.writes`) that announced it to the engine."""
    qpn: int
    sq_index: int
    length: int
    raddr: int
    signalled: bool
    inline: bool
    announce: int = -1


def table_qps(max_qps, depth, qpc_words):
    """Contexts of the table of :class:`Verbs`: ``max_qps``, at most half of ``depth``
    words of ``qpc_words`` each (the rest for send queues, the CQ and buffers)."""
    return min(max_qps, max(1, depth // (2 * qpc_words)))


#: Host words of a QP context by default (:data:`spec.formats.roce.QPC_BYTES_DEFAULT`).
QPC_WORDS_DEFAULT = QPC_BYTES_DEFAULT // HOST_WORD_BYTES


class Verbs:
    """Both nodes' host images for one scenario (requester A, responder B).

    Parameters
    ----------
    depth : int
        Host-memory words of each node.
    mr_entries : int
        Entries of node B's MR table.
    max_qps : int
        QP numbers below this have a context slot (the table starts at word 0), at most
        as many as fill half of the host memory (:func:`table_qps`).
    qpc_words : int
        Host words of one context (``qpc_bytes // 64``, the engines' ``qpc_log2`` port):
        QP ``q``'s context is at ``q * qpc_words``, laid out by
        :func:`spec.formats.roce.qpc_image` (dynamic word, static word, reserved words).
    cq_log2 : int
        The CQ holds ``2**cq_log2`` CQEs.
    """

    def __init__(self, depth=HOST_DEPTH, mr_entries=16, max_qps=4096,
                 cq_log2=MIN_CQ_LOG2, qpc_words=None):
        qpc_words = QPC_WORDS_DEFAULT if qpc_words is None else qpc_words
        self.depth, self.mr_entries, self.cq_log2 = depth, mr_entries, cq_log2
        self.qpc_words = qpc_words_of(HOST_WORD_BYTES * qpc_words, "Verbs")
        self.qpc_base_a = self.qpc_base_b = 0
        self.mem_a, self.mem_b = {}, {}
        self.max_qps = table_qps(max_qps, depth, qpc_words)
        self._next_a = self._next_b = self.max_qps * qpc_words
        self.cq_base = self._alloc_a(1 << cq_log2)
        self.mr_table = [0] * mr_entries
        self.writes = []             # MMIO writes: (release cycle, [words])
        self.qps = {}
        self.messages = []           # every WRITE posted, in posting order
        self.posted = []             # (raddr, payload) of every WRITE posted, in order
        self.ops = []                # every READ and atomic posted (post_read, post_atomic)
        self.mrs = []                # (base byte address, bytes) of every MR registered
        self.cq_next = 0

    def _alloc_a(self, words):
        base, self._next_a = self._next_a, self._next_a + words
        if self._next_a > self.depth:
            raise ValueError(f"host memory A of {self.depth} words is full")
        return base

    def _alloc_b(self, words):
        base, self._next_b = self._next_b, self._next_b + words
        if self._next_b > self.depth:
            raise ValueError(f"host memory B of {self.depth} words is full")
        return base

    def create_qp(self, qpn_a, qpn_b, sq_log2=0, pmtu_log2=12, psn_a=0, psn_b=0,
                  stride_log2=0, state_b=QpState.RTS):
        """Create and connect QP ``qpn_a`` (node A) to ``qpn_b`` (node B), both RTS (or
        node B's in ``state_b``); its send queue has ``2**sq_log2`` slots of
        ``2**stride_log2`` words."""
        sq_base = self._alloc_a((1 << sq_log2) << stride_log2)
        self.put_context(self.mem_a, self.qpc_base_a, qpn_a, pack(
            QPC_LAYOUT, valid=1, state=QpState.RTS.value, pmtu_log2=pmtu_log2,
            dest_qp=qpn_b, next_psn=psn_a,
            sq_size_log2=sq_log2, sq_stride_log2=stride_log2, sq_base=sq_base, dmac=MAC_B,
            smac=MAC_A, dip=IP_B, sip=IP_A))
        self.put_context(self.mem_b, self.qpc_base_b, qpn_b, pack(
            QPC_LAYOUT, valid=1, state=QpState(state_b).value, pmtu_log2=pmtu_log2,
            dest_qp=qpn_a, expected_psn=psn_b,
            dmac=MAC_A, smac=MAC_B, dip=IP_A, sip=IP_B))
        qp = self.qps[qpn_a] = QpPair(qpn_a, qpn_b, sq_base, sq_log2, stride_log2)
        return qp

    def check_qps(self, qps):
        """``ValueError`` naming ``qps`` and ``qpc_bytes`` unless the context table holds
        ``qps`` contexts."""
        if qps > self.max_qps:
            size = HOST_WORD_BYTES * self.qpc_words
            raise ValueError(f"qps {qps} and qpc_bytes {size}: the context table holds "
                             f"{self.max_qps} contexts of {size} bytes (half of the "
                             f"{self.depth} host words); use at most {self.max_qps} QPs "
                             f"or a smaller qpc_bytes")

    def put_context(self, mem, base, qpn, word):
        """Write QP ``qpn``'s context (its fields as the integer ``word``) into the host
        image ``mem`` of a table at ``base``: ``qpc_words`` words at ``base + qpn *
        qpc_words`` (:func:`spec.formats.roce.qpc_image`). ``ValueError`` if ``qpn`` has
        no slot in the table."""
        if not 0 <= qpn < self.max_qps:
            raise ValueError(f"QPN {qpn} has no context slot: the table holds "
                             f"{self.max_qps} contexts of {HOST_WORD_BYTES * self.qpc_words}"
                             f" bytes (qpc_bytes) in half of {self.depth} words")
        for k, w in enumerate(qpc_image(word, self.qpc_words)):
            mem[base + qpn * self.qpc_words + k] = w

    def context(self, mem, base, qpn):
        """The fields of QP ``qpn``'s context in ``mem`` (a dict): the static word's
        static fields and the dynamic word's dynamic fields."""
        at = base + qpn * self.qpc_words
        dyn = mem.get(at, 0)
        static = mem.get(at + min(1, self.qpc_words - 1), 0)
        return unpack(QPC_LAYOUT, (dyn & QPC_DYNAMIC_MASK) | (static & ~QPC_DYNAMIC_MASK))

    def reg_mr(self, nbytes, index, remote_write=True, key_tag=0xA5, base=None,
               remote_read=False, remote_atomic=False):
        """Register a buffer of ``nbytes`` on node B; returns ``(byte address, rkey)``.
        ``base``: the byte address of a buffer registered before, for a second MR over
        it (nothing is allocated); ``remote_read``, ``remote_atomic``: RDMA READ and the
        atomics allowed (``IBV_ACCESS_REMOTE_READ``, ``IBV_ACCESS_REMOTE_ATOMIC``)."""
        if base is None:
            base = self._alloc_b(-(-nbytes // _W)) * _W
            self.mrs.append((base, nbytes))
        rkey = key_tag << _MR_INDEX_BITS | index
        self.mr_table[index % self.mr_entries] = pack(
            MR_LAYOUT_RA, valid=1, remote_write=int(remote_write), key=rkey, base=base,
            length=nbytes, remote_read=int(remote_read), remote_atomic=int(remote_atomic))
        return base, rkey

    def post_write(self, qp, payload, raddr, rkey, wr_id, signalled=True, inline=False,
                   ack_req=False):
        """Post an RDMA WRITE of ``payload``: copied into a fresh local buffer, or carried
        in the WQE itself (``inline``: at most ``MAX_INLINE_WORDS`` words, and the send
        queue's slots must hold them). ``ack_req``: the WQE asks for an ACK whatever the
        engine's coalescing says (``WQE_ACK_REQ``). Returns the :class:`Message`."""
        words = -(-len(payload) // _W)
        padded = payload + bytes(_W * words - len(payload))
        data = [int.from_bytes(padded[_W * k:_W * k + _W], "little") for k in range(words)]
        if inline:
            most = inline_limit(qp.stride_log2)
            if len(payload) > most:
                raise ValueError(f"inline payload of {len(payload)} bytes is over the {most} "
                                 f"bytes a WQE carries inline (a {_W << qp.stride_log2}-byte "
                                 f"send-queue slot: the WQE's own word, then at most "
                                 f"{most // _W} payload words)")
            laddr = 0
        else:
            laddr = self._alloc_a(words) * _W
            for k, word in enumerate(data):
                self.mem_a[laddr // _W + k] = word
        flags = ((WQE_SIGNALLED if signalled else 0) | (WQE_INLINE if inline else 0)
                 | (WQE_ACK_REQ if ack_req else 0))
        slot = (qp.tail & ((1 << qp.sq_log2) - 1)) << qp.stride_log2
        wqe = [pack(WQE_LAYOUT, wr_id=wr_id, opcode=WqeOpcode.RDMA_WRITE, flags=flags,
                    sq_index=qp.tail, length=len(payload), laddr=laddr, raddr=raddr,
                    rkey=rkey, qpn=qp.qpn_a)] + (data if inline else [])
        for k, word in enumerate(wqe):
            self.mem_a[qp.sq_base + slot + k] = word
        msg = Message(qp.qpn_a, qp.tail, len(payload), raddr, signalled, inline)
        msg.wqe = wqe
        qp.tail = (qp.tail + 1) % (1 << SQ_INDEX_BITS)
        qp.pending.append(msg)
        self.messages.append(msg)
        self.posted.append((raddr, bytes(payload)))
        return msg

    def post_read(self, qp, length, raddr, rkey, wr_id):
        """Post an RDMA READ of ``length`` bytes at ``raddr`` into a fresh local buffer
        (signalled; ``IBV_WR_RDMA_READ``). Returns the local byte address; the operation
        is kept in :attr:`ops` as ``("read", laddr, length, raddr, wr_id)``."""
        laddr = self._alloc_a(max(1, -(-length // _W))) * _W
        self._post_op(qp, WqeOpcode.RDMA_READ, length, laddr, raddr, rkey, wr_id)
        self.ops.append(("read", laddr, length, raddr, wr_id))
        return laddr

    def post_atomic(self, qp, opcode, raddr, rkey, swap_add, compare, wr_id):
        """Post a COMPARE & SWAP or FETCH & ADD (``opcode``, a :class:`WqeOpcode`) on the
        8 bytes at ``raddr``, its original value into a fresh local word (signalled).
        Returns the local byte address; kept in :attr:`ops` as ``(kind, laddr, 8, raddr,
        wr_id, swap_add, compare)``, kind ``"cas"`` or ``"faa"``."""
        laddr = self._alloc_a(1) * _W
        self._post_op(qp, opcode, 8, laddr, raddr, rkey, wr_id, swap_add, compare)
        kind = "cas" if opcode == WqeOpcode.ATOMIC_CMP_AND_SWP else "faa"
        self.ops.append((kind, laddr, 8, raddr, wr_id, swap_add, compare))
        return laddr

    def _post_op(self, qp, opcode, length, laddr, raddr, rkey, wr_id, swap_add=0,
                 compare=0):
        slot = (qp.tail & ((1 << qp.sq_log2) - 1)) << qp.stride_log2
        self.mem_a[qp.sq_base + slot] = pack(
            WQE_LAYOUT, wr_id=wr_id, opcode=opcode, flags=WQE_SIGNALLED, sq_index=qp.tail,
            length=length, laddr=laddr, raddr=raddr, rkey=rkey, qpn=qp.qpn_a,
            swap_add=swap_add, compare=compare)
        qp.tail = (qp.tail + 1) % (1 << SQ_INDEX_BITS)

    def ring(self, qp, release=0):
        """The doorbell (an 8-byte MMIO write): the send queue's new tail. It announces
        the QP's messages posted since its last doorbell."""
        word = dict(addr=DOORBELL_OFFSET, nbytes=DOORBELL_BYTES,
                    data=pack(DOORBELL_LAYOUT, qpn=qp.qpn_a, sq_tail=qp.tail), first=1,
                    last=1)
        self._announce(qp, release, [word])

    def blueflame(self, qp, release=0):
        """Write the QP's last posted WQE by MMIO (header and inline words), which rings
        for it; exactly one message may be pending."""
        if len(qp.pending) != 1:
            raise ValueError(f"a WQE by MMIO announces one message; QP {qp.qpn_a} has "
                             f"{len(qp.pending)} pending")
        wqe = qp.pending[0].wqe
        words = [dict(addr=BLUEFLAME_OFFSET, nbytes=_W * len(wqe), data=w, first=int(k == 0),
                      last=int(k == len(wqe) - 1)) for k, w in enumerate(wqe)]
        self._announce(qp, release, words)

    def modify_qp_rts(self, qp, release=0):
        """Move QP ``qp`` (node A) back to RTS, an 8-byte MMIO write of its QPN at
        :data:`~spec.rdma_engine.MODIFY_QP_OFFSET` (``ibv_modify_qp`` to
        ``IBV_QPS_RTS``): in order with its doorbells, it keeps its PSNs and send-queue
        indices. Messages posted and not rung yet stay pending."""
        self.writes.append((release, [dict(addr=MODIFY_QP_OFFSET, nbytes=DOORBELL_BYTES,
                                           data=qp.qpn_a, first=1, last=1)]))

    def _announce(self, qp, release, words):
        for msg in qp.pending:
            msg.announce = len(self.writes)
        qp.pending = []
        self.writes.append((release, words))

    def mmio_items(self):
        """The MMIO player's items and release cycles: every word of every write, the
        later words of a write released at once (a write is never paused)."""
        items, release = [], []
        for rel, words in self.writes:
            for k, w in enumerate(words):
                items.append(w)
                release.append(rel if k == 0 else 0)
        return items, release

    def write_starts(self):
        """The index among the MMIO player's words (:meth:`mmio_items`) of each MMIO
        write's first word: a message's accept stamp is
        ``stamps[write_starts()[message.announce]]``."""
        starts, pos = [], 0
        for _, words in self.writes:
            starts.append(pos)
            pos += len(words)
        return starts

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

    def poll_cq(self, mem_a_words, count):
        """The next ``count`` CQEs whose owner bit says they are new (as dicts)."""
        out = []
        size = 1 << self.cq_log2
        for _ in range(count):
            word = mem_a_words.get(self.cq_base + self.cq_next % size, 0)
            cqe = unpack(CQE_LAYOUT, word)
            if cqe["owner"] != 1 ^ ((self.cq_next // size) & 1):
                break
            out.append(cqe)
            self.cq_next += 1
        return out
