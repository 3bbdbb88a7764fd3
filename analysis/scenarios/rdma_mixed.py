"""A mixed chunk of RDMA WRITEs, READs and atomics posted to node A's requester (a top
with ``reads`` and ``read_words``), for ``make soak --mix`` (tb/soak/rdma.py).

Each operation is signalled and has bytes of its own, so that its outcome follows from
the posted work requests and node B's initial memory alone (IBTA Vol 1 9.4.5 for the
atomics), whatever order the QPs' operations run in:

- a WRITE targets its own bytes of MR 3 (remote write only);
- a READ reads bytes of the first half of MR 2 (remote read and atomic, random initial
  words), which nothing writes during the chunk: it must return the initial bytes. Its
  address is a multiple of 64, as every RETH address the responder accepts (its access
  check, docs/rdma.md);
- an atomic (FETCH & ADD or COMPARE & SWAP in turn, a COMPARE & SWAP's operand equal to
  the remote value every other time, so that half of them swap) works on its own 8
  bytes of the second half of MR 2: its original value is the initial one.

The verbs carry ``mix_ops`` (``[(op, wr_id, qpn_a, index)]`` in posting order; ``index``
into :attr:`~pymodel.rdma.verbs.Verbs.posted` for a write, into ``ops`` otherwise),
``expect_local`` and ``expect_image`` as :func:`~analysis.scenarios.rdma_read.
posted_reads_scenario`'s (the READs' and atomics' answers, MR 2 after each atomic ran
once) and ``write_mr`` (``(byte address, bytes)``: MR 3 after each WRITE landed once).
"""

import random

from analysis.scenarios.mix import OPS, op_sequence, seeded
from pymodel.rdma.verbs import Verbs, cq_log2_for
from spec.formats.roce import HOST_WORD_BYTES, PSN_BITS, WqeOpcode
from spec.rdma_engine import HOST_DEPTH

__all__ = ["mixed_scenario", "READ_SIZES"]

#: READ lengths: one byte, a word, a word and a byte, and around a 1 KiB path MTU (the
#: soak's WRITE sizes span the same).
READ_SIZES = (1, 64, 65, 300, 1024, 1025, 2048)
#: Bytes of MR 2's READ half (its atomic half holds one 8-byte word per atomic).
READ_SPAN = 8192
_M64 = (1 << 64) - 1


def mixed_scenario(messages, weights, sizes, qps, pmtu_log2=10, seed=1, depth=HOST_DEPTH,
                   mr_entries=16, qpc_words=None):
    """``messages`` operations shared by ``weights`` (``(W, R, A)``,
    :func:`analysis.scenarios.mix.counts`), round robin over ``qps`` QPs, WRITE sizes
    cycling ``sizes``. Returns the :class:`Verbs` (see the module)."""
    if not isinstance(messages, int) or messages < 1:
        raise ValueError(f"messages must be an integer of 1 or more, not {messages!r}")
    if not isinstance(qps, int) or not 1 <= qps <= messages:
        raise ValueError(f"qps must be 1 to messages ({messages}), not {qps!r}")
    rng = random.Random(seed)
    seq = op_sequence(weights, messages, seeded(seed, 0))
    per_qp = -(-messages // qps)
    v = Verbs(depth=depth, mr_entries=mr_entries, cq_log2=cq_log2_for(messages),
              qpc_words=qpc_words)
    slots = min(4096, v.max_qps)
    psn_mask = (1 << PSN_BITS) - 1
    pairs = [v.create_qp(q + 1, (q * 7 + 3) % slots, sq_log2=max(0, (per_qp - 1).bit_length()),
                         pmtu_log2=pmtu_log2, psn_a=(q * 977) & psn_mask,
                         psn_b=(q * 977) & psn_mask)
             for q in range(qps)]
    n_write = seq.count("write")
    n_atomic = seq.count("atomic")
    total = sum(-(-sizes[j % len(sizes)] // 64) * 64 for j in range(n_write))
    waddr, wkey = v.reg_mr(max(total, 64), index=3)
    span = READ_SPAN + HOST_WORD_BYTES * max(1, -(-8 * n_atomic // HOST_WORD_BYTES))
    raddr, rkey = v.reg_mr(span, index=2, remote_write=False, remote_read=True,
                           remote_atomic=True)
    first = raddr // HOST_WORD_BYTES
    for k in range(span // HOST_WORD_BYTES):
        v.mem_b[first + k] = rng.getrandbits(8 * HOST_WORD_BYTES)
    image = bytearray(b"".join(v.mem_b[first + k].to_bytes(HOST_WORD_BYTES, "little")
                               for k in range(span // HOST_WORD_BYTES)))
    written = bytearray(max(total, 64))
    expect_local, mix_ops = {}, []
    cursor = waddr
    n_w = n_a = 0
    for j, op in enumerate(seq):
        qp = pairs[j % qps]
        wr_id = 0x2000_0000 + j
        if op == "write":
            n = sizes[n_w % len(sizes)]
            payload = rng.randbytes(n)
            v.post_write(qp, payload, cursor, wkey, wr_id=wr_id)
            written[cursor - waddr:cursor - waddr + n] = payload
            mix_ops.append((op, wr_id, qp.qpn_a, len(v.posted) - 1))
            cursor += -(-n // 64) * 64
            n_w += 1
            continue
        if op == "read":
            length = rng.choice(READ_SIZES)
            offset = 64 * rng.randrange(0, (READ_SPAN - length) // 64 + 1)
            laddr = v.post_read(qp, length, raddr + offset, rkey, wr_id=wr_id)
            expect_local[laddr] = bytes(image[offset:offset + length])
        else:
            offset = READ_SPAN + 8 * n_a
            orig = int.from_bytes(image[offset:offset + 8], "little")
            operand = rng.getrandbits(64)
            cas = n_a % 2 == 1
            compare = orig if n_a % 4 == 1 else orig ^ 1
            code = WqeOpcode.ATOMIC_CMP_AND_SWP if cas else WqeOpcode.ATOMIC_FETCH_AND_ADD
            laddr = v.post_atomic(qp, code, raddr + offset, rkey, operand, compare,
                                  wr_id=wr_id)
            expect_local[laddr] = orig.to_bytes(8, "little")
            new = (operand if orig == compare else orig) if cas else (orig + operand) & _M64
            image[offset:offset + 8] = new.to_bytes(8, "little")
            n_a += 1
        mix_ops.append((op, wr_id, qp.qpn_a, len(v.ops) - 1))
    for qp in pairs:
        v.ring(qp)
    assert [op for op, *_ in mix_ops] == seq and set(seq) <= set(OPS)
    v.mix_ops = mix_ops
    v.expect_local = expect_local
    v.expect_image = (raddr, bytes(image))
    v.write_mr = (waddr, bytes(written))
    return v
