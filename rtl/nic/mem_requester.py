"""The requester: memory commands in, one-beat request frames out, a tag per request."""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.nic.tag_table import tag_entry_layout
from spec.checks import reject
from spec.formats.nic import ETHERTYPE, MAC_PREFIX, MIN_FRAME_BYTES, Framing
from spec.formats.nic_mem import (
    MEM_OPCODE,
    MEM_WIDTH,
    TAG_BITS,
    MemOp,
    mem_cmd_layout,
    mem_header_bytes,
    mem_layout,
)
from spec.formats.packet import packet_signature

__all__ = ["MemRequester", "fill_routing"]


def fill_routing(m, hdr, framing, dst, src):
    """Drive the framing's routing fields of header view ``hdr`` (compact ``dst``/``src``,
    or the L2 MACs and EtherType)."""
    if Framing(framing) is Framing.L2:
        for i in range(5):
            m.d.comb += [hdr.dst_mac[i].eq(MAC_PREFIX[i]), hdr.src_mac[i].eq(MAC_PREFIX[i])]
        m.d.comb += [hdr.dst_mac[5].eq(dst), hdr.src_mac[5].eq(src),
                     hdr.ethertype[0].eq(ETHERTYPE >> 8),
                     hdr.ethertype[1].eq(ETHERTYPE & 0xFF)]
    else:
        m.d.comb += [hdr.dst.eq(dst), hdr.src.eq(src)]


class MemRequester(wiring.Component):
    """Turn each memory command into a request frame carrying a free tag.

    Parameters
    ----------
    framing : str or Framing
    mem_words : int
        Words of the local memory (the tag entries' ``laddr``).

    Ports
    -----
    cmd : In(stream.Signature(mem_cmd_layout))
        Commands (``op`` LOAD, FETCH_ADD or CMP_SWAP; spec.formats.nic_mem). Not checked
        here: the target answers a request it can not do with an ERROR response.
    o : Out(packet_signature(64))
        One-beat request frames without FCS (header, operands; L2: zero padding to 60
        bytes; bytes above ``nbytes`` zero).
    node_id : In(8)
    free, free_tag : In(1), In(TAG_BITS)
        From the :class:`rtl.nic.tag_table.TagTable`.
    take : Out(1)
    take_entry : Out(tag_entry_layout(mem_words))
        To the tag table: the command's tag is taken (``laddr`` in words; ``length`` the
        load's or 8; ``op``; ``dst``, the node whose response alone is accepted).

    Timing
    ------
    Zero latency: ``o.valid`` is ``cmd.valid & free``, the frame is combinational from
    the command and ``free_tag``, and ``cmd.ready = o.ready & free``; the tag is taken
    in the cycle the frame's beat is. Backpressure: with no free tag the command waits
    (nothing is dropped); ``o.ready`` low holds it too.
    """

    def __init__(self, framing, mem_words):
        try:
            self.framing = Framing(framing)
        except ValueError:
            reject(self, f"framing must be 'l2' or 'compact', not {framing!r}")
        self.mem_words = mem_words
        super().__init__({
            "cmd": In(stream.Signature(mem_cmd_layout)),
            "o": Out(packet_signature(MEM_WIDTH)),
            "node_id": In(8),
            "free": In(1), "free_tag": In(TAG_BITS),
            "take": Out(1), "take_entry": Out(tag_entry_layout(mem_words)),
        })

    def elaborate(self, platform):
        m = Module()
        c = self.cmd.payload
        h = mem_header_bytes(self.framing)
        hdr = Signal(mem_layout(self.framing))
        fill_routing(m, hdr, self.framing, c.dst, self.node_id)
        atomic = c.op != MemOp.LOAD
        m.d.comb += [
            hdr.mem.opcode.eq(MEM_OPCODE),
            hdr.mem.op.eq(c.op),
            hdr.mem.tag.eq(self.free_tag),
            hdr.mem.length.eq(Mux(atomic, 8, c.length)),
            hdr.mem.addr.eq(c.addr),
        ]
        pay = Mux(c.op == MemOp.CMP_SWAP, Cat(c.a, c.b),
                  Mux(c.op == MemOp.FETCH_ADD, c.a, 0))
        nbytes = h + Mux(c.op == MemOp.CMP_SWAP, 16, Mux(c.op == MemOp.FETCH_ADD, 8, 0))
        if self.framing is Framing.L2:
            nbytes = Const(MIN_FRAME_BYTES - 4, 7)
        beat = self.o.payload
        m.d.comb += [
            self.o.valid.eq(self.cmd.valid & self.free),
            beat.data.eq(Cat(hdr.as_value(), pay[:128])),
            beat.nbytes.eq(nbytes),
            beat.first.eq(1), beat.last.eq(1),
            self.cmd.ready.eq(self.o.ready & self.free),
            self.take.eq(self.o.valid & self.o.ready),
            self.take_entry.laddr.eq(c.laddr[6:]),
            self.take_entry.length.eq(Mux(atomic, 8, c.length)),
            self.take_entry.op.eq(c.op),
            self.take_entry.dst.eq(c.dst),
        ]
        return m
