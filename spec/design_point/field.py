"""The fields of a design point (:mod:`spec.design_point`): :func:`knob` declares one
(default, kind, range or choices, help, source), :class:`Point` checks them all in one
place, and :func:`option_names` words a check's error in the names users type.

A field's metadata (``dataclasses.fields(point)[i].metadata``):

- ``kind``: ``"build"`` (a parameter of the RTL top, fixed when it is built), ``"port"``
  (a run-time port of the top, set before the run) or ``"run"`` (a setting of the run:
  its scenario, testbench or which top).
- ``help``: the text of its option; ``source``: where its default comes from.
- ``range`` ``(lo, hi)`` with ``power_of_two``, or ``choices``, or ``check`` (a function
  of the value and the point that raises ``ValueError`` naming the knob, usually one of
  spec's own checks): the field's own rule, checked by :meth:`Point.check`.
- ``option``: whether ``make sim`` has an option for it (``--`` and the name with ``-``);
  ``parse``: the option's type (``int`` or ``str`` from the default, else a function).
- ``tag``: the short prefix that names the field's value in a component's name (``w``:
  ``_w4``), or None.
  Two designs' points that both have a field of one name share its option (``--peers``
  of the NIC and of the ephemeral design).
"""

import dataclasses
import re

__all__ = ["KINDS", "knob", "Point", "option_of", "option_names", "check_int"]

#: What a field sets: a build parameter of the top, a run-time port, or the run's setting.
KINDS = ("build", "port", "run")


def knob(default, kind, help, source, *, range=None, power_of_two=False, choices=None,
         check=None, option=True, parse=None, tag=None):
    """A field of a design point (module doc); ``ValueError`` for a declaration that does
    not say what the module doc asks."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    if not help or not source:
        raise ValueError("a knob needs its help text and the source of its default")
    return dataclasses.field(default=default, metadata=dict(
        kind=kind, help=help, source=source, range=range, power_of_two=power_of_two,
        choices=choices, check=check, option=option, parse=parse, tag=tag))


def option_of(name):
    """The option users type for knob ``name`` (``cache_entries`` -> ``--cache-entries``)."""
    return "--" + name.replace("_", "-")


def check_int(name, value, low, high, power_of_two=False):
    """``value`` if it is an int in ``[low, high]`` (and a power of two when asked), else
    ``ValueError`` naming ``name``."""
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer from {low} to {high}, not {value!r}")
    if power_of_two and value & (value - 1):
        raise ValueError(f"{name} must be a power of two, not {value!r}")
    return value


def option_names(text, names):
    """``text`` (an error of a knob's check) in the names users type: every knob of
    ``names`` (pairs of knob and option) with an underscore (an identifier, never a word
    of prose) becomes its option (``cache_entries`` -> ``--cache-entries``), and a leading knob
    name without one gains its option (``qps must be ...`` -> ``--qps: qps must be
    ...``)."""
    for knob_, opt in names:
        if "_" in knob_:
            text = re.sub(rf"(?<![\w-]){knob_}(?!\w)", opt, text)
    for knob_, opt in names:
        if text.startswith(knob_ + " "):
            return f"{opt}: {text}"
    return text


class Point:
    """Base of the frozen design-point dataclasses: construction checks every field
    (:meth:`check`), and a bad one raises ``ValueError`` naming its option."""

    def __post_init__(self):
        self.check()

    #: Fields checked first, in this order (the rest follow in declaration order): the
    #: order in which the model's checks meet them, so that of two bad options the one
    #: named is the one the model would name.
    CHECK_ORDER = ()

    @classmethod
    def knobs(cls):
        """The fields of the point, in declaration order."""
        return dataclasses.fields(cls)

    @classmethod
    def of_kind(cls, *kinds):
        """The names of the point's fields of ``kinds`` (:data:`KINDS`), in declaration
        order."""
        bad = sorted(set(kinds) - set(KINDS))
        if bad:
            raise ValueError(f"kinds must be from {KINDS}, not {bad}")
        return tuple(f.name for f in cls.knobs() if f.metadata["kind"] in kinds)

    @classmethod
    def declared(cls, first, last):
        """The names of the point's fields from ``first`` to ``last`` (both included), in
        declaration order."""
        names = [f.name for f in cls.knobs()]
        return tuple(names[names.index(first):names.index(last) + 1])

    def values(self, names=None):
        """``{name: value}`` of the point's fields (of ``names``, all by default)."""
        return {f.name: getattr(self, f.name) for f in self.knobs()
                if names is None or f.name in names}

    def changes(self):
        """``{name: value}`` of the point's fields that are off their defaults, in
        declaration order (what a point sets over the default point)."""
        return {f.name: getattr(self, f.name) for f in self.knobs()
                if getattr(self, f.name) != f.default}

    def tags(self):
        """``<tag><value>`` of the fields with a ``tag`` that are off their defaults, in
        declaration order (a component's name, ``w4``)."""
        return [f"{f.metadata['tag']}{getattr(self, f.name)}" for f in self.knobs()
                if f.metadata["tag"] and getattr(self, f.name) != f.default]

    def check(self):
        """Each field against its own rule (module doc), in :data:`CHECK_ORDER`; the first
        bad one raises ``ValueError`` in the names users type (:func:`option_names`)."""
        names = [(f.name, option_of(f.name)) for f in self.knobs()]
        rank = {n: i for i, n in enumerate(self.CHECK_ORDER)}
        for f in sorted(self.knobs(), key=lambda f: rank.get(f.name, len(rank))):
            value, m = getattr(self, f.name), f.metadata
            try:
                if m["check"] is not None:
                    m["check"](value, self)
                elif m["choices"] is not None and value not in m["choices"]:
                    raise ValueError(f"{f.name} must be one of {list(m['choices'])}, "
                                     f"not {value!r}")
                elif m["range"] is not None:
                    check_int(f.name, value, *m["range"], m["power_of_two"])
            except ValueError as exc:
                raise ValueError(option_names(str(exc), names)) from None
