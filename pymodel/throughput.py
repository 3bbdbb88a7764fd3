"""``ii_cycles`` of a run: steady-state cycles per message, from the cycles its messages
were sent (both designs' messages' first wire beats); and
``latency_cycles`` / ``completion_cycles`` of a run of messages sent one at a time.

One function each for both designs and for both sides of a co-simulation (the RTL's
stamps and the model's reduce through them), after the definitions in SPEC.md ("What
every run measures") and :data:`spec.metrics.STEADY_WINDOW`.
"""

import statistics

from spec.metrics import STEADY_WINDOW

__all__ = ["steady_ii", "isolated_median"]


def steady_ii(cycles):
    """Cycles per message in the steady state of a back-to-back run: the span of the
    messages inside :data:`~spec.metrics.STEADY_WINDOW` (the middle half) over their
    count. ``cycles`` are the messages' send cycles, in any order (they are sorted).
    ``None`` for fewer than 2 messages."""
    cycles = sorted(cycles)
    n = len(cycles)
    if n < 2:
        return None
    (lo_num, lo_den), (hi_num, hi_den) = STEADY_WINDOW
    lo = n * lo_num // lo_den
    hi = min(n - 1, max(lo + 1, n * hi_num // hi_den))
    return (cycles[hi] - cycles[lo]) / (hi - lo)


def isolated_median(values):
    """Median of the per-message values of a run whose messages go one at a time, each
    into an idle design, without the first (the warm-up: its setup, e.g. a cold cache,
    is not the message's own). ``None`` values (a message not measured) are left out;
    ``None`` if nothing is left."""
    vals = [x for x in (values or [])[1:] if x is not None]
    return statistics.median(vals) if vals else None
