"""Pack and unpack Amaranth layout values as plain integers (the layouts are in spec).

Both work on the layout's field offsets and widths with integer shifts, without building
Amaranth constants (``Layout.const`` costs tens of microseconds a field, which the
testbenches paid for every MMIO word they load): :func:`pack` gives the same integer as
``layout.const(fields).as_value().value`` (tested on every layout of spec): a field's
value wraps to its width as in that constant, and an enum-shaped field refuses a value
that is not one of its members (``ValueError``), as Amaranth does.

The golden models pack and unpack headers, WQEs and contexts every few cycles, so each
layout's fields are read once into a plan of plain tuples (offset, mask, nested plan),
kept for the life of the layout object.
"""

import enum

from amaranth.lib import data

__all__ = ["pack", "unpack", "field_slot"]


class _Plan:
    """The fields of one layout as plain values (built once per layout object).

    ``fields``: ``(name, offset, mask, sub-layout or None, enum values or None)`` in
    layout order, for :func:`pack`; ``names``: the field names (``None`` unless the
    layout is a struct, whose unknown names :func:`pack` refuses); ``unpack``:
    ``(name, offset, mask, nested plan or None)`` for :func:`unpack`, the nested plan
    only for a struct-layout field (an array-layout field unpacks to its integer)."""

    __slots__ = ("layout", "fields", "names", "unpack")

    def __init__(self, layout):
        self.layout = layout
        fields = []
        for name, f in layout:
            sub = f.shape if isinstance(f.shape, data.Layout) else None
            members = None
            if isinstance(f.shape, type) and issubclass(f.shape, enum.Enum):
                members = frozenset(m.value for m in f.shape)
            fields.append((name, f.offset, (1 << f.width) - 1, sub, members))
        self.fields = tuple(fields)
        self.names = (frozenset(name for name, *_ in fields)
                      if isinstance(layout, data.StructLayout) else None)
        self.unpack = tuple(
            (name, offset, mask,
             _plan(sub) if isinstance(sub, data.StructLayout) else None)
            for name, offset, mask, sub, _ in fields)


_PLAN = {}


def _plan(layout):
    """The :class:`_Plan` of ``layout``, cached by identity (the cached plan keeps its
    layout alive, so the id is not reused)."""
    hit = _PLAN.get(id(layout))
    if hit is None or hit.layout is not layout:
        hit = _PLAN[id(layout)] = _Plan(layout)
    return hit


def pack(layout, fields=None, **kw):
    """The integer of ``layout`` with the given fields (others zero). Nested layouts take
    nested dicts (arrays: sequences) or integers; an unknown field raises ``KeyError``."""
    if type(fields) is not dict or kw:
        fields = dict(fields or {}, **kw)
    return _pack(_plan(layout), fields)


def _pack(plan, values):
    """:func:`pack` on a plan; ``values`` (a dict) is only read."""
    names = plan.names
    if names is not None and not names.issuperset(values):
        unknown = [k for k in values if k not in names]
        raise KeyError(f"{sorted(unknown)} not in the layout's fields "
                       f"{sorted(plan.layout.members)}")
    word = 0
    get = values.get
    for name, offset, mask, sub, members in plan.fields:
        v = get(name)
        if v is None:
            continue
        if type(v) is not int:          # bool, enum, nested: the full rules
            if isinstance(v, enum.Enum):
                v = v.value
            if isinstance(v, (dict, list, tuple)):
                if sub is None:
                    raise TypeError(f"field {name!r} is not a layout; {type(v).__name__} "
                                    "cannot fill it")
                v = _pack(_plan(sub), v if isinstance(v, dict) else dict(enumerate(v)))
                members = None
            if members is not None and v not in members:
                raise ValueError(f"{v!r} is not a valid value of field {name!r}")
            word |= (int(v) & mask) << offset
        elif members is not None and v not in members:
            raise ValueError(f"{v!r} is not a valid value of field {name!r}")
        else:                           # a plain int: no conversion
            word |= (v & mask) << offset
    return word


def _unpack(plan, value):
    out = {}
    for name, offset, mask, sub in plan:
        raw = (value >> offset) & mask
        out[name] = raw if sub is None else _unpack(sub.unpack, raw)
    return out


def unpack(layout, value):
    """A dict of the fields of ``value`` (nested struct layouts give nested dicts)."""
    return _unpack(_plan(layout).unpack, value)


def field_slot(layout, path):
    """``(offset, mask)`` of the field at ``path`` (names joined by dots, ``"bth.psn"``)
    of ``layout``: ``(value >> offset) & mask`` is what :func:`unpack` gives for it, and
    ``(v & mask) << offset`` its bits in what :func:`pack` gives (for a plain integer
    ``v``). For models that read or place a few fields of a wide header per frame."""
    offset, names = 0, path.split(".")
    plan = _plan(layout)
    for depth, name in enumerate(names):
        found = [f for f in plan.fields if f[0] == name]
        if not found:
            raise KeyError(f"{path!r}: no field {name!r}")
        _, foff, mask, sub, _ = found[0]
        offset += foff
        if depth + 1 < len(names):
            if sub is None:
                raise KeyError(f"{path!r}: field {name!r} is not a layout")
            plan = _plan(sub)
    return offset, mask
