"""The export cache shared by clones (tb.verilog_export: ``$VERILOG_CACHE``): a fresh
build folder takes an export from the shared folder instead of exporting again, and the
text is the export's."""

import pytest
from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

import tb.verilog_export as vx


class _Counter(wiring.Component):
    """A small top: a counter of ``en`` cycles, ``width`` bits."""

    def __init__(self, width):
        self.width = width
        super().__init__({"en": In(1), "count": Out(width)})

    def elaborate(self, platform):
        m = Module()
        n = Signal(self.width)
        with m.If(self.en):
            m.d.sync += n.eq(n + 1)
        m.d.comb += self.count.eq(n)
        return m


def test_a_fresh_build_folder_takes_the_shared_export(tmp_path, monkeypatch):
    """Clone 1 exports and writes both caches; clone 2 (another build folder) gets the
    same text from the shared folder without exporting; the text is export_verilog's."""
    monkeypatch.setenv("VERILOG_CACHE", str(tmp_path / "shared"))
    monkeypatch.delenv("AMARANTH_USE_YOSYS", raising=False)
    monkeypatch.setattr(vx, "BUILD", tmp_path / "clone1")
    text = vx.cached_verilog(_Counter(5), "counter5")
    assert text == vx.export_verilog(_Counter(5), "counter5")
    assert len(list((tmp_path / "shared").glob("counter5-*.v"))) == 1
    assert len(list((tmp_path / "clone1" / "verilog").glob("counter5-*.v"))) == 1

    def no_export(top, name):
        raise AssertionError(f"{name} exported again")

    monkeypatch.setattr(vx, "BUILD", tmp_path / "clone2")
    monkeypatch.setattr(vx, "export_verilog", no_export)
    assert vx.cached_verilog(_Counter(5), "counter5") == text
    assert (tmp_path / "clone2" / "verilog").exists()
    with pytest.raises(AssertionError, match="counter6 exported again"):
        vx.cached_verilog(_Counter(6), "counter6")      # another top: not in the cache


@pytest.mark.parametrize("env", [{}, {"VERILOG_CACHE": " "},
                                 {"VERILOG_CACHE": "/x", "AMARANTH_USE_YOSYS": "system"}])
def test_no_shared_folder(env, monkeypatch):
    """Unset or empty, or Yosys other than Amaranth's own: no shared path."""
    for var in ("VERILOG_CACHE", "AMARANTH_USE_YOSYS"):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    assert vx.shared_verilog_path("t", "0" * 16) is None


def test_shared_name_holds_the_key(monkeypatch):
    """Two keys, two files, in the folder named (``~`` expanded)."""
    monkeypatch.setenv("VERILOG_CACHE", "~/vc")
    monkeypatch.delenv("AMARANTH_USE_YOSYS", raising=False)
    a, b = vx.shared_verilog_path("t", "0" * 16), vx.shared_verilog_path("t", "1" * 16)
    assert a != b and a.parent == b.parent and "~" not in str(a)
    assert a.name.startswith("t-" + "0" * 16 + "-")
