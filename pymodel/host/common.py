"""Definitions the host-interface twins share: a TLP's occupancy, the round robin of a
direction, byte masks (twin of :mod:`rtl.host.common`'s arithmetic)."""

from spec.host import WORD_BYTES

__all__ = ["tlp_cycles", "pick", "byte_mask"]

_BYTE_MASKS = {}


def tlp_cycles(payload, overhead, bytes_per_cycle, words=0):
    """Cycles a TLP occupies its direction: ``ceil((payload + overhead) / bpc)``, at least
    one, and at least one per word it carries."""
    return max(1, words, -(-(payload + overhead) // bytes_per_cycle))


def pick(a, can_a, b, can_b, last):
    """Round robin between two kinds: the one eligible, or the one not started last."""
    if can_a and can_b:
        return b if last == a else a
    return a if can_a else (b if can_b else None)


def byte_mask(be):
    """The bit mask of the bytes a byte enable ``be`` selects in a word (cached: a
    run uses a few distinct enables)."""
    mask = _BYTE_MASKS.get(be)
    if mask is None:
        mask = _BYTE_MASKS[be] = sum(0xFF << (8 * k) for k in range(WORD_BYTES)
                                     if be >> k & 1)
    return mask
