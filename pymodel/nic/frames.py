"""Store frames byte for byte, built and parsed with the layouts of :mod:`spec.formats.nic`."""

import functools

from pymodel.fcs import fcs_bytes, phy_bytes
from pymodel.fields import pack
from pymodel.packet import unpack_beat
from spec.formats.nic import (
    ETHERTYPE,
    MIN_FRAME_BYTES,
    Framing,
    NicOp,
    check_id_bits,
    completion_bytes,
    completion_header_layout,
    completion_layout,
    header_bytes,
    header_layout,
    node_mac,
    store_header_layout,
    wide_mac,
)

__all__ = ["build_frame", "parse_header", "wire_bytes", "build_completion",
           "parse_completion", "wire_starts"]

#: The header's length, per framing (cached: each call builds the layout).
header_bytes = functools.cache(header_bytes)


def _mac(framing, id_bits):
    """The MAC of an id: 8-bit ids in byte 5, or 16-bit ids in bytes 4..5 (L2 only)."""
    return wide_mac if check_id_bits(id_bits, framing) == 16 else node_mac


def build_frame(framing, src, dst, addr, length, payload, fcs=True, ack_req=0, id_bits=8):
    """The frame a NIC sends for a store (``length`` is the header field, ``payload`` the
    bytes actually sent; they differ only in malformed-frame tests; ``ack_req`` the
    header's flag). An L2 frame is padded with zeros to 60 bytes before its FCS (64 with
    it). ``id_bits`` 16: the ids in the MACs' bytes 4..5
    (:func:`spec.formats.nic.wide_mac`)."""
    mac = _mac(framing, id_bits)
    framing = Framing(framing)
    store = {"opcode": NicOp.STORE, "ack_req": int(bool(ack_req)), "length": length,
             "addr": addr}
    if framing is Framing.L2:
        fields = {"dst_mac": list(mac(dst)), "src_mac": list(mac(src)),
                  "ethertype": list(ETHERTYPE.to_bytes(2, "big")), "store": store}
    else:
        fields = {"dst": dst, "src": src, "store": store}
    h = header_bytes(framing)
    frame = pack(header_layout(framing), fields).to_bytes(h, "little") + payload
    if framing is Framing.L2:
        frame += bytes(max(0, MIN_FRAME_BYTES - 4 - len(frame)))
    return frame + fcs_bytes(frame) if fcs else frame


@functools.cache
def _store_slots(framing):
    """``(header bytes, ((name, offset, mask), ...))`` of the store header's fields in a
    header of ``framing``, at their offsets from the header's first bit (the layouts
    measured once: Amaranth walks a layout at each size or offset asked)."""
    base = header_layout(framing)["store"].offset
    return header_bytes(framing), tuple(
        (name, base + store_header_layout[name].offset,
         (1 << store_header_layout[name].width) - 1)
        for name in ("opcode", "ack_req", "length", "addr"))


def parse_header(framing, raw):
    """Fields of a header held in ``raw`` (bytes, at least the header length): a dict with
    ``dst`` (node id, or None when an L2 dst MAC is not ours), ``opcode`` (raw bits),
    ``ack_req``, ``length``, ``addr``, ``ethertype_ok``."""
    framing = Framing(framing)
    h, slots = _store_slots(framing)
    bits = int.from_bytes(raw[:h], "little")
    out = {name: (bits >> offset) & mask for name, offset, mask in slots}
    if framing is Framing.L2:
        out["dst_mac"] = bytes(raw[0:6])
        out["ethertype_ok"] = bytes(raw[12:14]) == ETHERTYPE.to_bytes(2, "big")
    else:
        out["dst"] = raw[0]
        out["ethertype_ok"] = True
    return out


def wire_bytes(frame_with_fcs):
    """Bytes a frame costs on an Ethernet PHY: preamble/SFD + frame + FCS + IFG."""
    return phy_bytes(frame_with_fcs)


def build_completion(framing, src, dst, status, count, dropped, fcs=True, id_bits=8):
    """The completion frame receiver ``src`` sends to store source ``dst``: the framing's
    header with the completion header, zero padding (L2: to 60 bytes), the FCS.
    ``id_bits`` as :func:`build_frame`."""
    mac = _mac(framing, id_bits)
    framing = Framing(framing)
    cpl = {"opcode": NicOp.COMPLETION, "ack_req": 0, "status": status, "count": count,
           "dropped": dropped, "reserved": 0}
    if framing is Framing.L2:
        fields = {"dst_mac": list(mac(dst)), "src_mac": list(mac(src)),
                  "ethertype": list(ETHERTYPE.to_bytes(2, "big")), "cpl": cpl}
    else:
        fields = {"dst": dst, "src": src, "cpl": cpl}
    n = completion_bytes(framing)
    frame = pack(completion_layout(framing), fields).to_bytes(n, "little")
    return frame + fcs_bytes(frame) if fcs else frame


def parse_completion(framing, raw, id_bits=8):
    """The completion header fields of a header held in ``raw``: ``status``, ``count``,
    ``dropped``, and ``src`` (the compact ``src`` byte or byte 5 of the L2 source MAC;
    ``id_bits`` 16: bytes 10..11 of the MAC, big endian)."""
    wide = check_id_bits(id_bits, framing) == 16
    framing = Framing(framing)
    layout = completion_layout(framing)
    bits = int.from_bytes(raw[:layout.size // 8], "little")
    cpl = bits >> layout["cpl"].offset

    def part(name):
        f = completion_header_layout[name]
        return (cpl >> f.offset) & ((1 << f.width) - 1)

    src = raw[11] if framing is Framing.L2 else raw[1]
    if wide:
        src |= raw[10] << 8
    return {"status": part("status"), "count": part("count"), "dropped": part("dropped"),
            "src": src}


def wire_starts(beats, stores, width, framing, max_payload):
    """The cycle of each store's first beat on its sender's uplink (where the RDMA
    engine's ``ii_cycles`` is taken, its messages' first wire beats): ``beats`` the
    uplink's ``(raw beats, cycles)`` (the ``tx<p>`` recorder's, or the model's
    ``tx``), completion frames left out, ``stores`` the sender's in order (a store of
    several segments is several frames)."""
    starts, cur, start = [], b"", None
    for beat, stamp in zip(*beats, strict=True):
        data, nb, first, last = unpack_beat(width, beat)
        if first:
            cur, start = b"", stamp
        cur += data.to_bytes(width, "little")[:nb]
        if last and parse_header(framing, cur)["opcode"] != NicOp.COMPLETION.value:
            starts.append(start)
    out, k = [], 0
    for s in stores:
        out.append(starts[k] if k < len(starts) else -1)
        k += len(s.segments(width, max_payload))
    return out
