"""The RDMA engine's QPs by popularity (analysis/scenarios/rdma.py ``qp_order``): round
robin unchanged, Zipf 0.99 by the NIC's destinations' own law and seed rule, bad values
named, and every runner of the point either taking it or refusing it."""

from collections import Counter

import pytest

from analysis.scenarios.nic import build_scenario
from analysis.scenarios.rdma import coalesced_ack_requests, qp_order, writes_scenario
from spec.rdma_engine import RUNG_KNOBS


def _qps_of(v):
    """The QP index (the requester's QPN, :func:`writes_scenario`'s ``q``) of each
    posted message, in posting order."""
    return [m.qpn for m in v.messages]


def test_round_robin_is_the_default_and_unchanged():
    """Round robin takes QP ``j % qps`` and builds the same verbs, byte for byte, as the
    scenario without the knob; the signalled messages are each QP's last and every
    ``signal_every``-th of its own."""
    v = writes_scenario(30, [64, 200], 7, signal_every=2)
    w = writes_scenario(30, [64, 200], 7, signal_every=2, popularity="round_robin")
    assert _qps_of(v) == [j % 7 for j in range(30)] == qp_order(30, 7)
    assert v.mem_a == w.mem_a and v.mem_b == w.mem_b and v.writes == w.writes
    for j, m in enumerate(v.messages):
        last = j + 7 >= 30
        assert m.signalled == (last or (j // 7) % 2 == 1), j


def test_zipf_is_the_nic_destinations_law():
    """Zipf over the QPs is the sequence the NIC's ``destinations`` scenario draws for
    its destination ids with the same count and seed (one function, one seed rule), it
    differs from round robin, and QP 0 is the most popular."""
    n, qps = 600, 4096
    order = qp_order(n, qps, "zipf", seed=1)
    stores, _, _ = build_scenario("destinations", nodes=2, width=64, window=512 * 64,
                                  max_payload=1024, seed=1, msg_bytes=128, messages=n,
                                  destinations=qps, popularity="zipf")
    assert order == [s.dst for s in stores[0]]
    assert order != qp_order(n, qps)
    counts = Counter(order)
    assert counts[0] == max(counts.values())
    assert qp_order(n, qps, "zipf", seed=2) != order


def test_zipf_scenario_posts_on_the_drawn_qps():
    """The scenario's messages go to the drawn QPs; each QP's send queue holds its own
    messages (the popular ones more than the round robin's share), each QP's last
    message is signalled, and with BlueFlame every WQE is announced as it is posted."""
    n, qps = 80, 16
    order = qp_order(n, qps, "zipf", seed=3)
    v = writes_scenario(n, [128], qps, seed=3, popularity="zipf", bf=1)
    assert _qps_of(v) == order
    counts = Counter(order)
    for q, pair in v.qps.items():
        assert 1 << pair.sq_log2 >= max(counts[q], -(-n // qps)), q
    lasts = {q: max(j for j, x in enumerate(order) if x == q) for q in counts}
    for q, j in lasts.items():
        assert v.messages[j].signalled, (q, j)
    assert all(m.announce >= 0 for m in v.messages)


def test_coalesced_acks_follow_the_drawn_qps():
    """ACK coalescing's host requests go by each message's own QP: every QP's last
    message asks, with the same popularity and seed as the scenario."""
    n, qps = 60, 4
    k = dict(RUNG_KNOBS, ack_every=8)
    order = qp_order(n, qps, "zipf", seed=5)
    asks = coalesced_ack_requests(n, [128], qps, cache_entries=16, popularity="zipf",
                                  seed=5, **k)
    for q in set(order):
        assert asks[max(j for j, x in enumerate(order) if x == q)], q
    assert asks != coalesced_ack_requests(n, [128], qps, cache_entries=16, seed=5, **k)


def test_bad_popularity_is_named():
    from analysis.points import cycle_point

    with pytest.raises(ValueError, match="popularity must be one of"):
        writes_scenario(10, [64], 4, popularity="Zipf")
    with pytest.raises(ValueError, match="popularity must be one of"):
        cycle_point("rdma", msg_bytes=64, messages=10, popularity="pareto")


def test_runners_take_or_refuse_it():
    """The fast path refuses QPs off round robin (it models round robin only); the
    co-simulation's run parameters (direct link and switch) take it, with the same
    verbs as the model's (the RTL plays them); :func:`tb.rdma.headline.run_point`, which
    names its runs by the design point, refuses it, and model_point's row says it."""
    from analysis.fastpath import fast_point
    from tb.rdma.cocotb_rdma import check_params, config, scenario
    from tb.rdma.fabric_writes import writes_setup
    from tb.rdma.headline import run_point

    with pytest.raises(ValueError, match="popularity"):
        fast_point("rdma", msg_bytes=128, messages=2000, qps=64, popularity="zipf")
    p = dict(kind="writes", messages=40, sizes=[128], qps=64, popularity="zipf")
    check_params(p)
    cfg, knobs = config({}, p)
    assert _qps_of(scenario(p, cfg, knobs)[0]) == qp_order(40, 64, "zipf")
    with pytest.raises(ValueError, match="popularity must be one of"):
        check_params(dict(p, popularity="hot"))
    _, v = writes_setup({"nodes": 2}, p)
    assert _qps_of(v) == qp_order(40, 64, "zipf")
    with pytest.raises(TypeError, match="popularity"):
        run_point("icarus", 128, 40, qps=64, popularity="zipf", check_only=True)


@pytest.mark.slow(reason=(
    "two RDMA model points on the switch (about 40 s on a loaded machine); the fast "
    "suite covers the knob's path to model_point in test_runners_take_or_refuse_it"))
def test_spectrum_rc_row_at_zipf_is_the_engines_zipf_point():
    """The state spectrum's RC row at Zipf is the engine's own point with its QPs by Zipf
    (the best cache's ways) on the row's fabric: rate, latency and in-flight state."""
    from spec.rdma_engine import LADDER
    from tb.ephemeral.point import LEVEL
    from tb.ephemeral.spectrum import RC_CACHE, RC_WAYS, rc_row
    from tb.rdma.headline import model_point

    kw = dict(qps=64, cache_entries=RC_CACHE, rung=LADDER[-1][0], fabric="board",
              host="pcie", **LEVEL)
    zipf = model_point(128, 60, popularity="zipf", cache_ways=RC_WAYS, **kw)
    row = rc_row(64, "board", "zipf", messages=60)
    assert row["msgs_per_s"] == pytest.approx(1e9 / zipf["ii_cycles_model"])
    assert (row["latency_cycles"], row["completion_cycles"]) == (
        zipf["latency_cycles_model"], zipf["completion_cycles_model"])
    assert row["endpoint_state_bits"] - row["context_state_bits"] \
        - row["host_context_bits"] == zipf["endpoint_state_bits_model"]
    assert f"{RC_WAYS}-way" in row["note"]
