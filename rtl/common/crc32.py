"""Streaming Ethernet CRC-32 over a packet stream, one beat a cycle, any packet length.

Ref: IEEE 802.3-2022 clause 3.2.9 (FCS): CRC-32, generator 0x04C11DB7, initial value all
ones, bits sent LSB first, complemented result. This is exactly ``zlib.crc32``.
"""

import functools

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from rtl.common import gf2
from spec.formats.packet import check_width, packet_layout

__all__ = ["CRC32_POLY_REFLECTED", "CRC32_INIT", "CRC32_RESIDUE", "crc32_step", "data_rows",
           "Crc32Core"]

#: The generator polynomial, bit-reversed (LSB-first register).
CRC32_POLY_REFLECTED = 0xEDB88320
#: Register value before the first byte.
CRC32_INIT = 0xFFFFFFFF


def crc32_step(reg, data, nbytes):
    """Advance the raw (not complemented) CRC register over ``nbytes`` bytes of ``data``.

    Byte ``i`` of the beat is ``(data >> 8*i) & 0xFF``, processed in order.
    """
    for i in range(nbytes):
        reg ^= (data >> (8 * i)) & 0xFF
        for _ in range(8):
            reg = (reg >> 1) ^ (CRC32_POLY_REFLECTED if reg & 1 else 0)
    return reg


@functools.cache
def data_rows(width):
    """The GF(2) map (rows, see :mod:`rtl.common.gf2`) from a full ``width``-byte beat to
    the register change it causes from a zero register: ``crc32_step(0, data, width)``.
    Cached: every CRC block of a top of one width shares it."""
    return tuple(gf2.matrix_of(lambda d: crc32_step(0, d, width), 8 * width, 32))


def _residue():
    frame_reg = crc32_step(CRC32_INIT, 0x5A, 1)
    fcs = frame_reg ^ 0xFFFFFFFF
    return crc32_step(frame_reg, fcs, 4)


#: Raw register value after any frame followed by its own FCS (the "magic" residue).
CRC32_RESIDUE = _residue()


#: Input bits per table lookup of a :func:`_linear_map`.
_SLICE = 4


def _xor_tree(terms):
    """The XOR of ``terms`` as a balanced tree (depth ``ceil(log2(len(terms)))``).

    Not a chain ``((t0 ^ t1) ^ t2) ^ ...``: an event-driven simulator (Icarus) evaluates
    each XOR as soon as one of its inputs changes, so a chain over 64 byte lanes that all
    change in one beat took about 60 intermediate values per beat, each of which rippled
    through the rest of the network; Icarus ran the FCS blocks over 10x slower.
    """
    terms = list(terms)
    while len(terms) > 1:
        terms = [terms[i] ^ terms[i + 1] if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
    return terms[0]


@functools.cache
def _slice_table(rows, n):
    """The ROM contents of :func:`_linear_map` for the map ``rows`` on ``n`` input bits
    (cached: the CRC blocks of a top share them)."""
    full = (1 << n) - 1
    return tuple(gf2.apply(rows, (v << (_SLICE * j)) & full)
                 for j in range((n + _SLICE - 1) // _SLICE) for v in range(1 << _SLICE))


def _linear_map(m, vec, rows, name):
    """The GF(2) map ``rows`` (see :mod:`rtl.common.gf2`) applied to ``vec``.

    By linearity the result is the XOR over the 4-bit slices of ``vec`` of one table
    lookup each: slice ``j`` reads a constant ROM of 16 entries (``name`` + ``j``) that
    holds at address ``v`` the image of ``v`` placed at slice ``j``. The map is in ROMs
    rather than in ``Const`` operands: Amaranth lowers an AND with a constant into bit
    selections, which made the exported Verilog, and the C++ that Verilator builds from
    it, ten times larger. Table lookups also cost Icarus far fewer events (eight lookups
    for 32 bits) than one parity per output bit did (32 ANDs, 32 reductions and a
    concatenation that passes on every bit change). One small ROM per slice, not one
    ROM with a read port per slice: Yosys maps every read port of a ROM to a multiplexer
    tree over all its entries before it sees that the slice number is constant, which
    for the 128 slices of a 64-byte beat (2,048 entries) was 262,016 multiplexers and
    more memory than Yosys has. A synthesis flow folds the ROMs back into XOR trees (the
    area script counts ROMs as logic, not as memory bits).
    """
    n = len(vec)
    table = _slice_table(tuple(rows), n)
    parts = []
    for j in range((n + _SLICE - 1) // _SLICE):
        rom = memory.Memory(shape=len(rows), depth=1 << _SLICE,
                            init=table[j << _SLICE:(j + 1) << _SLICE])
        m.submodules[f"{name}{j}"] = rom
        port = rom.read_port(domain="comb")
        bits = vec[_SLICE * j:_SLICE * (j + 1)]
        m.d.comb += port.addr.eq(Cat(bits, Const(0, _SLICE - len(bits))))
        parts.append(port.data)
    return _xor_tree(parts)


def _data_part(m, data, width):
    """The data part of a full beat: :func:`data_rows` applied to ``data``.

    By linearity, the register change caused by the beat is the XOR of the changes caused
    by each of its 4-bit slices alone: one lookup per slice in a ROM of 16 entries per
    slice (:func:`_linear_map`), summed in a balanced tree. Slices of 4 bits rather than
    the classic byte lanes of 256 entries: the tables of a 64-byte datapath are 2,048
    words instead of 16,384, which were three quarters of the exported Verilog of every
    large top and a good part of its build; both simulators also run faster with the
    smaller tables (docs/bench.md). Synthesis folds the constant tables into XOR logic.
    """
    return _linear_map(m, data, data_rows(width), "data_rows")


class Crc32Core(wiring.Component):
    """The CRC register and its parallel update network for a ``width``-byte datapath.

    Parameters
    ----------
    width : int
        Datapath width in bytes (see :data:`spec.formats.packet.SUPPORTED_WIDTHS`).

    Ports
    -----
    beat : In(packet_layout(width))
        The beat seen on the stream this cycle.
    en : In(1)
        The beat is transferred this cycle (``valid & ready`` of the watched stream).
    crc : Out(32)
        Combinational, same cycle: ``zlib.crc32`` of the packet up to and including
        ``beat`` (meaningful when ``en`` and ``beat.last``).
    residue_ok : Out(1)
        Combinational, same cycle: the packet so far, read as frame + FCS, has a correct
        FCS (meaningful when ``en`` and ``beat.last``).

    Timing: zero latency; the register takes the new value at the clock edge that
    transfers the beat and returns to the initial value after the last beat. A beat with
    ``first`` set starts a new packet whatever the register holds. Bytes above
    ``nbytes`` on the last beat are ignored.
    """

    def __init__(self, width):
        self.width = check_width(width, self)
        super().__init__({
            "beat": In(packet_layout(width)),
            "en": In(1),
            "crc": Out(32),
            "residue_ok": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        w = self.width
        # One full beat from any register value: state part and data part.
        state_rows = gf2.matrix_of(lambda s: crc32_step(s, 0, w), 32, 32)
        # A partial last beat of n bytes equals a full beat with the data zero padded at
        # the top, followed by undoing (w - n) zero-byte steps; the undo is done in
        # log2(w) stages of 2**k bytes, each taken when bit k of (w - n) is set.
        undo_one = gf2.inverse(gf2.matrix_of(lambda s: crc32_step(s, 0, 1), 32, 32))
        undo_pow = [undo_one]
        while 1 << len(undo_pow) < w:
            undo_pow.append(gf2.compose(undo_pow[-1], undo_pow[-1]))

        reg = Signal(32, init=CRC32_INIT)
        cur = Signal(32)
        m.d.comb += cur.eq(Mux(self.beat.first, CRC32_INIT, reg))

        nbytes = self.beat.nbytes
        mask = Signal(8 * w)
        m.d.comb += mask.eq(Const((1 << (8 * w)) - 1, 8 * w) >> ((w - nbytes) * 8)[:16])
        masked = Signal(8 * w)
        m.d.comb += masked.eq(self.beat.data & mask)
        full = Signal(32)
        m.d.comb += full.eq(_linear_map(m, cur, state_rows, "state_rows")
                            ^ _data_part(m, masked, w))
        undo = Signal(len(undo_pow))
        m.d.comb += undo.eq(w - nbytes)
        nxt = full
        for k, rows in enumerate(undo_pow):
            stage = Signal(32, name=f"undo{k}")
            m.d.comb += stage.eq(Mux(undo[k], _linear_map(m, nxt, rows, f"undo{k}_rows"), nxt))
            nxt = stage

        m.d.comb += [
            self.crc.eq(~nxt),
            self.residue_ok.eq(nxt == CRC32_RESIDUE),
        ]
        with m.If(self.en):
            m.d.sync += reg.eq(Mux(self.beat.last, CRC32_INIT, nxt))
        return m
