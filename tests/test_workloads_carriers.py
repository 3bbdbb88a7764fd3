"""Carriers (per-message costs from the golden model's fast path) and phase timing.

The carriers must not invent numbers: every engine figure is checked equal to
``fast_point``'s for the same message; the composition rules (stores of at most
max_payload, issuer costs, phase times) are checked against sums written out here.
"""

import pytest

from analysis.fastpath import fast_point
from analysis.points import NIC_DEFAULTS
from analysis.workloads.carriers import ISSUERS, MESSAGES, Carrier, Rung
from analysis.workloads.generate import Deployment, decode_step, kv_transfer
from analysis.workloads.issuers import sm_store_issue_cycles
from analysis.workloads.timing import DATAPATH_BYTES_PER_CYCLE, comm_time
from analysis.workloads.trace import TraceBuilder

N = MESSAGES       # back-to-back messages per engine point (Carrier's default)


@pytest.mark.parametrize("design,knobs,size", [
    ("nic", dict(framing="compact"), 128), ("nic", dict(framing="l2"), 8),
    ("rdma", {}, 128), ("rdma", {}, 4096), ("rdma", {}, 7408),
    ("rdma", dict(rung="pipelined"), 128), ("rdma", dict(rung="+ACK coalescing"), 128)])
def test_carrier_numbers_are_the_fast_paths(design, knobs, size):
    car = Carrier(design, **knobs)
    got = car.cost(size)
    # The carrier's rung (sequential by default) is the fast path's rung.
    want = fast_point(design, msg_bytes=size, messages=N, peers=1, **knobs) \
        if design == "nic" else fast_point(design, msg_bytes=size, messages=N, qps=1,
                                           rung=car.rung.name)
    assert got.chunks == 1
    assert got.ii_cycles == want["ii_cycles"]
    assert got.latency_cycles == want["latency_cycles"]
    assert got.completion_cycles == want["completion_cycles"]
    assert got.wire_bytes == want["wire_bytes"]
    assert got.ctrl_bytes == want["ctrl_bytes"]
    assert got.ctrl_ops == sum(want["ctrl_ops"].values())


def test_conns_reach_the_engine_as_qps_and_peers():
    # 4096 QPs round robin over the context cache: the fast path's own figures for them.
    got = Carrier("rdma").cost(128, conns=4096)
    want = fast_point("rdma", msg_bytes=128, messages=2 * 4096, qps=4096)
    assert got.ii_cycles == want["ii_cycles"] and got.ctrl_bytes == want["ctrl_bytes"]
    assert got.ctrl_by_kind["ctx_misses"] == want["ctrl_ops"]["ctx_misses"]
    nic = Carrier("nic").cost(128, conns=300)              # peers capped at 254
    assert nic.ii_cycles == fast_point("nic", msg_bytes=128, messages=510,
                                       framing="compact", peers=254)["ii_cycles"]


def test_nic_cuts_messages_into_stores_of_max_payload():
    mp = NIC_DEFAULTS["max_payload"]                       # 1024 at the headline top
    car = Carrier("nic")
    full = fast_point("nic", msg_bytes=mp, messages=N, framing="compact", peers=1)
    rest = fast_point("nic", msg_bytes=7408 - 7 * mp, messages=N, framing="compact",
                      peers=1)
    c = car.cost(7408)                                     # 7 stores of 1024 + 1 of 240
    assert c.chunks == 8
    assert c.ii_cycles == 7 * full["ii_cycles"] + rest["ii_cycles"]
    assert c.latency_cycles == 7 * full["ii_cycles"] + rest["latency_cycles"]
    assert c.wire_bytes == 7 * full["wire_bytes"] + rest["wire_bytes"]
    assert c.wqes == c.doorbells == c.issuer_cycles == 0     # stores: no descriptors


def test_rdma_above_64k_is_costed_as_64k_writes_but_posted_once():
    car = Carrier("rdma", issuer="cpu")
    big = fast_point("rdma", msg_bytes=65536, messages=N, qps=1)
    rest = fast_point("rdma", msg_bytes=100, messages=N, qps=1)
    c = car.cost(2 * 65536 + 100)
    assert c.chunks == 3
    assert c.ii_cycles == 2 * big["ii_cycles"] + rest["ii_cycles"]
    assert c.wqes == 1
    assert c.issuer_cycles == 55 + 88


def test_issuer_costs_and_policies():
    # cpu: 55 per WQE + 88 per doorbell, one doorbell and one CQE (cost 0) per WQE.
    c = Carrier("rdma", issuer="cpu").cost(8)
    assert c.issuer_cycles == 143 and c.doorbells == 1 and c.cqes == 1
    assert c.cycles == max(c.ii_cycles, 143)
    # gpu (DeepEP policy): a doorbell per 4 WQEs -> 55 + 88 / 4 = 77.
    g = Carrier("rdma", issuer="gpu").cost(8)
    assert (g.issuer_cycles, g.doorbells, g.cqes) == (77, 0.25, 1)
    # NIXL's framework cost: 2,436 per descriptor, more than the engine's ii at 4 KiB.
    f = Carrier("rdma", issuer="cpu_framework").cost(4096)
    assert f.issuer_cycles == 2436 and f.cycles == 2436 > f.ii_cycles


def test_gpu_posts_on_every_qp_at_once_and_the_cpu_one_after_the_other():
    """The GPU issuer posts as DeepEP's warps do, a poster and a doorbell per QP: over
    248 QPs (EP32) a message occupies the sender max(ii, 77 / 248) cycles, the engine's
    ii; the CPU (a host thread or proxy) posts serially: max(ii, 143). A message's own
    posting takes the full 77 and 143 either way."""
    g = Carrier("rdma", issuer="gpu").cost(8, conns=248)
    assert g.issuer_cycles == 77 and g.cycles == max(g.ii_cycles, 77 / 248) == g.ii_cycles
    one = Carrier("rdma", issuer="gpu").cost(8, conns=1)
    assert one.cycles == max(one.ii_cycles, 77)
    c = Carrier("rdma", issuer="cpu").cost(8, conns=248)
    assert c.issuer_cycles == 143 and c.cycles == max(c.ii_cycles, 143)
    assert ISSUERS["gpu"].parallel and not ISSUERS["cpu"].parallel


def test_bad_parallel_flag_is_named(tmp_path):
    from analysis.workloads.issuers import load_issuers
    bad = tmp_path / "issuers.toml"
    bad.write_text('[x]\ntitle = "x"\nwqe_cycles = 1\ndoorbell_cycles = 1\n'
                   'cqe_cycles = 0\ndoorbell_batch = 1\nsignal_every = 1\n'
                   'status = "assumption"\nsource = "s"\nderivation = "d"\n'
                   'parallel = "yes"\n')
    with pytest.raises(ValueError, match="parallel"):
        load_issuers(bad)


def test_rung_overrides_the_issuer_policy():
    rung = Rung("batched", doorbell_batch=16, signal_every=64)
    c = Carrier("rdma", rung=rung, issuer="controller").cost(128)
    assert c.issuer_cycles == pytest.approx(1 + 1 / 16 + 1 / 64)
    assert (c.doorbells, c.cqes) == (1 / 16, 1 / 64)


def test_a_new_engine_plugs_in_as_a_rung():
    seen = []

    def engine(design, *, msg_bytes, messages, **knobs):
        seen.append((design, msg_bytes, messages, knobs))
        return {"ii_cycles": 4, "latency_cycles": 70, "completion_cycles": 90,
                "wire_bytes": msg_bytes + 100, "ctrl_ops": {"doorbells": 0.0625},
                "ctrl_bytes": 1, "host_bytes": msg_bytes + 30}
    car = Carrier("rdma", rung=Rung("pipelined", knobs={"depth": 99}, cost_fn=engine))
    c = car.cost(128, conns=3)
    assert (c.ii_cycles, c.latency_cycles, c.wire_bytes, c.host_bytes) == (4, 70, 228, 158)
    assert seen[-1] == ("rdma", 128, N, {"depth": 99, "qps": 3})
    assert car.name == "rdma-pipelined-none"


def test_issuer_profiles_are_sourced_and_derivations_hold():
    for p in ISSUERS.values():
        assert p.source and p.derivation and p.status in ("derived", "bound", "assumption")
    cpu = ISSUERS["cpu"]
    # Kalia et al.: 7 M requests/s per core unbatched, 16.6 M with doorbell batching (16).
    assert cpu.wqe_cycles + cpu.doorbell_cycles == pytest.approx(1e9 / 7.0e6, abs=1)
    assert cpu.wqe_cycles + cpu.doorbell_cycles / 16 == pytest.approx(1e9 / 16.6e6, abs=1)
    # NIXL issue 1514: 46 ms for 18,880 descriptors.
    assert ISSUERS["cpu_framework"].wqe_cycles == pytest.approx(46e6 / 18_880, abs=1)
    assert ISSUERS["gpu"].doorbell_batch == 4 and ISSUERS["gpu"].signal_every == 1


@pytest.mark.parametrize("kw,field", [
    (dict(design="tcp"), "design"), (dict(design="nic", framing="jumbo"), "framing"),
    (dict(design="rdma", rung="warp"), "rung"), (dict(design="rdma", issuer="fpga"), "issuer"),
    (dict(design="rdma", knobs={"qps": 0}), "qps"),
    (dict(design="rdma", knobs={"cache_entries": 17}), "cache_entries")])
def test_bad_carrier_names_the_field(kw, field):
    with pytest.raises(ValueError, match=field):
        Carrier(**kw)


@pytest.mark.parametrize("size,conns,field", [
    (0, 1, "msg_bytes"), (-8, 1, "msg_bytes"), (8, 0, "conns"), (1.5, 1, "msg_bytes")])
def test_bad_message_names_the_field(size, conns, field):
    with pytest.raises(ValueError, match=field):
        Carrier("nic").cost(size, conns)


# -- timing ----------------------------------------------------------------------------------

def test_phase_time_by_hand_tp2():
    # Llama-3-8B TP2, batch 1: 64 phases, each GPU sends 1 message of 8,192 bytes then 1
    # flag of 8 to its peer. Per phase: T_send = c(8192) + issuer(8) + latency(8);
    # T_recv = ii(8192) + ii(8) + max(latency - ii). The step: 64 phases in a chain.
    tr = decode_step("llama-3-8b", Deployment(batch=1, tp=2))
    for car in (Carrier("nic"), Carrier("rdma", issuer="cpu")):
        d, f = car.cost(8192, 1), car.cost(8, 1)
        send = d.cycles + f.issuer_cycles + f.latency_cycles
        recv = d.ii_cycles + f.ii_cycles + max(d.latency_cycles - d.ii_cycles,
                                               f.latency_cycles - f.ii_cycles)
        r = comm_time(tr, car)
        assert r.cycles == pytest.approx(64 * max(send, recv))
        assert r.moving_cycles == pytest.approx(64 * 8200 / DATAPATH_BYTES_PER_CYCLE)
        assert r.critical == tuple(range(64))
        assert r.ctrl_ops == pytest.approx(128 * (d.ctrl_ops + f.ctrl_ops))
        assert r.messages == 256


def test_fabric_profile_adds_its_path_to_every_phase_by_hand():
    """Llama-3-8B TP2, batch 1 (64 phases in a chain, one message and a flag per GPU):
    on the ``rack`` profile (spec/fabric_profiles.py: 75-cycle links, a 250-cycle
    switch) a message lands 2 x 75 + 250 - 6 = 394 cycles later than on ``board`` (the
    engines' own 6-cycle path), so each phase, sender and receiver alike, ends 394
    cycles later: the step by 64 x 394, for both designs."""
    tr = decode_step("llama-3-8b", Deployment(batch=1, tp=2))
    for car in (Carrier("nic"), Carrier("rdma", issuer="cpu")):
        board, rack = comm_time(tr, car), comm_time(tr, car, fabric="rack")
        assert rack.cycles - board.cycles == pytest.approx(64 * (2 * 75 + 250 - 6))
        assert rack.moving_cycles == board.moving_cycles
    with pytest.raises(ValueError, match="fabric"):
        comm_time(tr, Carrier("nic"), fabric="campus")


def test_phase_waits_for_the_slowest_sender_and_its_deps():
    b = TraceBuilder("decode_step", "toy", {}, 3)
    p0 = b.phase("a", "op", 0, (), 1, 2)
    b.add(p0, [0, 1, 2], [1, 2, 0], 64, [1, 1, 5], "data")      # GPU 2 sends 5
    p1 = b.phase("b", "op", 0, (p0,), 1, 2)
    b.add(p1, 0, 1, 64, 1, "data")
    p2 = b.phase("c", "op", 0, (), 1, 2)                           # independent
    b.add(p2, 1, 0, 64, 1, "data")
    tr = b.build()
    car = Carrier("nic")
    c = car.cost(64, 2)
    r = comm_time(tr, car)
    slow = 4 * c.cycles + c.latency_cycles                         # 5 back to back
    assert r.phase_cycles[0] == pytest.approx(slow)
    assert r.phase_end[1] == pytest.approx(slow + c.latency_cycles)
    assert r.phase_end[2] == pytest.approx(c.latency_cycles)
    assert r.cycles == pytest.approx(slow + c.latency_cycles)
    assert r.critical == (0, 1)


def test_ports_divide_the_occupancy():
    tr = kv_transfer("llama-3-8b", prompt_tokens=160)               # one GPU to one
    car = Carrier("nic")
    one, four = comm_time(tr, car), comm_time(tr, car, ports=4)
    d = car.cost(32_768, 1)        # a block: 16 tokens x 8 KV heads x 128 x 2 bytes
    n = 32 * 2 * 10                # 32 layers x K, V x 10 blocks
    f = car.cost(8, 1)
    # The receiver ends later than the sender here (the data's latency beyond its ii).
    tail = max(d.latency_cycles - d.ii_cycles, f.latency_cycles - f.ii_cycles)
    for r, k in ((one, 1), (four, 4)):
        send = n * d.cycles / k + f.latency_cycles
        recv = (n * d.ii_cycles + f.ii_cycles) / k + tail
        assert r.cycles == pytest.approx(max(send, recv))
    assert four.moving_cycles == pytest.approx(one.moving_cycles / 4)
    with pytest.raises(ValueError, match="ports"):
        comm_time(tr, car, ports=0)


def test_kv_posting_time_reproduces_nixl_issue_1514():
    # 18,880 descriptors per GPU x 2,436 ns = 46 ms of posting per GPU.
    tr = kv_transfer("llama-3-70b", prompt_tokens=118 * 16, tp=8)
    r = comm_time(tr, Carrier("rdma", issuer="cpu_framework"))
    per_gpu = r.issuer_cycles / 8
    assert per_gpu == pytest.approx((18_880 + 1) * 2436)
    assert r.wqes == 8 * 18_881
    assert r.cycles == pytest.approx(46e6, rel=0.01)         # issuer-bound: ~46 ms


def test_empty_trace_costs_nothing():
    r = comm_time(decode_step("llama-3-8b", Deployment(batch=4)), Carrier("rdma"))
    assert (r.cycles, r.messages, r.ctrl_ops) == (0, 0, 0)


# -- the NIC's stores from SMs ---------------------------------------------------------------

def test_sm_store_issue_cycles_by_hand():
    # A warp-wide st.v4 moves 32 threads x 16 bytes = 512 bytes; one instruction a cycle
    # at the H100 SXM5's 1.98 GHz boost clock (issuers.py cites the sources).
    car = Carrier("nic", issuer="sm")
    for size, stores in ((8, 1), (512, 1), (513, 2), (1500, 3), (7408, 15)):
        assert sm_store_issue_cycles(size) == pytest.approx(stores / 1.98)
        c = car.cost(size, 1)
        assert c.issuer_cycles == pytest.approx(stores / 1.98)
        assert c.cycles == max(c.ii_cycles, c.issuer_cycles)
        assert c.wqes == c.doorbells == c.cqes == 0
    assert Carrier("nic").cost(1500, 1).issuer_cycles == 0
    assert Carrier("nic", issuer="sm").name == "nic-compact-sm"


def test_sm_fence_before_each_flag_by_hand_tp2():
    # Llama-3-8B TP2, batch 1: 64 phases in a chain, each GPU sends 8,192 bytes (8 stores
    # of 1,024) then an 8-byte flag. The fence before the flag waits for the last data
    # store's completion: its last beat leaves ii - 1 cycles after its accept (compact
    # header of 8 bytes < a beat: the accept is its first beat; 17 beats, no credit
    # stall) and its credit is back 2 x link_latency + 1 cycles later (the NIC's rule,
    # docs/nic.md), so the flag waits 2 x link_latency past the store's ii.
    lat = NIC_DEFAULTS["link_latency"]
    car = Carrier("nic", issuer="sm")
    assert car.fence_cycles(8192, 1) == 2 * lat
    assert Carrier("nic").fence_cycles(8192, 1) == 0
    assert Carrier("rdma", issuer="gpu").fence_cycles(8192, 1) == 0
    tr = decode_step("llama-3-8b", Deployment(batch=1, tp=2))
    d, f = car.cost(8192, 1), car.cost(8, 1)
    assert d.issuer_cycles == pytest.approx(16 / 1.98)
    send = d.cycles + 1 / 1.98 + 2 * lat + f.latency_cycles
    recv = d.ii_cycles + f.ii_cycles + max(d.latency_cycles - d.ii_cycles,
                                           f.latency_cycles - f.ii_cycles)
    r = comm_time(tr, car)
    assert r.cycles == pytest.approx(64 * max(send, recv))
    assert r.fences == 128 and r.fence_cycles == pytest.approx(128 * 2 * lat)
    assert r.issuer_cycles == pytest.approx(128 * (17 / 1.98 + 2 * lat))
    assert comm_time(tr, Carrier("nic")).fences == 0


def test_sm_fence_needs_data_before_the_flag():
    b = TraceBuilder("decode_step", "toy", {}, 2)
    p0 = b.phase("a", "op", 0, (), 1, 1)
    b.add(p0, 0, 1, 8, 1, "flag")                                  # a flag alone
    r = comm_time(b.build(), Carrier("nic", issuer="sm"))
    assert r.fences == 0 and r.fence_cycles == 0


@pytest.mark.parametrize("issuer", ["gpu", "cpu", "SM", None])
def test_bad_nic_issuer_is_named(issuer):
    with pytest.raises(ValueError, match="issuer of the NIC"):
        Carrier("nic", issuer=issuer)


def test_sm_fence_on_a_fabric_waits_for_the_longer_credit_loop():
    # On ``rack`` (75-cycle links) the last store's credit comes back over the first
    # link: 2 x 75 + 1 cycles after its last beat left (spec.fabric_profiles), so each of
    # the 128 flags of the TP2 step waits 2 x 75 cycles past the store's ii.
    tr = decode_step("llama-3-8b", Deployment(batch=1, tp=2))
    r = comm_time(tr, Carrier("nic", issuer="sm"), fabric="rack")
    assert r.fence_cycles == pytest.approx(128 * 2 * 75)
