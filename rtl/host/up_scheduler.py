"""The device-to-host direction: read request TLPs and posted write TLPs, one at a time."""

from amaranth import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.common.latency_memory import write_layout
from rtl.host.common import TLP_LAYOUT, ceil_div, check_depth, checked_profile, chunk_layout
from spec.host import COUNTER_BITS, MAX_READ_WORDS, TAG_BITS, WORD_BYTES, held_word_layout

__all__ = ["UpScheduler", "UP_COUNTERS", "read_request_cycles"]

#: The counters this part keeps (names of :data:`spec.host.HOST_COUNTERS`).
UP_COUNTERS = ("up_rd_tlps", "up_wr_tlps", "up_payload_bytes", "up_overhead_bytes",
               "up_busy_cycles", "tag_wait_cycles")


def read_request_cycles(profile):
    """Cycles a read request TLP occupies ``up``: ``max(1, ceil(req_overhead /
    bytes_per_cycle))`` (a TLP takes at least one cycle even without overhead)."""
    return max(1, -(-profile.req_overhead // profile.bytes_per_cycle))


class UpScheduler(wiring.Component):
    """Start read request TLPs and posted write TLPs on the serial ``up`` direction.

    Parameters
    ----------
    profile : spec.host.HostProfile
        Uses ``bytes_per_cycle`` and ``req_overhead``.
    depth : int
        Host-memory words (a power of two).

    Ports
    -----
    chunk : In(stream.Signature(chunk_layout(depth)))
        The next chunk to request; taken in the cycle its TLP starts.
    tag_free : In(1)
        A tag is free (the due queue has room) in this cycle.
    issue : Out(stream.Signature(chunk_layout(depth), always_ready=True))
        The chunk whose request TLP starts in this cycle (to the due queue).
    tlp : In(stream.Signature(TLP_LAYOUT))
        The next whole posted-write TLP; taken in the cycle it starts.
    word : In(stream.Signature(write_layout(64, depth)))
        The write words, oldest first; all words of an offered TLP are present.
    marked : Out(stream.Signature(TAG_BITS))
        In the cycle a word with ``mark`` is written into host memory, its ``tag``
        (no backpressure).
    mem_wr : Out(stream.Signature(write_layout(64, depth), always_ready=True))
        Host-memory writes; ``ready`` is ignored (the memory takes one every cycle).
    up_* counters, tag_wait_cycles : Out(32)
        :data:`UP_COUNTERS`; TLP and byte counts change at the edge after a TLP starts,
        ``up_busy_cycles`` and ``tag_wait_cycles`` at the edge after each cycle counted.

    Timing
    ------
    ``up`` is free in a cycle when no TLP occupies it. In a free cycle the candidates are
    READ (``chunk.valid`` and ``tag_free``) and WRITE (``tlp.valid``); one starts if
    eligible, and when both are, the kind that did not start last (READ after reset). A
    TLP starting in cycle ``s`` occupies ``up`` in cycles ``s .. s + d - 1``:

    * read request: ``d = max(1, ceil(req_overhead / bytes_per_cycle))``;
    * posted write of ``k`` words and ``p`` payload bytes:
      ``d = max(k, ceil((p + req_overhead) / bytes_per_cycle))``; its word ``j`` is
      written to host memory in cycle ``s + j`` (``d >= k``, so writes never overlap).

    ``tag_wait_cycles`` counts free cycles in which ``chunk.valid`` is high and no tag is
    free (whether or not a write starts in them). ::

        cycle      s    s+1  s+2  s+3  s+4  s+5
        up         [WR                     ][RQ]   k = 4, p = 256, o = 24: d = 5
        mem_wr     w0   w1   w2   w3
        issue                               RQ     the chunk goes to the due queue
    """

    def __init__(self, profile, depth):
        self.profile = checked_profile(self, profile)
        self.depth = check_depth(self, depth)
        lay = chunk_layout(depth)
        wlay = write_layout(WORD_BYTES, depth)
        sig = {
            "chunk": In(stream.Signature(lay)),
            "tag_free": In(1),
            "issue": Out(stream.Signature(lay, always_ready=True)),
            "tlp": In(stream.Signature(TLP_LAYOUT)),
            "word": In(stream.Signature(held_word_layout(depth))),
            "mem_wr": Out(stream.Signature(wlay, always_ready=True)),
            "marked": Out(stream.Signature(TAG_BITS)),
        }
        sig.update({name: Out(COUNTER_BITS) for name in UP_COUNTERS})
        super().__init__(sig)

    def elaborate(self, platform):
        m = Module()
        p = self.profile
        o, bpc = p.req_overhead, p.bytes_per_cycle
        d_read = read_request_cycles(p)
        d_most = max(d_read, MAX_READ_WORDS,
                     -(-(MAX_READ_WORDS * WORD_BYTES + o) // bpc))
        left = Signal(range(d_most))            # occupied cycles after the current one
        to_write = Signal(range(MAX_READ_WORDS))  # words still to write after this cycle
        last_read = Signal()                    # the last TLP started was a read request
        free, can_read, can_write = Signal(), Signal(), Signal()
        start_read, start_write, started, busy = Signal(), Signal(), Signal(), Signal()
        d_write = Signal(range(d_most + 1))
        tlp = self.tlp.payload
        m.d.comb += [
            free.eq(left == 0),
            can_read.eq(self.chunk.valid & self.tag_free),
            can_write.eq(self.tlp.valid),
            start_read.eq(free & can_read & (~can_write | ~last_read)),
            start_write.eq(free & can_write & (~can_read | last_read)),
            started.eq(start_read | start_write),
            busy.eq(started | ~free),
            d_write.eq(ceil_div(tlp.bytes + o, bpc)),
            self.chunk.ready.eq(start_read),
            self.issue.valid.eq(start_read),
            self.issue.payload.eq(self.chunk.payload),
            self.tlp.ready.eq(start_write),
            self.word.ready.eq(start_write | (to_write != 0)),
            self.mem_wr.valid.eq(self.word.ready),
            self.mem_wr.payload.addr.eq(self.word.payload.addr),
            self.mem_wr.payload.data.eq(self.word.payload.data),
            self.mem_wr.payload.be.eq(self.word.payload.be),
            self.marked.valid.eq(self.word.ready & self.word.payload.mark),
            self.marked.payload.eq(self.word.payload.tag),
        ]
        with m.If(start_read):
            m.d.sync += [left.eq(d_read - 1), last_read.eq(1)]
        with m.Elif(start_write):
            m.d.sync += [
                left.eq(Mux(d_write > tlp.words, d_write, tlp.words) - 1),
                to_write.eq(tlp.words - 1),
                last_read.eq(0),
            ]
        with m.Else():
            m.d.sync += [left.eq(Mux(free, 0, left - 1)),
                         to_write.eq(Mux(to_write != 0, to_write - 1, 0))]
        m.d.sync += [
            self.up_rd_tlps.eq(self.up_rd_tlps + start_read),
            self.up_wr_tlps.eq(self.up_wr_tlps + start_write),
            self.up_payload_bytes.eq(self.up_payload_bytes + Mux(start_write, tlp.bytes, 0)),
            self.up_overhead_bytes.eq(self.up_overhead_bytes + Mux(started, o, 0)),
            self.up_busy_cycles.eq(self.up_busy_cycles + busy),
            self.tag_wait_cycles.eq(self.tag_wait_cycles
                                    + (free & self.chunk.valid & ~self.tag_free)),
        ]
        return m
