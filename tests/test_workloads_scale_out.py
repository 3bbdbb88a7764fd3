"""Deployments over nodes (analysis/workloads/timing.py, ``ScaleOut``): the messages between
nodes on the design's scale-out port, those inside a node on the node's fabric at the same
time, by hand; and the two-node TP16 ring slower than one scale-up domain."""

import pytest

from analysis.workloads.carriers import Carrier
from analysis.workloads.generate import Deployment, decode_step
from analysis.workloads.timing import (
    DATAPATH_BYTES_PER_CYCLE,
    SCALE_OUT_BYTES_PER_CYCLE,
    ScaleOut,
    comm_time,
)
from analysis.workloads.trace import TraceBuilder

NIC = Carrier("nic")
RDMA = Carrier("rdma")


def _toy(cross_bytes, inside_bytes):
    """Four GPUs in two nodes of two; one phase: GPU 0 sends ``cross_bytes`` to GPU 2
    (the other node) and ``inside_bytes`` to GPU 1 (its own node)."""
    b = TraceBuilder("decode_step", "toy", {}, 4)
    p = b.phase("a", "op", 0, (), 1, 1)
    b.add(p, 0, 2, cross_bytes, 1, "data")
    b.add(p, 0, 1, inside_bytes, 1, "data")
    return b.build()


def _only(trace, keep_cross):
    b = TraceBuilder("decode_step", "toy", {}, 4)
    p = b.phase("a", "op", 0, (), 1, 1)
    c = trace.columns
    for s, d, n in zip(c["src"], c["dst"], c["bytes"], strict=True):
        if (s // 2 != d // 2) == keep_cross:
            b.add(p, int(s), int(d), int(n), 1, "data")
    return b.build()


@pytest.mark.parametrize("car", [NIC, RDMA], ids=["nic", "rdma"])
def test_a_phase_lasts_the_longer_of_its_two_parts(car):
    """At the datapath's own rate, the phase is the longer of the message between nodes
    (on the design) and the one inside the node (on the node's carrier), each timed
    alone; the totals are the design's message only."""
    for cross, inside in ((32768, 64), (64, 32768)):
        tr = _toy(cross, inside)
        so = ScaleOut(2, NIC, inside_ports=1, link_bytes_per_cycle=DATAPATH_BYTES_PER_CYCLE)
        r = comm_time(tr, car, scale_out=so)
        a, b = comm_time(_only(tr, True), car), comm_time(_only(tr, False), NIC)
        assert r.cycles == pytest.approx(max(a.cycles, b.cycles))
        assert r.messages == 1 and r.payload_bytes == cross


@pytest.mark.parametrize("car", [NIC, RDMA], ids=["nic", "rdma"])
def test_a_slower_port_stretches_the_message_between_nodes(car):
    """A lone 32 KiB message between nodes on a 50-byte-a-cycle port: its ii is
    stretched by 64 / 50 and it lands that many cycles later (latency grows by the
    stretch); ``moving`` is its payload at 50 bytes a cycle."""
    tr = _only(_toy(32768, 64), True)
    fast = comm_time(tr, car, scale_out=ScaleOut(2, NIC, 1, DATAPATH_BYTES_PER_CYCLE))
    slow = comm_time(tr, car, scale_out=ScaleOut(2, NIC, 1, SCALE_OUT_BYTES_PER_CYCLE))
    ii = car.cost(32768, 1).ii_cycles
    assert slow.cycles - fast.cycles == pytest.approx(ii * (64 / 50 - 1))
    assert slow.moving_cycles == pytest.approx(32768 / 50)
    assert fast.moving_cycles == pytest.approx(32768 / 64)


def test_the_fabric_hop_is_on_both_parts():
    """On ``rack`` every message crosses a switch hop: the message inside a node and the
    one between nodes each land one_way(rack) - one_way(board) = 394 cycles later."""
    so = ScaleOut(2, NIC, 1, DATAPATH_BYTES_PER_CYCLE)
    for tr in (_only(_toy(4096, 64), True), _only(_toy(64, 4096), False)):
        board = comm_time(tr, NIC, scale_out=so)
        rack = comm_time(tr, NIC, scale_out=so, fabric="rack")
        assert rack.cycles - board.cycles == pytest.approx(2 * 75 + 250 - 6)


def test_tp16_over_two_nodes_is_slower_than_one_domain():
    """Llama-3.1-405B TP16, NCCL's ring (8 channels): in one domain every ring step's
    pieces go over 8 ports at 64 bytes a cycle; over two nodes the pieces that cross go
    over one 400 Gb/s port a GPU, so each of the 30 steps waits for the slower link
    (every step has pieces that cross) and the two-node step is slower on both designs,
    by at least the stretch of the crossing pieces' ii."""
    dep = Deployment(batch=16, tp=16)
    one = decode_step("llama-3.1-405b", dep, allreduce="ring", channels=8)
    two = decode_step("llama-3.1-405b", dep, allreduce="ring", channels=8, node_gpus=8)
    so = ScaleOut(8, Carrier("nic", issuer="sm"), 8)
    piece = 16 * 16384 * 2 // 16 // 8             # S = B x hidden x 2, / tp, / channels
    for car in (NIC, RDMA):
        a = comm_time(one, car, ports=8, fabric="rack")
        b = comm_time(two, car, ports=1, fabric="rack", scale_out=so)
        steps = 2 * 126 * 2 * 15          # 2 all-reduces x 126 layers x 2 (tp - 1) steps
        assert b.cycles - a.cycles >= steps * car.cost(piece, 8).ii_cycles * (64 / 50 - 1)


@pytest.mark.parametrize("field,value", [("node_gpus", 0), ("inside_ports", 1.5),
                                         ("link_bytes_per_cycle", 65),
                                         ("link_bytes_per_cycle", 0), ("inside", "nvlink")])
def test_a_bad_scale_out_is_named(field, value):
    kw = dict(node_gpus=2, inside=NIC, inside_ports=1, link_bytes_per_cycle=50)
    kw[field] = value
    with pytest.raises(ValueError, match=field):
        ScaleOut(**kw)


def test_nodes_must_divide_the_gpus():
    with pytest.raises(ValueError, match="node_gpus"):
        comm_time(_toy(64, 64), NIC, scale_out=ScaleOut(3, NIC))
    with pytest.raises(ValueError, match="scale_out"):
        comm_time(_toy(64, 64), NIC, scale_out=2)
