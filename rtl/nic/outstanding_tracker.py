"""The sender's outstanding tracker: frames sent minus completed, per destination."""

from amaranth import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from spec.checks import check_int
from spec.formats.nic import COMPLETION_COUNT_BITS
from spec.rdma_engine import TIMEOUT_BITS

__all__ = ["OutstandingTracker", "sent_event_layout", "cpl_event_layout"]

#: A store frame leaving the sender (its first beat on the link) for ``dst``.
sent_event_layout = data.StructLayout({"dst": 8})
#: A completion frame that passed the receiver's FCS, format and destination checks
#: (``NicRx.cpl``): its source id, whether that id is a node (an L2 source MAC with
#: ``MAC_PREFIX``), and its completion header fields.
cpl_event_layout = data.StructLayout({
    "src": 8, "known": 1, "status": 5,
    "count": COMPLETION_COUNT_BITS, "dropped": COMPLETION_COUNT_BITS})


class OutstandingTracker(wiring.Component):
    """Per destination: frames sent, completed and dropped, and a completion timeout.

    Parameters
    ----------
    peers : int
        Destinations tracked: node ids ``0 .. peers - 1`` (1 to 256); frames to other
        ids are not tracked.
    timeout : int
        Cycles without an accepted completion from a destination, while frames to it are
        outstanding, that count one timeout (2 to ``2**TIMEOUT_BITS``, the RDMA
        requester's timeout range: :data:`spec.rdma_engine.TIMEOUT_BITS`).

    Ports
    -----
    sent : In(stream.Signature(sent_event_layout, always_ready=True))
        A store frame to ``dst`` started on the link (``NicTx.sent``).
    cpl : In(stream.Signature(cpl_event_layout, always_ready=True))
        A completion arrived (``NicRx.cpl``).
    outstanding, completed, dropped, timeouts : Out(data.ArrayLayout(16, peers))
        Per destination ``d``: frames sent and not yet completed (``sent - completed``
        modulo ``2**16``; a fence on ``d`` waits for 0), frames completed (cumulative,
        the last accepted completion's ``count``), of those dropped by the receiver (its
        ``dropped``), timeouts counted.
    accepted : Out(stream.Signature(data.StructLayout({"src": 8}), always_ready=True))
        The completion of this cycle, if accepted: its source (``completed[src]`` and
        ``dropped[src]`` hold its figures from the next cycle on).
    cpl_ok, cpl_bad : Out(32)
        Completions accepted; completions dropped: from an unknown source (an L2 source
        MAC without ``MAC_PREFIX``, or an id ``>= peers``), or whose ``count`` does not
        advance ``completed`` by 1 to ``outstanding`` frames (a forged or stale count,
        or one from a destination this node sent nothing to).

    Timing
    ------
    Everything takes effect at the end of the cycle of the event; the checks use the
    state of the start of that cycle (a frame sent in the cycle of a completion is not
    covered by it). Destination ``d``'s timer counts the cycles in which
    ``outstanding[d] != 0`` and no completion from ``d`` is accepted; at ``timeout -
    1`` it counts a timeout and restarts from 0 (a destination that stays silent counts
    one every ``timeout`` cycles); it restarts at 0 whenever a completion from ``d`` is
    accepted or nothing is outstanding. Never stalls.
    """

    def __init__(self, peers, timeout):
        self.peers = check_int(self, "peers", peers, 1, 256)
        self.timeout = check_int(self, "timeout", timeout, 2, 1 << TIMEOUT_BITS)
        b = COMPLETION_COUNT_BITS
        arr = data.ArrayLayout(b, peers)
        super().__init__({
            "sent": In(stream.Signature(sent_event_layout, always_ready=True)),
            "cpl": In(stream.Signature(cpl_event_layout, always_ready=True)),
            "outstanding": Out(arr),
            "completed": Out(arr),
            "dropped": Out(arr),
            "timeouts": Out(arr),
            "accepted": Out(stream.Signature(data.StructLayout({"src": 8}),
                                             always_ready=True)),
            "cpl_ok": Out(32),
            "cpl_bad": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        b, n = COMPLETION_COUNT_BITS, self.peers
        c = self.cpl.payload
        oks = []
        for d in range(n):
            sent = Signal(b, name=f"sent{d}")
            done, drp, tmo = self.completed[d], self.dropped[d], self.timeouts[d]
            timer = Signal(range(self.timeout), name=f"timer{d}")
            out = Signal(b, name=f"out{d}")
            delta = Signal(b, name=f"delta{d}")
            ok = Signal(name=f"ok{d}")
            m.d.comb += [
                out.eq(sent - done),
                self.outstanding[d].eq(out),
                delta.eq(c.count - done),
                ok.eq(self.cpl.valid & c.known & (c.src == d) & (delta != 0)
                      & (delta <= out)),
            ]
            oks.append(ok)
            with m.If(self.sent.valid & (self.sent.payload.dst == d)):
                m.d.sync += sent.eq(sent + 1)
            with m.If(ok):
                m.d.sync += [done.eq(c.count), drp.eq(c.dropped)]
            with m.If(ok | (out == 0)):
                m.d.sync += timer.eq(0)
            with m.Elif(timer == self.timeout - 1):
                m.d.sync += [timer.eq(0), tmo.eq(tmo + 1)]
            with m.Else():
                m.d.sync += timer.eq(timer + 1)
        any_ok = Signal()
        m.d.comb += [any_ok.eq(sum(oks) != 0), self.accepted.valid.eq(any_ok),
                     self.accepted.payload.src.eq(c.src)]
        with m.If(any_ok):
            m.d.sync += self.cpl_ok.eq(self.cpl_ok + 1)
        with m.Elif(self.cpl.valid):
            m.d.sync += self.cpl_bad.eq(self.cpl_bad + 1)
        return m
