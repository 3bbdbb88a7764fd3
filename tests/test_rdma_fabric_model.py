"""The RDMA fabric's golden model (pymodel/rdma/fabric_system.py) on its own: idle
skipping changes nothing, the scenario builder's addressing, and the model-only runner's
per-message arrays (co-simulation: tests/test_cosim_rdma_fabric.py)."""

import pytest

from analysis.rdma.fabric_point import fabric_run
from analysis.scenarios.rdma_fabric import fabric_scenario
from pymodel.rdma.fabric_system import FabricConfig, simulate_fabric
from spec.rdma_fabric import FABRIC_DEFAULTS, MERGE_ROOM, node_mac
from spec.rdma_responder import HIGH_WATER


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
    sc = fabric_scenario("all_to_all", 4, 10, 128, 0.5, seed=2, qps=2)
    for m in sc.messages:
        a = sc.verbs[m.src].context(sc.verbs[m.src].mem_a, 0, m.qpn_a)
        b = sc.verbs[m.dst].context(sc.verbs[m.dst].mem_b, 0, m.qpn_b)
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


def test_fabric_rates_of_an_incast_by_hand():
    """Offered and achieved rates, both in messages per cycle of the whole fabric.

    Incast 2->1 (3 nodes) of 777-byte WRITEs at load 0.9, by hand: a WRITE ONLY frame is
    Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + RETH 16 + payload padded to 780 + ICRC 4 +
    FCS 4 = 858 bytes, 14 beats of 64 B; the two senders share node 0's downlink, so
    each sender's service is 2 x 14 = 28 cycles and its schedule offers 0.9 / 28
    messages per cycle: 0.9 / 14 in all. Achieved: the 2 x 12 measured messages over the
    span of their remote writes, 23 / (last - first). It can not exceed what node 0's
    responder writes into host memory: 777 bytes in 13 words, PCIe TLPs of at most
    MPS 256 B = 4 words, 24 B of overhead each, 63 B per cycle: 3 TLPs of
    ceil((256 + 24) / 63) = 5 cycles and one of ceil((12 + 24) / 63) = 1 (the last word's
    9 bytes count as 12): 16 cycles per message, so at most 1 / 16, which is also
    below the offered 0.9 / 14 (the receiver's host interface, not the downlink, is the
    bottleneck at this size)."""
    r = fabric_run("incast", 3, 777, 12, 0.9, seed=1, warmup=3000)
    row = r["row"]
    assert row["senders"] == 2 and row["messages"] == 24
    assert row["service_cycles"] == 28
    assert row["offered_per_cycle"] == pytest.approx(0.9 / 14)
    rw = r["remote_write"]
    assert row["achieved_per_cycle"] == pytest.approx(23 / (int(rw.max()) - int(rw.min())))
    assert row["achieved_per_cycle"] <= 1 / 16 < row["offered_per_cycle"]


def test_fabric_rates_of_isolated_messages_by_hand():
    """A pair at 1 % of the downlink: 128-byte WRITEs are 14 + 20 + 8 + 12 + 16 + 128 +
    4 + 4 = 206 bytes, 4 beats, so the schedule offers 0.01 / 4 messages per cycle (one
    sender). Messages this sparse never meet in the engines: each lands the same number
    of cycles after its arrival, so the remote writes are the arrivals shifted by a
    constant and the achieved rate is the schedule's own, (n - 1) / (arrival span)."""
    r = fabric_run("pair", 2, 128, 20, 0.01, seed=1, warmup=3000)
    row = r["row"]
    assert row["offered_per_cycle"] == pytest.approx(0.01 / 4)
    lat = r["remote_write"] - r["arrival"]
    assert lat.min() == lat.max()
    span = int(r["arrival"].max()) - int(r["arrival"].min())
    assert row["achieved_per_cycle"] == pytest.approx(19 / span)


def test_fabric_qps_of_a_node_on_distinct_cache_entries():
    """All-to-all over 3 nodes with 3 QPs per (sender, destination): a node has 2 x 3 = 6
    requester QPs and 6 responder QPs, 3 x 3 = 9 <= 16 cache entries, so each QP keeps
    its own entry of the direct-mapped cache: the only context misses are the warm-up's
    cold fills, one per QP at each end, 6 per engine; and the rates are of the whole
    fabric: 65 bytes pad to 68, a 146-byte frame of 3 beats, each of the 3 senders
    offers 0.7 / 3, 0.7 in all."""
    r = fabric_run("all_to_all", 3, 65, 12, 0.7, seed=1, qps=3, warmup=3000)
    assert [c["misses"] for c in r["counters"]["req"]] == [6, 6, 6]
    assert [c["misses"] for c in r["counters"]["resp"]] == [6, 6, 6]
    assert r["row"]["offered_per_cycle"] == pytest.approx(0.7)
    sc = fabric_scenario("all_to_all", 3, 12, 65, 0.7, seed=1, qps=3)
    for node in range(3):
        req = {m.qpn_a for m in sc.messages if m.src == node}
        resp = {m.qpn_b for m in sc.messages if m.dst == node}
        assert len(req) == len({q % 16 for q in req}) == 6
        assert len(resp) == len({q % 16 for q in resp}) == 6


def test_fabric_load_row_rejects_a_bad_pattern():
    """A pattern that is not one of the traffic patterns is named in the error."""
    from analysis.rdma.fabric_point import fabric_load_row
    r = fabric_run("pair", 2, 128, 2, 0.5, seed=1, warmup=3000)
    with pytest.raises(ValueError, match="pattern"):
        fabric_load_row(r, "broadcast", 2, 128, 0.5)


@pytest.mark.slow(reason=(
    "about 10 s of model each; make test keeps "
    "test_small_incast_drops_without_pause_and_not_with_it"))
def test_incast_7_to_1_of_1_kib_at_90_percent_is_lossless():
    """Incast 7->1 of 1 KiB WRITEs at 90 % of node 0's downlink, 200 messages per sender
    at the defaults: the backlog reaches the uplink merges, which hold their requesters
    (a merge's level passes ``merge_depth - MERGE_ROOM``) and never lose a beat (the
    twin raises if one would find the buffer full); every message lands and completes.

    Bounds on the rate at node 0, by hand: a WRITE ONLY of 1,024 bytes is 14 + 20 + 8 +
    12 + 16 + 1,024 + 4 + 4 = 1,102 bytes, 18 beats, so its downlink carries at most
    1 / 18 messages per cycle; its responder writes 1,024 bytes as 4 PCIe TLPs of MPS
    256 B with 24 B of overhead at 63 B a cycle, ceil(280 / 63) = 5 cycles each: at most
    1 / 20. The offered rate is 7 x 0.9 / (7 x 18) = 0.05 messages per cycle."""
    r = fabric_run("incast", 8, 1024, 200, 0.9, seed=1, warmup=3000)
    depth = FABRIC_DEFAULTS["merge_depth"]
    assert len(r["remote_write"]) == len(r["completion"]) == 7 * 200
    assert depth - MERGE_ROOM < max(r["merge_level_max"]) <= depth
    row = r["row"]
    assert row["offered_per_cycle"] == pytest.approx(0.05)
    assert row["achieved_per_cycle"] <= 1 / 20 < 1 / 18
    # Without the pause nothing holds the switch's egress toward node 0: its responder's
    # receive buffer overflows (frames dropped whole) and go-back-N resends.
    assert r["counters"]["resp"][0]["overflow"] > 0
    assert sum(c["retransmissions"] for c in r["counters"]["req"]) > 0


def _paused_run(sc, pause, **top):
    cfg = FabricConfig(nodes=len(sc.verbs), cq_base=sc.cq_base, cq_log2=sc.cq_log2,
                       pause=pause, **top)
    return simulate_fabric(cfg, sc.images())


def _check_lossless(sc, r, nodes):
    """No frame dropped anywhere, none resent, every posted byte in its MR, one
    completion per message (the merges' overflow would have raised in the twin)."""
    for n in range(nodes):
        assert r["resp"][n]["overflow"] == 0, n
        assert r["req"][n]["retransmissions"] == 0, n
        mem = r["mem_rs"][n]
        for base, want in sc.expected_mr_bytes(n).items():
            nw = -(-len(want) // 64)
            have = b"".join(mem.get(base // 64 + k, 0).to_bytes(64, "little")
                            for k in range(nw))[:len(want)]
            assert have == want, (n, base)
    assert sum(len(w) for w in r["written"]) == sum(len(c) for c in r["completed"]) \
        == len(sc.messages)


@pytest.mark.slow(reason=(
    "about 10 s of model each; make test keeps "
    "test_small_incast_drops_without_pause_and_not_with_it"))
def test_incast_7_to_1_of_1_kib_at_90_percent_with_pause_loses_nothing():
    """The same incast as above with ``pause`` on: node 0's responder raises XOFF before
    its receive buffer can overflow, the switch's egress holds frames toward it, the
    switch's ingress buffers fill and their credits hold the merges, whose ``room``
    holds the requesters: no frame is dropped at a merge or at the responder, none is
    resent, every byte lands, and the rate stays under the same bounds."""
    sc = fabric_scenario("incast", 8, 200, 1024, 0.9, seed=1, depth=1 << 20, warmup=3000)
    r = _paused_run(sc, 1, depth=1 << 20)
    _check_lossless(sc, r, 8)
    assert r["pause"][0]["xoffs"] > 0
    assert all(p["xoffs"] == 0 for p in r["pause"][1:])     # the senders receive no data


#: The co-simulation's small paused top (tests/test_cosim_rdma_fabric.py): a receive
#: payload FIFO of 128 beats (the least that holds a largest frame, 64, plus 64), so
#: that a short cold 3->1 incast of 1 KiB WRITEs fills it; XOFF above 128 - 64 - 5 = 59
#: beats, XON at 59 - 16 = 43.
PAUSE4 = dict(pause_hysteresis=16, responder_sizes=dict(rx_beats=128))


def test_small_incast_drops_without_pause_and_not_with_it():
    """Incast 3->1 of 12 1 KiB WRITEs per sender at full load from cold (the first
    messages bunch up behind the context fills) into a 128-beat receive buffer: without
    the pause node 0's responder drops frames and the senders resend; with it nothing is
    lost and the run ends sooner."""
    sc = fabric_scenario("incast", 4, 12, 1024, 1.0, seed=1, depth=1 << 12, warmup=0)
    off = _paused_run(sc, 0, depth=1 << 12, **PAUSE4)
    on = _paused_run(sc, 1, depth=1 << 12, **PAUSE4)
    assert off["resp"][0]["overflow"] > 0
    assert sum(c["retransmissions"] for c in off["req"]) > 0
    _check_lossless(sc, on, 4)
    assert on["pause"][0]["xoffs"] > 0
    assert on["cycles"] < off["cycles"]
    # The pause's guarantee: a frame is admitted with at most 128 - 64 payload beats
    # held, so the buffer never holds more than that plus one frame's 16 payload beats.
    assert on["resp"][0]["rx_beats_max"] <= 128 - 64 + 16


def test_pause_on_changes_nothing_until_it_pauses():
    """With ``pause`` on but a run that never reaches XOFF (the idle-skipping run of
    incast, 3 nodes) every record, counter and memory equals the run without it (the
    switch's egress with backpressure is timed as without while it is ready)."""
    sc = fabric_scenario("incast", 3, 4, 200, 0.5, seed=3, qps=2)
    off, on = _paused_run(sc, 0, depth=1 << 12), _paused_run(sc, 1, depth=1 << 12)
    assert on["pause"] == [dict(xoffs=0)] * 3
    for key in ("wire", "mmio_stamps", "written", "completed", "req", "resp", "host_rq",
                "host_rs", "merge", "switch", "mem_rq", "mem_rs", "cycles"):
        assert on[key] == off[key], key


def test_idle_skipping_changes_nothing_with_pause():
    """The small paused incast (XOFF raised and lifted) stepped every cycle gives every
    record, counter and memory of the run that jumps over quiet cycles."""
    sc = fabric_scenario("incast", 4, 4, 1024, 1.0, seed=1, depth=1 << 12, warmup=0)
    cfg = FabricConfig(nodes=4, cq_base=sc.cq_base, cq_log2=sc.cq_log2, depth=1 << 12,
                       pause=1, **PAUSE4)
    fast = simulate_fabric(cfg, sc.images(), skip=True)
    slow = simulate_fabric(cfg, sc.images(), skip=False)
    assert fast["pause"][0]["xoffs"] > 0
    for key in ("wire", "mmio_stamps", "written", "completed", "req", "resp", "host_rq",
                "host_rs", "merge", "switch", "mem_rq", "mem_rs", "pause"):
        assert fast[key] == slow[key], key


def test_mr_cache_same_decisions_more_reads():
    """Every responder's MR table in host memory behind 2 MR-cache lines: an incast
    3->1 whose MRs at node 0 (indices 1, 2, 3: lines 1, 0, 1) evict each other makes
    the same decisions and writes the same MR buffers as the on-chip table; node 0's
    host interface carries its context fills plus at least the 3 compulsory MR reads
    and one conflict read more, and the run takes longer."""
    sc = fabric_scenario("incast", 4, 12, 128, 0.5, seed=1, warmup=3000)
    runs = {}
    for mc in (0, 2):
        cfg = FabricConfig(mr_cache=mc, cq_base=sc.cq_base, cq_log2=sc.cq_log2)
        runs[mc] = simulate_fabric(cfg, sc.images())
    base, cached = runs[0], runs[2]
    levels = HIGH_WATER + ("fills_max",)          # buffer levels: the timing differs
    for node in range(4):
        assert ({k: v for k, v in cached["resp"][node].items() if k not in levels}
                == {k: v for k, v in base["resp"][node].items() if k not in levels})
    table = FABRIC_DEFAULTS["depth"] - FABRIC_DEFAULTS["mr_entries"]
    for node in range(4):
        assert ({a: v for a, v in cached["mem_rs"][node].items() if a < table}
                == {a: v for a, v in base["mem_rs"][node].items() if a < table})
    assert cached["host_rs"][0]["up_rd_tlps"] >= base["host_rs"][0]["up_rd_tlps"] + 4
    assert cached["cycles"] > base["cycles"]
    with pytest.raises(ValueError, match="mr_cache"):
        FabricConfig(mr_cache=3)


def _pair_point(**top):
    """The median latency and completion of 128-byte WRITEs posted one at a time on a
    two-node fabric top ``top`` (the ``writes`` kind of tb/rdma/fabric_writes.py), and
    the sender's credits in use at their high-water mark."""
    import statistics

    from analysis.rdma.point import latency_knobs, latency_spacing, reduce_run
    from spec.rdma_engine import LADDER
    from tb.rdma.fabric_writes import pair_run, writes_images, writes_setup

    warm = latency_spacing("pcie")
    cfg, v = writes_setup(dict(nodes=2, **top), dict(
        kind="writes", messages=5, sizes=[128], qps=1, warmup=warm, spacing=warm,
        knobs=latency_knobs(dict(LADDER)[LADDER[-1][0]])))
    run = simulate_fabric(cfg, writes_images(v))
    r = reduce_run(v, pair_run(run), len(v.messages))
    return (statistics.median(r["latency"][1:]), statistics.median(r["completion"][1:]),
            run["merge"][0]["credits_max"])


def test_link_retry_and_hop_latency_add_their_cycles():
    """A WRITE of 128 B is a 4-beat frame (206 bytes) and its ACK a 2-beat one (66
    bytes: Ethernet 14, IPv4 20, UDP 8, BTH 12, AETH 4, ICRC 4, FCS 4). A reliable link
    adds ``n + 1`` cycles to a frame of ``n`` beats (spec.fabric_profiles.
    retry_delivery_extra) and the switch's hop its ``hop_latency``: the WRITE crosses
    two links and one hop to the remote write, its ACK two more links and a hop to the
    CQE. The sender's credits in use peak at the WRITE's 4 beats (one at a time)."""
    from spec.fabric_profiles import retry_delivery_extra

    hop = 7
    lat0, comp0, used0 = _pair_point()
    lat1, comp1, used1 = _pair_point(link_retry=1, hop_latency=hop, credits=140)
    assert lat1 - lat0 == 2 * retry_delivery_extra(4) + hop
    assert comp1 - comp0 == lat1 - lat0 + 2 * retry_delivery_extra(2) + hop
    assert used0 == used1 == 4


def test_fabric_top_and_model_refuse_pause_with_retry_or_hop():
    """Bad ``link_retry`` and ``hop_latency`` values, and the pause with either, are named
    by the top and by the model's configuration."""
    from rtl.tops.rdma_fabric_top import RdmaFabricTop

    with pytest.raises(ValueError, match="link_retry"):
        RdmaFabricTop(pause=1, link_retry=1)
    with pytest.raises(ValueError, match="hop_latency"):
        RdmaFabricTop(pause=1, hop_latency=3)
    with pytest.raises(ValueError, match="link_retry"):
        RdmaFabricTop(link_retry=2)
    with pytest.raises(ValueError, match="hop_latency"):
        RdmaFabricTop(hop_latency=-1)
    with pytest.raises(ValueError, match="link_retry"):
        FabricConfig(link_retry=2)
    with pytest.raises(ValueError, match="hop_latency"):
        FabricConfig(hop_latency=4097)
    with pytest.raises(ValueError, match="link_retry"):
        FabricConfig(pause=1, link_retry=1)
    with pytest.raises(ValueError, match="hop_latency"):
        FabricConfig(pause=1, hop_latency=3)


@pytest.mark.parametrize("op, msg_bytes, qps", [("read", 200, 1), ("atomic", 8, 1),
                                               ("read", 200, 4), ("atomic", 8, 3)])
def test_fabric_model_reads_land_as_ibta_says(op, msg_bytes, qps):
    """The model of the fabric with ``reads`` (the twin the `make sim` READ points compare
    with): 12 READs of 200 bytes, or 12 FETCH & ADDs, from node 0 to node 1 across the
    switch, on one QP or round robin over ``qps``. Independent of the model (IBTA's
    outcome, from the scenario): each answer's bytes at its local address, node B's MR
    with each atomic executed once, one successful CQE per operation; every response
    taken by the requester's intake (none unmatched, duplicated or rewound), and idle
    skipping changes nothing."""
    import logging

    from tb.rdma import reads as read_checks
    from tb.rdma.fabric_reads import reads_images, reads_pair, reads_setup
    from tb.rdma.read_point import read_top
    from tb.scoreboard import Scoreboard

    cfg, v = reads_setup(dict(read_top("board"), depth=1 << 12),
                         dict(kind="reads", op=op, msg_bytes=msg_bytes, messages=12,
                              qps=qps))
    runs = [simulate_fabric(cfg, reads_images(v), skip=skip) for skip in (True, False)]
    assert runs[0] == runs[1]
    sb = Scoreboard(logging.getLogger(__name__))
    read_checks.posted_read_checks(sb, v, reads_pair(runs[0], cfg.depth))
    assert sb.mismatches == []
    req = runs[0]["req"][0]
    assert req["read_responses"] == 12
    assert [req[f"read_{k}"] for k in ("unmatched", "duplicates", "rewinds")] == [0, 0, 0]
    assert runs[0]["resp"][1]["read_reqs" if op == "read" else "atomics"] == 12


def test_read_scenario_and_rate_name_bad_parameters():
    from analysis.scenarios.rdma_read import read_point_scenario
    from tb.rdma.read_point import model_read_rate
    with pytest.raises(ValueError, match="qps must be 1 to messages"):
        read_point_scenario("read", 128, 4, qps=5)
    with pytest.raises(ValueError, match="op must be"):
        model_read_rate("write", 128, 4, 1)
