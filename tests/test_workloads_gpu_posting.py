"""Issue cost on both sides, in parallel: the engine's WQEs posted by SM warps as
DeepEP's IBGDA code does (analysis/workloads/issuers.py, ``ibgda``), and the NIC's flags
fenced by parallel warps (analysis/workloads/timing.py), by hand."""

import pytest

from analysis.workloads.carriers import ISSUERS, Carrier
from analysis.workloads.grid import ISSUER
from analysis.workloads.issuers import ibgda_posting_cycles
from analysis.workloads.timing import comm_time
from analysis.workloads.trace import TraceBuilder


def test_ibgda_costs_by_hand():
    """A WQE: an atomicAdd, three 16-byte stores, a __threadfence and an atomicCAS, so 3
    L2 round trips of 200 SM cycles and 3 issue cycles: 603 cycles at 1.98 GHz. A
    doorbell: the lock's atomicCAS, an atomicMax and two releases (the doorbell record,
    the BlueFlame write), 4 round trips and 2 stores: 802 cycles."""
    wqe, db = ibgda_posting_cycles()
    assert wqe == pytest.approx(603 / 1.98)
    assert db == pytest.approx(802 / 1.98)
    g = ISSUERS["ibgda"]
    assert (g.wqe_cycles, g.doorbell_cycles) == (wqe, db)
    assert g.parallel and g.doorbell_batch == 4 and g.signal_every == 1
    assert ibgda_posting_cycles(100, 1.0) == (303, 402)


@pytest.mark.parametrize("kw", [dict(l2_round_trip=0), dict(clock_ghz=-1),
                                dict(l2_round_trip="200")])
def test_bad_ibgda_parameter_is_named(kw):
    with pytest.raises(ValueError, match=next(iter(kw))):
        ibgda_posting_cycles(**kw)


def test_the_grid_posts_as_ibgda_and_keeps_the_cpu_proxy():
    assert ISSUER == "ibgda"
    assert not ISSUERS["cpu"].parallel
    assert ISSUERS["ibgda"].wqe_cycles > ISSUERS["cpu"].wqe_cycles


def test_one_message_waits_for_its_poster_many_qps_share_the_posting():
    """An 8-byte WRITE on the pipelined engine: on 1 QP the sender is busy the poster's
    whole cost per message (WQE + a quarter doorbell); over 248 QPs, 1/248 of it (one
    warp per QP), and the message's own posting still takes it all."""
    car = Carrier("rdma", issuer="ibgda")
    wqe, db = ibgda_posting_cycles()
    one, many = car.cost(8, 1), car.cost(8, 248)
    assert one.issuer_cycles == pytest.approx(wqe + db / 4)
    assert one.cycles == pytest.approx(max(one.ii_cycles, wqe + db / 4))
    assert many.cycles == pytest.approx(max(many.ii_cycles, (wqe + db / 4) / 248))
    assert many.issuer_cycles == one.issuer_cycles


def _flags(peers):
    """GPU 0 sends 4 KiB then a flag to each of ``peers`` GPUs, one phase."""
    b = TraceBuilder("decode_step", "toy", {}, peers + 1)
    p = b.phase("a", "op", 0, (), peers, peers)
    for d in range(1, peers + 1):
        b.add(p, 0, d, 4096, 1, "data")
        b.add(p, 0, d, 8, 1, "flag")
    return b.build()


def test_nic_flags_are_fenced_by_parallel_warps():
    """Four peers: each flag's fence occupies the sender a quarter of its length (one
    warp per peer), so the sender's busy time grows by 3/4 of a fence less than with the
    fences one after another; every flag still waits for its whole fence."""
    car = Carrier("nic", issuer="sm")
    tr = _flags(4)
    r = comm_time(tr, car)
    f = car.fence_cycles(4096, 4)
    d, g = car.cost(4096, 4), car.cost(8, 4)
    # Sender: 4 data + 3 flags' occupancy (each flag's fence / 4), then the last flag's
    # posting (its issue and whole fence) and latency.
    send = 4 * d.cycles + 3 * (g.cycles + f / 4) + g.issuer_cycles + f + g.latency_cycles
    recv = d.ii_cycles + g.ii_cycles + max(d.latency_cycles - d.ii_cycles,
                                           g.latency_cycles - g.ii_cycles)
    assert f > 0
    assert r.cycles == pytest.approx(max(send, recv))
    assert r.fences == 4 and r.fence_cycles == pytest.approx(4 * f)
