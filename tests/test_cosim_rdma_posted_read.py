"""RDMA READ and atomics posted to node A's requester (the top's ``reads``, with node
B's ``read_words``) in co-simulation against the golden model: every beat on both links,
every counter of both engines (the requester's response intake's too) and both host
memories compared cycle for cycle (the comparison of test_cosim_rdma.py); and,
independent of the model (IBTA's outcome, derived by the scenario from node B's initial
memory): each READ's bytes land at its local address, each atomic's original value at
its local address, node B's MR holds what each atomic executed once leaves, and one
successful CQE per operation carries its opcode and ``wr_id``; every frame on both links
passes the scapy + zlib checks."""

import pytest

from tb.rdma.runner import run_rdma

#: The requester's 16 outstanding READ/atomic slots (ORD 16, mlx5's max_qp_rd_atom) and
#: the responder's READ data FIFO of two packets of the largest MTU.
TOP = {"reads": 16, "read_words": 128}

_SLOW = ("a top of its own (both nodes with READs): its builds are about a minute of CPU "
         "each; make test-all runs it on both simulators")


@pytest.mark.slow(reason=_SLOW)
def test_rdma_posted_reads_and_atomics(sim, test_id):
    """Four READs (1 to 600 bytes at a 256-byte MTU), two FETCH & ADDs and two COMPARE
    & SWAPs (one swapping) on two QPs: 6 READ RESPONSE frames and 4 ATOMIC
    ACKNOWLEDGEs taken by the requester, 8 CQEs."""
    run_rdma(TOP, params=dict(kind="posted_reads", expect={
        "req_read_responses": 10, "req_cqe_writes": 8, "resp_atomics": 4,
        "resp_read_frames": 6}), sim=sim, test_id=test_id)


@pytest.mark.slow(reason=_SLOW)
def test_rdma_posted_reads_lost_responses(sim, test_id):
    """The same with B->A frames dropped (link seed 1, drop rate 6000 of 65536): the
    requester's intake finds the gaps and rewinds; the READs are read again and the
    repeated atomics answered from the responder's saved results (each executed once)."""
    run_rdma(TOP, params=dict(
        kind="posted_reads", faults_ba=dict(seed=1, drop_rate=6000),
        expect={"req_read_responses": 10, "req_cqe_writes": 8, "resp_atomics": 4},
        expect_min={"req_read_rewinds": 1, "ba_dropped": 1}), sim=sim, test_id=test_id)
