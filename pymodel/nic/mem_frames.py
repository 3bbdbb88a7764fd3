"""Memory frames (loads, atomics, responses) byte for byte, built and parsed with the
layouts of :mod:`spec.formats.nic_mem`."""

from pymodel.fields import pack, unpack
from spec.formats.nic import ETHERTYPE, MIN_FRAME_BYTES, Framing, node_mac
from spec.formats.nic_mem import (
    MEM_OPCODE,
    MemOp,
    mem_header_bytes,
    mem_layout,
)

__all__ = ["build_mem_frame", "parse_mem_header", "request_payload"]


def build_mem_frame(framing, src, dst, op, tag, length, addr, payload=b"", status=0,
                    opcode=MEM_OPCODE):
    """A memory frame without FCS: header, ``payload``, L2 zero padding to 60 bytes."""
    framing = Framing(framing)
    mem = {"opcode": opcode, "op": MemOp(op).value, "status": status, "tag": tag,
           "length": length, "addr": addr}
    if framing is Framing.L2:
        fields = {"dst_mac": list(node_mac(dst)), "src_mac": list(node_mac(src)),
                  "ethertype": list(ETHERTYPE.to_bytes(2, "big")), "mem": mem}
    else:
        fields = {"dst": dst, "src": src, "mem": mem}
    h = mem_header_bytes(framing)
    frame = pack(mem_layout(framing), fields).to_bytes(h, "little") + payload
    if framing is Framing.L2:
        frame += bytes(max(0, MIN_FRAME_BYTES - 4 - len(frame)))
    return frame


def request_payload(op, a, b):
    """The operand bytes of a request ``op``: none, ``a``, or ``a`` then ``b``."""
    op = MemOp(op)
    if op is MemOp.FETCH_ADD:
        return a.to_bytes(8, "little")
    if op is MemOp.CMP_SWAP:
        return a.to_bytes(8, "little") + b.to_bytes(8, "little")
    return b""


def parse_mem_header(framing, raw):
    """The header fields of the frame bytes ``raw`` (at least the header): a dict of the
    layout's fields (``mem`` a dict) plus ``dst``/``src`` node ids (L2: byte 5 of the
    MACs, with ``dst_ok`` the destination MAC's prefix check and ``ethertype_ok``)."""
    framing = Framing(framing)
    h = mem_header_bytes(framing)
    f = unpack(mem_layout(framing), int.from_bytes(bytes(raw[:h]).ljust(h, b"\0"), "little"))
    if framing is Framing.L2:
        f["dst"], f["src"] = raw[5], raw[11]
        f["dst_mac"] = bytes(raw[0:6])
        f["ethertype_ok"] = bytes(raw[12:14]) == ETHERTYPE.to_bytes(2, "big")
    else:
        f["dst_mac"] = None
        f["ethertype_ok"] = True
    return f
