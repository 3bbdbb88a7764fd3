"""A soak's operation mix: how many writes, loads/reads and atomics a chunk posts, and
in which order (``scripts/soak.py --mix``).

A mix is three non-negative integer weights ``W:R:A`` (writes, loads or READs,
atomics), not all 0, or a preset name of :data:`PRESETS`. A chunk of ``n`` operations
gets its counts by largest remainder (:func:`counts`: exact shares, so a mix of
``70:20:10`` over 2,000 operations is 1,400 writes, 400 reads and 200 atomics), in an
order shuffled by the chunk's seed (:func:`op_sequence`).
"""

import random

__all__ = ["OPS", "PRESETS", "parse_mix", "counts", "op_sequence"]

#: The three kinds of operation, in the order of a mix's weights.
OPS = ("write", "read", "atomic")
#: Named mixes. ``writes``: the WRITE-only soak. ``mixed``: a test mix, not a measured
#: workload: mostly writes, with enough reads and atomics in every chunk to exercise
#: both paths (one read in five, one atomic in ten operations).
PRESETS = {"writes": (1, 0, 0), "mixed": (70, 20, 10)}


def parse_mix(text):
    """The weights ``(W, R, A)`` of a mix given as ``W:R:A`` or a preset name;
    ``ValueError`` naming ``--mix`` and the bad text otherwise."""
    if not isinstance(text, str):
        raise ValueError(f"--mix must be W:R:A or one of {sorted(PRESETS)}, not {text!r}")
    if text in PRESETS:
        return PRESETS[text]
    parts = text.split(":")
    if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
        raise ValueError(f"--mix must be W:R:A (three integers 0 or more: writes, "
                         f"loads/reads, atomics) or one of {sorted(PRESETS)}, not {text!r}")
    weights = tuple(int(p) for p in parts)
    if not any(weights):
        raise ValueError(f"--mix {text!r}: at least one weight must be above 0")
    return weights


def counts(weights, n):
    """``{op: count}`` of ``n`` operations shared by ``weights`` (largest remainder; ties
    to the earlier op of :data:`OPS`); the counts add up to ``n``."""
    total = sum(weights)
    exact = [n * w / total for w in weights]
    out = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda k: (-(exact[k] - out[k]), k))
    for k in order[:n - sum(out)]:
        out[k] += 1
    return dict(zip(OPS, out, strict=True))


def op_sequence(weights, n, rng):
    """``n`` operation names (of :data:`OPS`) with :func:`counts` of ``weights``, shuffled
    by ``rng`` (a :class:`random.Random`)."""
    seq = [op for op, c in counts(weights, n).items() for _ in range(c)]
    rng.shuffle(seq)
    return seq


def seeded(seed, chunk):
    """The :class:`random.Random` of a chunk's order."""
    return random.Random(f"mix-{seed}-{chunk}")
