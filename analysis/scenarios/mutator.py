"""Seeded mutations of valid frames: :class:`Mutator` and the header fields it rewrites.

The header fields are enumerated from the spec layouts (:func:`header_fields`: every
leaf field of a layout), so a field added to a layout is fuzzed without a change here.
Every mutation can be sent with its checksums as they fall (caught by the FCS) or
recomputed (the ``refresh`` function the caller gives), so that mutations reach the
checks behind the CRCs.

Mutation kinds (:data:`KINDS`): ``valid`` (unchanged), ``bitflip`` (1 to 3 bits of the
frame), ``field`` (one header field rewritten: 0, all ones, +-1, one bit, or random),
``truncate`` (cut short), ``extend`` (bytes added before the trailer), ``duplicate``
(a valid frame sent again), ``reorder`` (two valid frames swapped). Fixes
(:data:`FIXES`): ``none``, ``fcs``, ``crc`` (RoCEv2: IPv4 checksum, ICRC and FCS).
"""

import dataclasses

from amaranth.lib import data

__all__ = ["KINDS", "FIXES", "Field", "Mutant", "header_fields", "Mutator"]

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
