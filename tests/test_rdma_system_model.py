"""The RDMA system model's idle skipping changes nothing.

After a cycle in which no state changed, :func:`pymodel.rdma.system.simulate` jumps to
the next external event (a host-interface output, a beat arriving, a release of the MMIO
player, a transport timer, the framer becoming free). Here every scenario kind runs with
and without skipping, and every output, counter and memory word must be equal.
"""

import dataclasses

import pytest

from pymodel.rdma.system import simulate
from tb.rdma.cocotb_rdma import config, scenario

CASES = {
    "ladder_pipelined": dict(messages=60, sizes=[128], qps=2, rung="pipelined", warmup=3000),
    "ladder_best": dict(messages=60, sizes=[128], qps=2, rung="+ACK coalescing"),
    "serial": dict(messages=5, sizes=[300], qps=1, rung="sequential"),
    "many_qps": dict(messages=80, sizes=[64, 200], qps=300, cache_entries=16),
    "spaced": dict(messages=6, sizes=[128], qps=1, spacing=2000),
    "full_window": dict(messages=300, sizes=[1], qps=1, knobs=dict(ring_every=16),
                        ack_timeout=1024,
                        faults_ba=dict(seed=1, drop_rate=1, drop_burst=255)),
    "faults": dict(messages=20, sizes=[1, 255, 256, 257, 700], qps=3, pmtu_log2=8,
                   ack_timeout=1024,
                   faults_ab=dict(seed=66, drop_rate=2000, corrupt_rate=2000, dup_rate=2000),
                   faults_ba=dict(seed=73, drop_rate=4000)),
    # QP errors: a remote access error, flushes, a doorbell to a QP in ERR, the reset;
    # and retries exhausted on two QPs (every WRITE frame lost).
    "qp_error": dict(kind="qp_error"),
    "retry_exhausted": dict(messages=4, sizes=[100], qps=2, ack_timeout=256,
                            faults_ab=dict(seed=1, drop_rate=65535)),
    # READs and atomics posted at node A (the top's reads), B->A frames dropped.
    "posted_reads": dict(kind="posted_reads", top=dict(reads=16, read_words=128),
                         faults_ba=dict(seed=1, drop_rate=6000)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_skipping_changes_nothing(case):
    params = dict({"kind": "writes"}, **CASES[case])
    top = params.pop("top", {})
    runs = []
    for skip in (False, True):
        cfg, knobs = config(top, params)
        v, inject, _ = scenario(params, cfg, knobs)
        items, release = v.mmio_items()
        cfg = dataclasses.replace(cfg, cq_base=v.cq_base, cq_log2=v.cq_log2)
        runs.append(simulate(cfg, v.mem_a, v.mem_b, v.mr_table, items, release,
                             skip=skip))
    full, skipped = runs
    assert full["wire_ab"] and full["completed"]
    for key in ("wire_ab", "wire_ba", "written", "completed", "mmio_stamps", "req", "resp",
                "host_a", "host_b", "links", "mem_a", "mem_b"):
        assert skipped[key] == full[key], key


def test_cq_holds_every_cqe_of_a_long_run():
    """A run of more signalled WRITEs than the 1,024 CQEs of the default ring: the
    scenario sizes the CQ for all of them, and every CQE is found by polling the model's
    host memory after the run (with 1,024 slots the ring wrapped, the owner bits no longer
    matched and the co-simulated check saw no CQE at all)."""
    messages = 1100
    params = dict(kind="writes", messages=messages, sizes=[8], qps=1,
                  rung="+ACK coalescing", knobs=dict(signal_every=1))
    cfg, knobs = config({}, params)
    v, _, _ = scenario(params, cfg, knobs)
    assert 1 << v.cq_log2 >= messages
    items, release = v.mmio_items()
    cfg = dataclasses.replace(cfg, cq_base=v.cq_base, cq_log2=v.cq_log2)
    out = simulate(cfg, v.mem_a, v.mem_b, v.mr_table, items, release)
    signalled = [m for m in v.messages if m.signalled]
    assert len(signalled) == messages
    cqes = v.poll_cq(out["mem_a"], messages + 1)
    assert len(cqes) == messages
