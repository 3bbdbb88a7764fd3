"""Pack and unpack Amaranth layout values as plain integers (the layouts are in spec).

Both work on the layout's field offsets and widths with integer shifts, without building
Amaranth constants (``Layout.const`` costs tens of microseconds a field, which the
testbenches paid for every MMIO word they load): :func:`pack` gives the same integer as
``layout.const(fields).as_value().value`` (tested on every layout of spec): a field's
value wraps to its width as in that constant, and an enum-shaped field refuses a value
that is not one of its members (``ValueError``), as Amaranth does.
"""

import enum

from amaranth.lib import data

__all__ = ["pack", "unpack"]

_PLAN = {}


def _plan(layout):
    """``[(name, offset, width, sub-layout or None, enum values or None)]``, cached (with
    the set of field names, see :func:`_names`)."""
    hit = _PLAN.get(id(layout))
    if hit is not None and hit[0] is layout:
        return hit[1]
    plan = []
    for name, f in layout:
        sub = f.shape if isinstance(f.shape, data.Layout) else None
        members = None
        if isinstance(f.shape, type) and issubclass(f.shape, enum.Enum):
            members = {m.value for m in f.shape}
        plan.append((name, f.offset, f.width, sub, members))
    _PLAN[id(layout)] = (layout, plan, frozenset(name for name, *_ in plan))
    return plan


def _names(layout):
    _plan(layout)
    return _PLAN[id(layout)][2]


def pack(layout, fields=None, **kw):
    """The integer of ``layout`` with the given fields (others zero). Nested layouts take
    nested dicts (arrays: sequences) or integers; an unknown field raises ``KeyError``."""
    values = dict(fields or {}, **kw)
    plan = _plan(layout)
    if isinstance(layout, data.StructLayout):
        names = _names(layout)
        unknown = [k for k in values if k not in names]
        if unknown:
            raise KeyError(f"{sorted(unknown)} not in the layout's fields "
                           f"{sorted(layout.members)}")
    word = 0
    for name, offset, width, sub, members in plan:
        v = values.get(name)
        if v is None:
            continue
        if isinstance(v, enum.Enum):
            v = v.value
        if isinstance(v, (dict, list, tuple)):
            if sub is None:
                raise TypeError(f"field {name!r} is not a layout; {type(v).__name__} "
                                "cannot fill it")
            v = pack(sub, v if isinstance(v, dict) else dict(enumerate(v)))
        elif members is not None and v not in members:
            raise ValueError(f"{v!r} is not a valid value of field {name!r}")
        word |= (int(v) & ((1 << width) - 1)) << offset
    return word


def unpack(layout, value):
    """A dict of the fields of ``value`` (nested struct layouts give nested dicts)."""
    out = {}
    for name, offset, width, sub, _ in _plan(layout):
        raw = (value >> offset) & ((1 << width) - 1)
        out[name] = unpack(sub, raw) if isinstance(sub, data.StructLayout) else raw
    return out
