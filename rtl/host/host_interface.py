"""The host interface both engines reach their host memory through."""

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out, flipped

from rtl.common.latency_memory import write_layout
from rtl.host.common import check_depth, checked_profile
from rtl.host.down_scheduler import DOWN_COUNTERS, DownScheduler
from rtl.host.due_queue import NOW_BITS, DueQueue
from rtl.host.mmio_buffer import MmioBuffer
from rtl.host.read_splitter import ReadSplitter
from rtl.host.up_scheduler import UP_COUNTERS, UpScheduler
from rtl.host.write_buffer import WriteBuffer
from spec.checks import check_int
from spec.host import (
    COUNTER_BITS,
    HOST_COUNTERS,
    MMIO_ADDR_BITS,
    TAG_BITS,
    WORD_BYTES,
    mmio_layout,
    rd_data_layout,
    rd_req_layout,
    wr_layout,
)
from spec.ports import CountersSignature, HostDmaSignature, PortView

__all__ = ["HostInterface"]


class HostInterface(wiring.Component):
    """DMA reads, posted DMA writes and host MMIO writes over two serial directions.

    The contract (binding for the model :class:`pymodel.host.HostInterfaceModel`) is
    ``docs/host_interface.md``; the parts each document their own share:
    :class:`~rtl.host.read_splitter.ReadSplitter`,
    :class:`~rtl.host.due_queue.DueQueue`, :class:`~rtl.host.write_buffer.WriteBuffer`,
    :class:`~rtl.host.mmio_buffer.MmioBuffer`,
    :class:`~rtl.host.up_scheduler.UpScheduler` and
    :class:`~rtl.host.down_scheduler.DownScheduler`. One cycle is 1 ns; cycle 0 is the
    first after reset; every address is a 64-byte word address.

    Parameters
    ----------
    profile : spec.host.HostProfile
        Bandwidth, overheads, latency, tags, split sizes and buffer sizes.
    depth : int
        Host-memory words, a power of two from 2 to 2**20. Addresses wrap modulo
        ``depth``.
    mmio_addr_bits : int
        Bits of a host write's register offset on ``mmio_in`` and ``mmio``
        (:func:`spec.host.mmio_layout`), :data:`spec.host.MMIO_ADDR_BITS` (16) to 32; the
        interface carries the offset and does not look at it.

    Ports
    -----
    rd_req : In(stream.Signature(rd_req_layout(depth)))
        DMA reads of ``words`` (1..64) words from ``addr``; ``ready`` while the read
        queue (``rd_queue``) has room, a function of registers.
    rd_data : Out(stream.Signature(rd_data_layout()))
        The words of every read in request order, ``id`` echoed, ``last`` on the read's
        last word; no backpressure.
    wr : In(stream.Signature(wr_layout(depth)))
        Posted DMA writes, one word per transfer; ``ready`` while the write buffer
        (``wr_fifo_words``) has room, a function of registers.
    mmio : Out(stream.Signature(mmio_layout()))
        Host posted writes delivered to the device; ``valid`` is a function of registers,
        the device may hold ``ready`` low.
    mmio_in : In(stream.Signature(mmio_layout()))
        Host posted writes from the host CPU; ``ready`` depends on ``valid & first`` of
        the same cycle. The host keeps ``valid`` high through the words of a write, and
        ``1 <= nbytes <= 64 * mmio_fifo_words``.
    mem_rd_addr, mem_rd_data, mem_wr
        To a ``LatencyMemory(64, depth, latency=1)`` (join each with ``wiring.connect``):
        ``mem_rd_addr`` and ``mem_wr`` are always ready, ``mem_rd_data`` is taken the
        cycle after its address (``valid`` not looked at).
    marked : Out(stream.Signature(TAG_BITS))
        The ``tag`` of a posted-write word with ``mark``, in the cycle that word is
        written into host memory (no backpressure): the engines mark the last payload
        word of a message and each CQE, so these are the ``written`` and ``completed``
        times of the results.
    up_rd_tlps ... tags_max : Out(32)
        :data:`spec.host.HOST_COUNTERS`, wrapping.

    Rules chosen where the contract is silent
    -----------------------------------------
    * Every TLP occupies its direction for at least one cycle, and a posted write TLP for
      at least one cycle per word (``d = max(1, k, ceil((p + o) / bytes_per_cycle))``):
      with zero overhead a read request takes one cycle; a write of words with few
      enabled bytes still writes one word per cycle.
    * A posted write TLP also closes when it holds ``wr_fifo_words`` words (if that is
      fewer than ``max_payload / 64``), since it leaves only once whole.
    * Chunk and piece boundaries are taken on the word address modulo ``depth``.
    * TLP and byte counters change at the edge after a TLP starts; busy and tag-wait
      counters at the edge after each cycle they count.
    """

    def __init__(self, profile, depth, mmio_addr_bits=MMIO_ADDR_BITS):
        self.profile = checked_profile(self, profile)
        self.depth = check_depth(self, depth)
        self.mmio_addr_bits = check_int(self, "mmio_addr_bits", mmio_addr_bits,
                                        MMIO_ADDR_BITS, 32)
        sig = {
            "rd_req": In(stream.Signature(rd_req_layout(depth))),
            "rd_data": Out(stream.Signature(rd_data_layout())),
            "wr": In(stream.Signature(wr_layout(depth))),
            "mmio": Out(stream.Signature(mmio_layout(mmio_addr_bits))),
            "mmio_in": In(stream.Signature(mmio_layout(mmio_addr_bits))),
            "mem_rd_addr": Out(stream.Signature(range(depth), always_ready=True)),
            "mem_rd_data": In(stream.Signature(8 * WORD_BYTES)),
            "mem_wr": Out(stream.Signature(write_layout(WORD_BYTES, depth), always_ready=True)),
            "marked": Out(stream.Signature(TAG_BITS)),
        }
        sig.update({name: Out(COUNTER_BITS) for name in HOST_COUNTERS})
        super().__init__(sig)

    @property
    def dma(self):
        """The engine side (``rd_req``, ``rd_data``, ``wr``) as one port of
        :class:`~spec.ports.HostDmaSignature`, flipped: an engine's ``Out`` port of that
        kind joins it with ``wiring.connect``."""
        port = HostDmaSignature(self.depth).flip().create()
        port.rd_req, port.rd_data, port.wr = self.rd_req, self.rd_data, self.wr
        return port

    def elaborate(self, platform):
        m = Module()
        p, depth = self.profile, self.depth
        m.submodules.reads = reads = ReadSplitter(p, depth)
        m.submodules.due = due = DueQueue(p, depth)
        m.submodules.writes = writes = WriteBuffer(p, depth)
        m.submodules.up = up = UpScheduler(p, depth)
        m.submodules.down = down = DownScheduler(p, depth, self.mmio_addr_bits)
        m.submodules.mmio_buf = buf = MmioBuffer(p, self.mmio_addr_bits)

        now = Signal(NOW_BITS)
        m.d.sync += now.eq(now + 1)
        m.d.comb += due.now.eq(now)

        wiring.connect(m, flipped(self.rd_req), reads.rd_req)
        wiring.connect(m, reads.chunk, up.chunk)
        wiring.connect(m, up.issue, due.push)
        m.d.comb += up.tag_free.eq(due.room)
        wiring.connect(m, flipped(self.wr), writes.wr)
        wiring.connect(m, writes.tlp, up.tlp)
        wiring.connect(m, writes.word, up.word)
        wiring.connect(m, up.mem_wr, flipped(self.mem_wr))
        wiring.connect(m, up.marked, flipped(self.marked))

        wiring.connect(m, due.piece, down.piece)
        wiring.connect(m, flipped(self.mmio_in), down.mmio_in)
        wiring.connect(m, down.mmio_w, buf.w)
        m.d.comb += [buf.reserve.eq(down.mmio_reserve), buf.commit.eq(down.mmio_commit),
                     down.mmio_room.eq(buf.room)]
        wiring.connect(m, buf.o, flipped(self.mmio))
        wiring.connect(m, down.mem_rd_addr, flipped(self.mem_rd_addr))
        wiring.connect(m, flipped(self.mem_rd_data), down.mem_rd_data)
        wiring.connect(m, down.rd_data, flipped(self.rd_data))

        for stage, names in ((up, UP_COUNTERS), (down, DOWN_COUNTERS)):
            sig = CountersSignature(names)
            wiring.connect(m, PortView(sig, stage), flipped(PortView(sig, self)))
        m.d.comb += self.tags_max.eq(due.tags_max)
        return m
