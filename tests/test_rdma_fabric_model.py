"""The RDMA fabric's golden model (pymodel/rdma/fabric_system.py) on its own: idle
skipping changes nothing, the scenario builder's addressing, and the model-only runner's
per-message arrays (co-simulation: tests/test_cosim_rdma_fabric.py)."""

import pytest

from pymodel.rdma.fabric_point import fabric_run
from pymodel.rdma.fabric_system import FabricConfig, simulate_fabric
from pymodel.scenarios.rdma_fabric import fabric_scenario
from spec.formats.roce import QPC_LAYOUT
from spec.rdma_fabric import node_mac


def _run(sc, skip):
    cfg = FabricConfig(nodes=len(sc.verbs), cq_base=sc.cq_base, cq_log2=sc.cq_log2)
    return simulate_fabric(cfg, sc.images(), skip=skip)


@pytest.mark.parametrize("pattern", ["pair", "incast", "all_to_all", "permutation"])
def test_idle_skipping_changes_nothing(pattern):
    """Jumping over quiet cycles gives every record, counter and memory of stepping
    every cycle."""
    sc = fabric_scenario(pattern, 3, 4, 200, 0.5, seed=3, qps=2)
    fast, slow = _run(sc, True), _run(sc, False)
    for key in ("wire", "mmio_stamps", "written", "completed", "req", "resp", "host_rq",
                "host_rs", "merge", "switch", "mem_rq", "mem_rs"):
        assert fast[key] == slow[key], key
    assert fast["cycles"] <= slow["cycles"]


def test_scenario_addresses_each_qp_to_its_destination():
    """Every requester context names its destination's MAC and its own as source; every
    responder context the reverse; one MR per (sender, destination) on the destination."""
    from pymodel.fields import unpack
    sc = fabric_scenario("all_to_all", 4, 10, 128, 0.5, seed=2, qps=2)
    for m in sc.messages:
        a = unpack(QPC_LAYOUT, sc.verbs[m.src].mem_a[m.qpn_a])
        b = unpack(QPC_LAYOUT, sc.verbs[m.dst].mem_b[m.qpn_b])
        assert (a["dmac"], a["smac"], a["dest_qp"]) == (node_mac(m.dst), node_mac(m.src),
                                                       m.qpn_b)
        assert (b["dmac"], b["smac"], b["dest_qp"]) == (node_mac(m.src), node_mac(m.dst),
                                                       m.qpn_a)
        assert any(base <= m.raddr < base + n for base, n in sc.verbs[m.dst].mrs)
    assert len({(m.src, m.dst) for m in sc.messages}) > 4


def test_fabric_run_arrays():
    """Per measured message: arrival <= accept < remote write < completion, every
    sender's messages there, incast to node 0."""
    r = fabric_run("incast", 4, 128, 20, 0.5, seed=1, warmup=3000)
    n = 3 * 20
    for key in ("src", "dst", "arrival", "accept", "remote_write", "completion"):
        assert r[key].shape == (n,), key
    assert (r["dst"] == 0).all() and sorted(set(r["src"].tolist())) == [1, 2, 3]
    assert (r["arrival"] <= r["accept"]).all()
    assert (r["accept"] < r["remote_write"]).all()
    assert (r["remote_write"] < r["completion"]).all()
    assert r["arrival"].min() > 3000
