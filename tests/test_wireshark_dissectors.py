"""The Wireshark Lua dissectors of scripts/wireshark/, run on a plain Lua interpreter
with a stand-in of Wireshark's API (tests/lua/wireshark_mock.lua): every field they
show is read at the offset the project's layouts give it (spec/formats/scaleup.py,
spec/formats/roce.py, spec/formats/nic.py), on frames built by the golden model."""

import random

import pytest

from pymodel.fields import field_slot
from pymodel.nic.frames import build_frame
from pymodel.rdma.frames import Endpoint, ack_frame, write_frame
from pymodel.rdma.read_frames import atomic_ack_frame, read_request_frame, read_response_frame
from spec.formats.nic import compact_header_layout
from spec.formats.roce import OpCode, bswap
from spec.formats.scaleup import SU_ACK_HEADER, SU_WRITE_RETH_HEADER
from tb.wireshark_lua import dissect, lua_interpreter

pytestmark = pytest.mark.skipif(lua_interpreter() is None, reason="no Lua interpreter")

A = Endpoint(0x02_00_00_00_00_01, 0x0A_00_01_01)
B = Endpoint(0x02_00_00_00_00_02, 0x0A_00_01_02)

#: Dissector field -> (layout path, bytes in wire order to swap into a value).
_SU_FIELDS = {"scaleup.dst": ("su.dst", 2), "scaleup.src": ("su.src", 2),
              "scaleup.type": ("su.type", 1), "scaleup.hop_limit": ("su.hop_limit", 1),
              "scaleup.length": ("su.length", 2), "scaleup.entropy": ("su.entropy", 2),
              "scaleup.bth.opcode": ("bth.opcode", 1),
              "scaleup.bth.pad_count": ("bth.pad_count", 1),
              "scaleup.bth.tver": ("bth.tver", 1), "scaleup.bth.pkey": ("bth.pkey", 2),
              "scaleup.bth.dest_qp": ("bth.dest_qp", 3),
              "scaleup.bth.ack_req": ("bth.ack_req", 1), "scaleup.bth.psn": ("bth.psn", 3)}
_RETH_FIELDS = {"scaleup.reth.va": ("reth.va", 8), "scaleup.reth.rkey": ("reth.rkey", 4),
                "scaleup.reth.dma_length": ("reth.dma_length", 4)}
_AETH_FIELDS = {"scaleup.aeth.syndrome": ("aeth.syndrome", 1),
                "scaleup.aeth.msn": ("aeth.msn", 3)}


def _expected(layout, fields, frame):
    raw = int.from_bytes(frame[:layout.size // 8], "little")
    out = {}
    for name, (path, nbytes) in fields.items():
        offset, mask = field_slot(layout, path)
        value = raw >> offset & mask
        out[name] = bswap(value, nbytes) if nbytes > 1 else value
    return out


def test_scaleup_dissector_reads_every_field_where_the_layout_puts_it():
    rng = random.Random(4)
    frames, kinds = [], []
    for op in (OpCode.RC_RDMA_WRITE_ONLY, OpCode.RC_RDMA_WRITE_FIRST,
               OpCode.RC_RDMA_WRITE_MIDDLE, OpCode.RC_RDMA_WRITE_LAST):
        for n in (1, 7, 128, 300):
            frames.append(write_frame(op, A, B, rng.randrange(1 << 24),
                                      rng.randrange(1 << 24), rng.randrange(1 << 24),
                                      rng.random() < 0.5, rng.randbytes(n),
                                      va=rng.randrange(1 << 64), rkey=rng.randrange(1 << 32),
                                      dma_length=n, header="scaleup"))
            kinds.append("reth" if op in (OpCode.RC_RDMA_WRITE_ONLY,
                                          OpCode.RC_RDMA_WRITE_FIRST) else "plain")
    frames.append(ack_frame(B, A, 3, 0x123456, 999, 0x60, 77, header="scaleup"))
    kinds.append("ack")
    got = dissect("scripts/wireshark/scaleup.lua", "USER0", frames)
    for frame, kind, fields in zip(frames, kinds, got, strict=True):
        layout = SU_ACK_HEADER if kind == "ack" else SU_WRITE_RETH_HEADER
        want = _expected(layout, _SU_FIELDS, frame)
        if kind == "reth":
            want.update(_expected(layout, _RETH_FIELDS, frame))
        if kind == "ack":
            want.update(_expected(layout, _AETH_FIELDS, frame))
        assert {k: fields[k] for k in want} == want
        assert fields["scaleup.icrc"] == int.from_bytes(frame[-8:-4], "little")
        assert fields["scaleup.fcs"] == int.from_bytes(frame[-4:], "little")
        hdr = {"reth": 38, "plain": 22, "ack": 26}[kind]
        assert fields.get("scaleup.payload", "") == frame[hdr:-8].hex()
        assert fields["used"] == len(frame) and fields["protocol"] == "SU-RoCE"


def test_scaleup_dissector_reads_read_requests_and_responses():
    """READ REQUEST (BTH + RETH, no payload), READ RESPONSE FIRST/MIDDLE/LAST/ONLY (an
    AETH but on MIDDLE) and ATOMIC ACKNOWLEDGE (AETH, then the AtomicAckETH as payload)
    behind the scale-up header."""
    rng = random.Random(5)
    frames = [read_request_frame(A, B, 7, 0x123456, 41, rng.randrange(1 << 64),
                                 rng.randrange(1 << 32), 3000, header="scaleup")]
    kinds = ["reth"]
    for op, kind in ((OpCode.RC_RDMA_READ_RESPONSE_FIRST, "ack"),
                     (OpCode.RC_RDMA_READ_RESPONSE_MIDDLE, "plain"),
                     (OpCode.RC_RDMA_READ_RESPONSE_LAST, "ack"),
                     (OpCode.RC_RDMA_READ_RESPONSE_ONLY, "ack")):
        frames.append(read_response_frame(op, B, A, 9, 0x654321, 42, 0x1F, 5,
                                          rng.randbytes(97), header="scaleup"))
        kinds.append(kind)
    frames.append(atomic_ack_frame(B, A, 9, 0x654321, 43, 0x1F, 6, rng.getrandbits(64),
                                   header="scaleup"))
    kinds.append("ack")
    got = dissect("scripts/wireshark/scaleup.lua", "USER0", frames)
    for frame, kind, fields in zip(frames, kinds, got, strict=True):
        layout = SU_ACK_HEADER if kind == "ack" else SU_WRITE_RETH_HEADER
        want = _expected(layout, _SU_FIELDS, frame)
        want.update(_expected(layout, {"reth": _RETH_FIELDS, "ack": _AETH_FIELDS}.get(
            kind, {}), frame))
        assert {k: fields[k] for k in want} == want
        hdr = {"reth": 38, "plain": 22, "ack": 26}[kind]
        assert fields.get("scaleup.payload", "") == frame[hdr:-8].hex()
        assert fields["scaleup.icrc"] == int.from_bytes(frame[-8:-4], "little")


def test_scaleup_dissector_leaves_a_roce_frame_undecoded_past_the_type():
    """A RoCEv2 frame (Ethernet first) is not taken for a BTH: its byte 4 is no type."""
    f = write_frame(OpCode.RC_RDMA_WRITE_ONLY, A, B, 1, 2, 3, False, b"x" * 64)
    (fields,) = dissect("scripts/wireshark/scaleup.lua", "USER0", [f])
    assert fields["scaleup.type"] == f[4] != 0x1B
    assert "scaleup.bth.opcode" not in fields


def test_nic_compact_dissector_reads_every_field_where_the_layout_puts_it():
    rng = random.Random(6)
    frames, want = [], []
    for k, n in enumerate((1, 63, 64, 200)):
        dst, src, addr = rng.randrange(256), rng.randrange(256), 64 * rng.randrange(1 << 20)
        frames.append(build_frame("compact", src, dst, addr, n, rng.randbytes(n),
                                  ack_req=k % 2))
        raw = int.from_bytes(frames[-1][:8], "little")
        want.append({name: raw >> field_slot(compact_header_layout, path)[0]
                     & field_slot(compact_header_layout, path)[1]
                     for name, path in (("niccompact.dst", "dst"), ("niccompact.src", "src"),
                                        ("niccompact.opcode", "store.opcode"),
                                        ("niccompact.ack_req", "store.ack_req"),
                                        ("niccompact.length", "store.length"),
                                        ("niccompact.addr", "store.addr"))})
        assert (want[-1]["niccompact.dst"], want[-1]["niccompact.length"]) == (dst, n)
        assert (want[-1]["niccompact.opcode"], want[-1]["niccompact.ack_req"]) == (1, k % 2)
    got = dissect("scripts/wireshark/nic_compact.lua", "USER1", frames)
    for frame, w, fields in zip(frames, want, got, strict=True):
        assert {k: fields[k] for k in w} == w
        assert fields["niccompact.payload"] == frame[8:-4].hex()
        assert fields["used"] == len(frame)
