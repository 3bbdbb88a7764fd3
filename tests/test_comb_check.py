"""tb.comb_check agrees with Amaranth's own test for combinational cycles."""

import contextlib

import pytest
from amaranth import Cat, Module, Signal
from amaranth.hdl import _ir, _nir
from amaranth.lib import memory

from tb import comb_check
from tb.cosim import export_verilog


def _unchecked_netlist(m, ports):
    """The netlist of ``m`` built without Amaranth's cycle check."""
    original = _nir.Netlist.check_comb_cycles
    _nir.Netlist.check_comb_cycles = lambda self: None
    try:
        return _ir.build_netlist(_ir.Fragment.get(m, None), ports=ports, name="t")
    finally:
        _nir.Netlist.check_comb_cycles = original


def _designs():
    """(name, module builder, has a cycle): loops through each kind of cell the fast
    check treats as one node, through per-bit cells, and designs without a loop whose
    bits would form one if the check merged bits it must keep apart."""
    def adder_loop():
        m = Module()
        a, b = Signal(8), Signal(8)
        m.d.comb += [a.eq(b + 1), b.eq(a)]
        return m, [a]

    def shift_loop():
        m = Module()
        a, s = Signal(16), Signal(4)
        m.d.comb += [s.eq(a[:4]), a.eq(Signal(16, name="x") << s)]
        return m, [a]

    def part_loop():
        m = Module()
        v, off = Signal(32), Signal(5)
        m.d.comb += [off.eq(v.bit_select(off, 5)), v.eq(Cat(off, off))]
        return m, [v]

    def memory_loop():
        m = Module()
        m.submodules.mem = mem = memory.Memory(shape=4, depth=16, init=[])
        rp = mem.read_port(domain="comb")
        m.d.comb += rp.addr.eq(rp.data)
        return m, [rp.data]

    def bitwise_swap_loop():
        m = Module()
        a = Signal(2)
        m.d.comb += a.eq(Cat(~a[1], ~a[0]))
        return m, [a]

    def bit_chain_no_loop():
        # bit k of a feeds bit k + 1: a loop only if bits were merged
        m = Module()
        a, x = Signal(8), Signal()
        m.d.comb += a.eq(Cat(x, a[:7] ^ 1))
        return m, [a, x]

    def registered_no_loop():
        m = Module()
        a, b = Signal(8), Signal(8)
        m.d.comb += a.eq(b + 1)
        m.d.sync += b.eq(a)
        return m, [a]

    def mux_no_loop():
        m = Module()
        a, sel, x = Signal(4), Signal(), Signal(4)
        with m.If(sel):
            m.d.comb += a.eq(x + 1)
        with m.Else():
            m.d.comb += a.eq(x)
        return m, [a, sel, x]

    return [("adder", adder_loop, True), ("shift", shift_loop, True),
            ("part", part_loop, True), ("memory", memory_loop, True),
            ("bitwise", bitwise_swap_loop, True), ("chain", bit_chain_no_loop, False),
            ("registered", registered_no_loop, False), ("mux", mux_no_loop, False)]


@pytest.mark.parametrize("name,build,cycle", _designs(), ids=[d[0] for d in _designs()])
def test_fast_check_agrees_with_amaranth(name, build, cycle):
    """Amaranth finds a cycle exactly where the fast check does, and with the fast check
    installed the export still fails with Amaranth's own error."""
    expect = pytest.raises(_nir.CombinationalCycle) if cycle else contextlib.nullcontext()
    m, ports = build()
    with expect:
        _ir.build_netlist(_ir.Fragment.get(m, None), ports=ports, name="t")
    m, ports = build()
    assert comb_check.has_no_comb_cycle(_unchecked_netlist(m, ports)) is not cycle
    m, ports = build()
    expect = pytest.raises(_nir.CombinationalCycle) if cycle else contextlib.nullcontext()
    with comb_check.install(), expect:
        _ir.build_netlist(_ir.Fragment.get(m, None), ports=ports, name="t")


def test_fast_check_on_a_real_top_says_no_cycle():
    """A real top (the FCS top: CRC cores, players, recorders) exports with the fast
    check answering "no cycle", so Amaranth's own check is skipped."""
    from rtl.tops.fcs_top import FcsTop

    seen = []
    original = comb_check.has_no_comb_cycle

    def spy(netlist):
        seen.append(original(netlist))
        return seen[-1]

    comb_check.has_no_comb_cycle = spy
    try:
        export_verilog(FcsTop(8, depth=64), "t")
    finally:
        comb_check.has_no_comb_cycle = original
    assert seen == [True]
