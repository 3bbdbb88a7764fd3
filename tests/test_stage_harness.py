"""The stage harness (:func:`tb.stage_harness.compare_stage`) on a toy stage: its
``quiet`` rule ends a run early once nothing is left to happen, and still compares an
output that comes late."""

import pytest
from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from tb.stage_harness import compare_stage


class _Hold(wiring.Component):
    """Takes an item from ``i`` and writes it to ``o`` ``wait + 1`` cycles later (``wait``
    cycles without a move in between); takes nothing while it holds one. ``a`` answers
    the query ``q`` of the same cycle (``a = q``)."""

    i: In(stream.Signature(8))
    o: Out(stream.Signature(8))
    q: In(8)
    a: Out(8)

    def __init__(self, wait):
        super().__init__()
        self.wait = wait

    def elaborate(self, platform):
        m = Module()
        held, data = Signal(), Signal(8)
        count = Signal(range(self.wait + 1))
        m.d.comb += [self.i.ready.eq(~held), self.o.valid.eq(held & (count == 0)),
                     self.o.payload.eq(data), self.a.eq(self.q)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [held.eq(1), data.eq(self.i.payload), count.eq(self.wait)]
        with m.Elif(held & (count != 0)):
            m.d.sync += count.eq(count - 1)
        with m.Elif(self.o.valid & self.o.ready):
            m.d.sync += held.eq(0)
        return m


class _HoldTwin:
    """The twin of :class:`_Hold`; ``bump`` is added to every item it writes (a wrong
    twin), ``steps`` counts the cycles it played."""

    def __init__(self, fifos, wait, bump=0):
        self.i, self.o, self.wait, self.bump = fifos["i"], fifos["o"], wait, bump
        self.held, self.count, self.steps = None, 0, 0

    def step(self, c, side):
        self.steps += 1
        self._next = (self.held, self.count)
        if self.held is None:
            if self.i.can_read():
                self._next = (self.i.read(), self.wait)
        elif self.count:
            self._next = (self.held, self.count - 1)
        elif self.o.can_write():
            self.o.write(self.held + self.bump)
            self._next = (None, 0)
        return {"a": side.get("q", 0)}

    def commit(self):
        self.held, self.count = self._next


class _BusyTwin(_HoldTwin):
    def busy(self):
        return self.held is not None


ITEMS = [3, 5, 7]
CYCLES = 400


def _run(wait, quiet, twin=_HoldTwin, bump=0, **kw):
    box = {}

    def make(fifos):
        box["t"] = twin(fifos, wait, bump)
        return box["t"]

    out = compare_stage(_Hold(wait), make, inputs={"i": 2}, outputs={"o": 2},
                        stimulus={"i": ITEMS}, cycles=CYCLES, push_rate=1.0, pop_rate=1.0,
                        quiet=quiet, **kw)
    return out, box["t"].steps


def test_without_quiet_the_run_lasts_its_cycles():
    out, steps = _run(4, None)
    assert steps == CYCLES and [v for _, v in out["o"]] == ITEMS


def test_quiet_run_ends_quiet_cycles_after_the_last_move():
    quiet = 8
    out, steps = _run(4, quiet)
    assert [v for _, v in out["o"]] == ITEMS and len(out["taken"]["i"]) == len(ITEMS)
    # The last move is the last write; the run plays ``quiet`` cycles after it.
    assert steps == out["o"][-1][0] + quiet + 1 < CYCLES


def test_quiet_run_still_compares_an_output_quiet_minus_one_cycles_late():
    quiet = 8
    out, _ = _run(quiet - 1, quiet)
    assert [v for _, v in out["o"]] == ITEMS
    with pytest.raises(AssertionError, match="o: RTL wrote 3, twin 4"):
        _run(quiet - 1, quiet, bump=1)


def test_quiet_shorter_than_the_wait_ends_before_the_output_unless_the_twin_is_busy():
    quiet = 8
    out, steps = _run(quiet, quiet)
    # (Until the last item is taken the input FIFO holds one: the run goes on.)
    assert [v for _, v in out["o"]] == ITEMS[:-1]
    assert steps == out["taken"]["i"][-1] + quiet + 1
    out, _ = _run(quiet, quiet, twin=_BusyTwin)
    assert [v for _, v in out["o"]] == ITEMS


def test_a_changing_side_output_is_a_move_unless_it_answers_a_query():
    asked = dict(side_in=lambda c, peek: {"q": c % 256}, side_out=("a",))
    out, steps = _run(4, 8, **asked)
    assert steps == CYCLES and [v for _, v in out["o"]] == ITEMS
    out, steps = _run(4, 8, answers=("a",), **asked)
    assert steps == out["o"][-1][0] + 8 + 1 < CYCLES
