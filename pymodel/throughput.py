"""``ii_cycles`` of a run: steady-state cycles per message, from the cycles its messages
were sent (the RDMA engine's first wire beats, the NIC's store accepts).

One function for both designs and for both sides of a co-simulation (the RTL's stamps
and the model's reduce through it), after the definition in :data:`spec.metrics.STEADY_WINDOW`.
"""

from spec.metrics import STEADY_WINDOW

__all__ = ["steady_ii"]


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
