"""Contexts that leave the cache while their messages wait for the ACK (the requester's
``windows`` parameter: window state per QP window slot, the default; docs/rdma.md
"Window state per QP"), and the pinned contexts of ``windows`` 0, in co-simulation
against the golden model.

The comparison is the one of test_cosim_rdma.py: every beat on both links, every
counter of both engines, both host memories, cycle for cycle; CQEs per QP and landed
payloads checked against what was posted.
"""

import pytest

from spec.rdma_engine import LADDER, REQUESTER_DEFAULTS
from tb.rdma.runner import run_rdma

#: Cycles before the messages of a run with a warm-up start (test_cosim_rdma.py).
WARMUP = 4000
#: 4096 QPs round robin over 16 entries: each QP sends one message.
MESSAGES = 300


def _params(**expect):
    return dict(kind="writes", messages=MESSAGES, sizes=[128], qps=4096, cache_entries=16,
                rung=LADDER[-1][0], warmup=WARMUP, **expect)


@pytest.mark.slow_variants("icarus", reason=(
    "Verilator runs the same scenario on the same top (the default RdmaTop, which Icarus "
    "co-simulates in test_cosim_rdma.py), about ten times faster"))
def test_rdma_4096_qps_over_16_entries_evict_in_flight(sim, test_id):
    """The default top (a window slot for each of the 4096 QPs): 4096 QPs round robin
    over 16 context-cache entries, 128-byte WRITEs on the best rung: every message
    misses, and an entry is taken from a QP whose message has left but is not yet
    acknowledged (``req_evict_inflight``). Each QP's message is its last, so it asks for
    its ACK (ACK coalescing never leaves one waiting). A context that stayed pinned
    until its ACK would count no such eviction."""
    assert REQUESTER_DEFAULTS["windows"] == 4096
    run_rdma({}, params=_params(expect_min={"req_frames": MESSAGES,
                                            "req_misses": MESSAGES,
                                            "req_evict_inflight": MESSAGES // 2}),
             sim=sim, test_id=test_id)


@pytest.mark.slow_variants("icarus", reason=(
    "the windows 0 top is an export and compile of its own: the pinned engine is model-tested "
    "(test_fastpath.py's windows 0 points against the cycle model, test_uvm_rdma.py) and "
    "unit-tested in the Amaranth simulator (test_unit_requester.py runs windows 0)"))
def test_rdma_4096_qps_over_16_entries_pinned(sim, test_id):
    """The same run on a top with a window slot per cache entry (``windows`` 0): an
    entry stays pinned while its QP's window is open, so no context is evicted in
    flight, and with 16 entries for 4096 QPs the front waits on held entries
    (``req_ctx_stalls``)."""
    if sim == "verilator":
        pytest.skip("a build of its own: Icarus runs it, the default top on Verilator")
    run_rdma({"windows": 0}, params=_params(expect={"req_evict_inflight": 0},
                                            expect_min={"req_frames": MESSAGES,
                                                        "req_misses": MESSAGES,
                                                        "req_ctx_stalls": 1}),
             sim=sim, test_id=test_id)
