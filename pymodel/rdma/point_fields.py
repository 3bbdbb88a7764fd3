"""The RDMA design point's fields (:class:`spec.design_point.RdmaPoint`) as the model's
knobs: which of them the model's point takes (:data:`MODEL_FIELDS`), their defaults
(:func:`model_defaults`) and their checks (:func:`check_fields`: the point's own, by
construction, with the error in the keyword names a Python caller gives).

Pure functions; a bad field raises ``ValueError`` naming the keyword, then the option of
``make sim`` in parentheses (``qps must be an integer from 1 to 4096, not 0 (--qps)``).
"""

import dataclasses
import re

from spec.design_point import RdmaPoint, option_of

__all__ = ["NOT_MODEL", "MODEL_FIELDS", "model_defaults", "check_fields", "keyword_error"]

#: The point's fields that are not the model's knobs: the operation, the topology and
#: the fabric around the engines are the co-simulation's choice of top
#: (:mod:`tb.rdma.headline`); the model's point is WRITEs over one link, go-back-N.
NOT_MODEL = ("op", "fabric", "link_retry", "topology", "selective")
#: The point's fields the model's point takes (:func:`analysis.rdma.point.rdma_point`'s
#: keywords of the same names), in declaration order.
MODEL_FIELDS = tuple(f.name for f in dataclasses.fields(RdmaPoint) if f.name not in NOT_MODEL)


def model_defaults(names=MODEL_FIELDS, **overrides):
    """``{name: the point's default}`` of ``names`` (fields of the point), ``overrides``
    on top (the model's runner states its own where it has one, e.g. ``link_latency``:
    the point's ``None`` means the top's)."""
    fields = {f.name: f.default for f in dataclasses.fields(RdmaPoint)}
    return {n: fields[n] for n in names} | overrides


def keyword_error(exc):
    """The text of ``exc`` (an error of the point's check, in options) in keyword names,
    the option named once in parentheses after it."""
    text, opts = str(exc), []
    for f in dataclasses.fields(RdmaPoint):
        opt = option_of(f.name)
        if text.startswith(f"{opt}: "):
            text = text[len(opt) + 2:]
        text = re.sub(rf"{opt}(?![\w-])", f.name, text)
        if re.search(rf"(?<![\w-]){f.name}(?!\w)", text):
            opts.append(opt)
    return text + (f" ({opts[0]})" if opts else "")


def check_fields(values):
    """The checked :class:`RdmaPoint` of ``values`` (fields of the point; the rest at the
    point's defaults); ``ValueError`` in keyword names (:func:`keyword_error`)."""
    try:
        return RdmaPoint(**values)
    except ValueError as exc:
        raise ValueError(keyword_error(exc)) from None
