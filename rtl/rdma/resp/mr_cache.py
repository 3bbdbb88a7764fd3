"""The responder's MR cache: a direct-mapped cache of the MR table in host memory."""

from amaranth import Module, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from spec.checks import check_int, reject
from spec.formats.roce import MR_LAYOUT
from spec.rdma_responder import MR_CACHE_COUNTERS, MR_CACHE_RANGE

__all__ = ["MrCache"]


def _pow2(owner, name, value, low, high):
    check_int(owner, name, value, low, high)
    if value & (value - 1):
        reject(owner, f"{name} must be a power of two, not {value!r}")
    return value


class MrCache(wiring.Component):
    """``entries`` MRs of the ``mr_entries``-entry MR table in host memory, direct mapped.

    MR ``rkey % mr_entries`` (its table index ``x``) lives in line ``x % entries`` with
    ``x`` as its tag. MRs never change in the engine: lines are only filled, never
    written back. Reset clears every line's valid bit.

    Parameters
    ----------
    entries : int
        Cache lines (the responder's ``mr_cache``, a power of two 2 to 256).
    mr_entries : int
        Entries of the MR table in host memory (a power of two 2 to 256).

    Ports
    -----
    key : In(32)
        The rkey looked up (the verify stage's head job), read combinationally.
    look : In(1)
        A FIRST/ONLY job that passed the header check is at the head of the verify stage
        and needs ``key``'s MR in this cycle.
    take : In(1)
        The verify stage decides that job in this cycle (counted in ``mr_lookups``).
    hit : Out(1), mr : Out(MR_LAYOUT)
        ``key``'s line holds its table index (combinational), and that line's MR.
    rd_req : Out(stream.Signature(range(mr_entries)))
        The table index of a read to issue (one word), a register: set in the cycle
        after a ``look`` that misses while no read is on its way (``mr_misses`` counts
        it then), held until taken.
    fill : In(stream.Signature(MR_LAYOUT))
        The read's word (always ready); written into the line of the read's index with
        it as tag, seen from the next cycle (a ``look`` of that cycle still misses).
    mr_lookups, mr_misses : Out(32)

    Timing
    ------
    A hit costs nothing: ``hit`` and ``mr`` are combinational from ``key``. A miss seen
    in cycle ``c`` presents its read in ``c + 1``; if it is taken then and its word
    arrives in ``d``, the job hits in ``d + 1``. One read at a time: the verify stage
    holds its head job until it hits, so nothing else can evict the line it waits for.
    """

    def __init__(self, entries, mr_entries):
        lo, hi = MR_CACHE_RANGE
        self.entries = _pow2(self, "mr_cache (MR cache entries)", entries, lo, hi)
        self.mr_entries = _pow2(self, "MR table entries", mr_entries, 2, 256)
        ports = {
            "key": In(32), "look": In(1), "take": In(1),
            "hit": Out(1), "mr": Out(MR_LAYOUT),
            "rd_req": Out(stream.Signature(range(mr_entries))),
            "fill": In(stream.Signature(MR_LAYOUT)),
        }
        ports.update({name: Out(32) for name in MR_CACHE_COUNTERS})
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        xbits = (self.mr_entries - 1).bit_length()
        lbits = (self.entries - 1).bit_length()
        line = data.StructLayout({"tag": xbits, "mr": MR_LAYOUT})
        m.submodules.lines = lines = memory.Memory(shape=line, depth=self.entries, init=[])
        rd, wr = lines.read_port(domain="comb"), lines.write_port()
        valid = Signal(self.entries)
        busy = Signal()                 # a read issued, its word not back yet
        index = Signal(xbits)
        m.d.comb += index.eq(self.key[:xbits])
        at = index[:lbits] if lbits <= xbits else index
        m.d.comb += [rd.addr.eq(at), self.mr.eq(rd.data.mr),
                     self.hit.eq(valid.bit_select(rd.addr, 1) & (rd.data.tag == index))]
        with m.If(self.look & ~self.hit & ~busy):
            m.d.sync += [busy.eq(1), self.rd_req.valid.eq(1), self.rd_req.payload.eq(index),
                         self.mr_misses.eq(self.mr_misses + 1)]
        with m.If(self.rd_req.valid & self.rd_req.ready):
            m.d.sync += self.rd_req.valid.eq(0)
        fill_at = self.rd_req.payload[:lbits] if lbits <= xbits else self.rd_req.payload
        m.d.comb += [self.fill.ready.eq(1), wr.addr.eq(fill_at),
                     wr.data.tag.eq(self.rd_req.payload), wr.data.mr.eq(self.fill.payload)]
        with m.If(self.fill.valid):
            m.d.comb += wr.en.eq(1)
            m.d.sync += [busy.eq(0), valid.bit_select(wr.addr, 1).eq(1)]
        with m.If(self.take):
            m.d.sync += self.mr_lookups.eq(self.mr_lookups + 1)
        return m
