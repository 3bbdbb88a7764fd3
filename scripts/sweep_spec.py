"""Read and check a sweep file (TOML) for ``make sweep``; the format is in docs/sweeps.md.

:func:`load_sweep` returns a :class:`Sweep` or raises :class:`SweepError`, whose message
names the file and the field (``sweep file x.toml: axes.qps: value 0: ...``). Every
value is checked by the golden model's own parameter checks
(:func:`analysis.points.resolve`) and, for the RTL subset, by ``make sim``'s
(:func:`scripts.sim.check_point`), before anything runs.
"""

import dataclasses
import itertools
import re
import tomllib
from pathlib import Path

__all__ = ["Sweep", "SweepError", "load_sweep", "parse_sweep", "TOP_KEYS", "RTL_KEYS"]

TOP_KEYS = ("name", "design", "messages", "fixed", "axes", "rtl")
RTL_KEYS = ("sim", "messages", "points")
#: Messages per model point unless the file says.
DEFAULT_MESSAGES = 1000
#: Messages per co-simulated point unless ``rtl.messages`` says.
DEFAULT_RTL_MESSAGES = 50


class SweepError(ValueError):
    """A bad sweep file; the message names the file and the field."""


@dataclasses.dataclass
class Sweep:
    """A checked sweep: ``points`` (dicts of ``msg_bytes`` and knobs, in axis order: the
    last axis varies fastest) and ``rtl_points`` (a subset of them)."""
    name: str
    design: str
    messages: int
    fixed: dict
    axes: dict
    points: list
    rtl_sim: str | None = None
    rtl_messages: int = DEFAULT_RTL_MESSAGES
    rtl_points: list = dataclasses.field(default_factory=list)


def _knobs(design):
    from analysis.points import NIC_DEFAULTS, RDMA_DEFAULTS
    return set(NIC_DEFAULTS if design == "nic" else RDMA_DEFAULTS) | {"msg_bytes"}


def _scalar(value):
    return isinstance(value, (int, str, float, bool))


def _resolve(design, point, messages):
    """``resolve`` of a point; the NIC's framing defaults to compact as in make sim."""
    from analysis.points import resolve
    knobs = dict(point)
    msg_bytes = knobs.pop("msg_bytes", 128)
    if design == "nic":
        knobs.setdefault("framing", "compact")
    resolve(design, msg_bytes, messages, knobs)


def load_sweep(path):
    """The :class:`Sweep` of the TOML file at ``path``."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise SweepError(f"sweep file {path}: cannot read it ({exc.strerror})") from exc
    return parse_sweep(text, where=str(path), default_name=path.stem)


def parse_sweep(text, where="<sweep>", default_name="sweep"):
    """The :class:`Sweep` of TOML ``text`` (``where`` names it in errors)."""
    def bad(field, msg):
        return SweepError(f"sweep file {where}: {field}: {msg}")

    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SweepError(f"sweep file {where}: not valid TOML ({exc})") from exc
    unknown = sorted(set(doc) - set(TOP_KEYS))
    if unknown:
        raise bad(unknown[0], f"unknown key; a sweep file has {', '.join(TOP_KEYS)}")
    design = doc.get("design")
    if design not in ("nic", "rdma"):
        raise bad("design", f"must be 'nic' or 'rdma', not {design!r}")
    name = doc.get("name", default_name)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise bad("name", f"must be letters, digits, '_', '-' or '.', not {name!r}")
    messages = doc.get("messages", DEFAULT_MESSAGES)
    if not isinstance(messages, int) or isinstance(messages, bool) or messages < 1:
        raise bad("messages", f"must be an integer of at least 1, not {messages!r}")
    knobs = _knobs(design)
    fixed = doc.get("fixed", {})
    if not isinstance(fixed, dict):
        raise bad("fixed", "must be a table of knob = value")
    for key, value in fixed.items():
        if key not in knobs:
            raise bad(f"fixed.{key}", f"not a knob of {design}; known: "
                                      f"{', '.join(sorted(knobs))}")
        if not _scalar(value):
            raise bad(f"fixed.{key}", f"must be a number or a string, not {value!r}")
    try:
        _resolve(design, fixed, messages)
    except ValueError as exc:
        raise bad("fixed", str(exc)) from exc
    axes = doc.get("axes")
    if not isinstance(axes, dict) or not axes:
        raise bad("axes", "must be a table of at least one knob = [values]")
    for key, values in axes.items():
        field = f"axes.{key}"
        if key not in knobs:
            raise bad(field, f"not a knob of {design}; known: {', '.join(sorted(knobs))}")
        if key in fixed:
            raise bad(field, "also in [fixed]; give it in one place")
        if not isinstance(values, list) or not values:
            raise bad(field, "must be a non-empty list of values")
        for value in values:
            if not _scalar(value):
                raise bad(field, f"value {value!r}: must be a number or a string")
            try:
                _resolve(design, dict(fixed, **{key: value}), messages)
            except ValueError as exc:
                raise bad(field, f"value {value!r}: {exc}") from exc
        if len(set(values)) != len(values):
            raise bad(field, "a value is repeated")
    if design == "nic" and "framing" not in axes:
        fixed = dict(fixed, framing=fixed.get("framing", "compact"))   # as make sim
    names = list(axes)
    points = [dict(fixed, **dict(zip(names, combo, strict=True)))
              for combo in itertools.product(*(axes[n] for n in names))]
    for point in points:
        try:
            _resolve(design, point, messages)
        except ValueError as exc:
            combo = ", ".join(f"{n}={point[n]!r}" for n in names)
            raise bad("axes", f"the point {combo}: {exc}") from exc
    sweep = Sweep(name=name, design=design, messages=messages, fixed=fixed, axes=axes,
                  points=points)
    if "rtl" in doc:
        _rtl(doc["rtl"], sweep, bad)
    return sweep


def _rtl(rtl, sweep, bad):
    from scripts.sim import check_point
    from tb.cosim import SIMULATORS

    if not isinstance(rtl, dict):
        raise bad("rtl", "must be a table with sim, messages, points")
    unknown = sorted(set(rtl) - set(RTL_KEYS))
    if unknown:
        raise bad(f"rtl.{unknown[0]}", f"unknown key; [rtl] has {', '.join(RTL_KEYS)}")
    sim = rtl.get("sim", "icarus")
    if sim not in SIMULATORS:
        raise bad("rtl.sim", f"must be one of {', '.join(SIMULATORS)}, not {sim!r}")
    messages = rtl.get("messages", DEFAULT_RTL_MESSAGES)
    if not isinstance(messages, int) or isinstance(messages, bool) or messages < 1:
        raise bad("rtl.messages", f"must be an integer of at least 1, not {messages!r}")
    chosen = rtl.get("points")
    if not isinstance(chosen, list) or not chosen:
        raise bad("rtl.points", "must be a non-empty list of tables of axis = value")
    picked = []
    for k, want in enumerate(chosen):
        field = f"rtl.points[{k}]"
        if not isinstance(want, dict) or set(want) - set(sweep.axes):
            raise bad(field, f"must be a table of axis = value (axes: "
                             f"{', '.join(sweep.axes)}), not {want!r}")
        match = [p for p in sweep.points if all(p[a] == v for a, v in want.items())]
        if len(match) != 1:
            raise bad(field, f"must name exactly one point of the sweep; {want!r} names "
                             f"{len(match)} (give a value for every axis)")
        knobs = dict(match[0])
        msg_bytes = knobs.pop("msg_bytes", 128)
        try:
            check_point(sweep.design, msg_bytes, messages, knobs)
        except ValueError as exc:
            raise bad(field, f"not a point the RTL top can run: {exc}") from exc
        picked.append(match[0])
    sweep.rtl_sim, sweep.rtl_messages, sweep.rtl_points = sim, messages, picked
