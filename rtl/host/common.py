"""Layouts and small arithmetic shared by the host interface's parts (RTL only)."""

from amaranth import Mux, Value
from amaranth.lib import data

from spec.checks import check_int, reject
from spec.host import ID_BITS, MAX_READ_WORDS, WORD_BYTES, check_profile

__all__ = ["chunk_layout", "TLP_LAYOUT", "ceil_div", "vmax", "dword_bytes", "wrap_next",
           "check_depth", "checked_profile"]


def chunk_layout(depth):
    """A run of consecutive words: one read request TLP (a *chunk*) or one completion (a
    *piece*): ``words`` (1..64) from word ``addr``, the engine read's ``id``, and ``last``
    when it ends the engine's read."""
    return data.StructLayout({"addr": range(depth), "words": range(1, MAX_READ_WORDS + 1),
                              "id": ID_BITS, "last": 1})


#: A whole posted-write TLP held in the write buffer: its words and payload bytes.
TLP_LAYOUT = data.StructLayout({"words": range(1, MAX_READ_WORDS + 1),
                                "bytes": range(MAX_READ_WORDS * WORD_BYTES + 1)})


def ceil_div(value, divisor):
    """``ceil(value / divisor)`` for an unsigned value and a positive constant divisor."""
    return (value + (divisor - 1)) // divisor


def vmax(*values):
    """The largest of unsigned values (a Mux chain)."""
    out = Value.cast(values[0])
    for v in values[1:]:
        out = Mux(v > out, v, out)
    return out


def dword_bytes(be):
    """``4 * ceil(popcount(be) / 4)``: the payload bytes a word with byte enables ``be``
    adds to a posted write (a balanced adder tree, then rounded up to a dword)."""
    terms = [Value.cast(b) for b in be]
    while len(terms) > 1:
        terms = [terms[k] + terms[k + 1] if k + 1 < len(terms) else terms[k]
                 for k in range(0, len(terms), 2)]
    return ((terms[0] + 3) >> 2) << 2


def wrap_next(ptr, depth):
    """The index after ``ptr`` in a ring of ``depth`` entries."""
    return Mux(ptr == depth - 1, 0, ptr + 1)


def check_depth(component, depth):
    """Return ``depth`` (host-memory words) if it is a power of two from 2 to 2**20."""
    check_int(component, "host memory depth (words)", depth, 2, 2**20)
    if depth & (depth - 1):
        reject(component, f"host memory depth (words) must be a power of two, not {depth!r}")
    return depth


def checked_profile(component, profile):
    """Return ``profile`` if it is a valid :class:`spec.host.HostProfile`, else reject."""
    try:
        return check_profile(profile)
    except ValueError as exc:
        reject(component, str(exc))
