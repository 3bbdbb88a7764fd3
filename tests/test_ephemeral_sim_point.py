"""`make sim --design ephemeral`'s composition (tb/ephemeral/sim_point.py) without a
simulator: every figure's source, the datapath's figures checked against the model's
datapath, and the wire bytes read from RoCEv2 frames built here by scapy.

The co-simulations themselves (the sender's flow and the datapath on RdmaFabricTop, RTL =
model) run in tests/test_unit_ephemeral_sender.py (test_make_sim_ephemeral_point)."""

import zlib

import pytest
from scapy.contrib.roce import AETH, BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from spec.formats.roce import OpCode
from tb.ephemeral.point import model_point
from tb.ephemeral.sim_point import (
    DATAPATH_FIGURES,
    SOURCES,
    _wire_bytes,
    datapath_mismatches,
    frame_wire_bytes,
)

#: RDMA Extended Transport Header of a WRITE FIRST / ONLY (IBTA Vol 1 section 9.3.2): 16
#: bytes (VA, R_Key, DMA length), carried here as raw bytes after the BTH.
RETH_BYTES = 16


def _with_fcs(frame):
    return frame + zlib.crc32(frame).to_bytes(4, "little")


def _write(payload, opcode=OpCode.RC_RDMA_WRITE_ONLY):
    """A RoCEv2 WRITE frame with FCS (scapy's BTH appends the ICRC)."""
    return _with_fcs(bytes(Ether() / IP() / UDP(dport=4791) / BTH(opcode=opcode.value)
                           / Raw(bytes(RETH_BYTES + payload))))


def _ack():
    return _with_fcs(bytes(Ether() / IP() / UDP(dport=4791)
                           / BTH(opcode=OpCode.RC_ACKNOWLEDGE.value) / AETH()))


def _wire(frame):
    """Bytes on the wire: preamble and SFD (8), the frame padded to 64, the gap (12)
    (IEEE 802.3 clause 4.4.2)."""
    return 8 + max(64, len(frame)) + 12


def test_every_figure_is_co_simulated():
    """Every figure of the model point has a source, and each says co-simulated."""
    row = model_point(4, "board", messages=8)
    figures = {k[:-len("_model")] for k in row if k.endswith("_model")}
    assert set(SOURCES) == figures
    assert all(src.startswith("co-simulated") for src in SOURCES.values())


def test_frame_wire_bytes_of_writes_and_acks():
    """Data frames over the messages, the ACK's: from scapy frames, equal to the model's
    count of the level field's frames (:func:`_wire_bytes`)."""
    write, ack = _write(128), _ack()
    frames = [(0, write), (3, ack), (5, write), (9, write), (12, ack)]
    assert frame_wire_bytes(frames) == (_wire(write), _wire(ack))
    assert frame_wire_bytes(frames) == _wire_bytes(128)


def test_frame_wire_bytes_counts_a_message_of_two_frames_once():
    first, last = _write(64, OpCode.RC_RDMA_WRITE_FIRST), _write(16, OpCode.RC_RDMA_WRITE_LAST)
    frames = [(0, first), (1, last), (2, _ack())]
    assert frame_wire_bytes(frames)[0] == _wire(first) + _wire(last)


@pytest.mark.parametrize("frames", [[], [(0, _ack())], [(0, _write(128))]])
def test_frame_wire_bytes_needs_writes_and_acks(frames):
    with pytest.raises(ValueError, match="ACKNOWLEDGE"):
        frame_wire_bytes(frames)


def test_datapath_mismatches_name_each_figure_off_the_model():
    """The co-simulated datapath equal to the model's datapath: no mismatch; each figure
    changed, or a frame of another size: that one named, RTL then model."""
    model = {f"{key}_model": 100.0 + k for k, key in enumerate(DATAPATH_FIGURES)}
    frames = [(0, _write(128)), (4, _ack()), (8, _write(128))]
    cosim = {f"{key}_rtl": model[f"{key}_model"] for key in DATAPATH_FIGURES}
    cosim["frames"] = frames
    assert datapath_mismatches(model, cosim, 128) == []
    for key in DATAPATH_FIGURES:
        off = dict(cosim, **{f"{key}_rtl": cosim[f"{key}_rtl"] + 1})
        assert datapath_mismatches(model, off, 128) == [(key, off[f"{key}_rtl"],
                                                         model[f"{key}_model"])]
    longer = dict(cosim, frames=[(0, _write(129)), (4, _ack())])
    (wrong,) = datapath_mismatches(model, longer, 128)
    assert wrong[0] == "data frame wire bytes"
    assert wrong[1:] == (_wire(_write(129)), _wire_bytes(128)[0])


@pytest.mark.parametrize("profile", ["board", "pod"])
def test_datapath_is_the_gap_tables_engine_row(profile):
    """The datapath's co-simulation is the point of the gap table's "QP engine, 1 QP" row
    at the same profile (one RdmaFabricTop build for both), and its model run's."""
    from tb.ephemeral.point import datapath_point
    from tb.gap_table import gap_settings, point_of

    (s,) = [s for name, _, s in gap_settings(profile) if name == "QP engine, 1 QP"]
    assert point_of("rdma", s) == datapath_point(profile)
