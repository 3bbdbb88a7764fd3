"""A point-to-point link, and the delay line it is built from.

A delay that stands for wire or switch traversal is simulation fabric, not part of a
design (docs/fabric.md). A short one is a chain of registers; a long one is a memory
written and read each cycle (a circular buffer), so that a 500-cycle link of 512-bit
beats is a memory of 500 words, not 256 kbit of flip-flops to simulate.
"""

from amaranth import Module, Mux, Shape, Signal, Value
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from spec.checks import check_int, reject
from spec.formats.packet import check_width, packet_layout, packet_signature

__all__ = ["DelayLine", "Link", "MAX_DELAY", "CHAIN_MAX", "DELAY_IMPLS"]

#: Longest delay a :class:`DelayLine` (and so a :class:`Link`) accepts, in cycles: eight
#: times the pod profile's one-way latency (spec/fabric_profiles.py).
MAX_DELAY = 4096
#: ``impl="auto"`` builds delays up to this many cycles as a register chain and longer
#: ones as a memory. Every delay of the ``board`` fabric (links of 2 cycles, RdmaTop's
#: 6-cycle link, the 2-cycle credit return) is below it, so their builds and area are
#: those of the register chain.
CHAIN_MAX = 16
#: The implementations of a delay line.
DELAY_IMPLS = ("auto", "chain", "memory")


class DelayLine(wiring.Component):
    """``o`` is ``i`` delayed by exactly ``latency`` cycles.

    Parameters
    ----------
    shape : shape-castable
        The value carried (a layout with a valid bit and a payload, a single bit, ...).
    latency : int
        Cycles from ``i`` to ``o``, 1 to :data:`MAX_DELAY`.
    impl : str
        ``"chain"``: ``latency`` registers. ``"memory"``: a circular buffer of
        ``max(latency, 2)`` words in an :class:`amaranth.lib.memory.Memory` with one write
        port (address: a write pointer that steps every cycle) and one synchronous read
        port (a read pointer ``latency - 1`` words behind it, so that the word written in
        cycle ``t`` is read in cycle ``t + latency - 1`` and on ``o`` in ``t + latency``).
        ``"auto"`` (default): ``"chain"`` up to :data:`CHAIN_MAX` cycles, else
        ``"memory"``.

    Ports
    -----
    i : In(shape)
        Sampled every cycle (no handshake: a wire can not push back).
    o : Out(shape)
        The value of ``i`` of ``latency`` cycles before; the shape's initial value (all
        zeros for a layout) in the first ``latency`` cycles after reset.

    Both implementations give the same ``o`` in every cycle, reset included: the memory
    keeps its words through a reset, so its output is held at the initial value until
    ``latency`` cycles after the reset (a counter), as the reset chain's is.
    """

    def __init__(self, shape, latency, impl="auto"):
        self.shape = shape
        self.latency = check_int(self, "delay (cycles)", latency, 1, MAX_DELAY)
        if impl not in DELAY_IMPLS:
            reject(self, f"delay line impl must be one of {list(DELAY_IMPLS)}, not {impl!r}")
        if impl == "auto":
            impl = "chain" if latency <= CHAIN_MAX else "memory"
        self.impl = impl
        super().__init__({"i": In(shape), "o": Out(shape)})

    def elaborate(self, platform):
        m = Module()
        lat = self.latency
        if self.impl == "chain":
            stage = self.i
            for k in range(lat):
                nxt = Signal(self.shape, name=f"stage{k}")
                m.d.sync += nxt.eq(stage)
                stage = nxt
            m.d.comb += self.o.eq(stage)
            return m
        depth = max(lat, 2)
        width = Shape.cast(self.shape).width
        m.submodules.mem = mem = memory.Memory(shape=width, depth=depth, init=[])
        wp = mem.write_port()
        rp = mem.read_port(transparent_for=(wp,))    # latency 1 reads the word being written
        wr = Signal(range(depth))
        rd = Signal(range(depth), init=(1 - lat) % depth)
        m.d.sync += [wr.eq(Mux(wr == depth - 1, 0, wr + 1)),
                     rd.eq(Mux(rd == depth - 1, 0, rd + 1))]
        m.d.comb += [wp.addr.eq(wr), wp.data.eq(Value.cast(self.i)),
                     wp.en.eq(1), rp.addr.eq(rd)]
        # ``since`` counts the cycles after reset up to ``latency``: the words read
        # before then were written before the reset.
        since = Signal(range(lat + 1))
        with m.If(since != lat):
            m.d.sync += since.eq(since + 1)
        init = Signal(self.shape, name="init")       # the shape's initial value
        m.d.comb += self.o.eq(Mux(since == lat, rp.data, Value.cast(init)))
        return m


def _beat_layout(width):
    return data.StructLayout({"valid": 1, "payload": packet_layout(width)})


class Link(wiring.Component):
    """Carry beats from ``i`` to ``o`` exactly ``latency`` cycles later.

    Parameters
    ----------
    width : int
        Datapath width in bytes.
    latency : int
        Cycles from a beat accepted on ``i`` to the same beat valid on ``o`` (1 to
        :data:`MAX_DELAY`).
    impl : str
        The :class:`DelayLine` implementation (default ``"auto"``: registers up to
        :data:`CHAIN_MAX` cycles, a memory above); every choice has the same timing.

    Ports
    -----
    i : In(packet_signature(width))
        Always ready: a wire can not push back. Flow control (credits) is the business
        of the endpoints, never of the link.
    o : Out(packet_signature(width))
        ``valid`` for one cycle per beat; ``o.ready`` is ignored (the receiver must take
        the beat or count it as dropped). In the cycle ``t + latency`` after a beat was
        accepted in cycle ``t``, ``o`` carries its valid bit and payload (the payload
        sampled in every cycle, valid or not).
    beats : Out(32)
        Beats carried since reset.
    """

    def __init__(self, width, latency, impl="auto"):
        self.width = check_width(width, self)
        self.latency = check_int(self, "link latency (cycles)", latency, 1, MAX_DELAY)
        if impl not in DELAY_IMPLS:
            reject(self, f"link impl must be one of {list(DELAY_IMPLS)}, not {impl!r}")
        self.delay = DelayLine(_beat_layout(width), latency, impl)
        self.impl = self.delay.impl
        super().__init__({
            "i": In(packet_signature(width)),
            "o": Out(packet_signature(width)),
            "beats": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.delay = d = self.delay
        m.d.comb += [self.i.ready.eq(1),
                     d.i.valid.eq(self.i.valid), d.i.payload.eq(self.i.payload),
                     self.o.valid.eq(d.o.valid), self.o.payload.eq(d.o.payload)]
        with m.If(self.i.valid):
            m.d.sync += self.beats.eq(self.beats + 1)
        return m
