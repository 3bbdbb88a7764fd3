"""Scenarios of RDMA READ requests at node B's responder (the top's ``read_words``)."""

import random

from pymodel.rdma.frames import Endpoint, write_frame
from pymodel.rdma.read_frames import (
    atomic_ack_frame,
    atomic_request_frame,
    read_request_frame,
    read_response_frame,
)
from pymodel.rdma.verbs import IP_A, IP_B, MAC_A, MAC_B, Verbs
from spec.formats.roce import HOST_WORD_BYTES, OpCode, WqeOpcode
from spec.rdma_engine import HOST_DEPTH

__all__ = ["read_requests_scenario", "posted_reads_scenario", "read_point_scenario"]


def read_requests_scenario(seed=5, depth=HOST_DEPTH, mr_entries=16, qpc_words=None):
    """RDMA READ requests (and WRITEs) played straight onto the A->B link, for a
    responder with ``read_words``: returns ``(verbs, frames, reasons)``, the responder
    counter each frame is expected under. ``verbs.expect_responses`` holds the READ
    RESPONSE frames node B must send, in order, derived here from the requests, node B's
    memory and the path MTU as IBTA Vol 1 prescribes (table 38, 9.7.4.1.3): the data cut
    at the MTU, PSNs from the request's, ONLY or FIRST/MIDDLE.../LAST, an AETH (ACK,
    the MSN after the READ) on all but MIDDLE. Covered: lengths 0, 1, 128 (ONLY), 600
    at a 256-byte MTU (FIRST, MIDDLE, LAST), a WRITE after a READ at the PSN past its
    responses, a repeated READ (read again, answered with its own PSN), a bad rkey, a
    READ beyond the MR and one of an MR without the remote-read right (NAKed), and a
    last READ over the bytes the WRITE wrote (it must see them).
    Then atomics on one word: FETCH & ADD, then :data:`OTHER_QP_ATOMICS` FETCH & ADDs of
    a second QP on a word of its own, COMPARE & SWAP (equal, then not), the first again
    (its ACK lost: answered from its QP's saved result, not executed again) and a
    misaligned one (NAKed); their ATOMIC ACKNOWLEDGEs are in ``expect_responses`` too.
    ``verbs.expect_reads``: READs the responder must execute (first time or repeated);
    ``verbs.expect_image``: ``(byte address, bytes)`` node B's MR must hold at the end."""
    rng = random.Random(seed)
    v = Verbs(depth=depth, mr_entries=mr_entries, qpc_words=qpc_words)
    v.create_qp(1, 5, psn_a=100, psn_b=100, pmtu_log2=8)
    raddr, rkey = v.reg_mr(2048, index=2, remote_read=True)
    _, atom_key = v.reg_mr(2048, index=3, base=raddr, remote_write=False, remote_atomic=True)
    wo_addr, wo_key = v.reg_mr(256, index=4)               # remote write only
    for k in range(2048 // HOST_WORD_BYTES):
        v.mem_b[raddr // HOST_WORD_BYTES + k] = rng.getrandbits(8 * HOST_WORD_BYTES)
    a, b = Endpoint(MAC_A, IP_A), Endpoint(MAC_B, IP_B)
    first = raddr // HOST_WORD_BYTES
    image = bytearray(b"".join(v.mem_b[first + k].to_bytes(HOST_WORD_BYTES, "little")
                               for k in range(2048 // HOST_WORD_BYTES)))
    frames, reasons, responses = [], [], []
    mtu, msn = 256, 0

    def read(psn, offset, length, key=rkey, va=None):
        return read_request_frame(a, b, 1, 5, psn, raddr + offset if va is None else va,
                                  key, length)

    def answer(psn, offset, length, msn):
        data = image[offset:offset + length]
        n = max(1, -(-length // mtu))
        for k in range(n):
            op = (OpCode.RC_RDMA_READ_RESPONSE_ONLY if n == 1 else
                  OpCode.RC_RDMA_READ_RESPONSE_FIRST if k == 0 else
                  OpCode.RC_RDMA_READ_RESPONSE_LAST if k == n - 1 else
                  OpCode.RC_RDMA_READ_RESPONSE_MIDDLE)
            responses.append(read_response_frame(op, b, a, 5, 1, psn + k, 0x1F, msn,
                                                 data[k * mtu:(k + 1) * mtu]))
        return n

    psn = 100
    for offset, length in ((0, 0), (64, 1), (128, 128), (256, 600)):
        frames.append(read(psn, offset, length))
        reasons.append("frames_ok")
        msn += 1
        psn += answer(psn, offset, length, msn)
    written = rng.randbytes(100)
    frames.append(write_frame(OpCode.RC_RDMA_WRITE_ONLY, a, b, 1, 5, psn, True, written,
                              va=raddr + 1024, rkey=rkey, dma_length=100))
    image[1024:1124] = written
    reasons.append("frames_ok")
    psn, msn = psn + 1, msn + 1
    frames.append(read(103, 256, 600))                 # repeated: PSNs 103..105 again
    reasons.append("duplicates")
    answer(103, 256, 600, msn)
    for bad in (read(psn, 0, 64, key=rkey ^ 0x100), read(psn + 1, 2048 - 64, 128),
                read(psn + 2, 0, 64, key=wo_key, va=wo_addr)):
        frames.append(bad)
        reasons.append("access_nak")
    psn += 3
    frames.append(read(psn, 1024 - 64, 256))           # sees the WRITE's bytes
    reasons.append("frames_ok")
    msn += 1
    answer(psn, 1024 - 64, 256, msn)
    psn += 1
    # Atomics on the word at raddr + 1536 + 8 (IBTA Vol 1 9.4.5): FETCH & ADD, COMPARE
    # & SWAP that swaps, one that does not, the first again (its ACK lost: answered
    # with the saved value, not executed again), a misaligned one (NAK invalid request).
    va = raddr + 1536 + 8
    at = 1536 + 8
    old = int.from_bytes(image[at:at + 8], "little")
    add, swap = rng.getrandbits(64), rng.getrandbits(64)
    first = psn
    for op, operand, compare in ((OpCode.RC_FETCH_ADD, add, 0),
                                 (OpCode.RC_CMP_SWAP, swap, (old + add) % (1 << 64)),
                                 (OpCode.RC_CMP_SWAP, 7, 0)):
        frames.append(atomic_request_frame(op, a, b, 1, 5, psn, va, atom_key, operand,
                                           compare))
        reasons.append("frames_ok")
        msn += 1
        responses.append(atomic_ack_frame(b, a, 5, 1, psn, 0x1F, msn, old))
        old = (old + operand) % (1 << 64) if op == OpCode.RC_FETCH_ADD else (
            operand if old == compare else old)
        psn += 1
        if psn == first + 1:
            _other_qp_atomics(v, a, b, atom_key, raddr, image, frames, reasons, responses)
    frames.append(atomic_request_frame(OpCode.RC_FETCH_ADD, a, b, 1, 5, first, va,
                                       atom_key, add))
    reasons.append("duplicates")
    responses.append(atomic_ack_frame(b, a, 5, 1, first,
                                      0x1F, msn, int.from_bytes(image[at:at + 8], "little")))
    frames.append(atomic_request_frame(OpCode.RC_FETCH_ADD, a, b, 1, 5, psn, va + 4,
                                       atom_key, 1))
    reasons.append("access_nak")
    image[at:at + 8] = old.to_bytes(8, "little")
    v.expect_image = (raddr, bytes(image))
    v.expect_responses = responses
    v.expect_reads = sum(1 for fr, r in zip(frames, reasons, strict=True)
                         if fr[42] == OpCode.RC_RDMA_READ_REQUEST.value and r != "access_nak")
    return v, frames, reasons


#: FETCH & ADDs of a second QP between the first atomic and its repeat: more than the
#: 16 results a QP keeps (:data:`spec.rdma_responder.IRD`), so a responder whose saved
#: results were shared by all QPs would have lost the first one's.
OTHER_QP_ATOMICS = 17


def _other_qp_atomics(v, a, b, key, raddr, image, frames, reasons, responses):
    """:data:`OTHER_QP_ATOMICS` FETCH & ADDs of 1 of QP 2 -> 6 (PSNs from 300) on the word
    at ``raddr + 1600``, each answered with the value before it (IBTA Vol 1 9.4.5)."""
    v.create_qp(2, 6, psn_a=300, psn_b=300, pmtu_log2=8)
    at = 1600
    value = int.from_bytes(image[at:at + 8], "little")
    for k in range(OTHER_QP_ATOMICS):
        frames.append(atomic_request_frame(OpCode.RC_FETCH_ADD, a, b, 2, 6, 300 + k,
                                           raddr + at, key, 1))
        reasons.append("frames_ok")
        responses.append(atomic_ack_frame(b, a, 6, 2, 300 + k, 0x1F, k + 1, value))
        value = (value + 1) % (1 << 64)
    image[at:at + 8] = value.to_bytes(8, "little")


def posted_reads_scenario(seed=6, depth=HOST_DEPTH, mr_entries=16, qpc_words=None):
    """RDMA READs and atomics posted to node A's requester (the top's ``reads``, with
    node B's ``read_words``) on two QPs at a 256-byte MTU: READs of 1, 64, 600 and 256
    bytes, FETCH & ADDs, a COMPARE & SWAP whose compare operand equals the remote value
    (it swaps) and one whose operand does not; each operation on bytes of its own.
    Returns the verbs, with ``expect_local`` (``{local byte address: bytes}``: a READ's
    remote bytes, an atomic's original value, 8 bytes little endian) and
    ``expect_image`` (``(byte address, bytes)``: node B's MR after each atomic executed
    once, IBTA Vol 1 9.4.5: FETCH & ADD adds modulo 2**64, COMPARE & SWAP swaps when
    equal), both derived from node B's initial memory, not from the engine model."""
    rng = random.Random(seed)
    v = Verbs(depth=depth, mr_entries=mr_entries, qpc_words=qpc_words)
    qps = [v.create_qp(1, 5, psn_a=100, psn_b=100, pmtu_log2=8, sq_log2=4),
           v.create_qp(2, 6, psn_a=7, psn_b=7, pmtu_log2=8, sq_log2=4)]
    size = 4096
    raddr, rkey = v.reg_mr(size, index=2, remote_read=True, remote_atomic=True)
    first = raddr // HOST_WORD_BYTES
    for k in range(size // HOST_WORD_BYTES):
        v.mem_b[first + k] = rng.getrandbits(8 * HOST_WORD_BYTES)
    image = bytearray(b"".join(v.mem_b[first + k].to_bytes(HOST_WORD_BYTES, "little")
                               for k in range(size // HOST_WORD_BYTES)))
    expect_local = {}
    mask = (1 << 64) - 1
    ops = (("read", 0, 600), ("faa", 2048, 8), ("read", 1024, 1), ("cas", 2056, 8),
           ("read", 1088, 64), ("cas", 2064, 8), ("faa", 2072, 8), ("read", 1280, 256))
    for k, (kind, offset, length) in enumerate(ops):
        qp = qps[k % 2]
        if kind == "read":
            laddr = v.post_read(qp, length, raddr + offset, rkey, wr_id=0x500 + k)
            expect_local[laddr] = bytes(image[offset:offset + length])
        else:
            orig = int.from_bytes(image[offset:offset + 8], "little")
            swap_add = rng.getrandbits(64)
            compare = orig if (kind == "cas" and offset == 2056) else orig ^ 1
            op = WqeOpcode.ATOMIC_CMP_AND_SWP if kind == "cas" else \
                WqeOpcode.ATOMIC_FETCH_AND_ADD
            laddr = v.post_atomic(qp, op, raddr + offset, rkey, swap_add, compare,
                                  wr_id=0x500 + k)
            expect_local[laddr] = orig.to_bytes(8, "little")
            new = ((orig + swap_add) & mask if kind == "faa"
                   else swap_add if orig == compare else orig)
            image[offset:offset + 8] = new.to_bytes(8, "little")
    for qp in qps:
        v.ring(qp)
    v.expect_local = expect_local
    v.expect_image = (raddr, bytes(image))
    return v


def read_point_scenario(op, msg_bytes, messages, depth=HOST_DEPTH, mr_entries=16,
                        qpc_words=None, seed=7, qps=1):
    """A `make sim` point of READs (``op`` ``"read"``: ``messages`` READs of
    ``msg_bytes`` each, of the same remote bytes, each into a buffer of its own) or
    atomics (``"atomic"``: ``messages`` FETCH & ADDs of one remote word) on one QP at a
    4096-byte MTU, posted at once and announced by one doorbell. With ``qps`` > 1 the
    operations go round robin over QPs 0 to ``qps - 1`` (operation ``k`` on QP ``k %
    qps``, the same QPN at both nodes), one doorbell each after all are posted.
    ``expect_local`` and ``expect_image`` as :func:`posted_reads_scenario`'s (a FETCH &
    ADD returns the sum of the earlier ones' operands over the initial value, IBTA Vol 1
    9.4.5; the operations of different QPs on one word run in the responder's order, so
    with ``qps`` > 1 the atomics' answers are not predicted: ``expect_local`` then holds
    the READs' only)."""
    if op not in ("read", "atomic"):
        raise ValueError(f"op must be 'read' or 'atomic', not {op!r}")
    if not isinstance(qps, int) or isinstance(qps, bool) or not 1 <= qps <= messages:
        raise ValueError(f"qps must be 1 to messages ({messages}), not {qps!r}")
    rng = random.Random(seed)
    v = Verbs(depth=depth, mr_entries=mr_entries, qpc_words=qpc_words)
    sq_log2 = max(1, (-(-messages // qps) - 1).bit_length())
    pairs = [(1, 5)] if qps == 1 else [(k, k) for k in range(qps)]
    all_qps = [v.create_qp(a, b, psn_a=0, psn_b=0, pmtu_log2=12, sq_log2=sq_log2)
               for a, b in pairs]
    size = 64 * max(1, -(-msg_bytes // 64)) if op == "read" else 64
    raddr, rkey = v.reg_mr(size, index=2, remote_read=True, remote_atomic=True)
    for k in range(size // HOST_WORD_BYTES):
        v.mem_b[raddr // HOST_WORD_BYTES + k] = rng.getrandbits(8 * HOST_WORD_BYTES)
    image = bytearray(b"".join(v.mem_b[raddr // HOST_WORD_BYTES + k].to_bytes(
        HOST_WORD_BYTES, "little") for k in range(size // HOST_WORD_BYTES)))
    expect_local = {}
    for k in range(messages):
        qp = all_qps[k % qps]
        if op == "read":
            laddr = v.post_read(qp, msg_bytes, raddr, rkey, wr_id=k)
            expect_local[laddr] = bytes(image[:msg_bytes])
        else:
            orig = int.from_bytes(image[:8], "little")
            add = rng.getrandbits(32)
            laddr = v.post_atomic(qp, WqeOpcode.ATOMIC_FETCH_AND_ADD, raddr, rkey, add, 0,
                                  wr_id=k)
            if qps == 1:
                expect_local[laddr] = orig.to_bytes(8, "little")
            image[:8] = ((orig + add) % (1 << 64)).to_bytes(8, "little")
    for qp in all_qps:
        v.ring(qp)
    v.expect_local = expect_local
    v.expect_image = (raddr, bytes(image))
    return v
