"""The engine's RoCEv2 frames of every opcode it sends, decoded by tshark (Wireshark's own
InfiniBand dissector, not the project's): each frame read as RoCEv2 with the opcode it was
built with, the QP and PSN where the BTH puts them, the Ethernet FCS and the IPv4 header
checksum verified good, and no expert message (malformed, bad length). The ICRC is checked
by the project's own hold-out check (tb/rdma/wirecheck.py; tshark shows it without
checking it). Skipped without tshark (``apt-get install tshark``); the same check on a
co-simulated point's frames: ``make sim ARGS="--design rdma --op read"`` writes them to
build/sim/point.pcap (docs/rdma.md, "READ and atomics on the wire")."""

import random
import shutil
import subprocess

import pytest

from pymodel.pcap import write_pcapng
from pymodel.rdma.frames import Endpoint, ack_frame, write_frame
from pymodel.rdma.read_frames import (
    atomic_ack_frame,
    atomic_request_frame,
    read_request_frame,
    read_response_frame,
)
from spec.formats.roce import OpCode

pytestmark = pytest.mark.skipif(shutil.which("tshark") is None, reason="no tshark")

A = Endpoint(0x02_00_00_00_00_01, 0x0A_00_01_01)
B = Endpoint(0x02_00_00_00_00_02, 0x0A_00_01_02)
FIELDS = ("frame.protocols", "infiniband.bth.opcode", "infiniband.bth.destqp",
          "infiniband.bth.psn", "eth.fcs.status", "ip.checksum.status", "_ws.expert")


def _frames():
    """``(frame, opcode, dest QP, PSN)`` of every kind the engine sends."""
    rng = random.Random(7)
    out = []
    for op in (OpCode.RC_RDMA_WRITE_ONLY, OpCode.RC_RDMA_WRITE_FIRST,
               OpCode.RC_RDMA_WRITE_MIDDLE, OpCode.RC_RDMA_WRITE_LAST):
        psn, qp = rng.randrange(1 << 24), rng.randrange(1, 1 << 24)
        out.append((write_frame(op, A, B, 5, qp, psn, True, rng.randbytes(128),
                                va=rng.randrange(1 << 64), rkey=rng.randrange(1 << 32),
                                dma_length=128), op, qp, psn))
    out.append((ack_frame(B, A, 9, 0x123456, 77, 0x1F, 12), OpCode.RC_ACKNOWLEDGE,
                0x123456, 77))
    out.append((read_request_frame(A, B, 7, 0x000321, 41, rng.randrange(1 << 64),
                                   rng.randrange(1 << 32), 5000),
                OpCode.RC_RDMA_READ_REQUEST, 0x000321, 41))
    for k, op in enumerate((OpCode.RC_RDMA_READ_RESPONSE_FIRST,
                            OpCode.RC_RDMA_READ_RESPONSE_MIDDLE,
                            OpCode.RC_RDMA_READ_RESPONSE_LAST,
                            OpCode.RC_RDMA_READ_RESPONSE_ONLY)):
        out.append((read_response_frame(op, B, A, 9, 0x000654, 42 + k, 0x1F, 5,
                                        rng.randbytes(256)), op, 0x000654, 42 + k))
    for k, op in enumerate((OpCode.RC_CMP_SWAP, OpCode.RC_FETCH_ADD)):
        out.append((atomic_request_frame(op, A, B, 7, 0x000321, 50 + k, 8 * rng.randrange(1 << 40),
                                         rng.randrange(1 << 32), rng.getrandbits(64),
                                         rng.getrandbits(64)), op, 0x000321, 50 + k))
    out.append((atomic_ack_frame(B, A, 9, 0x000654, 51, 0x1F, 6, rng.getrandbits(64)),
                OpCode.RC_ATOMIC_ACKNOWLEDGE, 0x000654, 51))
    return out


def test_tshark_decodes_every_opcode_the_engine_sends(tmp_path):
    frames = _frames()
    pcap = tmp_path / "roce.pcapng"
    write_pcapng(pcap, [(k, f) for k, (f, *_) in enumerate(frames)])
    cmd = ["tshark", "-r", str(pcap), "-o", "eth.check_fcs:TRUE", "-o",
           "ip.check_checksum:TRUE", "-T", "fields", "-E", "separator=;"]
    for f in FIELDS:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert len(lines) == len(frames)
    for line, (_, op, qp, psn) in zip(lines, frames, strict=True):
        protos, opcode, destqp, got_psn, fcs, ipck, expert = line.split(";")
        assert protos.startswith("eth:ethertype:ip:udp:infiniband"), line
        assert int(opcode) == op.value, line
        assert int(destqp, 0) == qp and int(got_psn) == psn, line
        assert fcs == "1" and ipck == "1", f"FCS or IP checksum not good: {line}"
        assert expert == "", line
