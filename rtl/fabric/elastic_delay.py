"""A delay that a ready signal can hold: the switch hop under backpressure.

A :class:`rtl.fabric.link.DelayLine` carries every value exactly ``latency`` cycles and
can not stop: right for a wire, wrong for a stage whose output may be told to wait (the
switch's egress in front of a link-level retry's replay buffer). :class:`ElasticDelay`
keeps the same timing while its output is ready, and holds its beats (in order, none
lost) while it is not.
"""

from amaranth import Module, Shape, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.fabric.link import MAX_DELAY, DelayLine
from spec.checks import check_int
from spec.fabric import elastic_depth

__all__ = ["ElasticDelay"]


class ElasticDelay(wiring.Component):
    """A stream delayed by ``latency`` cycles that honours ``o.ready``.

    Parameters
    ----------
    shape : shape-castable
        The payload of the stream (a packet beat layout, ...).
    latency : int
        The fewest cycles from ``i`` to ``o``, 1 to :data:`rtl.fabric.link.MAX_DELAY`.

    Ports
    -----
    i : In(stream.Signature(shape))
        ``ready`` while the buffer has room: fewer than :func:`spec.fabric.elastic_depth` beats held
        (registered: it does not depend on ``i.valid`` nor on ``o.ready`` of the same
        cycle). A beat is taken in a cycle where ``valid`` and ``ready`` are high.
    o : Out(stream.Signature(shape))
        The beats of ``i``, in order, each once. A beat taken in cycle ``t`` is valid on
        ``o`` from cycle ``t + latency`` on, once every beat taken before it has left;
        it stays (payload unchanged) until a cycle where ``o.ready`` is high, and leaves
        in that cycle. ``valid`` does not depend on ``ready``.

    Timing
    ------
    While ``o.ready`` stays high every beat leaves exactly ``latency`` cycles after it
    was taken and ``i.ready`` stays high (one beat a cycle fits: ``latency`` beats are
    held at most): ``o`` is then, cycle for cycle, what a ``DelayLine`` of ``latency``
    would show. A stall of ``o`` for ``k`` cycles keeps up to ``latency + k`` beats;
    ``i.ready`` falls when :func:`spec.fabric.elastic_depth` are held.

    State
    -----
    A FIFO of :func:`spec.fabric.elastic_depth` entries of the payload (a memory), a 1-bit
    ``DelayLine`` of ``latency`` cycles that says when each taken beat may leave
    (registers when short, a memory when long: :data:`rtl.fabric.link.CHAIN_MAX`), and
    a counter of the held beats that may leave.
    """

    def __init__(self, shape, latency):
        self.shape = shape
        self.latency = check_int(self, "elastic delay (cycles)", latency, 1, MAX_DELAY)
        self.depth = elastic_depth(self.latency)
        super().__init__({"i": In(stream.Signature(shape)),
                          "o": Out(stream.Signature(shape))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.fifo = q = fifo.SyncFIFO(width=Shape.cast(self.shape).width,
                                              depth=self.depth)
        m.submodules.due = due = DelayLine(data.StructLayout({"valid": 1}), self.latency)
        take = Signal()
        pop = Signal()
        # ``ripe``: beats held whose ``latency`` cycles are over (a prefix of the FIFO);
        # ``due.o.valid`` is the beat that becomes ripe in this cycle.
        ripe = Signal(range(self.depth + 1))
        m.d.comb += [
            self.i.ready.eq(q.w_rdy),
            take.eq(self.i.valid & q.w_rdy),
            q.w_en.eq(take), q.w_data.eq(self.i.payload),
            due.i.valid.eq(take),
            self.o.valid.eq((ripe != 0) | due.o.valid),
            self.o.payload.eq(q.r_data),
            pop.eq(self.o.valid & self.o.ready),
            q.r_en.eq(pop),
        ]
        m.d.sync += ripe.eq(ripe + due.o.valid - pop)
        return m
