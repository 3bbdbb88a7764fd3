"""pymodel.fields: the integer packer equals Amaranth's ``Layout.const`` on every
layout that spec defines, for random field values (wrapping ones too), and unpacks back."""

import enum
import importlib
import pkgutil
import random

import pytest
from amaranth.lib import data

import spec
from pymodel.fields import pack, unpack


def _layouts():
    found = {}
    for info in pkgutil.walk_packages(spec.__path__, "spec."):
        mod = importlib.import_module(info.name)
        for name, value in vars(mod).items():
            if isinstance(value, data.StructLayout):
                found[f"{info.name}.{name}"] = value
            elif callable(value) and name.endswith("_layout"):
                for args in ((), ("l2",), ("compact",), (64,)):
                    try:
                        made = value(*args)
                    except (TypeError, ValueError):
                        continue
                    if isinstance(made, data.StructLayout):
                        found[f"{info.name}.{name}{args}"] = made
                        if not args:
                            break
    return found


LAYOUTS = _layouts()


def _random(layout, rng, wrap):
    out = {}
    for name, f in layout:
        if isinstance(f.shape, data.ArrayLayout):
            out[name] = [_random_elem(f.shape.elem_shape, rng, wrap)
                         for _ in range(f.shape.length)]
        elif isinstance(f.shape, data.StructLayout):
            out[name] = _random(f.shape, rng, wrap)
        elif isinstance(f.shape, type) and issubclass(f.shape, enum.Enum):
            out[name] = rng.choice(list(f.shape))
        else:
            out[name] = rng.getrandbits(f.width + (3 if wrap else 0))
    return out


def _random_elem(shape, rng, wrap):
    if isinstance(shape, data.StructLayout):
        return _random(shape, rng, wrap)
    from amaranth.hdl import Shape
    return rng.getrandbits(Shape.cast(shape).width + (3 if wrap else 0))


def test_found_the_layouts():
    assert len(LAYOUTS) >= 15, sorted(LAYOUTS)
    assert any("mmio_layout" in n for n in LAYOUTS)
    assert any("WQE_LAYOUT" in n for n in LAYOUTS)


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_pack_equals_amaranth_const(name):
    layout, rng = LAYOUTS[name], random.Random(name)
    for wrap in (False, True):
        for _ in range(40):
            fields = _random(layout, rng, wrap)
            want = layout.const(fields).as_value().value
            assert pack(layout, fields) == want, fields
            if not wrap and not any(isinstance(f.shape, data.ArrayLayout) for _, f in layout):
                assert pack(layout, unpack(layout, want)) == want


def test_bad_fields_raise():
    from spec.formats.roce import WQE_LAYOUT
    with pytest.raises(KeyError, match="nonsense"):
        pack(WQE_LAYOUT, nonsense=1)
    enum_field = next(n for n, f in WQE_LAYOUT
                      if isinstance(f.shape, type) and issubclass(f.shape, enum.Enum))
    with pytest.raises(ValueError, match=enum_field):
        pack(WQE_LAYOUT, {enum_field: 250})
    with pytest.raises(ValueError):                    # and Amaranth agrees
        WQE_LAYOUT.const({enum_field: 250})
