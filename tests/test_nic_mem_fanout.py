"""The NIC's loads and atomics toward many peers, the golden model alone
(pymodel/nic/mem_fanout.py, tb/nic/mem_point.py ``model_load_rate``): equal to the
16-node top's model where both run (that model equals the RTL: tests/test_cosim_nic_mem.py,
test_target_latency_loads_and_atomics_match_model and the L2 tests; the report's
co-simulated rows, 0 mismatches), the parameters' errors, and limits derived by hand:
the target memory's reads and the requester's downlink bound the rate."""

import pytest

from pymodel.fabric.switch_sparse import SparseSwitchModel
from pymodel.nic.mem_fanout import NicMemFanoutModel, wire_id
from pymodel.nic.mem_system import NicMemSystemModel
from tb.nic.cocotb_nic_mem import memories
from tb.nic.mem_point import (
    CMD_FIELDS,
    entry_bits_for_peers,
    landing_order,
    mem_commands,
    model_load_rate,
)

WORDS = 256


def _cmds(op, size, messages, peers):
    return [dict(zip(CMD_FIELDS, c, strict=True))
            for c in mem_commands(op, size, messages, peers, WORDS)[0]]


@pytest.mark.parametrize("peers,op,size,messages,fabric,framing,lat,tags", [
    (1, "load", 128, 48, "board", "l2", 300, None),
    (3, "load", 256, 40, "board", "compact", 0, 4),      # tag exhaustion
    (15, "atomic", 8, 40, "board", "l2", 20, None),
    (15, "load", 64, 120, "pod", "l2", 300, None),
])
def test_fanout_equals_the_sixteen_node_model(peers, op, size, messages, fabric, framing,
                                              lat, tags):
    """Node 0 round robin over ``peers`` targets: every beat node 0 sends, every write and
    landing at node 0, its command stamps, busy tags, the run's cycles, every memory and
    the targets' answers equal NicMemSystemModel's with ``peers + 1`` nodes."""
    cmds = _cmds(op, size, messages, peers)
    mem = memories(peers + 1, WORDS, 3)
    kw = dict(framing=framing, fabric=fabric, tags=tags, target_latency=lat, target_reads=2)
    a = NicMemSystemModel(nodes=peers + 1, **kw).run({0: cmds}, mem=mem)
    b = NicMemFanoutModel(peers, **kw).run(cmds, mem=mem)
    assert len(b["rsp"]) == messages
    for key in ("tx", "wr", "rsp", "cmd_stamps"):
        assert b[key] == a[key][0], key
    assert (b["cycles"], b["peak"], b["mem"]) == (a["cycles"], a["peak"][0], a["mem"])
    assert b["counters"]["req_ok"] == sum(a["counters"][p]["req_ok"] for p in a["counters"])
    assert b["counters"]["rsp_ok"] == messages
    assert [d for _, d, _ in b["issued"]] == [1 + k % peers for k in range(messages)]


def test_rate_equals_the_co_simulated_points_model():
    """model_load_rate at 1 and 15 peers (pod, L2, the level field's target memory) gives
    the ii and first latency that tb.nic.mem_point.run_mem_point derives from the 16-node
    top's model side (its landings and stamps) for the same commands."""
    for peers in (1, 15):
        r = model_load_rate("load", 128, 40, peers)
        cmds = _cmds("load", 128, 40, peers)
        run = NicMemSystemModel(nodes=peers + 1, framing="l2", fabric="pod",
                                target_latency=300, target_reads=2).run({0: cmds})
        land = [c for c, *_ in run["rsp"][0]]
        issue = run["cmd_stamps"][0]
        tags = [t for _, t, _, _ in run["rsp"][0]]
        # The request frames' tags in order: the lowest free tag at each issue.
        issued = [(t, None, None) for t in _issue_tags(run, issue)]
        pairs = landing_order(issued, [{"tag": t} for t in tags])
        first = next(i for i, k in pairs if k == 0)
        assert r["ii_cycles"] == (land[-1] - land[0]) / 39
        assert r["latency_cycles"] == land[first] - issue[0]
        assert r["peers"] == peers and r["tags"] == 1024


def _issue_tags(run, issue):
    """The tag of each request node 0 sent: parsed from its request beats."""
    from pymodel.nic.mem_frames import parse_mem_header
    from spec.formats.nic_mem import MemOp
    out = []
    for _, (data, _, first, _) in run["tx"][0]:
        f = parse_mem_header("l2", data.to_bytes(64, "little"))
        if first and f["mem"]["op"] != MemOp.RESPONSE.value:
            out.append(f["mem"]["tag"])
    assert len(out) == len(issue)
    return out


@pytest.mark.parametrize("kw,name", [
    (dict(op="read"), "op"), (dict(op="write"), "op"),
    (dict(msg_bytes=0), "msg_bytes"), (dict(msg_bytes=257), "msg_bytes"),
    (dict(messages=1), "messages"), (dict(peers=0), "peers"), (dict(peers=4097), "peers"),
    (dict(peers=True), "peers"), (dict(peers=2.0), "peers"),
])
def test_bad_rate_parameters_are_named(kw, name):
    args = {**dict(op="load", msg_bytes=128, messages=4, peers=2), **kw}
    with pytest.raises(ValueError, match=name):
        model_load_rate(**args)


def test_bad_model_input_is_named():
    with pytest.raises(ValueError, match="peers"):
        NicMemFanoutModel(0)
    with pytest.raises(ValueError, match="dst"):
        NicMemFanoutModel(4).run(_cmds("load", 64, 5, 5))
    sw = SparseSwitchModel(3, "l2", 4, width=64)
    with pytest.raises(ValueError, match="table_write"):
        sw.cycle(0, {}, table_write=(1, 2))


def test_rates_are_bound_by_the_targets_memory_and_the_downlink():
    """Hand bounds at pod, 128-byte loads (a response of 22 + 128 + 4 bytes: 3 beats of
    node 0's 64-byte downlink, so at most one load every 3 cycles), targets reading in 300
    cycles with 2 reads in flight (one target answers at most 2 loads per 300 cycles):
    loads k and k + 2 land at least 300 cycles apart at 1 peer (ii >= 150 over 25 loads),
    k and k + 30 at 15 peers (ii >= 10 over 151 loads, within 5 % of it: the link is not
    the bound there); 64 peers could answer 0.43 a cycle, more than the link's
    1/3, so the link binds (ii = 3); 4,096 peers (each asked once) the same. Never
    above the wire; more peers never slower. Fetch-and-adds at 1 peer fence their reads:
    at least 300 cycles each."""
    r1 = model_load_rate("load", 128, 25, 1)
    r15 = model_load_rate("load", 128, 151, 15)
    r64 = model_load_rate("load", 128, 256, 64)
    r4k = model_load_rate("load", 128, 600, 4096)
    assert r1["ii_cycles"] >= 150
    assert 10 <= r15["ii_cycles"] < 10.5
    assert r64["ii_cycles"] == r4k["ii_cycles"] == 3.0
    rates = [r["ops_per_s"] for r in (r1, r15, r64, r4k)]
    assert rates == sorted(rates) and max(rates) <= 1e9 / 3
    assert model_load_rate("atomic", 8, 6, 1)["ii_cycles"] >= 300
    # The requester issues a request a cycle: its 256 and 600 requests all leave before
    # the first answer comes back (1,000 cycles of pod's round trip), so all are busy at
    # once (within pod's 1,024 tags).
    assert (r64["peak_outstanding"], r4k["peak_outstanding"]) == (256, 600)


def test_entry_bits_name_the_peers():
    """2 busy/pending + 8 address (256 words) + 13 length + 3 op + the node field: 8 bits
    to 255 peers, 13 to name ids 0 to 4,096; the fan-out's wire ids stay 8-bit."""
    assert entry_bits_for_peers(256, 1) == entry_bits_for_peers(256, 255) == 34
    assert entry_bits_for_peers(256, 4096) == 2 + 8 + 13 + 3 + 13
    assert [wire_id(p) for p in (1, 255, 256, 4096)] == [1, 255, 1, 4096 - 255 * 16]


def test_tags_bound_the_fanout():
    """4 tags, 64 peers, fetch-and-adds on board (the targets answer in 20 cycles): the
    requester never has more than 4 busy, and its request k (k >= 4) leaves only after
    k - 3 responses landed (a tag is freed by a landing); every response lands, OK."""
    tags, n = 4, 40
    run = NicMemFanoutModel(64, "l2", "board", tags=tags, target_latency=20).run(
        _cmds("atomic", 8, n, 64))
    land = sorted(c for c, *_ in run["rsp"])
    stamps = run["cmd_stamps"]
    assert len(land) == len(stamps) == n and run["counters"]["rsp_ok"] == n
    assert run["peak"] == tags
    assert all(stamps[k] > land[k - tags] for k in range(tags, n))
