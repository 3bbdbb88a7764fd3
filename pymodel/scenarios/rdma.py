"""Scenarios of the RDMA co-simulation, built with the verbs model (shared by the cocotb
module, the pytest tests and the headline run)."""

import random
import zlib

from pymodel.fabric.faulty_link import FaultPattern, FaultSettings
from pymodel.rdma.engine import Config
from pymodel.rdma.frames import Endpoint, write_frame
from pymodel.rdma.verbs import IP_A, IP_B, MAC_A, MAC_B, Verbs
from spec.formats.roce import OpCode

__all__ = ["writes_scenario", "bad_frames_scenario", "overflow_scenario", "fault_settings",
           "seed_dropping_only"]


def writes_scenario(cfg: Config, messages, sizes, qps, pmtu_log2=12, seed=1, ring_every=1):
    """``messages`` RDMA WRITEs round robin over ``qps`` QPs, sizes cycling ``sizes``;
    one WQE per message and a doorbell after every ``ring_every`` WQEs of a QP (and
    after its last one)."""
    rng = random.Random(seed)
    per_qp = -(-messages // qps)
    sq_log2 = max(0, (per_qp - 1).bit_length())
    v = Verbs(cfg)
    pairs = [v.create_qp(q, (q * 7 + 3) % 4096, sq_log2=sq_log2, pmtu_log2=pmtu_log2,
                         psn_a=(q * 977) & 0xFFFFFF, psn_b=(q * 977) & 0xFFFFFF)
             for q in range(qps)]
    total = sum(sizes[k % len(sizes)] for k in range(messages))
    raddr, rkey = v.reg_mr(total + 64 * messages, index=3)
    cursor = raddr
    posted = [0] * qps
    for k in range(messages):
        n = sizes[k % len(sizes)]
        qp = pairs[k % qps]
        v.post_write(qp, rng.randbytes(n), cursor, rkey, wr_id=0x1000_0000 + k)
        posted[k % qps] += 1
        if posted[k % qps] % ring_every == 0 or k + qps >= messages:
            v.ring(qp)
        cursor += -(-n // 64) * 64
    return v


def bad_frames_scenario(cfg: Config, seed=2):
    """Good and bad frames played straight onto the A->B link: returns ``(verbs, frames,
    reasons)``, the expected responder counter per frame."""
    rng = random.Random(seed)
    v = Verbs(cfg)
    v.create_qp(1, 5, psn_a=100, psn_b=100)
    raddr, rkey = v.reg_mr(4096, index=2)
    ro_addr, ro_key = v.reg_mr(256, index=4, remote_write=False)
    a, b = Endpoint(MAC_A, IP_A), Endpoint(MAC_B, IP_B)
    only = OpCode.RC_RDMA_WRITE_ONLY

    def w(psn, payload, va=raddr, key=rkey, dma=None, qpn=5):
        return write_frame(only, a, b, 1, qpn, psn, True, payload, va=va, rkey=key,
                           dma_length=len(payload) if dma is None else dma)

    frames, reasons = [], []

    def add(frame, reason):
        frames.append(frame)
        reasons.append(reason)

    add(w(100, rng.randbytes(100)), "frames_ok")
    bad = bytearray(w(101, rng.randbytes(64), va=raddr + 128))
    bad[-6] ^= 0x40                                   # ICRC, FCS recomputed below
    add(_refcs(bad), "icrc_bad")
    bad = bytearray(w(101, rng.randbytes(64), va=raddr + 128))
    bad[-1] ^= 1
    add(bytes(bad), "fcs_bad")
    add(w(101, rng.randbytes(64), va=raddr + 128, qpn=9), "unknown_qp")
    add(w(105, rng.randbytes(64), va=raddr + 128), "psn_nak")        # ahead: out of order
    add(w(99, rng.randbytes(64), va=raddr + 128), "duplicates")      # behind: ACKed again
    # A remote access error consumes the PSN (no QP error state): the next one follows.
    add(w(101, rng.randbytes(64), va=raddr + 128, key=rkey ^ 0x100), "access_nak")
    add(w(102, rng.randbytes(64), va=raddr + 4096 - 32), "access_nak")   # out of bounds
    add(w(103, rng.randbytes(64), va=ro_addr, key=ro_key), "access_nak")  # no right
    full = w(104, rng.randbytes(200), va=raddr + 256)
    add(_refcs(full[:120]), "truncated")
    add(w(104, rng.randbytes(129), va=raddr + 512), "frames_ok")
    return v, frames, reasons


def overflow_scenario(cfg: Config, seed=3, small=24, large=24, qps=4, tail=4):
    """Frames played back to back onto the A->B link, faster than the responder takes
    them: ``(verbs, frames, None)``.

    First ``small`` 64-byte WRITE ONLYs (3 beats, about 9 cycles of work each) on one
    QP, whose context miss at the start lets them fill the responder's frame slots
    (``RX_FRAMES``); then ``large`` 1024-byte WRITE ONLYs (18 beats, about 26 cycles of
    work) round robin over ``qps`` other QPs, which fill the receive FIFO up to its last
    free frame (``RX_FRAME_ROOM`` beats); then ``tail`` more small ones on the first QP,
    ahead of its expected PSN once some of its frames were dropped (one NAK, then
    silence). Every frame has its own target bytes, so a dropped frame leaves them zero.
    """
    rng = random.Random(seed)
    v = Verbs(cfg)
    a, b = Endpoint(MAC_A, IP_A), Endpoint(MAC_B, IP_B)
    only = OpCode.RC_RDMA_WRITE_ONLY
    v.create_qp(1, 5, psn_a=100, psn_b=100)
    for q in range(qps):
        v.create_qp(2 + q, 6 + q, psn_a=q * 1000, psn_b=q * 1000)
    raddr, rkey = v.reg_mr(64 * (small + tail) + 1024 * large, index=2)
    frames = []

    def small_frame(k):
        return write_frame(only, a, b, 1, 5, 100 + k, True, rng.randbytes(64),
                           va=raddr + 64 * k, rkey=rkey, dma_length=64)

    frames += [small_frame(k) for k in range(small)]
    for k in range(large):
        q = k % qps
        frames.append(write_frame(only, a, b, 2 + q, 6 + q, q * 1000 + k // qps, True,
                                  rng.randbytes(1024),
                                  va=raddr + 64 * (small + tail) + 1024 * k, rkey=rkey,
                                  dma_length=1024))
    frames += [small_frame(small + k) for k in range(tail)]
    return v, frames, None


def _refcs(frame_with_fcs):
    body = bytes(frame_with_fcs[:-4])
    return body + zlib.crc32(body).to_bytes(4, "little")


def fault_settings(params):
    """A :class:`FaultSettings` from a dict of its fields (None or empty: no faults)."""
    return FaultSettings(**(params or {}))


def seed_dropping_only(frame, rate=3277, clean_after=8, start=1):
    """The first link seed (from ``start``) whose pattern, at drop ``rate``, drops frame
    number ``frame`` and no other among frames ``0 .. frame + clean_after``: used to lose
    exactly the last frame of a scenario, so that only the transport timer recovers."""
    for seed in range(start, 1 << 16):
        pattern = FaultPattern(FaultSettings(seed=seed, drop_rate=rate))
        hits = [pattern.next()[0]["drop"] for _ in range(frame + clean_after + 1)]
        if hits[frame] and sum(hits) == 1:
            return seed
    raise ValueError(f"no seed drops only frame {frame} at rate {rate}")
