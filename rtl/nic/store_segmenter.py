"""Cut store commands longer than the largest frame payload into several store commands."""

from amaranth import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from spec.checks import check_int, reject
from spec.formats.nic import MAX_LENGTH, store_cmd_layout
from spec.formats.packet import check_width

__all__ = ["StoreSegmenter"]


class StoreSegmenter(wiring.Component):
    """Store commands in, store commands of at most ``max_payload`` bytes out.

    Parameters
    ----------
    width : int
        Datapath bytes (8, 16, 32, 64).
    max_payload : int
        Largest payload of one frame, a multiple of ``width`` (so a cut falls between
        beats and no data moves) from ``width`` to 8184.
    id_bits : int
        Bits of the commands' ``dst`` (8, or 16 for a NIC with many destinations).

    Ports
    -----
    i : In(stream.Signature(store_cmd_layout(width)))
        Store commands; ``dst``, ``addr`` and ``length`` are read on the ``first`` beat
        only. A command must run from a ``first`` beat to a ``last`` beat.
    o : Out(stream.Signature(store_cmd_layout(width)))
        The same beats, with ``first``/``last`` added at every ``max_payload / width``
        beats. Segment ``k`` carries ``addr + k * max_payload``, the same ``dst`` and
        ``min(rem_k, max_payload)`` as its length, where ``rem_0`` is the command's
        ``length`` and ``rem_{k+1} = (rem_k - max_payload) mod 2**13`` (for an honest
        command: ``max_payload`` for every segment but the last, which gets the rest).
        ``ack_req`` is the command's on the segment with ``rem_k <= max_payload`` (for an
        honest command its last) and 0 on the others (those have a next segment waiting
        behind them: spec.formats.nic, "Ack request"). These
        fields are valid on each segment's ``first`` beat.

    Timing
    ------
    Zero latency and no bubble: ``o`` is combinational from ``i`` and four registers
    (destination, next segment address, remaining length, ack request),
    ``i.ready = o.ready``.
    A command of ``L <= max_payload`` bytes passes unchanged.
    """

    def __init__(self, width, max_payload, id_bits=8):
        self.width = check_width(width, self)
        check_int(self, "max_payload", max_payload, width, MAX_LENGTH)
        if max_payload % width:
            reject(self, f"max_payload must be a multiple of the width ({width} bytes), "
                         f"not {max_payload}")
        self.max_payload = max_payload
        super().__init__({
            "i": In(stream.Signature(store_cmd_layout(width, id_bits))),
            "o": Out(stream.Signature(store_cmd_layout(width, id_bits))),
        })

    def elaborate(self, platform):
        m = Module()
        mp, per = self.max_payload, self.max_payload // self.width
        i, o = self.i.payload, self.o.payload
        beat = Signal(range(per))            # beat index inside the current segment
        dst = Signal.like(i.dst)
        addr = Signal.like(i.addr)           # address of the segment being sent
        rem = Signal.like(i.length)          # header length left, from this segment on
        ack = Signal()                       # the command's ack request
        cur_dst = Mux(i.first, i.dst, dst)
        cur_addr = Mux(i.first, i.addr, addr)
        cur_rem = Mux(i.first, i.length, rem)
        cur_ack = Mux(i.first, i.ack_req, ack)
        seg_end = beat == per - 1
        m.d.comb += [
            self.o.valid.eq(self.i.valid),
            self.i.ready.eq(self.o.ready),
            o.data.eq(i.data),
            o.nbytes.eq(i.nbytes),
            o.dst.eq(cur_dst),
            o.addr.eq(cur_addr),
            o.length.eq(Mux(cur_rem > mp, mp, cur_rem)),
            o.ack_req.eq(cur_ack & (cur_rem <= mp)),
            o.first.eq(i.first | (beat == 0)),
            o.last.eq(i.last | seg_end),
        ]
        with m.If(self.i.valid & self.o.ready):
            m.d.sync += beat.eq(Mux(i.last | seg_end, 0, beat + 1))
            with m.If(i.first):
                m.d.sync += [dst.eq(i.dst), addr.eq(i.addr), rem.eq(i.length),
                             ack.eq(i.ack_req)]
            with m.If(seg_end & ~i.last):
                m.d.sync += [addr.eq(cur_addr + mp), rem.eq(cur_rem - mp)]
        return m
