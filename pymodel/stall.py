"""Twin of :class:`rtl.common.stall_pattern.StallPattern`."""

import numpy as np

from rtl.common.stall_pattern import lfsr_next

__all__ = ["stall_pattern"]

_cache = {}


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
        state, out = seed, np.empty(65535, dtype=np.uint8)
        for c in range(65535):
            out[c] = state & 0xFF
            state = lfsr_next(state)
        low = _cache[seed] = out
    reps = -(-cycles // 65535)
    return np.tile(low, reps)[:cycles] < rate
