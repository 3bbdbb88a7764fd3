"""A bench for the requester's :class:`~rtl.rdma.req.response_intake.ResponseIntake`:
frames into the receive stage's header entries and payload beats, the stage against its
twin between FIFOs (:func:`tb.stage_harness.compare_stage`), and the host memory its
writes leave."""

from pymodel.cycle import Fifo
from pymodel.fields import unpack
from pymodel.packet import frame_to_beats, unpack_beat
from pymodel.rdma.frames import ack_frame
from pymodel.rdma.read_frames import atomic_ack_frame, read_response_frame
from pymodel.rdma.req.response_intake import ResponseIntakeModel
from pymodel.rdma.resp.rx import ReceiveModel
from rtl.rdma.req.response_intake import ResponseIntake
from spec.formats.roce import OpCode, Syndrome
from spec.rdma_read_req import ORD_DEFAULT
from tb.resp_frames import A, B
from tb.stage_harness import compare_stage

__all__ = ["LEAD", "DEPTH", "QP_A", "QP_B", "entries", "memory", "run_intake", "responses",
           "Ops", "mixed", "random_requests"]

#: Host-memory words of the requester in these runs.
DEPTH = 1 << 12
#: The requester's QPs (BTH DestQP of the responses).
QP_A, QP_B = 0x77, 0x78


def entries(frames):
    """Header entries and payload beats of ``frames`` as the receive stage stores them
    (:class:`~pymodel.rdma.resp.rx.ReceiveModel`, FIFOs that never fill)."""
    hdr, pay = Fifo(1 << 12, "hdr"), Fifo(1 << 16, "pay")
    rx = ReceiveModel(hdr, pay)
    for frame in frames:
        for bits in frame_to_beats(frame, 64):
            data, nbytes, first, last = unpack_beat(64, bits)
            rx.step(0, {"i": dict(data=data, nbytes=nbytes, first=first, last=last)})
            hdr.commit()
            pay.commit()
    return list(hdr.q), list(pay.q)


def memory(writes):
    """Bytes written by the host writes ``o`` (addr, data, be), later over earlier."""
    mem = {}
    for w in writes:
        for k in range(64):
            if w["be"] >> k & 1:
                mem[64 * w["addr"] + k] = (w["data"] >> (8 * k)) & 0xFF
    return mem


#: ACKs ahead of the responses, so that the issues are taken before the first response
#: is decided (``other`` counts them).
LEAD = 2


def run_intake(frames, issues, *, slots=16, ord=ORD_DEFAULT, timeout=0, seed=1,
               pop_rate=1.0, push_rate=0.7, cycles=None, limit_qpns=(0x77, 0x78)):
    """Run ``frames`` (after :data:`LEAD` ACKs) and ``issues`` through the RTL and its
    twin; the items written to ``o``, ``done``, ``rewind`` (dicts), ``taken`` (cycles
    the inputs were taken), ``count`` (the twin's counters, equal to the RTL's) and
    ``twin`` (its state at the end: RTL = twin in every cycle until then). The
    ACK limit is asked for ``limit_qpns`` in turn, one a cycle, and compared too."""
    lead = [ack_frame(B, A, 0x100, 0x78, 1, Syndrome.ACK, 3)] * LEAD
    hdr, pay = entries(lead + frames)
    dut = ResponseIntake(slots, ord, DEPTH)
    box = {}

    def make(fifos):
        box["t"] = ResponseIntakeModel(fifos, slots, ord, DEPTH)
        return box["t"]

    cycles = cycles or 6 * (len(hdr) + len(pay)) + 400
    out = compare_stage(
        dut, make, inputs={"hdr": 8, "beats": 256, "issue": 4},
        outputs={"o": 8, "done": 8, "rewind": 4},
        stimulus={"hdr": hdr, "beats": pay, "issue": issues}, cycles=cycles, seed=seed,
        push_rate={"hdr": push_rate, "beats": 1.0, "issue": 1.0}, pop_rate=pop_rate,
        side_in=lambda c, peek: {"timeout": timeout,
                                 "limit_qpn": limit_qpns[c % len(limit_qpns)]},
        side_out=tuple(ResponseIntakeModel(None).count) + ("limit", "limit_psn"))
    lay = {n: getattr(dut, n).payload.shape() for n in ("o", "done", "rewind")}
    res = {n: [unpack(lay[n], v) for _, v in out[n]] for n in lay}
    res["taken"] = out["taken"]
    res["count"] = box["t"].count
    res["twin"] = box["t"]
    return res


def responses(qpn, psn, data, pmtu_log2):
    """The READ RESPONSE frames IBTA prescribes for ``data`` from PSN ``psn``: cut at the
    path MTU, one PSN each, ONLY or FIRST/MIDDLE.../LAST, AETH on all but MIDDLE."""
    mtu = 1 << pmtu_log2
    parts = [data[k:k + mtu] for k in range(0, len(data), mtu)] or [b""]
    out = []
    for k, part in enumerate(parts):
        if len(parts) == 1:
            op = OpCode.RC_RDMA_READ_RESPONSE_ONLY
        elif k == 0:
            op = OpCode.RC_RDMA_READ_RESPONSE_FIRST
        elif k == len(parts) - 1:
            op = OpCode.RC_RDMA_READ_RESPONSE_LAST
        else:
            op = OpCode.RC_RDMA_READ_RESPONSE_MIDDLE
        out.append((psn + k, read_response_frame(op, B, A, 0x100, qpn, psn + k,
                                                  Syndrome.ACK, 9, part)))
    return out


class Ops:
    """Operations, their issue items, the responder's answers and the memory IBTA says
    the requester ends with."""

    def __init__(self, rng):
        self.rng = rng
        self.issues, self.expect, self.next_psn = [], {}, {QP_A: 100, QP_B: 0xFFFFF0}
        self.addr = 64 * 64
        self.answers = []       # per operation: [(psn, frame)]
        self.last = []          # per operation: (qpn, last PSN, atomic)

    def read(self, qpn, length, pmtu_log2):
        data = self.rng.randbytes(length)
        psn = self.next_psn[qpn]
        frames = responses(qpn, psn, data, pmtu_log2)
        self.next_psn[qpn] = (psn + len(frames)) & 0xFFFFFF
        self.issues.append(dict(atomic=0, qpn=qpn, psn=psn & 0xFFFFFF,
                                pmtu_log2=pmtu_log2, laddr=self.addr, length=length))
        for k, b in enumerate(data):
            self.expect[self.addr + k] = b
        self.answers.append([(p & 0xFFFFFF, f) for p, f in frames])
        self.last.append((qpn, (psn + len(frames) - 1) & 0xFFFFFF, 0))
        self.addr += -(-length // 64) * 64 + 64

    def atomic(self, qpn):
        orig = self.rng.getrandbits(64)
        psn = self.next_psn[qpn]
        self.next_psn[qpn] = (psn + 1) & 0xFFFFFF
        laddr = self.addr + 8 * self.rng.randrange(8)
        self.issues.append(dict(atomic=1, qpn=qpn, psn=psn, pmtu_log2=8, laddr=laddr,
                                length=0))
        for k, b in enumerate(orig.to_bytes(8, "little")):
            self.expect[laddr + k] = b
        self.answers.append([(psn, atomic_ack_frame(B, A, 0x100, qpn, psn, Syndrome.ACK, 9,
                                                    orig))])
        self.last.append((qpn, psn, 1))
        self.addr += 128


def mixed(rng, n=10):
    """``n`` operations, READs of 1 to 1,500 bytes at MTUs 256 to 1,024 and atomics, on
    QP A and QP B at random."""
    ops = Ops(rng)
    for _ in range(n):
        kind = rng.randrange(3)
        qpn = rng.choice((QP_A, QP_B))
        if kind == 0:
            ops.atomic(qpn)
        else:
            ops.read(qpn, rng.choice((1, 8, 64, 100, 256, 700, 1500)), rng.choice((8, 9, 10)))
    return ops


def random_requests(rng, n):
    """``n`` request descriptors of :func:`~rtl.rdma.req.request_framer.request_layout`:
    READs and both atomics, random fields."""
    out = []
    for _ in range(n):
        op = rng.choice((OpCode.RC_RDMA_READ_REQUEST, OpCode.RC_CMP_SWAP, OpCode.RC_FETCH_ADD))
        out.append(dict(opcode=op.value, dmac=A.mac, smac=B.mac, sip=B.ip, dip=A.ip,
                        src_qp=rng.getrandbits(24), dest_qp=rng.getrandbits(24),
                        psn=rng.getrandbits(24), ack_req=rng.getrandbits(1),
                        va=rng.getrandbits(64) & ~7, rkey=rng.getrandbits(32),
                        dma_length=rng.randrange(1, 1 << 14), swap_add=rng.getrandbits(64),
                        compare=rng.getrandbits(64)))
    return out
