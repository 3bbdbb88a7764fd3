"""The posted-write buffer: engine write words gather into whole TLPs."""

from amaranth import Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.host.common import (
    TLP_LAYOUT,
    check_depth,
    checked_profile,
    dword_bytes,
    wrap_next,
)
from spec.host import MAX_READ_WORDS, WORD_BYTES, held_word_layout, wr_layout

__all__ = ["WriteBuffer", "tlp_word_limit"]


def tlp_word_limit(profile):
    """Words at which a posted write TLP closes without ``last``: ``max_payload / 64``,
    or the write buffer's size if that is smaller (a TLP is sent only once it is whole,
    so a larger one could never leave)."""
    return min(profile.max_payload // WORD_BYTES, profile.wr_fifo_words)


class WriteBuffer(wiring.Component):
    """Hold ``profile.wr_fifo_words`` posted-write words and mark whole TLPs.

    Parameters
    ----------
    profile : spec.host.HostProfile
        Uses ``wr_fifo_words`` and ``max_payload``.
    depth : int
        Host-memory words (a power of two).

    Ports
    -----
    wr : In(stream.Signature(wr_layout(depth)))
        ``ready`` while fewer than ``wr_fifo_words`` words are held (a function of a
        register: a word that leaves frees its place from the next cycle). Consecutive
        words form one TLP until a word with ``last`` or until it holds
        :func:`tlp_word_limit` words. A word adds ``4 * ceil(popcount(be) / 4)`` payload
        bytes to its TLP.
    tlp : Out(stream.Signature(TLP_LAYOUT))
        The oldest whole TLP (its words and payload bytes), offered from the cycle after
        its final word was accepted; ``valid`` is a function of a register. Taking it
        does not remove its words: those leave through ``word``.
    word : Out(stream.Signature(held_word_layout(depth)))
        The oldest word held (``addr``, ``data``, ``be``, ``mark``, ``tag``); ``valid``
        while any is held.
        A transfer removes it.
    """

    def __init__(self, profile, depth):
        self.profile = checked_profile(self, profile)
        self.depth = check_depth(self, depth)
        super().__init__({
            "wr": In(stream.Signature(wr_layout(depth))),
            "tlp": Out(stream.Signature(TLP_LAYOUT)),
            "word": Out(stream.Signature(held_word_layout(depth))),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.profile.wr_fifo_words
        limit = tlp_word_limit(self.profile)
        m.submodules.words = words = memory.Memory(
            shape=held_word_layout(self.depth), depth=n, init=[])
        m.submodules.tlps = tlps = memory.Memory(shape=TLP_LAYOUT, depth=n, init=[])
        ww, wr_ = words.write_port(), words.read_port(domain="comb")
        tw, tr = tlps.write_port(), tlps.read_port(domain="comb")
        w_ptr, r_ptr, tw_ptr, tr_ptr = (Signal(range(n), name=f"{k}_ptr")
                                       for k in ("w", "r", "tw", "tr"))
        count, tlp_count = Signal(range(n + 1)), Signal(range(n + 1))
        open_words = Signal(range(MAX_READ_WORDS + 1))   # words of the TLP being gathered
        open_bytes = Signal(range(MAX_READ_WORDS * WORD_BYTES + 1))
        accept, close, pop, tlp_pop = Signal(), Signal(), Signal(), Signal()
        sum_words, sum_bytes = Signal.like(open_words), Signal.like(open_bytes)
        w = self.wr.payload
        m.d.comb += [
            self.wr.ready.eq(count < n),
            accept.eq(self.wr.valid & self.wr.ready),
            ww.addr.eq(w_ptr), ww.en.eq(accept),
            ww.data.addr.eq(w.addr), ww.data.data.eq(w.data), ww.data.be.eq(w.be),
            ww.data.mark.eq(w.mark), ww.data.tag.eq(w.tag),
            sum_words.eq(open_words + 1),
            sum_bytes.eq(open_bytes + dword_bytes(w.be)),
            close.eq(accept & (w.last | (sum_words == limit))),
            tw.addr.eq(tw_ptr), tw.en.eq(close),
            tw.data.words.eq(sum_words), tw.data.bytes.eq(sum_bytes),
            wr_.addr.eq(r_ptr), tr.addr.eq(tr_ptr),
            self.word.valid.eq(count != 0), self.word.payload.eq(wr_.data),
            self.tlp.valid.eq(tlp_count != 0), self.tlp.payload.eq(tr.data),
            pop.eq(self.word.valid & self.word.ready),
            tlp_pop.eq(self.tlp.valid & self.tlp.ready),
        ]
        with m.If(accept):
            m.d.sync += [open_words.eq(Mux(close, 0, sum_words)),
                         open_bytes.eq(Mux(close, 0, sum_bytes))]
        m.d.sync += [
            w_ptr.eq(Mux(accept, wrap_next(w_ptr, n), w_ptr)),
            r_ptr.eq(Mux(pop, wrap_next(r_ptr, n), r_ptr)),
            tw_ptr.eq(Mux(close, wrap_next(tw_ptr, n), tw_ptr)),
            tr_ptr.eq(Mux(tlp_pop, wrap_next(tr_ptr, n), tr_ptr)),
            count.eq(count + accept - pop),
            tlp_count.eq(tlp_count + close - tlp_pop),
        ]
        return m
