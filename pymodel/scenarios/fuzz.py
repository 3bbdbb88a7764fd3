"""Seeded mutation fuzzing of the two receivers: mutated frames and the fuzz scenarios.

:class:`Mutator` turns valid frames into malformed, corrupted or misaddressed ones. The
header fields it rewrites are enumerated from the spec layouts (:func:`header_fields`:
every leaf field of every header of :data:`spec.formats.roce.WRITE_RETH_HEADER`, or of
the NIC header of a framing), so a field added to a layout is fuzzed without a change
here. Every mutation can be sent with its checksums as they fall (caught by the FCS) or
recomputed (FCS, and for RoCEv2 the IPv4 header checksum and the ICRC as well), so that
mutations reach the checks behind the CRCs.

Mutation kinds (:data:`KINDS`): ``valid`` (unchanged), ``bitflip`` (1 to 3 bits of the
frame), ``field`` (one header field rewritten: 0, all ones, +-1, one bit, or random),
``truncate`` (cut short), ``extend`` (bytes added before the trailer), ``duplicate``
(a valid frame sent again), ``reorder`` (two valid frames swapped). Fixes
(:data:`FIXES`): ``none``, ``fcs``, ``crc`` (RoCEv2: IPv4 checksum, ICRC and FCS).

The scenarios (:func:`rdma_chunk`, :func:`nic_chunk`) are pure functions of
``(seed, chunk)``: the co-simulation, the model and the tests build the same frames.
"""

import dataclasses
import random
import zlib

from amaranth.lib import data

from pymodel.nic.frames import build_frame
from pymodel.rdma.frames import Endpoint, icrc, ipv4_checksum, write_frame
from pymodel.rdma.verbs import IP_A, IP_B, MAC_A, MAC_B, Verbs
from spec.formats.nic import Framing, header_layout
from spec.formats.roce import WRITE_RETH_HEADER, OpCode, QpState
from spec.rdma_engine import HOST_DEPTH

__all__ = ["KINDS", "FIXES", "Field", "Mutant", "header_fields", "Mutator", "RdmaChunk",
           "NicChunk", "rdma_chunk", "nic_chunk", "NIC_SOURCES", "NIC_SENTINEL",
           "NIC_NODE"]

KINDS = ("valid", "bitflip", "field", "truncate", "extend", "duplicate", "reorder")
FIXES = ("none", "fcs", "crc")


@dataclasses.dataclass(frozen=True)
class Field:
    """One header field: its dotted ``name``, bit ``offset`` from wire byte 0 (LSB
    first, as the layouts are packed) and ``width``; ``big`` when it is a byte-aligned
    multi-byte field in network order (``+-1`` then counts in network order)."""
    name: str
    offset: int
    width: int
    big: bool


def header_fields(layout, big_endian, prefix="", base=0):
    """Every leaf field of a (nested) ``StructLayout`` as :class:`Field` s. Arrays are
    leaves (a MAC address is one field). ``big_endian(name, width)`` says whether a
    byte-aligned field is in network order."""
    out = []
    for name, f in layout:
        full = f"{prefix}{name}"
        if isinstance(f.shape, data.StructLayout):
            out += header_fields(f.shape, big_endian, full + ".", base + f.offset)
        else:
            off = base + f.offset
            aligned = off % 8 == 0 and f.width % 8 == 0 and f.width > 8
            out.append(Field(full, off, f.width, aligned and big_endian(full, f.width)))
    return out


@dataclasses.dataclass
class Mutant:
    """A frame to send (FCS included) and how it was made: ``kind`` of :data:`KINDS`,
    ``fix`` of :data:`FIXES`, ``field`` the rewritten field's name (kind ``field``)."""
    frame: bytes
    kind: str
    fix: str = "none"
    field: str = ""

    @property
    def label(self):
        """The statistics key: ``kind+fix``."""
        return f"{self.kind}+{self.fix}"


def _swap(value, nbytes):
    return int.from_bytes(value.to_bytes(nbytes, "little"), "big")


class Mutator:
    """Mutations of valid frames, from a seeded :class:`random.Random`.

    Parameters
    ----------
    rng : random.Random
    fields : list of Field
        The header fields (:func:`header_fields`).
    refresh : callable
        ``refresh(body, fix)`` -> frame: ``body`` is the frame without FCS; returns it
        with its FCS (``fix`` ``"fcs"``), with the protocol's inner checksums recomputed
        as well (``"crc"``), or with the FCS of the valid frame it came from (``"none"``
        is handled here: the old FCS is kept).
    fixes : tuple
        The fixes this protocol has (``("none", "fcs")`` for the NIC).
    weights : dict
        Relative frequency of each kind of :data:`KINDS` (missing: 0).
    forbid : callable or None
        ``forbid(frame)`` true: the mutant must not be sent (it would address what the
        fuzz keeps out of reach, the sentinel); another is drawn.
    """

    def __init__(self, rng, fields, refresh, fixes, weights, forbid=None):
        unknown = set(weights) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown mutation kind(s) {sorted(unknown)}; known: {KINDS}")
        self.rng, self.fields, self.refresh, self.fixes = rng, fields, refresh, fixes
        self.kinds = [k for k in KINDS if weights.get(k, 0) > 0]
        self.weights = [weights[k] for k in self.kinds]
        self.forbid = forbid
        self._field_turn = 0

    def _value(self, f, old):
        r, mask = self.rng.randrange(6), (1 << f.width) - 1
        nb = f.width // 8
        if r == 0:
            return 0
        if r == 1:
            return mask
        if r in (2, 3):
            step = 1 if r == 2 else -1
            if f.big:
                return _swap((_swap(old, nb) + step) & mask, nb)
            return (old + step) & mask
        if r == 4:
            return old ^ (1 << self.rng.randrange(f.width))
        return self.rng.getrandbits(f.width)

    def _field(self, body):
        # Round robin over the fields, so that every field is rewritten early on; a
        # field beyond a short frame's end (the RETH of a small LAST) is passed over.
        for _ in range(len(self.fields)):
            f = self.fields[self._field_turn % len(self.fields)]
            self._field_turn += 1
            if f.offset + f.width <= 8 * len(body):
                break
        else:
            raise ValueError(f"a frame of {len(body)} bytes holds no header field")
        bits = int.from_bytes(body, "little")
        mask = (1 << f.width) - 1
        old = (bits >> f.offset) & mask
        new = self._value(f, old)
        if new == old:
            new = old ^ 1
        bits = (bits & ~(mask << f.offset)) | (new << f.offset)
        return bits.to_bytes(len(body), "little"), f.name

    def mutate(self, frame, kind=None):
        """One mutant of the valid ``frame`` (FCS included), of ``kind`` (default: drawn
        with the weights). ``duplicate`` and ``reorder`` are made by the caller (they
        need a stream); asked here, they return the frame unchanged with that kind."""
        for _ in range(64):
            m = self._mutate(frame, kind)
            if self.forbid is None or not self.forbid(m.frame):
                return m
        return Mutant(frame, "valid")

    def _mutate(self, frame, kind):
        rng = self.rng
        kind = kind or rng.choices(self.kinds, self.weights)[0]
        if kind in ("valid", "duplicate", "reorder"):
            return Mutant(bytes(frame), kind)
        fix = rng.choice(self.fixes)
        body, fcs = bytearray(frame[:-4]), frame[-4:]
        name = ""
        if kind == "bitflip":
            for _ in range(rng.randint(1, 3)):
                k = rng.randrange(8 * len(frame) if fix == "none" else 8 * len(body))
                if k < 8 * len(body):
                    body[k // 8] ^= 1 << (k % 8)
                else:
                    k -= 8 * len(body)
                    fcs = bytes(b ^ (1 << (k % 8)) if j == k // 8 else b
                                for j, b in enumerate(fcs))
        elif kind == "field":
            body, name = self._field(bytes(body))
        elif kind == "truncate":
            body = body[:rng.randrange(1, max(2, len(body)))]
        elif kind == "extend":
            body += rng.randbytes(rng.choice((1, 2, 3, 4, 63, 64, 65, rng.randint(1, 200))))
        else:
            raise ValueError(f"unknown mutation kind {kind!r}; known: {KINDS}")
        if fix == "none":
            out = bytes(body) + bytes(fcs)
        else:
            out = self.refresh(bytes(body), fix)
        return Mutant(out, kind, fix, name)

    def stream(self, valid, mutate_p=0.75):
        """Mutants of the valid frames ``valid``, in order: each valid frame is sent as
        is, with ``mutate_p`` of the time a mutant of it before it (a mutant of a
        frame's kind ``duplicate`` is the frame sent twice; ``reorder`` swaps it with
        the next valid frame, and the later one is sent again after them)."""
        out, k = [], 0
        while k < len(valid):
            frame = valid[k]
            if self.rng.random() < mutate_p:
                m = self.mutate(frame)
                if m.kind == "duplicate":
                    out += [Mutant(frame, "duplicate"), Mutant(frame, "duplicate")]
                    k += 1
                    continue
                if m.kind == "reorder" and k + 1 < len(valid):
                    # The later frame first, then the earlier, then the later again (as
                    # a go-back-N sender would): the receiver is back in step after it.
                    out += [Mutant(valid[k + 1], "reorder"), Mutant(frame, "reorder"),
                            Mutant(valid[k + 1], "reorder")]
                    k += 2
                    continue
                if m.kind not in ("duplicate", "reorder"):
                    out.append(m)
            out.append(Mutant(frame, "valid"))
            k += 1
        return out


# -- RoCEv2 ---------------------------------------------------------------------------------

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


def rdma_chunk(seed, chunk, frames, depth=HOST_DEPTH, mr_entries=16, tail=4, fillers=256):
    """``frames`` fuzz frames (RoCEv2 WRITEs to QP :data:`RDMA_QPN` and mutants of them)
    then ``fillers`` one-beat frames with a bad FCS (a gap on the wire, so that the
    responder's buffers drain whatever the fuzz left) and ``tail`` valid WRITE ONLYs to
    the sentinel QP :data:`RDMA_SENTINEL_QPN` and its own MR, whose QPN and rkey no
    mutant carries (the mutator redraws those). Deterministic in ``(seed, chunk)``."""
    rng = random.Random(f"rdma-fuzz-{seed}-{chunk}")
    v = Verbs(depth=depth, mr_entries=mr_entries)
    v.create_qp(1, RDMA_QPN, pmtu_log2=8, psn_a=RDMA_PSN, psn_b=RDMA_PSN)
    v.create_qp(2, RDMA_SENTINEL_QPN, psn_a=RDMA_SENTINEL_PSN, psn_b=RDMA_SENTINEL_PSN)
    v.create_qp(3, RDMA_ERR_QPN, psn_a=RDMA_ERR_PSN, psn_b=RDMA_ERR_PSN,
                state_b=QpState.ERR)
    mr_bytes = 8192
    raddr, rkey = v.reg_mr(mr_bytes, index=2)
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
    filler = [Mutant(bytes(60) + b"\xde\xad\xbe\xef", "filler") for _ in range(fillers)]
    want, tail_frames = {}, []
    for k in range(tail):
        pl = rng.randbytes(rng.randint(1, 128))
        tail_frames.append(Mutant(write_frame(
            ops.RC_RDMA_WRITE_ONLY, a, b, 2, RDMA_SENTINEL_QPN, RDMA_SENTINEL_PSN + k,
            k == tail - 1, pl, va=s_addr + 128 * k, rkey=s_key, dma_length=len(pl)), "tail"))
        want[s_addr + 128 * k] = pl
    contexts = [v.qpc_base_b + q for q in (RDMA_QPN, RDMA_SENTINEL_QPN)]
    # The ERR QP's MR is read-only to the checks: nothing may land there.
    return RdmaChunk(v, fuzz + filler + tail_frames, len(fuzz),
                     [(raddr, mr_bytes), (s_addr, 64 * tail * 2)],
                     [(ro_addr, 256), (e_addr, 1024)], contexts, want)


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
