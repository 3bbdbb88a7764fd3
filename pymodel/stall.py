"""Twin of :class:`rtl.common.stall_pattern.StallPattern`: its own code for the LFSR of
:mod:`spec.lfsr` (the polynomial is shared, not the function)."""

import numpy as np

from spec.lfsr import LFSR_PERIOD, LFSR_TAPS

__all__ = ["stall_pattern", "lfsr_step"]

_cache = {}


def lfsr_step(state):
    """The model's own step of the LFSR of :mod:`spec.lfsr`: shift right, then XOR the
    taps if the bit shifted out was 1 (tests hold it against :func:`spec.lfsr.lfsr_next`
    and the RTL)."""
    low = state & 1
    state >>= 1
    if low:
        state ^= LFSR_TAPS
    return state


def stall_pattern(seed, rate, cycles):
    """Boolean array: ``True`` where the pattern stalls, for cycles ``0 .. cycles-1``.

    The sequence has period 65535, so it is computed once per ``seed`` and tiled.
    """
    if not 0 <= seed < 1 << 16:
        raise ValueError(f"stall seed must be 0 to 65535, not {seed!r}")
    if not 0 <= rate < 256:
        raise ValueError(f"stall rate must be 0 to 255, not {rate!r}")
    if rate == 0:
        return np.zeros(cycles, dtype=bool)
    seed = seed or 1
    low = _cache.get(seed)
    if low is None:
        state, out = seed, np.empty(LFSR_PERIOD, dtype=np.uint8)
        for c in range(LFSR_PERIOD):
            out[c] = state & 0xFF
            state = lfsr_step(state)
        low = _cache[seed] = out
    reps = -(-cycles // LFSR_PERIOD)
    return np.tile(low, reps)[:cycles] < rate
