"""The read queue: engine reads wait here and leave as MRRS-aligned chunks."""

from amaranth import Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.host.common import check_depth, checked_profile, chunk_layout, wrap_next
from spec.host import MAX_READ_WORDS, WORD_BYTES, rd_req_layout

__all__ = ["ReadSplitter"]


class ReadSplitter(wiring.Component):
    """Queue engine reads (``profile.rd_queue`` entries) and cut each into chunks.

    Parameters
    ----------
    profile : spec.host.HostProfile
        Uses ``rd_queue`` and ``max_read_request``.
    depth : int
        Host-memory words (a power of two); addresses wrap modulo ``depth``.

    Ports
    -----
    rd_req : In(stream.Signature(rd_req_layout(depth)))
        ``ready`` while fewer than ``rd_queue`` reads are queued (a function of a
        register: a read leaves the queue in the cycle its last chunk is taken, and
        ``ready`` rises in the cycle after). ``words`` must be 1..64.
    chunk : Out(stream.Signature(chunk_layout(depth)))
        The next chunk of the oldest queued read, offered from the cycle after the read
        was accepted; ``valid`` is a function of a register. With ``R =
        max_read_request / 64`` words, the read's words ``addr .. addr + words - 1`` are
        cut at addresses that are multiples of ``R``: a chunk starts at ``a`` (the read's
        ``addr`` plus the words already taken, modulo ``depth``) and has
        ``min(words left, R - a mod R)`` words; ``last`` marks the read's final chunk.
        Taking a chunk (``ready``) moves to the next one in the same cycle's edge.
    """

    def __init__(self, profile, depth):
        self.profile = checked_profile(self, profile)
        self.depth = check_depth(self, depth)
        super().__init__({
            "rd_req": In(stream.Signature(rd_req_layout(depth))),
            "chunk": Out(stream.Signature(chunk_layout(depth))),
        })

    def elaborate(self, platform):
        m = Module()
        n, depth = self.profile.rd_queue, self.depth
        span = self.profile.max_read_request // WORD_BYTES
        m.submodules.queue = queue = memory.Memory(shape=rd_req_layout(depth), depth=n,
                                                   init=[])
        wp, rp = queue.write_port(), queue.read_port(domain="comb")
        w_ptr, r_ptr = Signal(range(n)), Signal(range(n))
        level = Signal(range(n + 1))
        done = Signal(range(MAX_READ_WORDS))       # words of the head read already taken
        head = rp.data
        push, pop, take = Signal(), Signal(), Signal()
        addr = Signal(range(depth))
        left = Signal(range(MAX_READ_WORDS + 1))
        room = Signal(range(span + 1))
        m.d.comb += [
            self.rd_req.ready.eq(level < n),
            push.eq(self.rd_req.valid & self.rd_req.ready),
            wp.addr.eq(w_ptr), wp.data.eq(self.rd_req.payload), wp.en.eq(push),
            rp.addr.eq(r_ptr),
            addr.eq(head.addr + done),
            left.eq(head.words - done),
            room.eq(span - (addr & (span - 1))),
            self.chunk.valid.eq(level != 0),
            self.chunk.payload.addr.eq(addr),
            self.chunk.payload.words.eq(Mux(left < room, left, room)),
            self.chunk.payload.id.eq(head.id),
            self.chunk.payload.last.eq(left <= room),
            take.eq(self.chunk.valid & self.chunk.ready),
            pop.eq(take & self.chunk.payload.last),
        ]
        with m.If(take):
            m.d.sync += done.eq(Mux(pop, 0, done + self.chunk.payload.words))
        m.d.sync += [
            w_ptr.eq(Mux(push, wrap_next(w_ptr, n), w_ptr)),
            r_ptr.eq(Mux(pop, wrap_next(r_ptr, n), r_ptr)),
            level.eq(level + push - pop),
        ]
        return m
