"""Put a store header (L2 or compact) in front of each store command's payload."""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from spec.checks import reject
from spec.formats.nic import (
    ETHERTYPE,
    ID_BITS,
    MAC_PREFIX,
    PSN_BITS,
    PSN_BYTES,
    Framing,
    NicOp,
    check_id_bits,
    frame_beats,
    header_bytes,
    header_layout,
    store_cmd_layout,
)
from spec.formats.packet import check_width, packet_signature

__all__ = ["NicTxFramer"]


class NicTxFramer(wiring.Component):
    """Frame store commands: header, then the payload shifted behind it.

    Parameters
    ----------
    width : int
        Datapath bytes (8, 16, 32, 64).
    framing : str or Framing
        ``"l2"`` (20-byte header) or ``"compact"`` (8 bytes).
    id_bits : int
        8, or :data:`spec.formats.nic.ID_BITS` (L2 only): ``dst`` and ``node_id`` of
        16 bits in the MACs' bytes 4..5 (:func:`spec.formats.nic.wide_mac`).
    ext : int
        0, or :data:`spec.formats.nic.PSN_BYTES` (``peer_retry``): the header is followed
        by the frame's PSN (port ``psn``, little endian) and the payload shifted behind
        both (``H`` below counts them).

    Ports
    -----
    cmd : In(stream.Signature(store_cmd_layout(width)))
        Store commands; ``dst``/``addr``/``length``/``ack_req`` are read on the first
        beat (``ack_req`` goes to the header as given: spec.formats.nic, "Ack request").
    o : Out(packet_signature(width))
        The frame without FCS: header (``H = q*W + r`` bytes), then the payload.
    node_id : In(8)
        This node's id (the ``src`` field / source MAC).
    need : Out(range(...))
        Combinational: wire beats (FCS and L2 padding included, :func:`frame_beats`) of
        the frame whose first command beat is at ``cmd`` (from the ``length`` field).
    psn : In(PSN_BITS)
        ``ext`` only: the PSN of the frame, read in the beat that carries it.
    start_ok : In(1)
        The first output beat of a frame is offered only while ``start_ok`` is high
        (the credit gate); the rest of the frame is never gated.

    Timing
    ------
    Zero latency (``o`` is combinational from ``cmd`` and a carry register). A frame of
    ``L`` payload bytes leaves in ``ceil((H + L) / W)`` beats: ``q`` header-only beats
    (command not consumed, but its first beat must be valid), one beat per command beat,
    and one tail beat (command not consumed) when the last command beat holds more than
    ``W - r`` bytes. No idle cycle between frames: the next command's first beat is
    taken in the cycle after the previous frame's last beat. ``o.ready`` low holds
    everything (``cmd.ready`` follows it). The framer does not check the command: a
    ``length`` that differs from the bytes of the beats gives a frame that the receiver
    drops as malformed.
    """

    def __init__(self, width, framing, id_bits=8, ext=0):
        self.width = check_width(width, self)
        try:
            self.framing = Framing(framing)
        except ValueError:
            reject(self, f"framing must be 'l2' or 'compact', not {framing!r}")
        self.id_bits = check_id_bits(id_bits, self.framing)
        if ext not in (0, PSN_BYTES):
            reject(self, f"ext must be 0 or {PSN_BYTES}, not {ext!r}")
        self.ext = ext
        self.hbytes = header_bytes(self.framing) + ext
        super().__init__({
            **({"psn": In(PSN_BITS)} if ext else {}),
            "cmd": In(stream.Signature(store_cmd_layout(width, id_bits))),
            "o": Out(packet_signature(width)),
            "node_id": In(id_bits),
            "need": Out(range(frame_beats(width, self.framing, 8191 + ext) + 1)),
            "start_ok": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        w, h = self.width, self.hbytes
        q, r = divmod(h, w)
        cmd = self.cmd.payload

        hdr = Signal(header_layout(self.framing))
        store = hdr.store
        m.d.comb += [
            store.opcode.eq(NicOp.STORE),
            store.ack_req.eq(cmd.ack_req),
            store.length.eq(cmd.length),
            store.addr.eq(cmd.addr),
        ]
        if self.id_bits == ID_BITS:
            for i in range(4):
                m.d.comb += [hdr.dst_mac[i].eq(MAC_PREFIX[i]), hdr.src_mac[i].eq(MAC_PREFIX[i])]
            m.d.comb += [
                hdr.dst_mac[4].eq(cmd.dst[8:]), hdr.dst_mac[5].eq(cmd.dst[:8]),
                hdr.src_mac[4].eq(self.node_id[8:]), hdr.src_mac[5].eq(self.node_id[:8]),
                hdr.ethertype[0].eq(ETHERTYPE >> 8),
                hdr.ethertype[1].eq(ETHERTYPE & 0xFF),
            ]
        elif self.framing is Framing.L2:
            for i in range(5):
                m.d.comb += [hdr.dst_mac[i].eq(MAC_PREFIX[i]), hdr.src_mac[i].eq(MAC_PREFIX[i])]
            m.d.comb += [
                hdr.dst_mac[5].eq(cmd.dst),
                hdr.src_mac[5].eq(self.node_id),
                hdr.ethertype[0].eq(ETHERTYPE >> 8),
                hdr.ethertype[1].eq(ETHERTYPE & 0xFF),
            ]
        else:
            m.d.comb += [hdr.dst.eq(cmd.dst), hdr.src.eq(self.node_id)]
        hbits = Cat(hdr.as_value(), self.psn) if self.ext else hdr.as_value()
        need = (cmd.length + (h + 4 + w - 1)) >> (w.bit_length() - 1)
        if self.framing is Framing.L2:
            least = frame_beats(w, self.framing, 1 + self.ext)
            need = Mux(need < least, least, need)
        m.d.comb += self.need.eq(need)

        hidx = Signal(range(q + 1))          # header beats sent of the current frame
        tail = Signal()                      # the tail beat is due
        tail_n = Signal(range(w + 1))
        carry = Signal(8 * max(r, 1))        # top r bytes of the last command beat
        o, take = self.o.payload, Signal()
        m.d.comb += take.eq(self.o.valid & self.o.ready)

        # Outputs are plain expressions (no conditional comb blocks): every simulator
        # evaluates them from time 0. Three phases: tail beat, header beats, body beats.
        in_hdr = (hidx < q) if q else Const(0)
        first_beat = cmd.first if q == 0 else Const(0)
        gate = ~first_beat | self.start_ok
        if r == 0:
            body_data, body_n, body_last = cmd.data, cmd.nbytes, cmd.last
        else:
            head = hbits[8 * q * w:8 * h]
            body_data = Cat(Mux(cmd.first, head, carry), cmd.data)[:8 * w]
            body_n = Mux(cmd.nbytes > w - r, w, cmd.nbytes + r)
            body_last = cmd.last & (cmd.nbytes <= w - r)
        hdr_data = hbits.word_select(hidx, 8 * w) if q else Const(0, 8 * w)
        hdr_valid = self.cmd.valid & cmd.first & ((hidx != 0) | self.start_ok)
        m.d.comb += [
            self.o.valid.eq(tail | Mux(in_hdr, hdr_valid, self.cmd.valid & gate)),
            o.data.eq(Mux(tail, carry, Mux(in_hdr, hdr_data, body_data))),
            o.nbytes.eq(Mux(tail, tail_n, Mux(in_hdr, w, body_n))),
            o.last.eq(tail | (~in_hdr & body_last)),
            o.first.eq(~tail & Mux(in_hdr, hidx == 0, first_beat)),
            self.cmd.ready.eq(~tail & ~in_hdr & self.o.ready & gate),
        ]
        body_take = Signal()
        m.d.comb += body_take.eq(take & ~tail & ~in_hdr)
        with m.If(take & tail):
            m.d.sync += tail.eq(0)
        if q:
            with m.If(take & ~tail & in_hdr):
                m.d.sync += hidx.eq(hidx + 1)
            with m.If(body_take & cmd.last):
                m.d.sync += hidx.eq(0)
        if r:
            with m.If(body_take):
                m.d.sync += carry.eq(cmd.data[8 * (w - r):])
                with m.If(cmd.last & (cmd.nbytes > w - r)):
                    m.d.sync += [tail.eq(1), tail_n.eq(cmd.nbytes - (w - r))]
        return m
