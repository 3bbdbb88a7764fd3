"""Node B's MR table in host memory behind an MR cache (the top's ``mr_cache``) in
co-simulation against the golden model: every beat on both links, every counter of both
engines and of the MR cache, both host memories (the MR table included), cycle for cycle
(the comparison of test_cosim_rdma.py); and the MR cache's counters against a
direct-mapped cache run over the rkeys of the frames on the wire (tb/rdma/cocotb_rdma.py).
"""

import pytest

from tb.rdma.fabric_runner import run_fabric
from tb.rdma.runner import run_rdma

#: 2 MR-cache lines: the scenario's 4 MRs sit at table indices 3, 8, 13 and 2
#: (analysis.scenarios.rdma.writes_scenario), lines 1, 0, 1, 0: every MR shares its line
#: with another, so the messages, each on the next MR, miss and evict.
TOP = {"mr_cache": 2}


@pytest.mark.slow(reason=(
    "an RdmaTop of its own with mr_cache (one more build per simulator; make test was at 10 "
    "minutes): test_unit_resp_responder.py checks the responder with the MR cache against its "
    "twin cycle for cycle and test_rdma_fabric_model.py runs the fabric model with and without "
    "it"))
def test_rdma_mr_cache_conflicts(sim, test_id):
    """3 QPs round robin, 24 WRITEs of 128 and 300 bytes at a 256-byte path MTU (ONLY,
    FIRST and LAST frames), message ``j`` on MR ``j % 4``: every FIRST/ONLY looks its MR
    up and, the MRs alternating on both lines, misses (24 reads at least), while the
    LAST frames need no MR; 12 messages of one frame and 12 of two are accepted."""
    run_rdma(TOP, params=dict(kind="writes", messages=24, sizes=[128, 300], qps=3,
                              pmtu_log2=8, mrs=4,
                              expect={"resp_mr_lookups": 24, "resp_mr_misses": 24,
                                      "resp_frames_ok": 36}),
             sim=sim, test_id=test_id)


@pytest.mark.slow(reason=(
    "a fabric top of its own with mr_cache (44 s of Icarus besides its builds; make test was "
    "at 10 minutes): test_unit_resp_responder.py checks the responder with the MR cache "
    "against its twin and test_rdma_fabric_model.py checks the fabric model's decisions with "
    "and without the MR cache"))
def test_rdma_fabric_mr_cache_incast(sim, test_id):
    """The fabric top with every responder's MR table in host memory behind 2 MR-cache
    lines: an incast 3->1 of 128-byte WRITEs, node 0's MRs for senders 1, 2 and 3 at
    table indices 1, 2, 3 (analysis.scenarios.rdma_fabric), lines 1, 0, 1: senders 1 and
    3 evict each other. Compared with the model cycle for cycle (test_cosim_rdma_fabric's
    checks)."""
    run_fabric({"mr_cache": 2}, params=dict(pattern="incast", messages=12, msg_bytes=128,
                                            load=0.5, warmup=3000),
               sim=sim, test_id=test_id)
