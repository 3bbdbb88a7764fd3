"""The requester's tag table: which loads and atomics are outstanding, and where their
answers land."""

from amaranth import Const, Module, Mux, Signal
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from spec.checks import check_int
from spec.formats.nic_mem import MAX_TAGS, TAG_BITS, MemOp

__all__ = ["TagTable", "tag_entry_layout", "lowest_set"]


def tag_entry_layout(mem_words):
    """One entry: the local word where the response's data lands, its length, the op,
    and the node asked (only its response is accepted)."""
    return data.StructLayout({"laddr": range(mem_words), "length": 13, "op": MemOp,
                              "dst": 8})


def lowest_set(m, bits, n):
    """``(any, index)``: whether a bit of the ``n``-bit value ``bits`` is set, and the
    lowest set bit's index; a tree of depth ``log2(n)`` whose nodes are signals (each
    result is used twice above it: as a signal it is built once)."""
    if n == 1:
        return bits[0], Const(0, 1)
    half = 1 << ((n - 1).bit_length() - 1)
    lo_any, lo_idx = lowest_set(m, bits[:half], half)
    hi_any, hi_idx = lowest_set(m, bits[half:n], n - half)
    width = (n - 1).bit_length()
    any_, idx = Signal(), Signal(width)
    m.d.comb += [any_.eq(lo_any | hi_any), idx.eq(Mux(lo_any, lo_idx, hi_idx + half))]
    return any_, idx


class TagTable(wiring.Component):
    """``tags`` tags; a tag is *busy* from its issue until its response has landed, and
    *pending* from its issue until its response has been accepted.

    Parameters
    ----------
    tags : int
        1 to :data:`spec.formats.nic_mem.MAX_TAGS` (a build parameter).
    mem_words : int
        Words of the local memory (the entries' ``laddr`` range).

    Ports
    -----
    free : Out(1)
        Some tag is not busy (combinational from the state).
    free_tag : Out(TAG_BITS)
        The lowest tag that is not busy (valid with ``free``).
    take : In(1)
        Issue ``free_tag`` this cycle with the entry ``take_entry``: busy and pending from
        the next cycle. Legal only while ``free``.
    take_entry : In(tag_entry_layout(mem_words))
    lookup_tag : In(TAG_BITS)
    lookup_pending : Out(1)
        ``lookup_tag`` is below ``tags`` and pending (combinational).
    lookup_entry : Out(tag_entry_layout(mem_words))
        The entry of ``lookup_tag`` (combinational).
    answer : In(1)
        ``lookup_tag``'s response is accepted: it is no longer pending from the next
        cycle (a second response with the same tag is then refused).
    release : In(1)
    release_tag : In(TAG_BITS)
        The response of ``release_tag`` has landed: the tag is free from the next cycle.
    outstanding : Out(range(tags + 1))
        Busy tags.

    Timing
    ------
    Everything reads the state of the start of the cycle; ``take``, ``answer`` and
    ``release`` act at the clock edge ending it. A tag released in cycle ``t`` can be
    taken again in ``t + 1``. With every tag busy ``free`` is low: the issuer waits
    (back-pressure), nothing is dropped. Bad input: a ``lookup_tag`` at or above
    ``tags`` is not pending.
    """

    def __init__(self, tags, mem_words):
        self.tags = check_int(self, "tags", tags, 1, MAX_TAGS)
        self.mem_words = mem_words
        layout = tag_entry_layout(mem_words)
        super().__init__({
            "free": Out(1), "free_tag": Out(TAG_BITS),
            "take": In(1), "take_entry": In(layout),
            "lookup_tag": In(TAG_BITS), "lookup_pending": Out(1),
            "lookup_entry": Out(layout), "answer": In(1),
            "release": In(1), "release_tag": In(TAG_BITS),
            "outstanding": Out(range(tags + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.tags
        busy, pending = Signal(n), Signal(n)
        m.submodules.entries = entries = memory.Memory(
            shape=tag_entry_layout(self.mem_words), depth=n, init=[])
        wp = entries.write_port()
        rp = entries.read_port(domain="comb")
        free = Signal(n)
        m.d.comb += free.eq(~busy)
        any_free, idx = lowest_set(m, free, n)
        m.d.comb += [
            self.free.eq(any_free),
            self.free_tag.eq(idx),
            wp.addr.eq(idx), wp.data.eq(self.take_entry), wp.en.eq(self.take),
            rp.addr.eq(self.lookup_tag),
            self.lookup_entry.eq(rp.data),
            self.lookup_pending.eq((self.lookup_tag < n) & pending.bit_select(
                self.lookup_tag, 1)),
        ]
        one = Const(1, n)
        take_mask = Mux(self.take, one << idx, 0)
        ans_mask = Mux(self.answer, one << self.lookup_tag, 0)
        rel_mask = Mux(self.release, one << self.release_tag, 0)
        m.d.sync += [
            busy.eq((busy | take_mask) & ~rel_mask),
            pending.eq((pending | take_mask) & ~ans_mask),
            self.outstanding.eq(self.outstanding + self.take - self.release),
        ]
        return m
