"""RDMA READ and atomics on the fabric (two nodes of RdmaFabricTop with ``reads`` and
``read_words``, the top of `make sim ARGS="--design rdma --op read|atomic"`) in
co-simulation against the golden model: every uplink beat and its cycle, every counter
(the requesters' response intakes and the responders' READ counters too) and every host
memory word compared; and, independent of the model (IBTA's outcome, derived by the
scenario from node B's initial memory): each READ's bytes at its local address, each
atomic's original value at its local address, node B's MR with each atomic executed
once, one successful CQE per operation with its opcode and ``wr_id``; every frame on
both uplinks passes the scapy + zlib checks and the merges' error flags stay low."""

import pytest

from tb.rdma.fabric_runner import run_fabric
from tb.rdma.read_point import read_top

pytestmark = pytest.mark.slow(reason=(
    "a top of its own (two nodes and the switch with reads: about two minutes of CPU to "
    "export and build, over make test's budget); make test keeps the READ path's blocks: "
    "FrameDemux with reads against its twin (test_unit_frame_merge.py), the requester's "
    "READ path in lockstep with its twin (test_unit_requester_read.py), the responder's "
    "READs co-simulated on Icarus (test_cosim_rdma_read.py); make sim's READ points "
    "co-simulate this top"))


@pytest.mark.parametrize("op, msg_bytes", [("read", 300), ("atomic", 8)])
def test_fabric_reads_match_the_model(sim, test_id, op, msg_bytes):
    """Eight READs of 300 bytes (one response packet each at the 4096-byte MTU) or eight
    FETCH & ADDs of one remote word, one QP, one doorbell, at ``board``: the READ
    RESPONSEs and ATOMIC ACKNOWLEDGEs cross node 1's merge, the switch and node 0's
    demux to the requester."""
    run_fabric(read_top("board"), params=dict(kind="reads", op=op, msg_bytes=msg_bytes,
                                              messages=8), sim=sim, test_id=test_id,
               test_module="tb.rdma.cocotb_fabric_reads")
