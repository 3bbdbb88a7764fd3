"""Open-loop traffic on the NIC model (analysis.load.nic): the saturated rate it assumes,
the release contract of the model's stores, the per-message arrays and the load row,
and the parameter checks. The co-simulation against the RTL is
tests/test_cosim_nic_load.py."""

import pytest

from analysis.load.nic import (
    MESSAGE_FIELDS,
    load_intent,
    load_plan,
    nic_load_run,
    pcie_service_cycles,
    run_plan,
    service_cycles,
)
from analysis.load.traffic import arrival_cycles, flows
from pymodel.nic.system import NicSystemModel, Store
from spec.formats.nic import header_bytes
from spec.load import DISTRIBUTION_KEYS
from spec.nic import link_credits

#: A small top: the L2 header spans two 16-byte beats.
TOP = dict(width=16, link_latency=2, mem_words=1024, max_payload=512)


def _model(width, framing, nodes=2, max_payload=512):
    return NicSystemModel(width, framing, nodes, 2, 1024, max_payload,
                          link_credits(width, max_payload))


@pytest.mark.parametrize("framing", ["l2", "compact"])
@pytest.mark.parametrize("width,msg_bytes", [(16, 1), (16, 64), (16, 128), (16, 700),
                                             (64, 128), (64, 8), (64, 1500)])
def test_service_cycles_is_the_back_to_back_rate(framing, width, msg_bytes):
    """The saturated rate the load runs assume (the frames' wire beats) is what a
    back-to-back model run of the same point does: one store every ``service_cycles``
    (stores longer than max_payload are several frames)."""
    m = _model(width, framing)
    stores = {0: [Store(1, 0, bytes(msg_bytes)) for _ in range(12)]}
    accept = [s["accept"] for s in m.run(stores, [0, 1])["stores"]]
    gaps = {b - a for a, b in zip(accept, accept[1:], strict=False)}
    assert gaps == {service_cycles(width, framing, msg_bytes, 512)}


@pytest.mark.parametrize("framing", ["l2", "compact"])
@pytest.mark.parametrize("width", [16, 64])
def test_a_released_store_is_the_same_store_later(framing, width):
    """A store released at cycle R on an idle system behaves as at release 0, every
    cycle shifted by R: its frame, writes and credits (the model's release contract).
    Its first body beat is accepted R plus the header beats that precede it."""
    m = _model(width, framing)
    payload = bytes(range(100))
    base = m.run({0: [Store(1, 64, payload)]}, [0, 1])
    for r in (1, 7, 300):
        late = m.run({0: [Store(1, 64, payload, release=r)]}, [0, 1])
        assert late["tx"][0][0] == base["tx"][0][0]
        assert late["tx"][0][1] == [c + r for c in base["tx"][0][1]]
        assert late["wr"][1][1] == [c + r for c in base["wr"][1][1]]
        assert late["cr"][0] == [c + r for c in base["cr"][0]]
        assert late["stores"][0]["accept"] == r + header_bytes(framing) // width
        assert late["mem"] == base["mem"]


def test_a_release_in_the_past_waits_for_the_store_before():
    """The player is in order: a store released before its predecessor is sent waits
    for it, and then goes at once (back to back)."""
    m = _model(16, "compact")
    stores = [Store(1, 0, bytes(64), release=50), Store(1, 64, bytes(64), release=3)]
    got = m.run({0: stores}, [0, 1])["stores"]
    beats = service_cycles(16, "compact", 64, 512)
    assert got[0]["accept"] == 50 and got[1]["accept"] == 50 + beats


def test_pcie_release_delays_the_host_write():
    """With the pcie attachment a release delays the host's posted write: released on
    an idle system, the store is the release-0 store shifted by R."""
    m = NicSystemModel(64, "l2", 2, 2, 256, 512, link_credits(64, 512),
                       attachment="pcie")
    base = m.run({0: [Store(1, 64, bytes(range(100)))]}, [0, 1])
    late = m.run({0: [Store(1, 64, bytes(range(100)), release=40)]}, [0, 1])
    for key in ("accept", "remote_write", "completion"):
        assert late["stores"][0][key] == base["stores"][0][key] + 40
    assert late["tx"][0][1] == [c + 40 for c in base["tx"][0][1]]


@pytest.mark.parametrize("pattern,nodes", [("pair", 2), ("incast", 4), ("incast", 8),
                                           ("all_to_all", 4), ("permutation", 4)])
def test_load_run_arrays_and_row(pattern, nodes):
    """Per message: the seeded arrivals and destinations, accept no earlier than arrival,
    the remote write and the credit after the accept; the row's distributions are the
    nearest-rank percentiles of remote_write - arrival and completion - arrival (worked
    out here by hand); every store lands once, where it was sent (the model's memories
    and writes against the stores' own intent)."""
    arrays, row = nic_load_run(pattern, nodes, 128, 12, 0.6, 5, **TOP)
    senders = sorted(flows(pattern, nodes, 12, 5))
    n = 12 * len(senders)
    assert set(arrays) == set(MESSAGE_FIELDS)
    assert all(len(v) == n for v in arrays.values())
    svc = service_cycles(16, "l2", 128, 512)
    for j, s in enumerate(senders):
        part = slice(12 * j, 12 * (j + 1))
        assert (arrays["sender"][part] == s).all()
        assert arrays["arrival"][part].tolist() == arrival_cycles(12, 0.6, svc,
                                                                  f"5/nic-load/{s}")
        assert arrays["dst"][part].tolist() == flows(pattern, nodes, 12, 5)[s]
    assert (arrays["accept"] >= arrays["arrival"]).all()
    assert (arrays["remote_write"] > arrays["accept"]).all()
    assert (arrays["completion"] > arrays["accept"]).all()
    lat = sorted((arrays["remote_write"] - arrays["arrival"]).tolist())
    comp = sorted((arrays["completion"] - arrays["arrival"]).tolist())
    for q, name in ((50, "p50"), (90, "p90"), (99, "p99")):
        k = -(-q * n // 100)                       # nearest rank: ceil(q/100 * n)
        assert row[f"latency_{name}_cycles"] == lat[k - 1]
        assert row[f"completion_{name}_cycles"] == comp[k - 1]
    assert row["latency_max_cycles"] == lat[-1]
    assert row["latency_p999_cycles"] == lat[-1]            # fewer than 1000 messages
    assert set(DISTRIBUTION_KEYS) <= set(row)
    assert row["offered_per_cycle"] == len(senders) * 0.6 / svc
    span = int(arrays["remote_write"].max() - arrays["remote_write"].min())
    assert row["achieved_per_cycle"] == (n - 1) / span
    assert row["messages"] == n and row["messages_per_sender"] == 12
    assert row["service_cycles"] == svc
    assert {k: row[k] for k in TOP} == TOP and row["attachment"] == "integrated"
    plan = load_plan(pattern, nodes, 128, 12, 0.6, 5, **TOP)
    _, _, want = run_plan(plan)
    mems, words = load_intent(plan)
    for p in range(nodes):
        data = b"".join(v.to_bytes(16, "little") for v in want["mem"][p])
        assert data == mems[p]
        assert sorted(a for a, _ in want["wr"][p][0]) == words[p]
    assert sum(len(v) for v in words.values()) == n * 8


def test_queueing_shows_in_latency_from_arrival():
    """Incast 7 -> 1 offers the destination 7 x 0.5 of a link: stores queue at the
    senders (accept well after arrival) and the latency from arrival grows far beyond
    an idle store's; the same point at a low load barely queues."""
    _, busy = nic_load_run("incast", 8, 128, 16, 0.5, 1, **TOP)
    _, idle = nic_load_run("incast", 8, 128, 16, 0.02, 1, **TOP)
    alone = _model(16, "l2").run({0: [Store(1, 0, bytes(128))]}, [0, 1])["stores"][0]
    assert busy["queue_max_cycles"] > 10 * busy["service_cycles"]
    assert busy["latency_p90_cycles"] > 4 * (alone["remote_write"] - alone["accept"])
    assert idle["latency_p50_cycles"] < busy["latency_p50_cycles"]
    # The destination's downlink is the limit: at most one store per service time.
    assert busy["achieved_per_cycle"] <= 1 / busy["service_cycles"]


def test_achieved_rate_follows_the_offered_rate_of_a_pair():
    """Below saturation a long pair run delivers what it is offered (within 5 %)."""
    _, row = nic_load_run("pair", 2, 128, 400, 0.5, 2, **TOP)
    assert abs(row["achieved_per_cycle"] / row["offered_per_cycle"] - 1) < 0.05


def test_runs_are_seeded():
    a, _ = nic_load_run("all_to_all", 4, 64, 10, 0.7, 9, burst=3, **TOP)
    b, _ = nic_load_run("all_to_all", 4, 64, 10, 0.7, 9, burst=3, **TOP)
    c, _ = nic_load_run("all_to_all", 4, 64, 10, 0.7, 10, burst=3, **TOP)
    assert all((a[f] == b[f]).all() for f in MESSAGE_FIELDS)
    assert (a["arrival"] != c["arrival"]).any()
    # bursts of 3: the arrivals of each sender come three to a cycle
    first = a["arrival"][:10].tolist()
    assert first[0] == first[1] == first[2] != first[3]


def test_stores_wrap_in_their_senders_region():
    """More stores than slots (8 of 128 B in a 1 KiB region): a sender's stores to one
    destination reuse its region's slots in turn, and the final memory holds the last
    store of each slot."""
    plan = load_plan("pair", 2, 128, 40, 0.5, 3, width=16, mem_words=128,
                     max_payload=512, link_latency=2)
    addrs = [s.addr for s in plan.stores[0]]
    assert addrs[:16] == [k * 128 for k in range(8)] * 2
    _, _, want = run_plan(plan)
    mems, _ = load_intent(plan)
    assert b"".join(v.to_bytes(16, "little") for v in want["mem"][1]) == mems[1]


@pytest.mark.parametrize("kwargs,word", [
    (dict(load=1.5), "load"), (dict(load=0), "load"), (dict(load=True), "load"),
    (dict(nodes=1), "nodes"), (dict(nodes=17), "nodes"),
    (dict(pattern="ring"), "pattern"), (dict(messages=0), "messages"),
    (dict(msg_bytes=0), "msg_bytes"), (dict(msg_bytes=8192), "msg_bytes"),
    (dict(burst=0), "burst"), (dict(framing="ipv4"), "framing"), (dict(seed="x"), "seed"),
    (dict(credits=3), "knob"), (dict(width=12), "width"), (dict(width=128), "width"),
    (dict(max_payload=100), "max_payload"), (dict(mem_words=0), "mem_words"),
    (dict(mem_words=16, msg_bytes=512), "msg_bytes"), (dict(link_latency=0), "link_latency"),
])
def test_bad_parameters_name_themselves(kwargs, word):
    args = dict(pattern="incast", nodes=4, msg_bytes=128, messages=4, load=0.5, seed=1)
    args.update(kwargs)
    with pytest.raises(ValueError, match=word):
        nic_load_run(**args)


def test_pcie_load_run():
    """Behind the pcie attachment (each store one host posted write): the saturated rate
    is a back-to-back model run's; a load run delivers every store where it was sent,
    none accepted before its arrival."""
    top = dict(width=64, link_latency=2, mem_words=512, max_payload=1024,
               attachment="pcie")
    plan = load_plan("incast", 4, 128, 12, 0.7, 4, **top)
    arrays, row, want = run_plan(plan)
    assert row["service_cycles"] == pcie_service_cycles("l2", 128, 2, 512, 1024)
    assert (arrays["accept"] >= arrays["arrival"]).all()
    assert row["queue_max_cycles"] > 0
    mems, words = load_intent(plan)
    data = b"".join(v.to_bytes(64, "little") for v in want["mem"][0])
    assert data == mems[0]
    assert sorted(a for a, _ in want["wr"][0][0]) == words[0]
    # one host write per store into each sender, one posted DMA write per store out
    # of the destination
    assert [want["host"][p]["dn_mmio_tlps"] for p in range(4)] == [0, 12, 12, 12]
    assert want["host"][0]["up_wr_tlps"] == 36


@pytest.mark.parametrize("kwargs,word", [
    (dict(width=16), "pcie"), (dict(msg_bytes=300), "pcie"), (dict(mem_words=8192), "pcie"),
    (dict(attachment="cxl"), "attachment"),
])
def test_bad_pcie_parameters_name_themselves(kwargs, word):
    args = dict(pattern="incast", nodes=4, msg_bytes=128, messages=4, load=0.5, seed=1,
                width=64, attachment="pcie")
    args.update(kwargs)
    with pytest.raises(ValueError, match=word):
        nic_load_run(**args)
