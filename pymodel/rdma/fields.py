"""Pack and unpack ``StructLayout`` values as plain integers (one definition, in rtl)."""

import enum

from amaranth.lib import data

__all__ = ["pack", "unpack"]


def pack(layout, fields=None, **kw):
    """The integer of ``layout`` with the given fields (others zero)."""
    values = dict(fields or {}, **kw)
    values = {k: (v.value if isinstance(v, enum.Enum) else v) for k, v in values.items()}
    return layout.const(values).as_value().value


def unpack(layout, value):
    """A dict of the fields of ``value`` (nested layouts give nested dicts)."""
    out = {}
    for name, field in layout:
        raw = (value >> field.offset) & ((1 << field.width) - 1)
        if isinstance(field.shape, data.StructLayout):
            out[name] = unpack(field.shape, raw)
        else:
            out[name] = raw
    return out
