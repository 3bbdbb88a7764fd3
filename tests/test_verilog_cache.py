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


def test_prune_deletes_the_oldest_past_the_budget(tmp_path):
    """Files over the budget go oldest first; the file just written stays even when it
    alone is over the budget; other files are not touched."""
    import os

    sizes = {"a.v": 300, "b.v": 300, "c.v": 300, "keep.txt": 5000}
    for i, (name, size) in enumerate(sizes.items()):
        (tmp_path / name).write_bytes(b"x" * size)
        os.utime(tmp_path / name, (1000 + i, 1000 + i))
    vx.prune(tmp_path, 650)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.v", "c.v", "keep.txt"]
    vx.prune(tmp_path, 10, keep=tmp_path / "b.v")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.v", "keep.txt"]


def test_an_unwritable_shared_folder_is_skipped(tmp_path, monkeypatch):
    """A shared folder that cannot be created (its parent a file): the export still lands
    in the build folder, and nothing is raised."""
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("VERILOG_CACHE", str(tmp_path / "file" / "shared"))
    monkeypatch.delenv("AMARANTH_USE_YOSYS", raising=False)
    monkeypatch.setattr(vx, "BUILD", tmp_path / "clone")
    text = vx.cached_verilog(_Counter(4), "counter4")
    assert "module counter4" in text
    assert len(list((tmp_path / "clone" / "verilog").glob("counter4-*.v"))) == 1


@pytest.mark.parametrize("value", ["0", "-5", "2G", "1.5"])
def test_a_bad_budget_names_the_variable(value, monkeypatch):
    monkeypatch.setenv("VERILOG_CACHE_MAX_MB", value)
    with pytest.raises(ValueError, match="VERILOG_CACHE_MAX_MB"):
        vx.shared_budget_mb()


def test_the_budget_defaults_when_unset(monkeypatch):
    monkeypatch.delenv("VERILOG_CACHE_MAX_MB", raising=False)
    assert vx.shared_budget_mb() == vx.SHARED_MAX_MB
    monkeypatch.setenv("VERILOG_CACHE_MAX_MB", "12")
    assert vx.shared_budget_mb() == 12
