"""Outstanding read chunks with their due cycle; each leaves as RCB-aligned pieces."""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.host.common import check_depth, checked_profile, chunk_layout, wrap_next
from spec.host import COUNTER_BITS, MAX_READ_WORDS, WORD_BYTES

__all__ = ["DueQueue"]

#: Bits of the free-running cycle count and of the due stamps.
NOW_BITS = 32


class DueQueue(wiring.Component):
    """The chunks whose read request TLP has been sent, in issue order: one per tag.

    A chunk is stamped ``due = now + read_latency`` when pushed and stored; nothing moves
    while it waits, so simulation work does not grow with ``read_latency``.

    Parameters
    ----------
    profile : spec.host.HostProfile
        Uses ``tags`` (the queue's entries), ``read_latency`` and ``rcb``.
    depth : int
        Host-memory words (a power of two).

    Ports
    -----
    push : In(stream.Signature(chunk_layout(depth), always_ready=True))
        A chunk whose request TLP starts in this cycle. The pusher must see ``room``
        first; a push without room is lost.
    room : Out(1)
        Fewer than ``tags`` chunks are held (a tag is free); a function of a register.
    now : In(32)
        The cycle count (0 in cycle 0, wrapping).
    piece : Out(stream.Signature(chunk_layout(depth)))
        The next completion of the oldest chunk. ``valid`` from the cycle ``now`` reaches
        the chunk's due stamp (compared modulo 2**32, so a chunk may wait up to 2**31
        cycles); with ``P = rcb / 64`` words a piece starts at ``a`` (the chunk's
        ``addr`` plus the words already taken, modulo ``depth``) and has ``min(words
        left, P - a mod P)`` words; ``last`` when it is the chunk's final piece and the
        chunk ends the engine's read. Taking the final piece frees the chunk's entry
        (``room`` rises in the next cycle).
    level : Out(range(tags + 1))
        Chunks held: the tags in use.
    tags_max : Out(32)
        The highest ``level`` so far.
    """

    def __init__(self, profile, depth):
        self.profile = checked_profile(self, profile)
        self.depth = check_depth(self, depth)
        lay = chunk_layout(depth)
        super().__init__({
            "push": In(stream.Signature(lay, always_ready=True)),
            "room": Out(1),
            "now": In(NOW_BITS),
            "piece": Out(stream.Signature(lay)),
            "level": Out(range(profile.tags + 1)),
            "tags_max": Out(COUNTER_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        p, depth = self.profile, self.depth
        n, span = p.tags, p.rcb // WORD_BYTES
        entry = data.StructLayout({"due": NOW_BITS, "chunk": chunk_layout(depth)})
        m.submodules.queue = queue = memory.Memory(shape=entry, depth=n, init=[])
        wp, rp = queue.write_port(), queue.read_port(domain="comb")
        w_ptr, r_ptr = Signal(range(n)), Signal(range(n))
        level = self.level
        done = Signal(range(MAX_READ_WORDS))      # words of the head chunk already taken
        head = rp.data
        waited = Signal(NOW_BITS)
        addr = Signal(range(depth))
        left = Signal(range(MAX_READ_WORDS + 1))
        room = Signal(range(span + 1))
        final, take, pop = Signal(), Signal(), Signal()
        m.d.comb += [
            self.room.eq(level < n),
            wp.addr.eq(w_ptr), wp.en.eq(self.push.valid),
            wp.data.due.eq(self.now + p.read_latency), wp.data.chunk.eq(self.push.payload),
            rp.addr.eq(r_ptr),
            waited.eq(self.now - head.due),
            addr.eq(head.chunk.addr + done),
            left.eq(head.chunk.words - done),
            room.eq(span - (addr & (span - 1))),
            final.eq(left <= room),
            self.piece.valid.eq((level != 0) & ~waited[-1]),
            self.piece.payload.addr.eq(addr),
            self.piece.payload.words.eq(Mux(final, left, room)),
            self.piece.payload.id.eq(head.chunk.id),
            self.piece.payload.last.eq(final & head.chunk.last),
            take.eq(self.piece.valid & self.piece.ready),
            pop.eq(take & final),
        ]
        with m.If(take):
            m.d.sync += done.eq(Mux(final, 0, done + self.piece.payload.words))
        next_level = Signal.like(level)
        m.d.comb += next_level.eq(level + self.push.valid - pop)
        m.d.sync += [
            w_ptr.eq(Mux(self.push.valid, wrap_next(w_ptr, n), w_ptr)),
            r_ptr.eq(Mux(pop, wrap_next(r_ptr, n), r_ptr)),
            level.eq(next_level),
            self.tags_max.eq(Mux(next_level > self.tags_max, next_level, self.tags_max)),
        ]
        return m
