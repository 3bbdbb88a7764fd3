"""The on-chip cache of QP contexts, backed by the context table in host memory."""

from amaranth import Module, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.common.latency_memory import write_layout
from spec.checks import check_int, reject
from spec.formats.roce import QPC_LAYOUT
from spec.rdma import QPN_BITS

__all__ = ["QpcCache"]


class QpcCache(wiring.Component):
    """Direct-mapped, write-back cache of ``entries`` QP contexts (one host word each).

    Parameters
    ----------
    entries : int
        Cache entries, a power of two from 16 to 256. QP ``q`` lives in entry
        ``q % entries``.
    depth : int
        Words of the host memory (address width of the DMA ports).

    Ports
    -----
    base : In(range(depth))
        Word address of the context table: QP ``q`` is at ``base + q``.
    req : In(stream.Signature(QPN_BITS))
        A lookup; ``ready`` only while no lookup is in progress.
    resp : Out(stream.Signature(QPC_LAYOUT))
        The context, ``valid`` for one cycle; no backpressure (``ready`` ignored).
    hit : Out(1)
        With ``resp.valid``: the lookup hit.
    upd : In(stream.Signature(QPC_LAYOUT, always_ready=True))
        Write a new context for the QP of the last lookup (marks the entry dirty).
    rd_addr, rd_data, wr :
        The DMA read request, read data and write ports into the host memory.
    lookups, misses, writebacks : Out(32)
        Counters since reset.

    Timing
    ------
    A lookup taken in cycle ``a`` answers in cycle ``a + 1`` on a hit. On a miss, in
    cycle ``a + 1`` the cache issues the DMA read of the context and, if the entry holds
    another QP's dirty context, its write-back; the answer comes with the read data in
    cycle ``a + 1 + L`` (``L`` the memory latency), and the entry is filled then. The
    cache does not look at a context's ``valid`` bit: that is the user's business.
    """

    def __init__(self, entries, depth):
        check_int(self, "QP-context cache entries", entries, 16, 256)
        if entries & (entries - 1):
            reject(self, f"QP-context cache entries must be a power of two, not {entries!r}")
        self.entries, self.depth = entries, depth
        super().__init__({
            "base": In(range(depth)),
            "req": In(stream.Signature(QPN_BITS)),
            "resp": Out(stream.Signature(QPC_LAYOUT)),
            "hit": Out(1),
            "upd": In(stream.Signature(QPC_LAYOUT, always_ready=True)),
            "rd_addr": Out(stream.Signature(range(depth))),
            "rd_data": In(stream.Signature(512)),
            "wr": Out(stream.Signature(write_layout(64, depth))),
            "lookups": Out(32), "misses": Out(32), "writebacks": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.entries
        tag_layout = data.StructLayout({"valid": 1, "dirty": 1, "qpn": QPN_BITS})
        m.submodules.tags = tags = memory.Memory(shape=tag_layout, depth=n, init=[])
        m.submodules.ctxs = ctxs = memory.Memory(shape=512, depth=n, init=[])
        tag_rd, ctx_rd = tags.read_port(), ctxs.read_port()
        tag_wr, ctx_wr = tags.write_port(), ctxs.write_port()

        qpn = Signal(QPN_BITS)
        index = Signal(range(n))
        m.d.comb += index.eq(qpn[:len(index)])
        m.d.comb += [tag_rd.addr.eq(self.req.payload[:len(index)]),
                     ctx_rd.addr.eq(self.req.payload[:len(index)]),
                     tag_wr.addr.eq(index), ctx_wr.addr.eq(index)]

        # Updates of the current entry (from the user) at any time.
        with m.If(self.upd.valid):
            m.d.comb += [
                ctx_wr.en.eq(1), ctx_wr.data.eq(self.upd.payload),
                tag_wr.en.eq(1), tag_wr.data.valid.eq(1), tag_wr.data.dirty.eq(1),
                tag_wr.data.qpn.eq(qpn),
            ]

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.req.ready.eq(1)
                with m.If(self.req.valid):
                    m.d.sync += [qpn.eq(self.req.payload), self.lookups.eq(self.lookups + 1)]
                    m.next = "CHECK"
            with m.State("CHECK"):
                with m.If(tag_rd.data.valid & (tag_rd.data.qpn == qpn)):
                    m.d.comb += [self.resp.valid.eq(1), self.resp.payload.eq(ctx_rd.data),
                                 self.hit.eq(1)]
                    m.next = "IDLE"
                with m.Else():
                    m.d.comb += [self.rd_addr.valid.eq(1),
                                 self.rd_addr.payload.eq(self.base + qpn)]
                    m.d.sync += self.misses.eq(self.misses + 1)
                    with m.If(tag_rd.data.valid & tag_rd.data.dirty):
                        m.d.comb += [
                            self.wr.valid.eq(1),
                            self.wr.payload.addr.eq(self.base + tag_rd.data.qpn),
                            self.wr.payload.data.eq(ctx_rd.data),
                            self.wr.payload.be.eq((1 << 64) - 1),
                        ]
                        m.d.sync += self.writebacks.eq(self.writebacks + 1)
                    m.next = "FILL"
            with m.State("FILL"):
                with m.If(self.rd_data.valid):
                    m.d.comb += [
                        self.resp.valid.eq(1), self.resp.payload.eq(self.rd_data.payload),
                        ctx_wr.en.eq(1), ctx_wr.data.eq(self.rd_data.payload),
                        tag_wr.en.eq(1), tag_wr.data.valid.eq(1), tag_wr.data.qpn.eq(qpn),
                    ]
                    m.next = "IDLE"
        return m
