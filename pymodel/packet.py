"""Frames to beats and back, on the packet stream of :mod:`spec.formats.packet`."""

import functools

from spec.formats.packet import check_width, packet_layout

__all__ = ["frame_to_beats", "frame_chunks", "beats_to_frames", "pack_beat", "unpack_beat"]


@functools.cache
def _fields(width):
    layout = packet_layout(width)
    return {name: (field.offset, field.width) for name, field in layout}


def pack_beat(width, data, nbytes, first, last):
    """The flat integer of one beat, laid out as :func:`packet_layout` says."""
    f = _fields(width)
    return (data << f["data"][0] | nbytes << f["nbytes"][0]
            | int(first) << f["first"][0] | int(last) << f["last"][0])


@functools.cache
def _slots(width):
    """``(offset, mask)`` of ``data``, ``nbytes``, ``first`` and ``last`` in a beat."""
    f = _fields(width)
    return tuple((f[k][0], (1 << f[k][1]) - 1) for k in ("data", "nbytes", "first", "last"))


def unpack_beat(width, bits):
    """The fields of a flat beat: ``(data, nbytes, first, last)``."""
    (d, dm), (n, nm), (f, fm), (la, lm) = _slots(width)
    return (bits >> d) & dm, (bits >> n) & nm, bool(bits >> f & fm), bool(bits >> la & lm)


def frame_chunks(frame, width):
    """``(data, nbytes, first, last)`` of each beat of ``frame`` (bytes, at least 1),
    ``width`` bytes a beat, the last one holding the rest."""
    check_width(width)
    if len(frame) == 0:
        raise ValueError("a packet has at least one byte")
    return [(int.from_bytes(frame[start:start + width], "little"),
             min(width, len(frame) - start), start == 0, start + width >= len(frame))
            for start in range(0, len(frame), width)]


def frame_to_beats(frame, width):
    """Split ``frame`` (bytes, at least 1) into flat beats."""
    return [pack_beat(width, *chunk) for chunk in frame_chunks(frame, width)]


def beats_to_frames(beats, width):
    """Join flat beats into frames; raise on a malformed beat sequence."""
    frames, cur = [], None
    for k, bits in enumerate(beats):
        data, nbytes, first, last = unpack_beat(width, bits)
        if first != (cur is None):
            raise ValueError(f"beat {k}: first={first} but a packet is "
                             f"{'open' if cur is not None else 'not open'}")
        if not 1 <= nbytes <= width or (not last and nbytes != width):
            raise ValueError(f"beat {k}: bad nbytes {nbytes}")
        if data >> (8 * nbytes):
            raise ValueError(f"beat {k}: nonzero bytes above nbytes={nbytes}")
        cur = (cur or b"") + data.to_bytes(width, "little")[:nbytes]
        if last:
            frames.append(cur)
            cur = None
    if cur is not None:
        raise ValueError("the last packet has no last beat")
    return frames
