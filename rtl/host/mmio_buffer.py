"""The device's receive buffer for host posted writes, with room reserved ahead."""

from amaranth import Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.host.common import checked_profile, wrap_next
from spec.host import MMIO_ADDR_BITS, MMIO_NBYTES_BITS, WORD_BYTES, mmio_layout

__all__ = ["MmioBuffer", "MAX_MMIO_WORDS"]

#: Words of the longest host write ``nbytes`` can describe.
MAX_MMIO_WORDS = -(-((1 << MMIO_NBYTES_BITS) - 1) // WORD_BYTES)


class MmioBuffer(wiring.Component):
    """A FIFO of ``profile.mmio_fifo_words`` host-write words whose room is reserved when
    a write starts, whose words are stored as they are taken from the host, and which
    become visible one by one when they have crossed the link (``commit``).

    Parameters
    ----------
    profile : spec.host.HostProfile
        Uses ``mmio_fifo_words``.
    addr_bits : int
        Bits of a host write's register offset (:func:`spec.host.mmio_layout`).

    Ports
    -----
    room : Out(range(mmio_fifo_words + 1))
        Words neither held nor reserved; a function of registers.
    reserve : In(range(MAX_MMIO_WORDS + 1))
        Words reserved in this cycle (a write starts); ``room`` drops from the next cycle.
    w : In(stream.Signature(mmio_layout(), always_ready=True))
        A word of a started write, stored behind the previous ones; not yet visible.
    commit : In(1)
        The oldest stored, invisible word becomes visible: offered on ``o`` from the next
        cycle (like a SyncFIFO write in this cycle).
    o : Out(stream.Signature(mmio_layout()))
        The oldest visible word; ``valid`` is a function of a register. A transfer frees
        its place (``room`` rises in the next cycle).
    """

    def __init__(self, profile, addr_bits=MMIO_ADDR_BITS):
        self.profile = checked_profile(self, profile)
        self.addr_bits = addr_bits
        n = profile.mmio_fifo_words
        super().__init__({
            "room": Out(range(n + 1)),
            "reserve": In(range(MAX_MMIO_WORDS + 1)),
            "w": In(stream.Signature(mmio_layout(addr_bits), always_ready=True)),
            "commit": In(1),
            "o": Out(stream.Signature(mmio_layout(addr_bits))),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.profile.mmio_fifo_words
        m.submodules.words = words = memory.Memory(shape=mmio_layout(self.addr_bits), depth=n,
                                                   init=[])
        wp, rp = words.write_port(), words.read_port(domain="comb")
        w_ptr, r_ptr = Signal(range(n)), Signal(range(n))
        used = Signal(range(n + 1))       # held or reserved
        visible = Signal(range(n + 1))
        pop = Signal()
        m.d.comb += [
            self.room.eq(n - used),
            wp.addr.eq(w_ptr), wp.data.eq(self.w.payload), wp.en.eq(self.w.valid),
            rp.addr.eq(r_ptr),
            self.o.valid.eq(visible != 0), self.o.payload.eq(rp.data),
            pop.eq(self.o.valid & self.o.ready),
        ]
        m.d.sync += [
            w_ptr.eq(Mux(self.w.valid, wrap_next(w_ptr, n), w_ptr)),
            r_ptr.eq(Mux(pop, wrap_next(r_ptr, n), r_ptr)),
            used.eq(used + self.reserve - pop),
            visible.eq(visible + self.commit - pop),
        ]
        return m
