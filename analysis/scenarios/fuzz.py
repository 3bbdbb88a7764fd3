"""Seeded mutation fuzzing of the two receivers: the fuzz scenarios.

The mutations are :class:`analysis.scenarios.mutator.Mutator`'s (re-exported here), over
every leaf field of every header of :data:`spec.formats.roce.WRITE_RETH_HEADER`, or of
the NIC header of a framing; for RoCEv2 the ``crc`` fix recomputes the IPv4 header
checksum and the ICRC as well as the FCS (:func:`roce_refresh`).

The scenarios (:func:`rdma_chunk`, :func:`nic_chunk`) are pure functions of
``(seed, chunk)``: the co-simulation, the model and the tests build the same frames.
"""

import dataclasses
import random
import zlib

from analysis.scenarios.mutator import (
    FIXES,
    KINDS,
    Field,
    Mutant,
    Mutator,
    _swap,
    header_fields,
)
from pymodel.nic.frames import build_frame
from pymodel.rdma.frames import Endpoint, icrc, ipv4_checksum, write_frame
from pymodel.rdma.read_frames import (
    atomic_ack_frame,
    atomic_request_frame,
    read_request_frame,
    read_response_frame,
)
from pymodel.rdma.verbs import IP_A, IP_B, MAC_A, MAC_B, Verbs
from spec.formats.nic import Framing, header_layout
from spec.formats.roce import WRITE_RETH_HEADER, OpCode, QpState
from spec.rdma_engine import HOST_DEPTH

__all__ = ["KINDS", "FIXES", "Field", "Mutant", "header_fields", "Mutator", "RdmaChunk",
           "NicChunk", "rdma_chunk", "nic_chunk", "NIC_SOURCES", "NIC_SENTINEL",
           "NIC_NODE", "frame_kind", "RDMA_FRAME_KINDS", "atomic_psns"]

#: The RoCEv2 header fields: every field of the WRITE FIRST/ONLY headers (a superset of
#: the MIDDLE/LAST ones). Every byte-aligned multi-byte field is in network order.
ROCE_FIELDS = header_fields(WRITE_RETH_HEADER, lambda name, width: True)
_DEST_QP = next(f for f in ROCE_FIELDS if f.name == "bth.dest_qp")
_RKEY = next(f for f in ROCE_FIELDS if f.name == "reth.rkey")


def roce_refresh(body, fix):
    """A RoCEv2 frame body (no FCS) with its FCS (``fcs``), or with its IPv4 header
    checksum, ICRC and FCS recomputed (``crc``; the body's last 4 bytes are its ICRC)."""
    body = bytearray(body)
    if fix == "crc" and len(body) >= 54 + 4:          # through the BTH, and an ICRC
        body[24:26] = b"\0\0"
        body[24:26] = ipv4_checksum(bytes(body[14:34])).to_bytes(2, "big")
        body[-4:] = icrc(bytes(body[:-4]))
    return bytes(body) + zlib.crc32(bytes(body)).to_bytes(4, "little")


def _field_of(frame, f):
    bits = int.from_bytes(frame[(f.offset // 8):(f.offset + f.width) // 8], "little")
    return _swap(bits, f.width // 8)


@dataclasses.dataclass
class RdmaChunk:
    """One RDMA fuzz chunk: the verbs (host images and MR table of node B), the frames
    (:class:`Mutant` s: the fuzz, then the tail), the fuzzed QP's and the sentinel's
    numbers, the MR windows (``(base, bytes, remote_write)``), the tail's expected bytes
    (``{byte address: bytes}``) and the QP-context words of the created QPs."""
    verbs: Verbs
    frames: list
    fuzz_frames: int
    writable: list
    readonly: list
    contexts: list
    tail: dict


#: The RDMA fuzz: node B's QPs (fuzzed, sentinel) and their PSNs.
RDMA_QPN, RDMA_PSN, RDMA_SENTINEL_QPN, RDMA_SENTINEL_PSN = 5, 100, 7, 500
#: A third QP of node B, in the ERR state (IBV_QPS_ERR), and its PSN: valid WRITEs to it
#: (and their mutants) are dropped and counted (``qp_err``); its MR must stay untouched.
RDMA_ERR_QPN, RDMA_ERR_PSN = 9, 900
RDMA_WEIGHTS = dict(valid=1, bitflip=4, field=8, truncate=2, extend=2, duplicate=1,
                    reorder=1)


#: The BTH opcode byte's offset in a RoCEv2 frame (Ethernet 14 + IPv4 20 + UDP 8 bytes).
_BTH_AT = 42
#: The kinds of RoCEv2 frames by their BTH opcode (IBTA Vol 1 table 38: 0x06-0x0A the
#: WRITEs, 0x0C READ REQUEST, 0x0D-0x10 READ RESPONSE, 0x11 ACKNOWLEDGE, 0x12 ATOMIC
#: ACKNOWLEDGE, 0x13 COMPARE & SWAP, 0x14 FETCH & ADD).
RDMA_FRAME_KINDS = {**dict.fromkeys((0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B), "write"),
                    0x0C: "read_request",
                    **dict.fromkeys((0x0D, 0x0E, 0x0F, 0x10), "read_response"),
                    0x11: "ack", 0x12: "atomic_ack", 0x13: "atomic", 0x14: "atomic"}
#: The share of the RDMA fuzz's valid frames (with ``reads``) that are READ requests,
#: atomics (COMPARE & SWAP, FETCH & ADD) and READ RESPONSEs / ATOMIC ACKNOWLEDGEs sent
#: to the responder, which asked for none; the rest are WRITEs as without ``reads``.
#: A READ or an atomic holds the responder for a host-memory read (hundreds of cycles,
#: spec.host's ``pcie`` profile) where a WRITE takes a few cycles a beat, so they are
#: kept few enough that the paced injection does not fill the responder's buffers
#: (``overflow`` would then refuse most frames before any check behind it).
RDMA_READ_MIX = dict(read_request=0.015, atomic=0.01, response=0.03)
#: Fillers added before the tail per valid READ or atomic: each may hold the responder
#: for a host read (``pcie``: 560 cycles, spec.host) and a filler passes in about 4
#: cycles at the fuzz's injection pace (a beat, then 192 of 256 cycles stalled), so
#: 560 / 4 = 140 fillers cover one READ's read; fewer, and a backlog of them could still
#: refuse the tail (``overflow``).
FILLERS_PER_READ = 140


def frame_kind(frame):
    """The kind of a RoCEv2 frame (:data:`RDMA_FRAME_KINDS`) by the opcode it carries,
    ``"short"`` without a BTH, ``"other"`` for another opcode."""
    if len(frame) <= _BTH_AT:
        return "short"
    return RDMA_FRAME_KINDS.get(frame[_BTH_AT], "other")


def atomic_psns(frames, qpn):
    """The distinct PSNs of the atomic requests (by opcode) to QP ``qpn`` among
    ``frames``: the responder may execute at most one atomic per PSN (a repeated PSN is
    answered from the saved result, IBTA Vol 1 9.4.5)."""
    out = set()
    for fr in frames:
        if len(fr) >= 54 and frame_kind(fr) == "atomic" and _field_of(fr, _DEST_QP) == qpn:
            out.add(int.from_bytes(fr[51:54], "big"))
    return out


def rdma_chunk(seed, chunk, frames, depth=HOST_DEPTH, mr_entries=16, tail=4, fillers=256,
               qpc_words=None, reads=False, read_mix=None):
    """``frames`` fuzz frames (RoCEv2 WRITEs to QP :data:`RDMA_QPN` and mutants of them)
    then ``fillers`` one-beat frames with a bad FCS (a gap on the wire, so that the
    responder's buffers drain whatever the fuzz left) and ``tail`` valid WRITE ONLYs to
    the sentinel QP :data:`RDMA_SENTINEL_QPN` and its own MR, whose QPN and rkey no
    mutant carries (the mutator redraws those). With ``reads`` (a responder with
    ``read_words``) the fuzzed MR also allows RDMA READ and atomics, and the valid
    frames mix in (:data:`RDMA_READ_MIX`) READ requests of 0 to 1024 bytes (one to four
    response packets at the 256-byte MTU; one-packet ones sometimes beyond the MR),
    COMPARE & SWAP and FETCH & ADD (one in ten misaligned) and READ RESPONSEs / ATOMIC
    ACKNOWLEDGEs for requests never made; their mutants rewrite the same byte positions
    (named by the WRITE headers' fields, :data:`ROCE_FIELDS`: the RETH's over the
    AtomicETH or the AETH); the fillers grow by :data:`FILLERS_PER_READ` per valid READ
    or atomic (the responder's backlog of host reads drains before the tail).
    ``read_mix``: shares as :data:`RDMA_READ_MIX` (default it; the tests' short chunks
    take a heavier one). Deterministic in ``(seed, chunk)``."""
    rng = random.Random(f"rdma-fuzz-{seed}-{chunk}")
    v = Verbs(depth=depth, mr_entries=mr_entries, qpc_words=qpc_words)
    v.create_qp(1, RDMA_QPN, pmtu_log2=8, psn_a=RDMA_PSN, psn_b=RDMA_PSN)
    v.create_qp(2, RDMA_SENTINEL_QPN, psn_a=RDMA_SENTINEL_PSN, psn_b=RDMA_SENTINEL_PSN)
    v.create_qp(3, RDMA_ERR_QPN, psn_a=RDMA_ERR_PSN, psn_b=RDMA_ERR_PSN,
                state_b=QpState.ERR)
    mr_bytes = 8192
    raddr, rkey = v.reg_mr(mr_bytes, index=2, remote_read=reads, remote_atomic=reads)
    ro_addr, ro_key = v.reg_mr(256, index=4, remote_write=False)
    s_addr, s_key = v.reg_mr(64 * tail * 2, index=6, key_tag=0x5E)
    e_addr, e_key = v.reg_mr(1024, index=8, key_tag=0xE7)
    a, b = Endpoint(MAC_A, IP_A), Endpoint(MAC_B, IP_B)
    ops = OpCode

    def forbid(frame):
        return (len(frame) >= 54 and _field_of(frame, _DEST_QP) == RDMA_SENTINEL_QPN) or (
            len(frame) >= 70 and _field_of(frame, _RKEY) == s_key)

    mut = Mutator(rng, ROCE_FIELDS, roce_refresh, FIXES, RDMA_WEIGHTS, forbid)
    valid, psn, err_psn = [], RDMA_PSN, RDMA_ERR_PSN
    while len(valid) < frames:
        if reads and _read_mix(rng, valid, a, b, psn, raddr, rkey, mr_bytes,
                               read_mix or RDMA_READ_MIX):
            psn = valid[-1][1]
            valid[-1] = valid[-1][0]
            continue
        r = rng.random()
        n = rng.choice((1, 4, 63, 64, 65, 128, rng.randint(1, 256)))
        va = raddr + 64 * rng.randrange((mr_bytes - 768) // 64)
        key, va_, dma = rkey, va, n
        if r > 0.95:                              # to the QP in ERR: dropped, counted
            valid.append(write_frame(ops.RC_RDMA_WRITE_ONLY, a, b, 3, RDMA_ERR_QPN, err_psn,
                                     rng.random() < 0.5, rng.randbytes(min(n, 256)),
                                     va=e_addr + 64 * rng.randrange(8), rkey=e_key,
                                     dma_length=min(n, 256)))
            err_psn += 1
            continue
        if r < 0.1:
            key, va_ = ro_key, ro_addr            # no write right: access NAK
        if r < 0.3 and len(valid) + 3 <= frames:  # a 3-segment message, PMTU 256
            total = 512 + n
            pl = rng.randbytes(total)
            valid.append(write_frame(ops.RC_RDMA_WRITE_FIRST, a, b, 1, RDMA_QPN, psn, False,
                                     pl[:256], va=va_, rkey=key, dma_length=total))
            valid.append(write_frame(ops.RC_RDMA_WRITE_MIDDLE, a, b, 1, RDMA_QPN, psn + 1,
                                     False, pl[256:512]))
            valid.append(write_frame(ops.RC_RDMA_WRITE_LAST, a, b, 1, RDMA_QPN, psn + 2,
                                     rng.random() < 0.5, pl[512:]))
            psn += 3
            continue
        valid.append(write_frame(ops.RC_RDMA_WRITE_ONLY, a, b, 1, RDMA_QPN, psn,
                                 rng.random() < 0.5, rng.randbytes(n), va=va_, rkey=key,
                                 dma_length=dma))
        psn += 1
    fuzz = mut.stream(valid)[:frames]
    if reads:
        fillers += FILLERS_PER_READ * sum(frame_kind(f) in ("read_request", "atomic")
                                          for f in valid)
    filler = [Mutant(bytes(60) + b"\xde\xad\xbe\xef", "filler") for _ in range(fillers)]
    want, tail_frames = {}, []
    for k in range(tail):
        pl = rng.randbytes(rng.randint(1, 128))
        tail_frames.append(Mutant(write_frame(
            ops.RC_RDMA_WRITE_ONLY, a, b, 2, RDMA_SENTINEL_QPN, RDMA_SENTINEL_PSN + k,
            k == tail - 1, pl, va=s_addr + 128 * k, rkey=s_key, dma_length=len(pl)), "tail"))
        want[s_addr + 128 * k] = pl
    # The dynamic words, which context write-backs rewrite.
    contexts = [v.qpc_base_b + q * v.qpc_words for q in (RDMA_QPN, RDMA_SENTINEL_QPN)]
    # The ERR QP's MR is read-only to the checks: nothing may land there.
    return RdmaChunk(v, fuzz + filler + tail_frames, len(fuzz),
                     [(raddr, mr_bytes), (s_addr, 64 * tail * 2)],
                     [(ro_addr, 256), (e_addr, 1024)], contexts, want)


def _read_mix(rng, valid, a, b, psn, raddr, rkey, mr_bytes, mix):
    """Maybe append ``(frame, next PSN)`` of a READ request, an atomic or a stray
    response to ``valid`` (shares ``mix``, as :data:`RDMA_READ_MIX`); returns whether
    it did."""
    r = rng.random()
    if r < mix["read_request"]:
        n = rng.choice((0, 1, 64, 256, 600, 1024, rng.randint(1, 1024)))
        # One-packet READs may run past the MR's end (NAKed, one PSN, as the generator
        # counts); longer ones stay inside it.
        last = mr_bytes if n <= 256 else mr_bytes - n
        off = 64 * rng.randrange(last // 64)
        valid.append((read_request_frame(a, b, 1, RDMA_QPN, psn, raddr + off, rkey, n,
                                         ack_req=True), psn + max(1, -(-n // 256))))
        return True
    r -= mix["read_request"]
    if r < mix["atomic"]:
        va = raddr + 8 * rng.randrange(64) + (rng.choice((1, 4)) if rng.random() < 0.1
                                              else 0)
        op = rng.choice((OpCode.RC_FETCH_ADD, OpCode.RC_CMP_SWAP))
        valid.append((atomic_request_frame(op, a, b, 1, RDMA_QPN, psn, va, rkey,
                                           rng.getrandbits(64),
                                           rng.choice((0, rng.getrandbits(64)))), psn + 1))
        return True
    r -= mix["atomic"]
    if r < mix["response"]:
        stray = rng.randrange(1 << 24)
        if rng.random() < 0.5:
            fr = atomic_ack_frame(a, b, 1, RDMA_QPN, stray, 0x1F, 1, rng.getrandbits(64))
        else:
            op = rng.choice((OpCode.RC_RDMA_READ_RESPONSE_ONLY,
                             OpCode.RC_RDMA_READ_RESPONSE_FIRST,
                             OpCode.RC_RDMA_READ_RESPONSE_MIDDLE,
                             OpCode.RC_RDMA_READ_RESPONSE_LAST))
            fr = read_response_frame(op, a, b, 1, RDMA_QPN, stray, 0x1F, 1,
                                     rng.randbytes(rng.choice((8, 64, 256))))
        valid.append((fr, psn))
        return True
    return False


# -- The scale-up NIC -------------------------------------------------------------------------

#: The NIC fuzz: the receiving node's id, the fuzzed sources and their windows (words),
#: the sentinel source (its own window, never a mutant's source).
NIC_NODE = 3
NIC_SOURCES = {1: (0, 24), 2: (32, 16), 5: (64, 32)}
NIC_SENTINEL = (9, (112, 16))
NIC_WEIGHTS = RDMA_WEIGHTS


def nic_fields(framing):
    """The NIC header fields of ``framing``: the MACs and the EtherType (IEEE 802.3
    byte arrays) are in network order, our own fields little endian."""
    return header_fields(header_layout(framing),
                         lambda name, width: name in ("dst_mac", "src_mac", "ethertype"))


def _nic_refresh(body, fix):
    return body + zlib.crc32(body).to_bytes(4, "little")


@dataclasses.dataclass
class NicChunk:
    """One NIC fuzz chunk: the frames (:class:`Mutant` s: fuzz, then tail), how many
    are fuzz, the window-table writes ``(src, base, size)`` in words (every source
    0..255: the fuzzed ones and the sentinel get a window, every other one none), and
    the tail's expected bytes ``{byte address: bytes}``."""
    frames: list
    fuzz_frames: int
    windows: list
    tail: dict


def nic_chunk(seed, chunk, frames, framing, width, mem_words, max_payload, tail=4):
    """``frames`` fuzz frames (stores of the sources :data:`NIC_SOURCES` to node
    :data:`NIC_NODE`, inside their windows, and mutants of them), then ``tail`` valid
    stores from the sentinel source into its window, which no mutant names as its
    source. Deterministic in ``(seed, chunk)``."""
    framing = Framing(framing)
    rng = random.Random(f"nic-fuzz-{seed}-{chunk}-{framing.value}-{width}")
    fields = nic_fields(framing)
    src_field = next(f for f in fields if f.name in ("src", "src_mac"))
    sentinel, (s_base, s_size) = NIC_SENTINEL
    if (s_base + s_size) * width > mem_words * width:
        raise ValueError(f"mem_words must be at least {s_base + s_size}, not {mem_words}")

    def forbid(frame):
        end = src_field.offset + src_field.width
        return len(frame) * 8 >= end and frame[end // 8 - 1] == sentinel

    mut = Mutator(rng, fields, _nic_refresh, ("none", "fcs"), NIC_WEIGHTS, forbid)
    valid = []
    for _ in range(frames):
        src = rng.choice(sorted(NIC_SOURCES))
        base, size = NIC_SOURCES[src]
        n = rng.choice((1, width - 1, width, width + 1, rng.randint(1, max_payload)))
        n = min(n, size * width, max_payload)
        word = base + rng.randrange(size - (-(-n // width)) + 1)
        valid.append(build_frame(framing, src, NIC_NODE, word * width, n, rng.randbytes(n)))
    fuzz = mut.stream(valid)[:frames]
    want, tail_frames = {}, []
    for k in range(tail):
        n = rng.randint(1, min(max_payload, 2 * width))
        addr = (s_base + 2 * k) * width
        pl = rng.randbytes(n)
        tail_frames.append(Mutant(build_frame(framing, sentinel, NIC_NODE, addr, n, pl),
                                  "tail"))
        want[addr] = pl
    windows = [(s, *NIC_SOURCES.get(s, NIC_SENTINEL[1] if s == sentinel else (0, 0)))
               for s in range(256)]
    return NicChunk(fuzz + tail_frames, len(fuzz), windows, want)
