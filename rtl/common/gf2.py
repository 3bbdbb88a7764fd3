"""Linear maps over GF(2) on bit vectors, used to build parallel CRC networks.

A map from ``n`` input bits to ``m`` output bits is a list of ``m`` row masks: output bit
``i`` is the parity of ``input & rows[i]``. These helpers run at elaboration time only.
"""

__all__ = ["matrix_of", "apply", "compose", "inverse", "identity"]


def matrix_of(func, n_in, n_out):
    """The rows of the linear function ``func`` (int -> int) on ``n_in`` input bits."""
    rows = [0] * n_out
    for j in range(n_in):
        col = func(1 << j)
        for i in range(n_out):
            if (col >> i) & 1:
                rows[i] |= 1 << j
    return rows


def apply(rows, value):
    """Apply a map to an integer vector (reference evaluation, for checks)."""
    out = 0
    for i, row in enumerate(rows):
        out |= (bin(row & value).count("1") & 1) << i
    return out


def compose(outer, inner):
    """The map ``outer(inner(x))``."""
    n_in = max((r.bit_length() for r in inner), default=0)
    return matrix_of(lambda x: apply(outer, apply(inner, x)), n_in, len(outer))


def identity(n):
    """The ``n``-bit identity map."""
    return [1 << i for i in range(n)]


def inverse(rows):
    """The inverse of a square invertible map (Gauss-Jordan elimination)."""
    n = len(rows)
    work = [(rows[i], 1 << i) for i in range(n)]
    for col in range(n):
        pivot = next((r for r in range(col, n) if (work[r][0] >> col) & 1), None)
        if pivot is None:
            raise ValueError("map is not invertible")
        work[col], work[pivot] = work[pivot], work[col]
        for r in range(n):
            if r != col and (work[r][0] >> col) & 1:
                work[r] = (work[r][0] ^ work[col][0], work[r][1] ^ work[col][1])
    return [work[i][1] for i in range(n)]
