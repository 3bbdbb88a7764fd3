"""Golden-model speed: messages per second of the cycle-level model and the fast path on
the headline point of each design (best of several runs)."""

import math
import time

from . import MODEL_KNOBS, MSG_BYTES

__all__ = ["measure_model"]


def _model_function(kind):
    """``cycle_point`` or ``fast_point``, imported only when the model figures are wanted."""
    if kind == "cycle":
        from analysis.points import cycle_point
        return cycle_point
    from analysis.fastpath import fast_point
    return fast_point


def measure_model(kind, design, messages, repeats):
    """Messages per second of the golden model ``kind`` ("cycle" or "fast") on the
    headline point of ``design``: best (shortest) wall time of ``repeats`` runs."""
    point = _model_function(kind)
    best, result = math.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = point(design, msg_bytes=MSG_BYTES, messages=messages, **MODEL_KNOBS[design])
        best = min(best, time.perf_counter() - t0)
    done = int(result.get("messages", messages))
    return {"kind": kind, "design": design, "messages": done, "repeats": repeats,
            "best_s": best, "msgs_per_s": done / best if best > 0 else None,
            "model_cycles": result.get("cycles")}

