"""The host-to-device direction: read completions and host posted writes, one at a time."""

from amaranth import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.host.common import ceil_div, check_depth, checked_profile, chunk_layout, vmax
from rtl.host.mmio_buffer import MAX_MMIO_WORDS
from spec.host import (
    COUNTER_BITS,
    ID_BITS,
    MAX_READ_WORDS,
    MMIO_ADDR_BITS,
    MMIO_NBYTES_BITS,
    WORD_BYTES,
    mmio_layout,
    rd_data_layout,
)

__all__ = ["DownScheduler", "DOWN_COUNTERS"]

#: The counters this part keeps (names of :data:`spec.host.HOST_COUNTERS`).
DOWN_COUNTERS = ("dn_cpl_tlps", "dn_mmio_tlps", "dn_payload_bytes", "dn_overhead_bytes",
                 "dn_busy_cycles")


class DownScheduler(wiring.Component):
    """Start completions and host posted writes on the serial ``down`` direction.

    Parameters
    ----------
    profile : spec.host.HostProfile
        Uses ``bytes_per_cycle``, ``cpl_overhead``, ``mmio_overhead``, ``mmio_fifo_words``.
    depth : int
        Host-memory words (a power of two).
    mmio_addr_bits : int
        Bits of a host write's register offset (:func:`spec.host.mmio_layout`).

    Ports
    -----
    piece : In(stream.Signature(chunk_layout(depth)))
        The next completion, ``valid`` once due; taken in the cycle it starts.
    mmio_in : In(stream.Signature(mmio_layout()))
        Host posted writes. ``ready`` is high in the cycles a write's words are taken;
        in the first it depends on ``valid`` and ``first`` of the same cycle.
    mmio_room, mmio_reserve, mmio_w, mmio_commit
        To the :class:`~rtl.host.mmio_buffer.MmioBuffer`: free words; words reserved
        when a write starts; each word taken; each word that has crossed.
    mem_rd_addr : Out(stream.Signature(range(depth), always_ready=True))
        Host-memory reads (``ready`` ignored); data comes back the cycle after.
    mem_rd_data : In(stream.Signature(8 * WORD_BYTES))
        Read data, taken the cycle after its address (``valid`` is not looked at).
    rd_data : Out(stream.Signature(rd_data_layout()))
        Completion words, ``id`` and ``last`` of their piece; ``ready`` is ignored.
        ``valid``, ``id`` and ``last`` are registers, ``data`` is ``mem_rd_data``.
    dn_* counters : Out(32)
        :data:`DOWN_COUNTERS`; TLP and byte counts change at the edge after a TLP starts,
        ``dn_busy_cycles`` at the edge after each occupied cycle.

    Timing
    ------
    ``down`` is free in a cycle when no TLP occupies it. In a free cycle the candidates are
    CPL (``piece.valid``) and MMIO (``mmio_in.valid & first`` and ``mmio_room >= n``
    with ``n = ceil(nbytes / 64)``); one starts if eligible, and when both are, the kind
    that did not start last (CPL after reset). A TLP of ``n`` words starting in cycle
    ``s`` occupies ``down`` in cycles ``s .. s + d - 1``:

    * completion: ``d = ceil((64 n + cpl_overhead) / bytes_per_cycle)``;
    * host write of ``nbytes``: ``d = max(1, n, ceil((nbytes + mmio_overhead) /
      bytes_per_cycle))``.

    Since ``bytes_per_cycle <= 64``, ``d >= n``. The last ``n`` occupied cycles,
    ``s + d - n .. s + d - 1``, are the TLP's word slots: for a completion, slot ``j``
    reads word ``addr + j`` from host memory and the word is on ``rd_data`` in the next
    cycle; for a host write, word ``j`` is taken from ``mmio_in`` in cycle ``s + j`` and
    stored, and slot ``j`` commits it in the next cycle (visible on ``mmio`` in the cycle
    after that). ::

        n = 2, d = 3 (pcie: 2 x 64 B + 20 B = 148 B at 63 B/cycle)
        cycle      s    s+1  s+2  s+3
        down       [C    C    C ]
        mem_rd_addr     a    a+1
        rd_data              w0   w1

        host write, nbytes = 64, d = 2 (pcie: 64 B + 24 B = 88 B)
        cycle      s    s+1  s+2  s+3
        mmio_in    w0                          (ready high in s: taken)
        down       [M    M ]
        commit               w0
        mmio                      w0           (valid from s + 3)
    """

    def __init__(self, profile, depth, mmio_addr_bits=MMIO_ADDR_BITS):
        self.profile = checked_profile(self, profile)
        self.depth = check_depth(self, depth)
        n = profile.mmio_fifo_words
        sig = {
            "piece": In(stream.Signature(chunk_layout(depth))),
            "mmio_in": In(stream.Signature(mmio_layout(mmio_addr_bits))),
            "mmio_room": In(range(n + 1)),
            "mmio_reserve": Out(range(MAX_MMIO_WORDS + 1)),
            "mmio_w": Out(stream.Signature(mmio_layout(mmio_addr_bits), always_ready=True)),
            "mmio_commit": Out(1),
            "mem_rd_addr": Out(stream.Signature(range(depth), always_ready=True)),
            "mem_rd_data": In(stream.Signature(8 * WORD_BYTES)),
            "rd_data": Out(stream.Signature(rd_data_layout())),
        }
        sig.update({name: Out(COUNTER_BITS) for name in DOWN_COUNTERS})
        super().__init__(sig)

    def elaborate(self, platform):
        m = Module()
        p = self.profile
        bpc, oc, om = p.bytes_per_cycle, p.cpl_overhead, p.mmio_overhead
        max_nbytes = (1 << MMIO_NBYTES_BITS) - 1
        d_most = max(-(-(MAX_READ_WORDS * WORD_BYTES + oc) // bpc),
                     -(-(max_nbytes + om) // bpc), 1)
        rem = Signal(range(d_most + 1))           # occupied cycles left, this one included
        slots = Signal(range(MAX_READ_WORDS + 1))  # word slots still to come
        is_mmio = Signal()                         # the kind of the TLP in progress
        to_take = Signal(range(MAX_MMIO_WORDS))    # host words still to take after this
        last_cpl = Signal()                        # the last TLP started was a completion
        nxt_addr = Signal(range(self.depth))
        cur_id, cur_last = Signal(ID_BITS), Signal()
        out_valid, out_id, out_last = Signal(), Signal(ID_BITS), Signal()
        commit = Signal()

        piece, host = self.piece.payload, self.mmio_in.payload
        free, can_cpl, can_mmio = Signal(), Signal(), Signal()
        start_cpl, start_mmio, started, busy = Signal(), Signal(), Signal(), Signal()
        n_mmio = Signal(range(MAX_MMIO_WORDS + 1))
        d_cpl, d_mmio = Signal(range(d_most + 1)), Signal(range(d_most + 1))
        r, w, slot, kind = Signal.like(rem), Signal.like(slots), Signal(), Signal()
        taking, rd_addr, word_last = Signal(), Signal(range(self.depth)), Signal()
        m.d.comb += [
            free.eq(rem == 0),
            n_mmio.eq(ceil_div(host.nbytes, WORD_BYTES)),
            can_cpl.eq(self.piece.valid),
            can_mmio.eq(self.mmio_in.valid & host.first & (n_mmio <= self.mmio_room)),
            start_cpl.eq(free & can_cpl & (~can_mmio | ~last_cpl)),
            start_mmio.eq(free & can_mmio & (~can_cpl | last_cpl)),
            started.eq(start_cpl | start_mmio),
            busy.eq(started | ~free),
            d_cpl.eq(ceil_div(piece.words * WORD_BYTES + oc, bpc)),
            d_mmio.eq(vmax(1, n_mmio, ceil_div(host.nbytes + om, bpc))),
            r.eq(Mux(start_cpl, d_cpl, Mux(start_mmio, d_mmio, rem))),
            w.eq(Mux(start_cpl, piece.words, Mux(start_mmio, n_mmio, slots))),
            kind.eq(Mux(started, start_mmio, is_mmio)),
            slot.eq(busy & (w != 0) & (r <= w)),
            self.piece.ready.eq(start_cpl),
            # Host words: the first in the start cycle, the others in the cycles after.
            taking.eq(start_mmio | (to_take != 0)),
            self.mmio_in.ready.eq(taking),
            self.mmio_w.valid.eq(taking),
            self.mmio_w.payload.eq(host),
            self.mmio_reserve.eq(Mux(start_mmio, n_mmio, 0)),
            self.mmio_commit.eq(commit),
            # Completion words: read in the slot, on rd_data the cycle after.
            rd_addr.eq(Mux(start_cpl, piece.addr, nxt_addr)),
            word_last.eq(Mux(start_cpl, piece.last, cur_last) & (w == 1)),
            self.mem_rd_addr.valid.eq(slot & ~kind),
            self.mem_rd_addr.payload.eq(rd_addr),
            self.mem_rd_data.ready.eq(1),
            self.rd_data.valid.eq(out_valid),
            self.rd_data.payload.data.eq(self.mem_rd_data.payload),
            self.rd_data.payload.id.eq(out_id),
            self.rd_data.payload.last.eq(out_last),
        ]
        with m.If(start_cpl):
            m.d.sync += [cur_id.eq(piece.id), cur_last.eq(piece.last), last_cpl.eq(1)]
        with m.If(start_mmio):
            m.d.sync += last_cpl.eq(0)
        with m.If(start_cpl | (slot & ~kind)):
            m.d.sync += nxt_addr.eq(rd_addr + (slot & ~kind))
        m.d.sync += [
            rem.eq(Mux(busy, r - 1, 0)),
            slots.eq(w - slot),
            is_mmio.eq(kind),
            to_take.eq(Mux(start_mmio, n_mmio - 1, Mux(to_take != 0, to_take - 1, 0))),
            commit.eq(slot & kind),
            out_valid.eq(slot & ~kind),
            out_id.eq(Mux(start_cpl, piece.id, cur_id)),
            out_last.eq(word_last),
            self.dn_cpl_tlps.eq(self.dn_cpl_tlps + start_cpl),
            self.dn_mmio_tlps.eq(self.dn_mmio_tlps + start_mmio),
            self.dn_payload_bytes.eq(self.dn_payload_bytes
                                     + Mux(start_cpl, piece.words * WORD_BYTES,
                                           Mux(start_mmio, host.nbytes, 0))),
            self.dn_overhead_bytes.eq(self.dn_overhead_bytes
                                      + Mux(start_cpl, oc, Mux(start_mmio, om, 0))),
            self.dn_busy_cycles.eq(self.dn_busy_cycles + busy),
        ]
        return m
