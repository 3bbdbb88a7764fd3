"""The slow marks declared beside the tests (tests/conftest.py, ``_slow_reason``): which
variants they make slow, and that a mark without a reason stops the collection."""

from types import SimpleNamespace

import pytest
from conftest import _slow_reason


def _item(marks, variant=None):
    """A stand-in for a collected test: its marks (closest first) and parameter id."""
    item = SimpleNamespace(nodeid="tests/test_x.py::test_y", iter_markers=lambda: iter(marks))
    if variant is not None:
        item.callspec = SimpleNamespace(id=variant)
    return item


def test_slow_marks_every_variant():
    assert _slow_reason(_item([pytest.mark.slow(reason="covered").mark], "icarus")) == "covered"
    assert _slow_reason(_item([pytest.mark.slow(reason="covered").mark])) == "covered"


def test_slow_variants_marks_the_matching_ones():
    mark = pytest.mark.slow_variants("icarus", "verilator-8*", reason="covered").mark
    assert _slow_reason(_item([mark], "icarus")) == "covered"
    assert _slow_reason(_item([mark], "verilator-8-x")) == "covered"
    assert _slow_reason(_item([mark], "verilator-64")) is None
    assert _slow_reason(_item([mark], "icarus-2")) is None
    assert _slow_reason(_item([mark])) is None


def test_the_closest_matching_mark_gives_the_reason():
    near = pytest.mark.slow_variants("icarus", reason="near").mark
    far = pytest.mark.slow_variants("*", reason="far").mark
    assert _slow_reason(_item([near, far], "icarus")) == "near"
    assert _slow_reason(_item([near, far], "verilator")) == "far"
    assert _slow_reason(_item([pytest.mark.cosim.mark], "icarus")) is None


@pytest.mark.parametrize("mark", [pytest.mark.slow.mark,
                                  pytest.mark.slow_variants("icarus").mark,
                                  pytest.mark.slow_variants("icarus", reason="").mark])
def test_a_slow_mark_needs_a_reason(mark):
    with pytest.raises(pytest.UsageError, match="needs a reason"):
        _slow_reason(_item([mark], "icarus"))
