"""The order in which `make sim` starts its co-simulations (scripts/sim.py: ``job_tops``,
``start_order``): each job's top is listed without building anything, the first job of
each distinct top starts first, the costliest tops first."""

import os

from scripts import sim
from tb.nic.headline import headline_jobs, point_top


def _not_a_point(x):
    return x


def test_job_tops_lists_each_jobs_top_and_builds_nothing(tmp_path, monkeypatch):
    """The NIC headline's three points list the tops their run_point builds (names from
    point_top, the function that names them, with the same arguments); a function that is
    not a co-simulation point is not called (None); a user's COSIM_LIST is kept."""
    monkeypatch.setenv("COSIM_LIST", str(tmp_path / "mine.jsonl"))
    jobs = headline_jobs("verilator", messages=100, msg_bytes=64)
    called = []
    tops = sim.job_tops(jobs + [("plain", called.append, dict(x=1))])
    want = [point_top(kw["framing"], 64, 101, attachment=kw["attachment"])[1]
            for _, _, kw in jobs]
    assert [t[0] for t in tops[:3]] == want
    assert len({t[1] for t in tops[:3]}) == 3         # three distinct export keys
    assert tops[3] is None and called == []
    assert os.environ["COSIM_LIST"] == str(tmp_path / "mine.jsonl")
    assert not (tmp_path / "mine.jsonl").exists()     # the listing went elsewhere


def test_start_order_firsts_then_the_rest_costliest_first():
    """Jobs 0..6: a NIC top twice, a job without a top, RdmaTop twice, the fabric top,
    a PCIe NIC top. First the first job of each top, by BUILD_CPU (fabric, RdmaTop, PCIe
    NIC, then the others in the jobs' order), then the second jobs of RdmaTop and of the
    NIC top."""
    nic, rdma = ("nic_point_l2_n4", "k1"), ("rdma_top", "k2")
    tops = [nic, nic, None, rdma, rdma, ("rdma_fabric_pair", "k3"),
            ("nic_point_l2_n4_pcie", "k4")]
    assert sim.start_order(tops) == [5, 3, 6, 0, 2, 4, 1]


def test_start_order_of_distinct_tops_is_by_cost_alone():
    """Every top distinct: all are first jobs, the costliest first; ties in job order."""
    tops = [("a", "1"), ("nic_point_compact_n4_pcie", "2"), ("b", "3")]
    assert sim.start_order(tops) == [1, 0, 2]
    assert sim.start_order([]) == []
