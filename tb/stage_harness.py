"""A pipeline stage between SyncFIFOs against its twin between ``Fifo``s, cycle by cycle.

The RTL side: the stage (any ``wiring.Component``) with a ``SyncFIFO`` in front of each
of its input stream ports and behind each of its output stream ports, in the Amaranth
simulator. The model side: the stage's twin with a :class:`pymodel.cycle.Fifo` in each of
the same places. One testbench drives both with the same seeded pattern: in each cycle it
may push the next stimulus item into an input FIFO and pop an output FIFO (random
backpressure), sets the stage's other inputs ("side inputs") and compares, in that same
cycle, every item the stage writes into an output FIFO, every item it takes from an
input FIFO, and the side outputs it names. The first difference fails with its cycle.
The run lasts ``cycles`` cycles, or (with ``quiet``) ends once nothing is left to happen.

The twin's protocol
-------------------
``make_twin(fifos)`` builds the twin from ``{port name: Fifo}``. Per cycle the harness
calls ``twin.step(c, side)`` (``side``: the side inputs of the cycle, a dict keyed by
the RTL port names) which returns a dict of side outputs (None, or a value of None, is
not compared), then ``twin.commit()`` and the FIFOs' ``commit()``. Every twin of a
pipeline stage (``pymodel/rdma/resp/``, ``pymodel/rdma/req/``) and of a NIC or
host-interface block (``pymodel/nic/``, ``pymodel/host/``) has this protocol. Items
are dicts of the port's ``StructLayout`` fields (or ints for plain shapes), packed for
the comparison.
"""

import random

from amaranth import Elaboratable, Module, Shape, Value
from amaranth.lib import data, stream
from amaranth.lib.fifo import SyncFIFO

from pymodel.cycle import Fifo
from pymodel.fields import pack
from tb.amsim import as_int, run_sim

__all__ = ["compare_stage", "to_int"]


def to_int(layout, item):
    """The flat integer of ``item`` (a dict of ``layout``'s fields, or an int)."""
    if isinstance(item, int):
        return item
    if isinstance(layout, data.Layout):
        return pack(layout, item)
    raise TypeError(f"cannot pack {item!r} for a plain shape")


class _RecordingFifo(Fifo):
    """A Fifo that remembers what was written and how many were read in the cycle."""

    def __init__(self, depth, name):
        super().__init__(depth, name)
        self.log, self.reads = [], 0

    def write(self, value):
        super().write(value)
        self.log.append(value)

    def read(self):
        self.reads += 1
        return super().read()

    def commit(self):
        super().commit()
        self.log, self.reads = [], 0


class _Bench(Elaboratable):
    def __init__(self, dut, inputs, outputs, levels):
        self.dut, self.levels = dut, levels
        self.fifos = {}
        for name, depth in {**inputs, **outputs}.items():
            port = getattr(dut, name)
            width = Shape.cast(port.payload.shape()).width
            self.fifos[name] = SyncFIFO(width=width, depth=depth)
        self.inputs, self.outputs = list(inputs), list(outputs)

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = self.dut
        for name, fifo in self.fifos.items():
            m.submodules[f"fifo_{name}"] = fifo
            port = getattr(self.dut, name)
            if name in self.inputs:
                m.d.comb += [port.valid.eq(fifo.r_rdy), port.payload.eq(fifo.r_data),
                             fifo.r_en.eq(port.ready)]
            else:
                m.d.comb += [fifo.w_en.eq(port.valid), fifo.w_data.eq(port.payload),
                             port.ready.eq(fifo.w_rdy)]
        for level_port, fifo_name in self.levels.items():
            m.d.comb += getattr(self.dut, level_port).eq(self.fifos[fifo_name].level)
        return m


def compare_stage(dut, make_twin, *, inputs, outputs, stimulus, cycles, seed=1,
                  push_rate=0.7, pop_rate=0.7, levels=None, side_in=None, side_out=(),
                  deadline_cycles=None, defined=None, ports=None, quiet=None,
                  answers=()):
    """Run ``dut`` and its twin for ``cycles`` cycles (with ``quiet``: at most); fail on
    the first difference.

    Parameters
    ----------
    dut : wiring.Component
    make_twin : callable
        ``make_twin({port name: Fifo})`` -> the twin.
    inputs, outputs : dict
        ``{stream port name: FIFO depth}`` of the stage's input and output streams.
    stimulus : dict
        ``{input port name: [items]}`` pushed in order.
    push_rate, pop_rate : float
        Probability that the testbench offers the next item to an input FIFO, and pops
        an output FIFO, in a cycle (1.0: every cycle); ``push_rate`` may be a dict
        ``{input port name: rate}`` (1.0 for a port it leaves out).
    levels : dict
        ``{stage port name: FIFO port name}``: stage inputs that see a FIFO's level.
    side_in : callable
        ``side_in(c, peek)`` -> ``{stage port name: value}`` for cycle ``c``;
        ``peek(name)`` reads a stage port of the RTL in this cycle (after the FIFOs). A
        stream port given here is driven as an always-ready source: ``valid`` when the
        value (an item) is not None. The ports are driven in the dict's order; a value
        may be a callable ``value(peek)``, called once the entries before it are driven
        (the read data of an address that an earlier side input moves).
    side_out : iterable
        Stage output ports compared with the twin's step result every cycle (dotted
        names reach into a port: ``"lookup.payload"``).
    defined : dict
        ``{output port name: f}``: ``f(bits)`` -> the item with the fields its contract
        leaves undefined set to 0 (both sides pass through it before the comparison;
        the returned items are the RTL's, whole).
    ports : dict
        ``{side name: port path of the RTL}`` where the twin's side key is not the
        RTL's port path (a member of a port Signature: ``"q_entry"`` ->
        ``"completion.entry"``); other names are the RTL's own.
    quiet : int
        None: the run lasts ``cycles`` cycles. Else the run ends after the first cycle
        ``c`` at whose end every stimulus item has entered, every FIFO of the model side
        (inputs and outputs; the RTL's agree, compared every cycle) is empty, the twin's
        ``busy()`` is false and its ``idle()`` true (where it has them), and nothing
        moved in cycles ``c - quiet + 1`` to ``c``: no item written by the stage or
        taken from an input FIFO, no side output of the RTL other than in the cycle
        before, no side input given as a stream item (a value not None). ``cycles``
        stays the cap. ``quiet`` must exceed the stage's longest wait without a move
        (a timer, a scan of its slots) and any gap before a side input's scheduled
        event, or those are not compared.
    answers : iterable
        Side outputs (of ``side_out``) that answer the side inputs of their cycle (a
        query's result for the entry asked about): their changes are not moves for
        ``quiet`` (the state they read moves other outputs, counters or registers).

    Returns
    -------
    dict
        ``{output port name: [(cycle, int item), ...]}`` written by the stage, and
        ``"taken"``: ``{input port name: [cycles]}``.
    """
    levels = levels or {}
    defined = defined or {}
    ports = ports or {}

    def port_of(name):
        return _resolve(dut, ports.get(name, name))

    bench = _Bench(dut, inputs, outputs, levels)
    fifos = {name: _RecordingFifo(depth, name) for name, depth in {**inputs, **outputs}.items()}
    twin = make_twin(fifos)
    layouts = {name: getattr(dut, name).payload.shape() for name in fifos}
    rng = random.Random(seed)
    queues = {name: list(stimulus.get(name, ())) for name in inputs}
    written = {name: [] for name in outputs}
    taken = {name: [] for name in inputs}
    streams = {}                        # side input name -> whether a stream port
    busy = getattr(twin, "busy", None)
    idle = getattr(twin, "idle", None)
    still = {"last": -1, "side": None}  # the last cycle with a move; side outputs

    def flat(port):
        payload = port.payload
        return payload.as_value() if hasattr(payload, "as_value") else Value.cast(payload)

    async def testbench(ctx):
        for c in range(cycles):
            pushes, pops = {}, {}
            for name in inputs:
                rtl = bench.fifos[name]
                rate = push_rate.get(name, 1.0) if isinstance(push_rate, dict) else push_rate
                offer = bool(queues[name]) and rng.random() < rate
                can = bool(ctx.get(rtl.w_rdy))
                assert can == fifos[name].can_write(), f"cycle {c}: {name} room"
                pushes[name] = offer and can
                ctx.set(rtl.w_en, pushes[name])
                if pushes[name]:
                    ctx.set(rtl.w_data, to_int(layouts[name], queues[name][0]))
            for name in outputs:
                rtl = bench.fifos[name]
                want = rng.random() < pop_rate
                can = bool(ctx.get(rtl.r_rdy))
                assert can == fifos[name].can_read(), f"cycle {c}: {name} not empty"
                pops[name] = want and can
                ctx.set(rtl.r_en, pops[name])
            peek = lambda n: ctx.get(port_of(n))    # noqa: E731
            side = {}
            for name, value in (side_in(c, peek) if side_in else {}).items():
                if callable(value):         # read after the side inputs before it
                    value = value(peek)
                side[name] = value
                _drive(ctx, port_of(name), value)
                if quiet is not None and value is not None:
                    if name not in streams:
                        streams[name] = _is_stream(port_of(name))
                    if streams[name]:
                        still["last"] = c
            got = {}
            for name in outputs:
                port = getattr(dut, name)
                if ctx.get(port.valid) and ctx.get(port.ready):
                    got[name] = ctx.get(flat(port))
            got_taken = {name: bool(ctx.get(getattr(dut, name).valid)
                                    and ctx.get(getattr(dut, name).ready)) for name in inputs}
            got_side = {name: ctx.get(port_of(name)) for name in side_out}
            moved = {name: got_side[name] for name in side_out if name not in answers}
            # The model's cycle.
            for name in inputs:
                if pushes[name]:
                    fifos[name].write(queues[name].pop(0))
            for name in outputs:
                if pops[name]:
                    fifos[name].read()
            want_side = twin.step(c, side) or {}
            for name in outputs:
                log = fifos[name].log
                assert len(log) <= 1, f"cycle {c}: twin wrote {len(log)} items into {name}"
                want = to_int(layouts[name], log[0]) if log else None
                have = got.get(name)
                if have is not None:
                    written[name].append((c, have))
                if name in defined and have is not None and want is not None:
                    have, want = defined[name](have), defined[name](want)
                assert have == want, (f"cycle {c}: {name}: RTL wrote "
                                      f"{_show(layouts[name], have)}, twin "
                                      f"{_show(layouts[name], want)}")
            for name in inputs:
                reads = fifos[name].reads
                assert got_taken[name] == (reads == 1), (
                    f"cycle {c}: {name}: RTL took {got_taken[name]}, twin read {reads}")
                if got_taken[name]:
                    taken[name].append(c)
            for name in side_out:
                want = want_side.get(name)
                if want is not None:
                    have = got_side[name]
                    have = as_int(have)
                    if isinstance(want, dict):
                        want = to_int(port_of(name).shape(), want)
                    want = int(want)
                    assert have == want, f"cycle {c}: {name}: RTL {have}, twin {want}"
            twin.commit()
            for f in fifos.values():
                f.commit()
            if quiet is not None and _ends(c, quiet, still, got, got_taken, moved,
                                           queues, fifos, busy, idle):
                return
            await ctx.tick()

    run_sim(bench, testbench, deadline_cycles=deadline_cycles or cycles + 10)
    for name, q in queues.items():
        assert not q, f"{len(q)} stimulus items of {name} never entered"
    return dict(written, taken=taken)


def _ends(c, quiet, still, got, got_taken, moved, queues, fifos, busy, idle):
    """Whether the run of :func:`compare_stage` ends after cycle ``c`` (its ``quiet``
    rule); notes the cycle's moves in ``still``."""
    side = {name: as_int(v) for name, v in moved.items()}
    if got or any(got_taken.values()) or side != still["side"]:
        still["last"] = c
    still["side"] = side
    return (c - still["last"] >= quiet and not any(queues.values())
            and not any(len(f) for f in fifos.values())
            and not (busy and busy()) and (idle is None or idle()))


def _is_stream(port):
    return isinstance(getattr(port, "signature", None), stream.Signature)


def _resolve(dut, name):
    """The port (or port member) ``name`` of ``dut``: ``"victim_busy"``, ``"lookup.valid"``,
    ``"probe[1].present"`` (a member of a port array)."""
    obj = dut
    for part in name.split("."):
        part, _, index = part.partition("[")
        obj = getattr(obj, part)
        if index:
            obj = obj[int(index.rstrip("]"))]
    return obj


def _drive(ctx, port, value):
    """Set a side input: a plain port to ``value``; a stream port (always ready on the
    stage's side) to ``valid`` = ``value is not None`` and that payload."""
    if _is_stream(port):
        ctx.set(port.valid, value is not None)
        if value is not None:
            payload = port.payload
            flat = payload.as_value() if hasattr(payload, "as_value") else payload
            ctx.set(flat, to_int(payload.shape(), value))
        return
    if isinstance(value, dict):
        value = to_int(port.shape(), value)
    ctx.set(port.as_value() if hasattr(port, "as_value") else port, value)


def _show(layout, value):
    if value is None or not isinstance(layout, data.StructLayout):
        return repr(value)
    parts = []
    for name, field in layout:
        v = (value >> field.offset) & ((1 << field.width) - 1)
        parts.append(f"{name}={v:#x}" if field.width > 8 else f"{name}={v}")
    return "{" + ", ".join(parts) + "}"
