"""The rungs of the RDMA optimisation ladder as the carriers use them
(:mod:`analysis.workloads.carriers`): a :class:`Rung` names the engine cost function and
knobs of one rung and its posting policy; :data:`RUNGS` holds the rungs of
:data:`spec.rdma_engine.LADDER` on the pipelined engine's fast path."""

import copy
from dataclasses import dataclass, field

from spec.formats.roce import HOST_WORD_BYTES
from spec.rdma_engine import LADDER, MAX_INLINE_WORDS

#: Largest payload a WQE carries inline (bytes).
MAX_INLINE_BYTES = MAX_INLINE_WORDS * HOST_WORD_BYTES


#: The fast path's points already computed in this process, by design, size, messages and
#: knobs: carriers of different scenarios and batches ask for the same points (a
#: deterministic function of its arguments), about half of them repeats in a grid.
_POINTS = {}


def _default_cost_fn(design, *, msg_bytes, messages, **knobs):
    # The golden model's fast path (imported here: it pulls in the whole model).
    from analysis.fastpath import fast_point
    key = (design, msg_bytes, messages, repr(sorted(knobs.items())))
    if key not in _POINTS:
        try:
            _POINTS[key] = ("ok", fast_point(design, msg_bytes=msg_bytes, messages=messages,
                                             **knobs))
        except ValueError as err:      # a point the fast path refuses stays refused
            _POINTS[key] = ("refused", err)
    kind, value = _POINTS[key]
    if kind == "refused":
        raise copy.copy(value)
    return copy.deepcopy(value)



def ladder_cost(design, *, msg_bytes, messages, rung, **knobs):
    """The fast path of the pipelined engine on a rung of :data:`spec.rdma_engine.LADDER`
    (``rung`` its name, ``knobs`` on top). On a rung with inline data, a payload longer
    than :data:`MAX_INLINE_BYTES` is read from host memory instead (``inline=0``; the
    WQE is still written by MMIO)."""
    if (dict(LADDER)[rung].get("inline") and msg_bytes > MAX_INLINE_BYTES
            and "inline" not in knobs):
        knobs = dict(knobs, inline=0)
    return _default_cost_fn(design, msg_bytes=msg_bytes, messages=messages, rung=rung,
                            **knobs)



@dataclass(frozen=True)
class Rung:
    """One rung of the RDMA optimisation ladder, as the carrier uses it.

    Parameters
    ----------
    name : str
    knobs : dict
        Engine knobs passed to ``cost_fn`` for every message (e.g. ``mem_latency``).
    doorbell_batch, signal_every : int or None
        WQEs per doorbell and per CQE when the rung sets them (doorbell batching,
        unsignalled completions); ``None``: the issuer's own policy.
    cost_fn : callable or None
        ``cost_fn(design, msg_bytes=..., messages=..., **knobs) -> dict`` with the keys of
        :func:`analysis.fastpath.fast_point` (``ii_cycles``, ``latency_cycles``,
        ``completion_cycles``, ``wire_bytes``, ``ctrl_ops`` dict, ``ctrl_bytes``, and
        ``host_bytes`` when the engine models a host interface). ``None``: the fast path.
    posting : bool
        Hand the carrier's effective posting policy to ``cost_fn`` as the engine knobs
        ``ring_every`` (WQEs per doorbell) and ``signal_every`` (WQEs per CQE), so that
        the engine model posts as the issuer does.
    note : str
    """

    name: str
    knobs: dict = field(default_factory=dict)
    doorbell_batch: int | None = None
    signal_every: int | None = None
    cost_fn: object = None
    posting: bool = False
    note: str = ""


def _ladder_rungs():
    """:data:`RUNGS`: one per rung of the ladder. A rung that writes WQEs by MMIO rings
    once per WQE (BlueFlame: the WQE is its own doorbell); the one-at-a-time rung rings
    once per WQE too (one message in flight); the others take the issuer's policy
    unless the ladder sets it (doorbell batching, unsignalled completions)."""
    notes = {
        "sequential": "one message in flight (the engine's serial port), a doorbell "
                      "per WQE",
        "pipelined": "every stage pipelined, reads of many messages overlap",
        "+doorbell batching 16": "one doorbell and one WQE read for 16 WQEs",
        "+WQE by MMIO, inline": "the WQE written by MMIO (no WQE read), payloads up to "
                                "192 B inline (no payload read)",
        "+unsignalled 1/64": "one CQE per 64 WQEs",
        "+ACK coalescing": "an ACK request every 16 messages or 64 frames per QP",
    }
    out = {}
    for name, knobs in LADDER:
        batch = 1 if (knobs.get("bf") or knobs.get("serial")) else knobs.get("ring_every")
        out[name] = Rung(name, knobs={"rung": name}, doorbell_batch=batch,
                         signal_every=knobs.get("signal_every"), cost_fn=ladder_cost,
                         posting=True, note=notes[name])
    return out


#: The rungs of :data:`spec.rdma_engine.LADDER` (sequential, pipelined, +doorbell
#: batching 16, +WQE by MMIO inline, +unsignalled 1/64, +ACK coalescing), each on the
#: pipelined engine's fast path (:func:`ladder_cost`), posting as the issuer does.
RUNGS = _ladder_rungs()

