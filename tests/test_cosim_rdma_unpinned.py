"""Contexts that leave the cache while their messages wait for the ACK (the requester's
``windows`` parameter: window state per QP window slot, docs/rdma.md "Window state per
QP"), in co-simulation against the golden model.

The comparison is the one of test_cosim_rdma.py: every beat on both links, every
counter of both engines, both host memories, cycle for cycle; CQEs per QP and landed
payloads checked against what was posted.
"""

from spec.rdma_engine import LADDER
from tb.rdma.runner import run_rdma

#: A top whose requester keeps a window slot per QP (4096 slots: one for each of the
#: 4096 QPs below) instead of one per cache entry.
TOP = {"windows": 4096}
#: Cycles before the messages of a run with a warm-up start (test_cosim_rdma.py).
WARMUP = 4000


def test_rdma_4096_qps_over_16_entries_evict_in_flight(sim, test_id):
    """4096 QPs round robin over 16 context-cache entries, 128-byte WRITEs on the best
    rung: every message misses, and an entry is taken from a QP whose message has left
    but is not yet acknowledged (``req_evict_inflight``). Each QP's message is its last,
    so it asks for its ACK (ACK coalescing never leaves one waiting). A context that
    stayed pinned until its ACK would count no such eviction."""
    messages = 300
    run_rdma(TOP, params=dict(kind="writes", messages=messages, sizes=[128], qps=4096,
                              cache_entries=16, rung=LADDER[-1][0], warmup=WARMUP,
                              expect_min={"req_frames": messages, "req_misses": messages,
                                          "req_evict_inflight": messages // 2}),
             sim=sim, test_id=test_id)
