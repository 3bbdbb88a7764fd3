"""Frames for the responder's tests: RDMA WRITEs and every kind of bad frame.

Built with the golden model's frame builder (:mod:`pymodel.rdma.frames`, which uses
``zlib`` for the ICRC and the FCS); a bad frame is a good one with one defect, its FCS
(and where the defect is elsewhere, its ICRC) fixed up so that exactly that check fails.
"""

from pymodel.fcs import fcs_bytes
from pymodel.rdma.frames import Endpoint, icrc, write_frame
from rtl.formats.roce import OpCode
from rtl.rdma.resp.sizes import MAX_FRAME_BEATS

__all__ = ["A", "B", "BAD_KINDS", "spoil", "refresh", "random_write", "random_frames"]

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
