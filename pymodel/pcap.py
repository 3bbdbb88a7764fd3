"""Write Ethernet frames (with their FCS) to a pcapng file that Wireshark opens, and read
them back (:func:`read_pcapng`, for the tests).

The interface description says ``if_fcslen = 4``, so Wireshark knows each frame ends in
an FCS and can check it (``-o eth.check_fcs:TRUE``).
Ref: draft-ietf-opsawg-pcapng (pcapng), sections 4.1 (SHB), 4.2 (IDB, option
if_tsresol = 9 and if_fcslen = 13), 4.3 (EPB).
"""

import struct

__all__ = ["write_pcapng", "read_pcapng"]


def _block(kind, body):
    body += b"\0" * (-len(body) % 4)
    size = 12 + len(body)
    return struct.pack("<II", kind, size) + body + struct.pack("<I", size)


def _option(code, value):
    return struct.pack("<HH", code, len(value)) + value + b"\0" * (-len(value) % 4)


def write_pcapng(path, frames, cycle_ns=1, linktype=1):
    """Write ``frames``: ``(cycle, bytes)`` pairs, bytes including the FCS.

    Timestamps are ``cycle * cycle_ns`` nanoseconds: one cycle is 1 ns, the 1 GHz clock
    of SPEC.md ("Units"), whatever period the simulator's clock has. ``linktype``: the
    interface's link type, 1 (Ethernet) by default; the RDMA engine's scale-up frames
    use :data:`spec.formats.scaleup.LINKTYPE_SCALEUP` (147, private use 0), which
    scripts/wireshark/scaleup.lua dissects.
    """
    shb = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1) + _option(0, b""))
    opts = _option(9, bytes([9])) + _option(13, bytes([4])) + _option(0, b"")
    idb = _block(0x00000001, struct.pack("<HHI", linktype, 0, 0) + opts)
    with open(path, "wb") as f:
        f.write(shb + idb)
        for cycle, frame in frames:
            t = int(cycle) * cycle_ns
            epb = struct.pack("<IIIII", 0, t >> 32, t & 0xFFFFFFFF, len(frame), len(frame))
            f.write(_block(0x00000006, epb + bytes(frame)))


def read_pcapng(path):
    """``(link type of the first interface, [packet bytes])`` of the pcapng file at
    ``path``, read by its block structure (the sections of the module docstring)."""
    with open(path, "rb") as f:
        raw = f.read()
    at, linktype, packets = 0, None, []
    while at < len(raw):
        kind, size = struct.unpack_from("<II", raw, at)
        body = raw[at + 8:at + size - 4]
        if kind == 1 and linktype is None:
            linktype = struct.unpack_from("<H", body, 0)[0]
        elif kind == 6:
            caplen = struct.unpack_from("<I", body, 12)[0]
            packets.append(body[20:20 + caplen])
        at += size
    return linktype, packets
