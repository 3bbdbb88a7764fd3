"""Frames lost inside the switch (``NicSystemModel(..., switch_faults=True)``, the run's
``switch_drops``) under link retry: without the per-peer retry the dropped stores are
lost (a defined outcome: missing from memory, outstanding at their senders, timed out
and counted); with it every store lands exactly once.

The oracles come from the stores alone (:func:`tb.nic.store_oracle.oracle`) and the
frames the switch reports dropped."""

import pytest

from pymodel.nic.system import NicSystemModel
from tb.nic.store_oracle import mixed_stores, oracle

W, NODES, TIMEOUT = 16, 4, 512
#: Egress frame numbers dropped inside the switch: store frames and a completion.
DROPS = {0: [2, 9], 1: [4], 2: [1, 7], 3: [5]}


def model(framing, peer_retry):
    return NicSystemModel(W, framing, NODES, 2, 256, 128, 26, retry=True, completion="e2e",
                          timeout=TIMEOUT, peer_retry=peer_retry, peer_window=8,
                          switch_faults=True)


@pytest.mark.parametrize("framing", ["compact", "l2"])
def test_switch_drops_lose_stores_without_peer_retry(framing):
    """Link retry alone: each dropped store frame is missing from its receiver's memory
    (the rest land once), stays outstanding at its sender and times out; the switch
    counted every drop."""
    stores = mixed_stores(NODES, seed=3)
    r = model(framing, False).run(stores, list(range(NODES)), switch_drops=DROPS,
                                  until=3 * TIMEOUT)
    assert r["switch"]["drop_fault"] == sum(len(d) for d in DROPS.values())
    assert len(r["switch_dropped"]) == r["switch"]["drop_fault"]
    lost = {mid for _, mid in r["switch_dropped"] if mid is not None}
    assert lost, "a store frame dropped"
    kept = {p: [m["store"] for m in r["messages"] if m["src"] == p and m["id"] not in lost]
            for p in range(NODES)}
    mem, words = oracle(kept, NODES, W, 256)
    for q in range(NODES):
        assert r["mem"][q] == mem[q], f"node {q}: memory is not the stores that arrived"
        assert len(r["wr"][q][0]) == words[q]
    ports = [r["e2e"][q]["ports"] for q in range(NODES)]
    assert sum(sum(p["outstanding"]) for p in ports) >= len(lost)
    assert sum(sum(p["timeouts"]) for p in ports) > 0


@pytest.mark.parametrize("framing", ["compact", "l2"])
def test_peer_retry_recovers_switch_drops(framing):
    """With the per-peer retry: every store lands exactly once, every message completes,
    nothing stays outstanding; the drops (a completion among them) were counted and the
    senders resent."""
    stores = mixed_stores(NODES, seed=3)
    r = model(framing, True).run(stores, list(range(NODES)), switch_drops=DROPS)
    assert r["switch"]["drop_fault"] == sum(len(d) for d in DROPS.values())
    assert any(mid is None for _, mid in r["switch_dropped"]), "a completion dropped"
    mem, words = oracle(stores, NODES, W, 256)
    for q in range(NODES):
        assert r["mem"][q] == mem[q], f"node {q}: memory differs from the stores"
        assert len(r["wr"][q][0]) == words[q], f"node {q}: a word written twice or not"
    assert all(m["completion"] is not None for m in r["messages"])
    for q, peer in r["peer"].items():
        assert peer["una"] == peer["next_psn"], f"node {q}: frames outstanding"
    assert sum(sum(peer["resent"]) for peer in r["peer"].values()) > 0


def test_switch_faults_options():
    """Bad values stop with an error naming the option."""
    with pytest.raises(ValueError, match="switch_faults must be True or False"):
        NicSystemModel(W, "compact", NODES, 2, 256, 128, 26, switch_faults="yes")
    plain = NicSystemModel(W, "compact", NODES, 2, 256, 128, 26)
    with pytest.raises(ValueError, match="switch_drops: the model needs switch_faults"):
        plain.run({}, list(range(NODES)), switch_drops={0: [1]})
    with pytest.raises(ValueError, match=r"switch_drops\[0\]"):
        model("compact", True).run({}, list(range(NODES)), switch_drops={0: [3, 1]})
