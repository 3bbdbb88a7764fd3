"""The packet stream: how a frame of any length travels on a ``W``-byte datapath.

One beat carries up to ``W`` bytes. Byte ``i`` of a beat is ``data[8*i : 8*i+8]`` (byte 0
in the least significant bits, as AXI4-Stream orders its lanes). Every beat but the last
is full; the last beat carries ``nbytes`` valid bytes (1 to ``W``) at lanes
``0 .. nbytes-1`` and zeros above them. ``first`` marks the first beat, ``last`` the last;
a one-beat packet has both set. ``nbytes`` is ``W`` on every beat but the last.

# Ref: ARM IHI 0051A (AMBA 4 AXI4-Stream) section 2.4 for the lane order; the byte count
# replaces TKEEP because only the last beat may be partial.
"""

from amaranth.lib import data, stream

from spec.checks import reject

__all__ = ["SUPPORTED_WIDTHS", "check_width", "packet_layout", "packet_signature"]

#: Datapath widths in bytes that every packet block accepts.
SUPPORTED_WIDTHS = (8, 16, 32, 64)


def check_width(width, owner=None):
    """Return ``width`` if it is a supported datapath width in bytes, else raise.

    ``owner`` is the component being built, if any (see :func:`spec.checks.reject`).
    """
    if not isinstance(width, int) or isinstance(width, bool) or width not in SUPPORTED_WIDTHS:
        message = f"datapath width must be one of {SUPPORTED_WIDTHS} bytes, not {width!r}"
        if owner is not None:
            reject(owner, message)
        raise ValueError(message)
    return width


def packet_layout(width):
    """The payload layout of one beat on a ``width``-byte datapath.

    Fields, LSB first: ``data`` (``8*width`` bits), ``nbytes`` (valid bytes, 1..width),
    ``first``, ``last``.
    """
    check_width(width)
    return data.StructLayout({
        "data": 8 * width,
        "nbytes": range(width + 1),
        "first": 1,
        "last": 1,
    })


def packet_signature(width):
    """A ``valid``/``ready`` stream of :func:`packet_layout` beats."""
    return stream.Signature(packet_layout(width))
