"""The co-simulation harness turns every kind of bad run into a failure."""

import pytest

from rtl.tops.mem_credit_top import MemCreditTop
from tb.cosim import BUILD, CosimFailure, bytecode_cache, run_cosim, selected_sim, waves_enabled

PARAMS = dict(width=16, depth=64, latency=4, max_credits=8)


def _top():
    # The same top as tests/test_cosim_mem_credit.py, so the build is shared.
    return MemCreditTop(**PARAMS, items=1024)


def test_failing_cocotb_test_fails_pytest(sim, test_id):
    with pytest.raises(CosimFailure, match="1 of 1 cocotb tests failed"):
        run_cosim(_top(), name="mem_credit_top", test_module="tb.cocotb_selftest_fails",
                  sim=sim, test_id=test_id)


def test_module_without_tests_fails_pytest(sim, test_id):
    with pytest.raises(CosimFailure, match="no (test|results)"):
        run_cosim(_top(), name="mem_credit_top", test_module="tb.cocotb_selftest_empty",
                  sim=sim, test_id=test_id)


def test_bad_simulator_and_waves_values_are_named(monkeypatch):
    with pytest.raises(ValueError, match="SIM must be one of"):
        selected_sim("modelsim")
    monkeypatch.setenv("SIM", "questa")
    with pytest.raises(ValueError, match="'questa'"):
        selected_sim()
    monkeypatch.setenv("WAVES", "maybe")
    with pytest.raises(ValueError, match="WAVES must be 0 or 1"):
        waves_enabled()
    monkeypatch.setenv("WAVES", "1")
    assert waves_enabled()


def test_fast_export_writes_the_same_verilog():
    """The export shortcut (zero initialisers as loops, tables as one constant) changes
    nothing in the Verilog but the folding of zero initialisers."""
    from amaranth.back import verilog

    from rtl.tops.fcs_top import FcsTop
    from tb.cosim import _ZERO_INIT, _zero_loop, export_verilog

    plain = _ZERO_INIT.sub(_zero_loop, verilog.convert(FcsTop(8, depth=64), name="t",
                                                       emit_src=False))
    fast = export_verilog(FcsTop(8, depth=64), "t")
    assert "zero_items" in fast and "data_rows7[15] = " in fast
    assert fast == plain


def test_one_bit_shifts_become_bit_selects_only_where_the_index_stays_inside():
    """tb.verilog_export.bit_selects: ``y = v >> i`` with a one-bit ``y`` is ``v[i]``
    when every ``i`` lies inside ``v``; wider results and amounts that can leave ``v``
    keep the shift."""
    from tb.verilog_export import bit_selects

    text = """module m(a, i, k, p, y0, y1, y2, y3, y4);
  input [255:0] a;
  input [7:0] i;
  input [8:0] k;
  input [39:0] p;
  output y0;
  output y1;
  output [1:0] y2;
  output y3;
  output y4;
  wire \\$5 ;
  assign y0 = a >> i;
  assign y1 = a >> k;
  assign y2 = a >> i;
  assign y3 = a >> p[39:32];
  assign y4 = a >> p[39:31];
  assign \\$5  = a >> i;
endmodule
"""
    want = (text.replace("y0 = a >> i;", "y0 = a[i];")
            .replace("y3 = a >> p[39:32];", "y3 = a[p[39:32]];")
            .replace("\\$5  = a >> i;", "\\$5 = a[i];"))
    assert bit_selects(text) == want
    assert bit_selects(text.replace("[255:0] a", "[254:0] a")) == \
        text.replace("[255:0] a", "[254:0] a")


def test_file_reads_of_memories_equal_vpi_reads(sim, test_id):
    """tb.bulk_dump: a memory written to a file by the simulator reads the same as
    through VPI; partial files, a snapshot at the wrong clock phase and (Icarus) X bits
    are errors."""
    run_cosim(_top(), name="mem_credit_top", test_module="tb.cocotb_selftest_bulk_dump",
              sim=sim, test_id=test_id)


def test_clock_of_a_later_test_keeps_the_grid(sim, test_id):
    """A later cocotb test's harness starts its clock on the first test's grid and
    resets the design whole, even when the first test ended with the clock low."""
    run_cosim(_top(), name="mem_credit_top", test_module="tb.cocotb_selftest_clock_restart",
              sim=sim, test_id=test_id)


def test_clock_only_run_covers_its_cycles(sim, test_id):
    """tb.cocotb_clock_only (make bench's ceiling): the run lets the asked cycles pass
    after reset and reports them with a wall time; a count that is not positive fails
    the run with an error naming it."""
    import json
    from pathlib import Path

    from scripts.benchmark.cosim import read_results_xml
    from tb.cosim import driven_inputs
    from tb.harness import CLOCK_NS

    inputs = driven_inputs(_top(), "mem_credit_top")
    assert inputs and "clk" not in inputs and "rst" not in inputs
    run = run_cosim(_top(), name="mem_credit_top", test_module="tb.cocotb_clock_only",
                    params={"cycles": 500, "inputs": inputs}, sim=sim, test_id=test_id)
    got = json.loads((run / "clock_only.json").read_text())
    assert got["cycles"] == 500 and got["seconds"] > 0
    _, sim_ns = read_results_xml(run / "results.xml")
    assert 500 <= sim_ns / CLOCK_NS <= 503          # plus the two reset cycles
    if sim == "verilator":
        with pytest.raises(CosimFailure, match="1 of 1 cocotb tests failed") as exc:
            run_cosim(_top(), name="mem_credit_top", test_module="tb.cocotb_clock_only",
                      params={"cycles": 0}, sim=sim, test_id=test_id + "_bad")
        log = Path(str(exc.value).rsplit("see ", 1)[1])
        assert "cycles must be a positive number of cycles, not 0" in log.read_text()


def test_dump_hooks_only_add_lines():
    """Every memory named in DUMPED of a clocked module gets its trigger and dump block;
    other memories and modules without a clock are untouched, and removing the added
    lines gives the original text back."""
    from tb.bulk_dump import DUMPED, add_dump_hooks

    text = ("module \\t.a (clk, x);\n  input clk;\n  reg [7:0] mem [3:0];\n"
            "  reg [3:0] queue [1:0];\nendmodule\n"
            "module \\t.b (x);\n  reg [7:0] items [3:0];\nendmodule\n"
            "module t(clk);\n  reg [31:0] stamps [15:0];\nendmodule\n")
    out = add_dump_hooks(text)
    assert '$writememh("t.a.mem.hex", mem);' in out
    assert '$writememh("t.stamps.hex", stamps, 0, bulk_dump_stamps_words - 1);' in out
    assert "bulk_dump_queue" not in out and "bulk_dump_items" not in out
    assert "queue" not in DUMPED
    kept = [line for line in out.splitlines()
            if "bulk_dump" not in line and "writememh" not in line and line != "  end"]
    assert "\n".join(kept) + "\n" == text


def test_player_and_recorder_ports_follow_their_signatures():
    """Each player and recorder of a HarnessTop has one control port, named as it, whose
    members are the Verilog ports ``<name>__<member>``: a player's ``count``,
    ``stall_seed``, ``stall_rate`` in and ``done`` out, a recorder's ``expect``,
    ``stall_seed``, ``stall_rate`` in and ``count``, ``done``, ``overflow`` out (the
    StreamPlayer and StreamRecorder contracts); the counter's flags stay as they are."""
    from tb.cosim import cached_verilog, top_ports

    got = set(top_ports(cached_verilog(_top(), "mem_credit_top"), "mem_credit_top"))
    want = {("input", "clk"), ("input", "rst"), ("output", "now"),
            ("output", "underflow"), ("output", "overflow")}
    for player in ("mem_ops", "credit_ops"):
        want |= {("input", f"{player}__{m}") for m in ("count", "stall_seed", "stall_rate")}
        want.add(("output", f"{player}__done"))
    for recorder in ("rd_data", "credit_obs"):
        want |= {("input", f"{recorder}__{m}") for m in ("expect", "stall_seed", "stall_rate")}
        want |= {("output", f"{recorder}__{m}") for m in ("count", "done", "overflow")}
    assert got == want


def test_port_view_of_a_mapping_and_ports_by_name():
    """PortView takes its ports from a mapping too and names a missing member;
    ports_by_name reads a component's ports through its signature."""
    from amaranth import Signal
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out

    from spec.ports import PlayerControlSignature, PortView, ports_by_name

    sig = PlayerControlSignature(7)
    ports = {"count": Signal(range(8)), "stall_seed": Signal(16), "stall_rate": Signal(8),
             "done": Signal()}
    view = PortView(sig, ports)
    assert view.count is ports["count"] and view.done is ports["done"]
    with pytest.raises(TypeError, match="no port 'done'"):
        PortView(sig, {k: v for k, v in ports.items() if k != "done"})

    class Block(wiring.Component):
        def __init__(self):
            super().__init__({"a": Out(3), "b": In(1), "ctl": In(sig),
                              "many": Out(2).array(2)})

        def elaborate(self, platform):
            raise NotImplementedError

    block = Block()
    top, ctl = ports_by_name(block), ports_by_name(block, "ctl")
    assert list(top) == ["a", "b"] and top["a"] is block.a and top["b"] is block.b
    assert sorted(ctl) == ["count", "done", "stall_rate", "stall_seed"]
    assert all(ctl[name] is getattr(block.ctl, name) for name in ctl)


def test_simulator_python_caches_its_bytecode_outside_the_tree():
    """With bytecode writing off and no cache folder of the user's, the simulator's Python
    caches its bytecode under build/pycache; a user's own cache folder, or bytecode
    writing on, is left as it is."""
    assert bytecode_cache({"PYTHONDONTWRITEBYTECODE": "1"}) == {
        "PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": str(BUILD / "pycache")}
    assert bytecode_cache({"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": "/x"}) == {}
    assert bytecode_cache({}) == bytecode_cache({"PYTHONDONTWRITEBYTECODE": ""}) == {}
