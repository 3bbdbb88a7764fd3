"""RDMA READ and atomics at node B's responder (the top's ``read_words``) in
co-simulation against the golden model: READ requests, a WRITE, atomics and bad ones
played onto the A->B link; every beat on both links, every counter of both engines (the
READ counters too) and both host memories compared cycle for cycle (the comparison of
test_cosim_rdma.py);
and, independent of the model, the READ RESPONSE and ATOMIC ACKNOWLEDGE frames equal
the ones IBTA prescribes for the requests (derived from node B's memory by the
scenario), node B's MR holds what each operation executed once leaves, every B->A
frame passes the scapy + zlib checks, each injected frame is counted once under its
expected reason, and node A's requester drops the responses it never asked for
(``ack_dropped``)."""

import pytest

from tb.rdma.runner import FEATURES_TOP, run_rdma

#: The shared feature top: the READ data FIFO, two packets of the largest MTU (and 4 ways,
#: a one-cycle link: tb.rdma.runner).
TOP = FEATURES_TOP


@pytest.mark.slow_variants("verilator", reason=(
    "a top of its own (the responder with read_words set): its Verilator build is about a "
    "minute of CPU; Icarus runs the same case in make test, make test-all both"))
def test_rdma_read_requests_and_atomics(sim, test_id):
    """Zero-length, 1-byte, one-packet and three-packet READs at a 256-byte MTU, a WRITE
    at the PSN after them, a repeated READ answered again, a bad rkey, a READ beyond the
    MR and one without the remote-read right NAKed, a READ over the WRITE's bytes; then
    FETCH & ADD, 17 FETCH & ADDs of another QP (more than the 16 results a QP keeps),
    COMPARE & SWAP (swapping, then not), the first FETCH & ADD again after its ACK was
    lost (answered from its QP's saved result, executed once) and a misaligned atomic
    (NAKed): 10 READ RESPONSE frames and 21 ATOMIC ACKNOWLEDGEs, all dropped at node A
    (it posted no READ or atomic)."""
    run_rdma(TOP, params=dict(kind="reads", expect={
        "resp_read_frames": 10, "resp_atomics": 20, "resp_atomic_replays": 1,
        "req_ack_dropped": 31}), sim=sim, test_id=test_id)
