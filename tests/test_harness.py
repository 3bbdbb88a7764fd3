"""The co-simulation harness turns every kind of bad run into a failure."""

import pytest

from rtl.tops.mem_credit_top import MemCreditTop
from tb.cosim import CosimFailure, run_cosim, selected_sim, waves_enabled

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
