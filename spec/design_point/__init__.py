"""A typed design point per design: frozen dataclasses whose fields are every knob of a
point, each with its kind (build parameter of the top, run-time port, or run setting),
range or choices, default, help text and the source of the default
(:mod:`spec.design_point.field`). Constructing a point checks every field by the spec's
own checks; a bad one raises ``ValueError`` naming the option users type.

- :class:`FabricPoint`: what both designs share (operation, fabric profile, link latency,
  link retry); :class:`NicPoint` and :class:`RdmaPoint` add each design's own;
  :class:`EphemeralPoint`: the ephemeral-context sender's.
- :func:`sim_options`: the options of ``make sim`` a point has (scripts/sim_point.py
  builds its ``POINT_OPTIONS`` from them), in the order ``--help`` lists them.
"""

import dataclasses

from spec.design_point.ephemeral import EphemeralPoint
from spec.design_point.field import KINDS, Point, knob, option_names, option_of
from spec.design_point.nic import NicPoint
from spec.design_point.rdma import RUNG_ALIASES, RdmaPoint, rung_name
from spec.design_point.shared import FabricPoint

__all__ = ["FabricPoint", "NicPoint", "RdmaPoint", "EphemeralPoint", "POINTS", "KINDS",
           "Point", "knob", "option_of", "option_names", "RUNG_ALIASES", "rung_name",
           "sim_options", "point_of", "HELP_ORDER"]

#: The point of each ``--design`` (``"both"``: the part the NIC and the engine share).
POINTS = {"both": FabricPoint, "nic": NicPoint, "rdma": RdmaPoint,
          "ephemeral": EphemeralPoint}

#: Where ``make sim --help`` lists the options (knob names); an option not named here
#: follows them in declaration order.
HELP_ORDER = ("op", "target_latency", "target_reads", "framing", "peers", "attachment",
              "link_latency", "completion", "header", "fabric", "max_payload",
              *RdmaPoint.declared("qps", "topology"), "popularity", "pool_entries", "idle",
              "ack_every", "lookahead", "rung")


def _owner(cls, name):
    """The design that declares field ``name`` first (FabricPoint's are ``"both"``)."""
    for design, point in POINTS.items():
        if name in {f.name for f in dataclasses.fields(point)}:
            return design
    raise KeyError(name)


def sim_options():
    """The options of ``make sim`` for a point: ``(option, knob, design, type, help)``,
    one per knob with ``option`` set, its design the one that declares it (``"both"``
    for :class:`FabricPoint`'s), its type the field's ``parse`` or its default's type;
    in :data:`HELP_ORDER`."""
    seen = {}
    for design, point in POINTS.items():
        for f in dataclasses.fields(point):
            m = f.metadata
            if not m["option"] or f.name in seen:
                continue
            kind = m["parse"] or (int if f.type in (int, "int", int | None, "int | None")
                                  else str)
            seen[f.name] = (option_of(f.name), f.name, design, kind, m["help"])
    order = [n for n in HELP_ORDER if n in seen] + [n for n in seen if n not in HELP_ORDER]
    return tuple(seen[n] for n in order)


def point_of(design, knobs):
    """The checked point of ``design`` with ``knobs`` (those that are its fields; others
    are left to the caller) over its defaults; ``ValueError`` naming the option of the
    first bad one."""
    cls = POINTS[design]
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in knobs.items() if k in names})
