"""An RDMA design point (:class:`spec.design_point.RdmaPoint`) mapped, by each field's
kind, to what runs it: the top's build parameters (:func:`top_params`), the run's
parameters and run-time ports (:func:`run_params`), the results row's keys and the run's
name (:func:`row_tags`), and back: the point of a run's parameters (:func:`params_point`,
the simulator side's check of what it receives). A new knob is a field of the point; no
list here names it.

- ``build`` fields that are :data:`spec.rdma_engine.TOP_DEFAULTS` keys (or RdmaTop's
  ``link_retry``) go to the top when off the top's default; ``fabric``, ``link_latency``,
  ``host`` and ``header`` are placed by :func:`tb.rdma.headline._top`, which derives the
  profile's path, window records and timeout.
- ``port`` and ``run`` fields that are parameters of a ``writes`` run
  (:data:`tb.rdma.cocotb_rdma.KIND_PARAMS`) go to the run's parameters; ``rung`` goes
  there as the engine's knobs.
- every field the row does not carry otherwise (:data:`ROW_ELSEWHERE`) is a key of the
  row when off its default, and adds ``_<name><value>`` to the run's name then.

Pure functions, no timing; a bad field raises ``ValueError`` naming its option (the
point's own check).
"""

import dataclasses

from pymodel.rdma.point_fields import check_fields
from spec.design_point import RdmaPoint, rung_name
from spec.design_point.rdma import BEST_CACHE
from spec.rdma_engine import TOP_DEFAULTS

__all__ = ["rdma_point", "top_params", "run_params", "row_tags", "params_point",
           "SWITCH_FIELDS", "off_default", "TOP_EXTRA", "ROW_ELSEWHERE"]

#: RdmaTop's build parameters that are not in TOP_DEFAULTS (reliable links; default False).
TOP_EXTRA = {"link_retry": False}
#: Fields :func:`tb.rdma.headline._top` places (the fabric profile sets the path from them).
_PLACED = ("fabric", "link_latency", "host", "header", "link_retry")
#: Fields of a point the ``switch`` topology's run takes (RdmaFabricTop's): these and
#: the build fields of the engine's best context cache (the gap table's side row runs
#: on the switch; :data:`spec.design_point.rdma.BEST_CACHE`, any value of them); the
#: others must be left at their defaults there.
SWITCH_FIELDS = ("op", "qps", "cache_entries", "host", "rung", "fabric", "link_retry",
                 "header", "topology",
                 *(n for n in BEST_CACHE.changes() if n in RdmaPoint.of_kind("build")))
#: Fields the row carries under keys of its own (``qps``, ``cache_entries``, ``host``,
#: ``rung`` always; ``link_latency`` when the top's is off its default; the framing and
#: the comparison keys) or not at all (``op``, ``topology``: the row's run is a WRITE run
#: of its topology).
ROW_ELSEWHERE = ("op", "qps", "cache_entries", "host", "rung", "link_latency", "fabric",
                 "link_retry", "header", "topology")


def rdma_point(**values):
    """The checked :class:`RdmaPoint` of ``values`` (a ``None`` ``rung``: the knobs are
    given instead, the point's default rung stands for it); ``ValueError`` naming the
    keyword and the option of the first bad field
    (:func:`pymodel.rdma.point_fields.check_fields`)."""
    if values.get("rung") is None:
        values.pop("rung", None)
    return check_fields(values)


def off_default(point, name):
    """Whether field ``name`` of ``point`` is off its default."""
    field = {f.name: f for f in dataclasses.fields(point)}[name]
    return getattr(point, name) != field.default


def top_params(point, top):
    """``top`` (from :func:`tb.rdma.headline._top`) with the point's other build fields
    that are parameters of the top and off its default."""
    top = dict(top)
    defaults = dict(TOP_DEFAULTS, **TOP_EXTRA)
    for f in dataclasses.fields(point):
        value = getattr(point, f.name)
        if (f.metadata["kind"] == "build" and f.name not in _PLACED and f.name in defaults
                and value != defaults[f.name]):
            top[f.name] = value
    return top


def run_params(point, accepted):
    """The parameters of a run the point's port and run fields set, every one of them
    that is a parameter of the run (``accepted``: the run kind's,
    :data:`tb.rdma.cocotb_rdma.COMMON_PARAMS` and :data:`~tb.rdma.cocotb_rdma.
    KIND_PARAMS`; at its default a field sets what the run's default is); ``rung`` goes
    as the engine's knobs instead."""
    return {f.name: getattr(point, f.name) for f in dataclasses.fields(point)
            if f.metadata["kind"] != "build" and f.name in accepted and f.name != "rung"}


def row_tags(point):
    """``(keys, suffix)``: the row's keys of the point's fields not in
    :data:`ROW_ELSEWHERE` that are off their default (in declaration order) and the
    suffix they add to the run's name (``_mrs3``)."""
    keys = {f.name: getattr(point, f.name) for f in dataclasses.fields(point)
            if f.name not in ROW_ELSEWHERE and off_default(point, f.name)}
    return keys, "".join(f"_{name}{value}" for name, value in keys.items())


def params_point(top, params):
    """The :class:`RdmaPoint` of a run's parameters as the simulator receives them: the
    fields that are parameters of the top (not run-time ports) from ``top``, the others
    from ``params`` (those given; the point's defaults for the rest, ``rung`` by
    :func:`spec.design_point.rung_name`).
    ``ValueError`` names the option of a bad one."""
    values = {}
    for f in dataclasses.fields(RdmaPoint):
        mine = f.metadata["kind"] != "port" and f.name in dict(TOP_DEFAULTS, **TOP_EXTRA)
        source = top if mine else params
        if f.name in source and source[f.name] is not None:
            values[f.name] = source[f.name]
    if isinstance(values.get("rung"), str):
        values["rung"] = rung_name(values["rung"])
    return check_fields(values)
