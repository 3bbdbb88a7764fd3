"""RdmaTop built with ``header="scaleup"`` (spec/formats/scaleup.py) in co-simulation
against the golden model: 128-byte WRITEs back to back, and bad frames.

Every run compares, cycle for cycle, each beat on both links, every counter and both
host memories (tb/rdma/cocotb_rdma.py), and checks every frame with an independent
decoder (tb.rdma.wirecheck.scaleup_problems). The expected sizes below are derived from
the layout (10-byte scale-up header, IBTA BTH 12, RETH 16, AETH 4, ICRC 4, FCS 4), not
read from a run.
"""

import json

import pytest

from pymodel.pcap import read_pcapng, write_pcapng
from spec.formats.roce import AETH_BYTES, BTH_BYTES, ICRC_BYTES, RETH_BYTES
from spec.formats.scaleup import LINKTYPE_SCALEUP, SCALEUP_BYTES, ScaleUpType
from tb.rdma.runner import run_rdma
from tb.wireshark_lua import dissect, lua_interpreter

pytestmark = pytest.mark.slow_variants("verilator", reason=(
    "Icarus runs both (RdmaTop with header='scaleup' is one more Verilator build of about a "
    "minute); test_unit_rdma_scaleup.py checks the scale-up blocks against the model in the "
    "Amaranth simulator"))

TOP = {"header": "scaleup"}      # one top for every test: one build per simulator
WARMUP = 4000
FCS = 4
#: Preamble + SFD (8) and inter-frame gap (12) per frame (IEEE 802.3 clause 4.4.2).
PHY = 20
MSG = 128
#: A WRITE ONLY of MSG bytes and an ACKNOWLEDGE, bytes with ICRC and FCS.
WRITE_BYTES = SCALEUP_BYTES + BTH_BYTES + RETH_BYTES + MSG + ICRC_BYTES + FCS
ACK_BYTES = SCALEUP_BYTES + BTH_BYTES + AETH_BYTES + ICRC_BYTES + FCS


def _beats(n):
    return -(-n // 64)


def test_scaleup_128_byte_writes(sim, test_id, tmp_path):
    """128-byte WRITEs back to back with doorbell batching (the rung where the host
    interface is not the bottleneck): RTL = model; each WRITE is one 174-byte frame of 3
    beats, each ACK one 34-byte frame of 1 beat; wire bytes per message 174 + 34 + 2 x
    20; steady-state ii 3 cycles (RoCEv2: 206 bytes, 4 beats, ii 4), on the RTL and the
    model. The run's frames go to a pcap with the scale-up link type, read back with the
    scale-up header at byte 0 of every packet, where scripts/wireshark/scaleup.lua reads
    it."""
    assert (WRITE_BYTES, _beats(WRITE_BYTES), ACK_BYTES, _beats(ACK_BYTES)) == (174, 3, 34, 1)
    out = tmp_path / "run.json"
    messages = 40
    run_rdma(TOP, params=dict(kind="writes", messages=messages, sizes=[MSG], qps=2,
                              rung="+doorbell batching 16", warmup=WARMUP,
                              out_json=str(out), expect_min={"req_frames": messages}),
             sim=sim, test_id=test_id)
    res = json.loads(out.read_text())
    assert res["mismatches"] == 0
    frames = [bytes.fromhex(h) for _, h in res["frames"]]
    writes = [f for f in frames if f[SCALEUP_BYTES] != 0x11]
    acks = [f for f in frames if f[SCALEUP_BYTES] == 0x11]
    assert len(writes) == messages and len(acks) == res["counters"]["resp_acks"] > 0
    assert {len(f) for f in writes} == {WRITE_BYTES}
    assert {len(f) for f in acks} == {ACK_BYTES}
    per_msg = (WRITE_BYTES + PHY) + len(acks) / messages * (ACK_BYTES + PHY)
    for side in ("rtl", "model"):
        assert res[side]["wire_bytes"] == per_msg
        assert res[side]["ii_cycles"] == _beats(WRITE_BYTES) == 3
    # The pcap: link type 147 in the interface block, each packet a scale-up frame.
    pcap = tmp_path / "rdma.pcap"
    write_pcapng(pcap, [(c, bytes.fromhex(h)) for c, h in res["frames"]],
                 linktype=LINKTYPE_SCALEUP)
    linktype, packets = read_pcapng(pcap)
    assert linktype == LINKTYPE_SCALEUP
    assert packets == frames
    assert all(p[4] == ScaleUpType.BTH.value for p in packets)
    assert all(int.from_bytes(p[6:8], "big") == len(p) - SCALEUP_BYTES - FCS
               for p in packets)
    if lua_interpreter() is not None:
        # The dissector itself on the packets of the pcap: type, length, opcode.
        for p, fields in zip(packets, dissect("scripts/wireshark/scaleup.lua", "USER0",
                                              packets), strict=True):
            assert fields["scaleup.type"] == ScaleUpType.BTH.value
            assert fields["scaleup.length"] == len(p) - SCALEUP_BYTES - FCS
            assert fields["scaleup.bth.opcode"] == p[SCALEUP_BYTES]
            assert fields["used"] == len(p)


def test_scaleup_bad_frames(sim, test_id):
    """Injected scale-up frames: a wrong ``type`` (malformed), a ``length`` 4 bytes too
    long and one too short (truncated), a bad ICRC (icrc_bad), a bad FCS (fcs_bad), each
    dropped and counted on the responder's counters (the cocotb test asserts the count
    of every reason, RTL = model), between good frames, one of them a one-beat WRITE."""
    run_rdma(TOP, params=dict(kind="bad"), sim=sim, test_id=test_id)


def test_scaleup_edge_sizes(sim, test_id):
    """WRITEs of 1 byte to one MTU + 1 over two QPs with the scale-up header: one-beat
    frames (up to 18 bytes of payload behind a RETH), the sizes where the payload crosses
    a beat (26 and 42 bytes: the writer's offsets 38 and 22), and two segments."""
    run_rdma(TOP, params=dict(kind="writes", messages=8,
                              sizes=[1, 18, 19, 26, 27, 128, 4096, 4097], qps=2),
             sim=sim, test_id=test_id)
