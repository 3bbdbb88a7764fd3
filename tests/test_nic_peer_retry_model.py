"""The NIC's per-peer retry inside the system model (``NicSystemModel(...,
peer_retry=True)``): frames lost after the last reliable link (the downlink's fault
injector in front of NicRx, with and without link retry) are recovered end to end.

The oracles come from the stores alone: each receiver's memory holds exactly the
stores sent to it, each store's words are written once (a resend is never written
twice), every message completes at its sender, and nothing stays outstanding."""

import random

import pytest

from pymodel.nic.store import Store
from pymodel.nic.system import NicSystemModel
from spec.fabric_profiles import fabric_profile, nic_top_credits
from spec.formats.nic import PSN_BYTES, completion_beats, header_bytes
from tb.nic.store_oracle import oracle

W, NODES, TIMEOUT = 16, 3, 1024
#: 64-byte stores, one frame each: compact ceil((8 + 2 + 64 + 4) / 16) = 5 beats.
FRAME_BEATS = {"compact": 5, "l2": 6}


def model(framing, nodes=NODES, retry=False, window=None, peer_retry=True):
    return NicSystemModel(W, framing, nodes, 2, 256, 512, 68, retry=retry,
                          completion="e2e", timeout=TIMEOUT, peer_retry=peer_retry,
                          peer_window=window)


def payload(k, n=64):
    return bytes((k * 7 + i + 1) & 0xFF for i in range(n))


def mixed(nodes=NODES, count=20, seed=3):
    """Each node stores ``count`` stores of 8 to 64 bytes to random other nodes, each at
    an address of its own (so that the final memory does not depend on the order)."""
    rng = random.Random(seed)
    return {p: [Store((p + 1 + rng.randrange(nodes - 1)) % nodes, p * 1280 + 64 * k,
                      payload(p * 100 + k, rng.choice([8, 16, 40, 64])))
                for k in range(count)] for p in range(nodes)}


def check_exactly_once(r, stores, nodes):
    mem, words = oracle(stores, nodes, W, 256)
    for q in range(nodes):
        assert r["mem"][q] == mem[q], f"node {q}: memory differs from the stores"
        assert len(r["wr"][q][0]) == words[q], f"node {q}: a word written twice or not"
    assert all(m["completion"] is not None for m in r["messages"]), "a store not completed"
    for q, peer in r["peer"].items():
        assert peer["una"] == peer["next_psn"], f"node {q}: frames outstanding"
        assert peer["refused"] == 0


@pytest.mark.parametrize("framing", ["compact", "l2"])
def test_peer_retry_no_loss(framing):
    """Without a loss: the same memories as without peer_retry, no resend, no gap; each
    store frame carries its destination's PSN (0, 1, ... per source and destination)
    after the header."""
    stores = mixed()
    r = model(framing).run(stores, list(range(NODES)))
    check_exactly_once(r, stores, NODES)
    assert r["mem"] == model(framing, peer_retry=False).run(stores, list(range(NODES)))["mem"]
    h, seen = header_bytes(framing), {}
    for m in r["messages"]:
        key = m["src"], m["store"].dst
        psn = int.from_bytes(m["frame"][h:h + PSN_BYTES], "little")
        assert psn == seen.get(key, 0)
        assert m["frame"][h + PSN_BYTES:h + PSN_BYTES + m["store"].length] == m["store"].payload
        seen[key] = psn + 1
    for peer in r["peer"].values():
        assert not any(peer["resent"]) and not any(peer["gaps"])
        assert not any(peer["duplicates"]) and peer["ack_bad"] == 0


@pytest.mark.parametrize("retry", [False, True])
@pytest.mark.parametrize("framing", ["compact", "l2"])
def test_peer_retry_recovers_losses(framing, retry):
    """Store frames and completions lost on the downlinks (after the last reliable link;
    with link retry, too): every store lands once, every message completes; the
    receivers counted the FCS drops and the gaps, the senders resent."""
    stores = mixed()
    # Beats at least a frame apart (at most 6 beats): 6 frames lost.
    faults = {0: [7], 1: [5, 40, 90], 2: [3, 60]}
    r = model(framing, retry=retry).run(stores, list(range(NODES)), faults=faults)
    check_exactly_once(r, stores, NODES)
    assert sum(c["drop_fcs"] for c in r["counters"].values()) == 6
    assert sum(sum(p["resent"]) for p in r["peer"].values()) > 0
    assert sum(sum(p["gaps"]) for p in r["peer"].values()) > 0


@pytest.mark.parametrize("framing", ["compact", "l2"])
def test_peer_retry_lost_last_frame(framing):
    """The last of 40 frames lost: no later frame shows the gap, only the timeout sends
    the sender back; it lands once, after ``TIMEOUT`` cycles."""
    stores = {0: [Store(1, 64 * k, payload(k)) for k in range(40)]}
    r = model(framing, nodes=2).run(stores, [0, 1],
                                     faults={1: [39 * FRAME_BEATS[framing]]})
    check_exactly_once(r, stores, 2)
    assert r["counters"][1]["drop_fcs"] == 1
    assert r["peer"][0]["timeouts"][1] == 1 and r["peer"][0]["resent"][1] == 1
    assert r["peer"][1]["gaps"][0] == 0
    assert r["messages"][-1]["completion"] > TIMEOUT


@pytest.mark.parametrize("framing", ["compact", "l2"])
def test_peer_retry_lost_last_completion(framing):
    """The last completion (the flush, count 40) lost: the sender times out and resends
    from PSN 32; the receiver drops the resends as duplicates (not written again) and
    re-ACKs the first at once, which covers PSNs up to 40 and ends the going back
    (fewer than the 8 frames are resent)."""
    stores = {0: [Store(1, 64 * k, payload(k)) for k in range(40)]}
    lost = 2 * completion_beats(W, framing)          # completions 16, 32, then the flush
    r = model(framing, nodes=2).run(stores, [0, 1], faults={0: [lost]})
    check_exactly_once(r, stores, 2)
    assert r["peer"][0]["timeouts"][1] == 1
    assert 1 <= r["peer"][0]["resent"][1] < 8
    assert r["peer"][1]["duplicates"][0] == r["peer"][0]["resent"][1]
    assert r["counters"][1]["frames_ok"] == 40


@pytest.mark.parametrize("framing", ["compact", "l2"])
def test_peer_retry_window_throttles(framing):
    """A window of 4 slots: at most 4 frames unacknowledged; the stores still land once
    with losses, and the run takes longer than with the default window."""
    stores = mixed(count=12)
    faults = {1: [5], 2: [9]}
    small = model(framing, window=4).run(stores, list(range(NODES)), faults=faults)
    check_exactly_once(small, stores, NODES)
    big = model(framing).run(stores, list(range(NODES)), faults=faults)
    assert small["cycles"] > big["cycles"]


def test_peer_retry_forged_acks_and_duplicates():
    """Hostile: node 3 is configured with node 1's id (no source table) and stores 6
    frames to node 0, which node 0 accepts as source 1's stream; node 0's ACKs go to id
    1's port, node 1, which has sent nothing to node 0: each is counted bad and changes
    nothing. Node 3, never acknowledged, times out and resends: node 0 drops the resends
    as duplicates (PSN behind), counted, not written. Nodes 0 and 1 meanwhile store 20
    frames each to node 2: every one lands once and completes. The run stops at a fixed
    cycle (node 3 would resend for ever)."""
    stores = {0: [Store(2, 32 * k, payload(k, 32)) for k in range(20)],
              1: [Store(2, 1024 + 32 * k, payload(k + 50, 32)) for k in range(20)],
              3: [Store(0, 32 * k, payload(k + 90, 32)) for k in range(6)]}
    r = model("compact", nodes=4, window=8).run(stores, [0, 1, 2, 1], stop=4 * TIMEOUT)
    mem, words = oracle(stores, 4, W, 256)
    assert r["mem"][2] == mem[2] and len(r["wr"][2][0]) == words[2]
    assert all(m["completion"] is not None for m in r["messages"] if m["src"] in (0, 1))
    peer = r["peer"]
    for q in (0, 1):
        assert peer[q]["una"][2] == peer[q]["next_psn"][2] == 20
    assert peer[1]["ack_bad"] >= 1 and peer[1]["una"][0] == peer[1]["next_psn"][0] == 0
    assert peer[3]["timeouts"][0] >= 2 and peer[3]["una"][0] == 0
    assert peer[0]["duplicates"][1] >= 6 and peer[0]["expected"][1] == 6
    assert r["counters"][0]["frames_ok"] == 6          # the forger's first copies only


@pytest.mark.parametrize("kwargs,message", [
    (dict(peer_retry=True, completion="credit"), "peer_retry needs completion 'e2e'"),
    (dict(peer_retry="yes", completion="e2e"), "peer_retry must be True or False"),
    (dict(peer_retry=True, completion="e2e", peer_window=3), "window must be a power of two"),
    (dict(peer_retry=True, completion="e2e", peer_window=1 << 16),
     "window must be a power of two"),
    (dict(peer_retry=True, completion="e2e", destinations=512),
     "peer_retry: not with destinations"),
])
def test_peer_retry_bad_options(kwargs, message):
    """Bad options stop with an error naming the option."""
    framing = "l2" if "destinations" in kwargs else "compact"
    with pytest.raises(ValueError, match=message):
        NicSystemModel(W, framing, NODES, 2, 256, 512, 68, **kwargs)


def test_peer_retry_model_point():
    """The point runner's ``peer_retry``: the row's wire bytes per store are the PSN's
    2 bytes more (a 128-byte L2 store is not padded), its endpoint state adds each node's
    :func:`spec.nic.peer_retry_state_bits`; the co-simulated point checks it too."""
    from spec.nic import HEADLINE_TOP, peer_retry_state_bits
    from tb.nic.headline import model_point, run_point

    kw = dict(completion="e2e", latency_messages=2)
    off = model_point("l2", 128, 40, **kw)
    on = model_point("l2", 128, 40, peer_retry=True, peer_window=64, **kw)
    assert on["peer_retry"] is True
    assert on["wire_bytes_model"] == pytest.approx(off["wire_bytes_model"] + PSN_BYTES)
    assert on["ctrl_ops_model"] == off["ctrl_ops_model"]
    slot = header_bytes("l2") + PSN_BYTES + HEADLINE_TOP["max_payload"]
    nodes = HEADLINE_TOP["nodes"]
    assert (on["endpoint_state_bits_model"] - off["endpoint_state_bits_model"]
            == nodes * sum(peer_retry_state_bits(nodes, 64, slot)))
    with pytest.raises(ValueError, match="peer_retry needs completion 'e2e'"):
        model_point("l2", 128, 4, peer_retry=True)
    with pytest.raises(ValueError, match="window must be a power of two"):
        model_point("l2", 128, 4, peer_retry=True, peer_window=48, **kw)
    assert run_point("verilator", "l2", 128, 4, peer_retry=True, check_only=True,
                     **kw) is None                      # checked, nothing built
    with pytest.raises(ValueError, match="window must be a power of two"):
        run_point("verilator", "l2", 128, 4, peer_retry=True, peer_window=3,
                  check_only=True, **kw)


def _pcie_records(peer_retry, retry=False, faults=None):
    """The model of a 4-node PCIe top with 16 completion records (W = 64, 1 KiB frames)
    run on 128-byte stores (one posted write each, every fourth asking for an ACK)."""
    stores = {q: [Store((q + 1 + k % 3) % 4, 128 * k, payload(30 * q + k, 128),
                        ack_req=k % 4 == 3) for k in range(24)] for q in (0, 2)}
    credits = nic_top_credits(fabric_profile("board"), 64, 1024, retry, 2)
    m = NicSystemModel(64, "l2", 4, 2, 512, 1024, credits, retry=retry, attachment="pcie",
                       completion="e2e", timeout=TIMEOUT, records=16, peer_retry=peer_retry)
    return stores, m.run(stores, [0, 1, 2, 3], faults=faults)


@pytest.mark.parametrize("retry", [False, True])
def test_peer_retry_records_as_the_tracker(retry):
    """Behind PCIe with completion records, the sender standing for the tracker feeds the
    records as the tracker does: on a run without loss (128-byte stores: the PSN adds no
    beat at W = 64) every record, its cycle in host memory and every store's completion
    equal those of the top without the per-peer retry."""
    _, off = _pcie_records(False, retry)
    _, on = _pcie_records(True, retry)
    assert any(on["records"].values())
    assert on["records"] == off["records"]
    assert [s["completion"] for s in on["stores"]] == [s["completion"]
                                                       for s in off["stores"]]


def test_peer_retry_records_under_loss():
    """Frames lost after the switch, behind PCIe with records: each node's memory below
    the ring holds the stores sent to it, every store completes, and per destination the
    records' counts rise with each record and end at the frames sent there."""
    stores, r = _pcie_records(True, faults={1: [2, 20], 3: [5]})
    assert sum(r["counters"][q]["drop_fcs"] for q in range(4)) == 3
    assert sum(sum(r["peer"][q]["resent"]) for q in range(4)) > 0
    mem, _ = oracle(stores, 4, 64, 512)
    for q in range(4):
        assert r["mem"][q][:512 - 16] == mem[q][:512 - 16]
    assert all(s["completion"] is not None for s in r["stores"])
    for q, ss in stores.items():
        last = {}
        for _, d, count in r["records"][q]:
            assert count > last.get(d, 0)
            last[d] = count
        assert last == {d: sum(s.dst == d for s in ss) for d in {s.dst for s in ss}}
