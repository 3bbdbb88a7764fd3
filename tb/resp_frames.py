"""Frames for the responder's tests: RDMA WRITEs and every kind of bad frame.

Built with the golden model's frame builder (:mod:`pymodel.rdma.frames`, which uses
``zlib`` for the ICRC and the FCS); a bad frame is a good one with one defect, its FCS
(and where the defect is elsewhere, its ICRC) fixed up so that exactly that check fails.
"""

import dataclasses

from pymodel.fcs import fcs_bytes
from pymodel.fields import pack
from pymodel.rdma.frames import Endpoint, icrc, write_frame
from spec.formats.roce import MR_LAYOUT, QPC_LAYOUT, OpCode
from spec.rdma_responder import MAX_FRAME_BEATS

__all__ = ["A", "B", "BAD_KINDS", "spoil", "refresh", "random_write", "random_frames",
           "Scenario", "responder_scenario"]

A = Endpoint(0x02_00_00_00_00_01, 0x0A_00_00_01)
B = Endpoint(0x02_00_00_00_00_02, 0x0A_00_00_02)
WRITES = (OpCode.RC_RDMA_WRITE_ONLY, OpCode.RC_RDMA_WRITE_FIRST,
          OpCode.RC_RDMA_WRITE_MIDDLE, OpCode.RC_RDMA_WRITE_LAST)
#: The defects :func:`spoil` knows, in the responder's check order.
BAD_KINDS = ("fcs", "runt", "long", "truncated", "ethertype", "dport", "opcode", "tver",
             "icrc")


def refresh(body, fix_icrc=True):
    """A frame (no ICRC, no FCS) ``body`` completed with its ICRC and FCS."""
    body = bytes(body)
    if fix_icrc:
        body += icrc(body)
    return body + fcs_bytes(body)


def spoil(frame, kind, rng):
    """``frame`` (a good WRITE with ICRC and FCS) with one defect of ``kind``."""
    body = bytearray(frame[:-8])
    if kind == "fcs":
        out = bytearray(frame)
        out[-1 - rng.randrange(4)] ^= 1 << rng.randrange(8)
        return bytes(out)
    if kind == "runt":
        return refresh(rng.randbytes(rng.randrange(1, 60)), fix_icrc=False)
    if kind == "long":
        n = 64 * MAX_FRAME_BEATS + rng.randrange(1, 200)
        return refresh(rng.randbytes(n), fix_icrc=False)
    if kind == "truncated":
        cut = rng.randrange(1, min(len(body) - 48, 70))
        return refresh(body[:-cut])
    if kind == "ethertype":
        body[12] ^= 0x10
    elif kind == "dport":
        body[37] ^= 0x01
    elif kind == "opcode":
        body[42] = rng.choice([0x00, 0x04, 0x0C, 0x11, 0x64])
    elif kind == "tver":
        body[43] |= 1
    elif kind == "icrc":
        out = bytearray(frame[:-4])
        out[-1 - rng.randrange(4)] ^= 1 << rng.randrange(8)
        return refresh(out, fix_icrc=False)
    else:
        raise ValueError(f"unknown defect {kind!r}")
    return refresh(body)


def random_write(rng, *, qpn=None, psn=None, op=None, size=None, ack_req=None, va=None,
                 rkey=None, dma_length=None):
    """A good WRITE frame with random fields (any argument given is used as is)."""
    op = op if op is not None else rng.choice(WRITES)
    size = size if size is not None else rng.choice(
        [1, 2, 3, 10, 11, 58, 59, 63, 64, 65, 74, 75, 127, 128, 129, 256, 1000, 4096])
    payload = rng.randbytes(size)
    return write_frame(
        op, A, B, 0x100, qpn if qpn is not None else rng.randrange(1 << 24),
        psn if psn is not None else rng.randrange(1 << 24),
        ack_req if ack_req is not None else rng.random() < 0.5, payload,
        va=va if va is not None else rng.randrange(1 << 64),
        rkey=rkey if rkey is not None else rng.randrange(1 << 32),
        dma_length=dma_length if dma_length is not None else rng.randrange(1 << 32))


def random_frames(rng, n, *, long_frames=False, bad_rate=0.4):
    """``n`` frames: good WRITEs and, at ``bad_rate``, one of :data:`BAD_KINDS`."""
    kinds = [k for k in BAD_KINDS if long_frames or k != "long"]
    out = []
    for _ in range(n):
        frame = random_write(rng)
        if rng.random() < bad_rate:
            frame = spoil(frame, rng.choice(kinds), rng)
        out.append(frame)
    return out


@dataclasses.dataclass
class Scenario:
    """Frames for a responder, and the host memory and MR table they are meant for."""
    frames: list
    mem: dict            # initial host memory: {word address: 512-bit int}
    mr_table: list       # MR_LAYOUT integers
    qpc_base: int
    qpns: list           # the QPs with a valid context


def responder_scenario(rng, *, qps=6, messages=40, qpn_range=64, sizes=None,
                       pmtu_log2=(8, 9, 10, 11, 12), bad_rate=0.05, dup_rate=0.05,
                       loss_rate=0.04, access_rate=0.05, unknown_rate=0.03, mr_entries=16,
                       qpc_base=16, ack_every=True, round_robin=False):
    """A plausible mix of traffic for one responder.

    ``qps`` QPs with valid contexts (QPNs below ``qpn_range``, so that they share cache
    entries), messages of ``sizes`` bytes segmented at each QP's path MTU, with PSNs in
    sequence; at the given rates a frame is preceded by a copy with one defect of
    :data:`BAD_KINDS` (dropped silently), a frame is lost (the rest of its message goes
    out, then the message is sent again from the lost frame, as go-back-N would), an
    earlier frame is sent again (a duplicate), a message breaks the MR rules, or a frame
    goes to a QP without a valid context. Messages pick their QP at random, or with
    ``round_robin`` QPNs ``0 .. qps - 1`` in turn. Payload buffers live in 16 MRs of
    32 KiB from byte address 2**18 on.
    """
    sizes = sizes or [1, 2, 63, 64, 65, 127, 128, 129, 256, 257, 1000, 4096, 5000]
    qpns = list(range(qps)) + [qps, qps + 1] if round_robin \
        else rng.sample(range(qpn_range), qps + 2)
    valid, invalid = qpns[:qps], qpns[qps:]
    mem, state = {}, {}
    for q in valid:
        ctx = dict(valid=1, pmtu_log2=rng.choice(pmtu_log2), dest_qp=rng.randrange(1 << 24),
                   expected_psn=rng.choice([0, (1 << 24) - 3, rng.randrange(1 << 24)]),
                   msn=rng.randrange(1 << 24), dmac=A.mac, smac=B.mac, dip=A.ip, sip=B.ip)
        mem[qpc_base + q] = pack(QPC_LAYOUT, ctx)
        state[q] = dict(psn=ctx["expected_psn"], mtu=1 << ctx["pmtu_log2"], sent=[])
    for q in invalid:
        mem[qpc_base + q] = pack(QPC_LAYOUT, dest_qp=q)
    mrs = []
    for k in range(mr_entries):
        mrs.append(dict(valid=int(k != 5), remote_write=int(k != 6),
                        key=k + mr_entries * rng.randrange(1, 1000),
                        base=(1 << 18) + k * (1 << 15), length=1 << 15))
    frames = []

    def emit(frame, q):
        if rng.random() < bad_rate:
            frames.append(spoil(frame, rng.choice([k for k in BAD_KINDS if k != "long"]),
                                rng))
        frames.append(frame)
        if q is not None and rng.random() < dup_rate and state[q]["sent"]:
            frames.append(rng.choice(state[q]["sent"][-4:]))

    for m in range(messages):
        if rng.random() < unknown_rate:
            emit(random_write(rng, qpn=rng.choice(invalid)), None)
            continue
        q = valid[m % qps] if round_robin else rng.choice(valid)
        st = state[q]
        size = rng.choice(sizes)
        mr_k = rng.choice([k for k in range(mr_entries) if k not in (5, 6)])
        mr = mrs[mr_k]
        va = mr["base"] + 64 * rng.randrange((mr["length"] - size) // 64)
        rkey = mr["key"]
        if rng.random() < access_rate:
            fault = rng.choice(["rkey", "bounds", "align", "invalid", "right"])
            if fault == "rkey":
                rkey ^= 1 << 20
            elif fault == "bounds":
                va = mr["base"] + mr["length"] - 64
            elif fault == "align":
                va += 8
            else:
                mr = mrs[5 if fault == "invalid" else 6]
                rkey, va = mr["key"], mr["base"]
        msg = []
        left, first = size, True
        while True:
            seg = min(left, st["mtu"])
            last = seg == left
            op = ((OpCode.RC_RDMA_WRITE_ONLY if last else OpCode.RC_RDMA_WRITE_FIRST)
                  if first else
                  (OpCode.RC_RDMA_WRITE_LAST if last else OpCode.RC_RDMA_WRITE_MIDDLE))
            msg.append(write_frame(op, A, B, 0x100, q, st["psn"], last and ack_every,
                                   rng.randbytes(seg), va=va, rkey=rkey, dma_length=size))
            st["psn"] = (st["psn"] + 1) & 0xFFFFFF
            left -= seg
            first = False
            if last:
                break
        lost = rng.randrange(len(msg)) if rng.random() < loss_rate else None
        for k, frame in enumerate(msg):
            if k != lost:
                emit(frame, q)
                st["sent"].append(frame)
        if lost is not None:
            for frame in msg[lost:]:
                emit(frame, q)
    return Scenario(frames=frames, mem=mem, mr_table=[pack(MR_LAYOUT, mr) for mr in mrs],
                    qpc_base=qpc_base, qpns=valid)
