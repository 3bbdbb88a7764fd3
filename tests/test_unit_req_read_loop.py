"""The requester's READ and atomic blocks against the engine's responder (Amaranth
simulator, each block against its twin cycle for cycle): requests framed as
:class:`~rtl.rdma.req.request_framer.RequestFramer` frames them, answered by the
:class:`~rtl.rdma.resp.responder.Responder` (``read_words`` set), the answers taken by
:class:`~rtl.rdma.req.response_intake.ResponseIntake`. What the requester's memory and
the responder's must hold comes from IBTA's rules on the memory the test set up (a READ
returns the bytes at its remote address; FETCH & ADD returns the original value and adds
modulo 2**64, COMPARE & SWAP returns it and swaps when equal; a repeated atomic is not
executed again), not from the code under test. Losses: a READ response lost, so the
requester re-reads from the first PSN missing (a READ of the bytes left from there, IBTA:
the responder answers a repeated READ by reading again); an ATOMIC ACKNOWLEDGE lost, so
the requester asks again after its timeout and the responder answers from its saved
result."""

import random

from pymodel.fields import pack
from pymodel.packet import beats_to_frames, pack_beat
from pymodel.rdma.frames import ack_frame
from pymodel.rdma.req.request_framer import request_frame
from spec.formats.roce import MR_LAYOUT_RA, QPC_LAYOUT, OpCode, Syndrome
from tb.rdma.intake_bench import LEAD, memory, run_intake
from tb.rdma.wirecheck import wire_problems
from tb.resp_bench import run_responder
from tb.resp_frames import A, B

OP = OpCode
QPC_BASE = 16
DATA_BASE = 1 << 12             # the responder's MR, word address
KEY = 0x1234_5601
PMTU = 9
REQ_QP, RESP_QP = 0x77, 3       # the requester's QP and the responder's
LOCAL = 64 * 64                 # the requester's local buffers (byte address)
_U64 = (1 << 64) - 1


def _respondermemory(rng):
    mem = {QPC_BASE + RESP_QP: pack(QPC_LAYOUT, dict(
        valid=1, pmtu_log2=PMTU, dest_qp=REQ_QP, expected_psn=100, msn=7,
        dmac=A.mac, smac=B.mac, dip=A.ip, sip=B.ip))}
    for k in range(64):
        mem[DATA_BASE + k] = rng.getrandbits(512)
    mr = [0] * 16
    mr[1] = pack(MR_LAYOUT_RA, dict(valid=1, remote_write=1, remote_read=1, remote_atomic=1,
                                 key=KEY, base=64 * DATA_BASE, length=64 * 64))
    return mem, mr


def _bytes(mem, va, n):
    return bytes((mem.get((va + k) // 64, 0) >> (8 * ((va + k) % 64))) & 0xFF
                 for k in range(n))


def _u64(mem, va):
    return int.from_bytes(_bytes(mem, va, 8), "little")


def _request(opcode, psn, va, length=0, swap_add=0, compare=0):
    return request_frame(dict(opcode=opcode.value, dmac=B.mac, smac=A.mac, sip=A.ip,
                              dip=B.ip, src_qp=REQ_QP, dest_qp=RESP_QP, psn=psn, ack_req=1,
                              va=va, rkey=KEY, dma_length=length, swap_add=swap_add,
                              compare=compare))


def _answers(requests, mem, mr):
    run = run_responder(requests, mem, mr, qpc_base=QPC_BASE, read_words=64, latency=30)
    frames = beats_to_frames([pack_beat(64, b["data"], b["nbytes"], b["first"], b["last"])
                              for _, b in run.acks], 64)
    assert not [p for _, p in wire_problems(frames) if p]
    return frames, run


def test_reads_and_atomics_through_the_responder_with_losses():
    rng = random.Random(4)
    mem, mr = _respondermemory(rng)
    # Operations: READ 1,300 B (3 packets at 512), READ 100 B, FETCH & ADD, COMPARE &
    # SWAP (equal: swaps), READ 512 B (1 packet).
    va_r1, va_r2, va_r3 = 64 * DATA_BASE, 64 * (DATA_BASE + 30), 64 * (DATA_BASE + 40)
    va_at = 64 * (DATA_BASE + 50) + 24
    add, swap = (1 << 64) - 5, 0x0102030405060708
    v0 = _u64(mem, va_at)
    v1 = (v0 + add) & _U64
    ops = [  # (opcode, psn, va, length, swap_add, compare, local address, packets)
        (OP.RC_RDMA_READ_REQUEST, 100, va_r1, 1300, 0, 0, LOCAL, 3),
        (OP.RC_RDMA_READ_REQUEST, 103, va_r2, 100, 0, 0, LOCAL + 2048, 1),
        (OP.RC_FETCH_ADD, 104, va_at, 0, add, 0, LOCAL + 2304, 1),
        (OP.RC_RDMA_READ_REQUEST, 105, va_r3, 512, 0, 0, LOCAL + 2432, 1),
        (OP.RC_CMP_SWAP, 106, va_at, 0, swap, v1, LOCAL + 3008, 1),
    ]
    requests = [_request(op, psn, va, n, sa, cmp) for op, psn, va, n, sa, cmp, _, _ in ops]
    issues = [dict(atomic=int(op != OP.RC_RDMA_READ_REQUEST), qpn=REQ_QP, psn=psn,
                   pmtu_log2=PMTU, laddr=la, length=n) for op, psn, _, n, _, _, la, _ in ops]
    # The requester's re-requests, as IBTA has them (checked against the intake's
    # below): a READ of the bytes left from PSN 101 (the first missing), the same atomic.
    again = [_request(OP.RC_RDMA_READ_REQUEST, 101, va_r1 + 512, 1300 - 512),
             _request(OP.RC_CMP_SWAP, 106, va_at, 0, swap, v1)]
    all_answers, run = _answers(requests + again, mem, mr)
    answers = all_answers[:sum(o[-1] for o in ops)]
    # Lost: the READ's second response (PSN 101) and the COMPARE & SWAP's ACKNOWLEDGE.
    kept = [f for k, f in enumerate(answers) if k not in (1, len(answers) - 1)]
    fillers = [ack_frame(B, A, RESP_QP, REQ_QP, 99, Syndrome.ACK, 6)] * 60
    probe = run_intake(kept + fillers, issues, timeout=40, push_rate=1.0)
    # The gap asks for the first PSN missing; with nothing answering, the timer asks
    # for the same again (the oldest operation).
    assert probe["rewind"] and all(r == dict(qpn=REQ_QP, psn=101) for r in probe["rewind"])
    assert probe["count"]["timeouts"] == len(probe["rewind"]) - 1 >= 1
    reread, replay = all_answers[len(answers):-1], all_answers[-1]
    assert len(reread) == 2
    res = run_intake(kept[:2] + reread + kept[2:] + fillers + [replay], issues,
                     timeout=40, push_rate=1.0)
    # The gap's re-request, then the atomic's by the timer (its answer lost), once per
    # timeout while no answer comes.
    assert res["rewind"][0] == dict(qpn=REQ_QP, psn=101)
    assert res["rewind"][1:] and all(r == dict(qpn=REQ_QP, psn=106)
                                     for r in res["rewind"][1:])
    assert res["count"]["timeouts"] == len(res["rewind"]) - 1
    assert res["count"]["gaps"] == 1
    # The requester's memory: every READ's bytes, each atomic's original value.
    want = {}
    for (_, _, va, n, _, _, la, _), orig in zip(ops, (None, None, v0, None, v1),
                                                 strict=True):
        if orig is None:
            want.update({la + k: b for k, b in enumerate(_bytes(mem, va, n))})
        else:
            want.update({la + k: b for k, b in enumerate(orig.to_bytes(8, "little"))})
    assert memory(res["o"]) == want
    assert [(d["qpn"], d["psn"], d["atomic"]) for d in res["done"]] == [
        (REQ_QP, 102, 0), (REQ_QP, 103, 0), (REQ_QP, 104, 1), (REQ_QP, 105, 0),
        (REQ_QP, 106, 1)]
    c = res["count"]
    assert c["other"] == LEAD + len(fillers) and c["bad"] == c["malformed"] == 0
    # The responder executed each atomic once (the repeat was answered, not executed).
    assert _u64(run.mem, va_at) == swap
    assert run.counters["atomics"] == 2 and run.counters["atomic_replays"] == 1
