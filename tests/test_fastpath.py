"""The fast path (pymodel.fastpath) against the cycle-level models (pymodel.points).

Every grid point runs both and asserts equal metric dicts and equal per-message cycles
(accept, remote write, completion, wire bytes of every message). No simulator; about
half a minute on one core (the cycle model costs ~4 ms per RDMA message, so 4096 QPs
are run for part of their first pass only; every other QP count wraps twice).
"""


import numpy as np
import pytest

from pymodel.fastpath import fast_messages, fast_point, fast_run
from pymodel.points import MESSAGE_KEYS, METRIC_KEYS, cycle_point, cycle_run

# Stores up to max_payload (1024 at the headline top) are one frame; the larger ones are
# cut in segments.
NIC_SIZES = (1, 8, 63, 64, 65, 128, 256, 512, 1024, 1025, 2048, 4096)


def _same(design, **kw):
    want, want_msgs = cycle_run(design, **kw)
    got, got_msgs = fast_run(design, **kw)
    assert list(got) == list(METRIC_KEYS)
    assert got == want
    for key in MESSAGE_KEYS:
        np.testing.assert_array_equal(got_msgs[key], want_msgs[key], err_msg=key)
    return got


# -- NIC ------------------------------------------------------------------------------

NIC_GRID = [(framing, size, peers) for peers in (1, 2, 7) for framing in ("compact", "l2")
            for size in NIC_SIZES]
# 63 peers: the cycle model's switch costs peers**2 per cycle, so a few sizes only.
NIC_GRID += [(framing, size, 63) for framing in ("compact", "l2") for size in (1, 63, 65, 256)]


@pytest.mark.parametrize("framing,msg_bytes,peers", NIC_GRID)
def test_nic_grid(framing, msg_bytes, peers):
    # Every destination gets at least two stores.
    _same("nic", msg_bytes=msg_bytes, messages=2 * peers + 2, framing=framing,
          peers=peers)


@pytest.mark.parametrize("knobs", [
    # Narrow datapaths: header-only beats before the accept, L2 padding beats.
    dict(width=8, max_payload=64, framing="l2", msg_bytes=130),
    dict(width=16, max_payload=128, framing="compact", msg_bytes=33),
    dict(width=32, max_payload=96, framing="l2", msg_bytes=200),
    # Long links: the sender waits for credits (periodic pattern over several stores).
    dict(width=64, max_payload=1024, framing="compact", msg_bytes=1024, link_latency=12),
    dict(width=64, max_payload=1024, framing="l2", msg_bytes=3000, link_latency=40),
    dict(width=8, max_payload=16, framing="compact", msg_bytes=100, link_latency=9),
])
def test_nic_other_tops(knobs):
    _same("nic", messages=9, peers=2, **knobs)


def test_nic_headline_numbers():
    # docs/nic.md: 128 B stores at the headline top, RTL = model.
    for framing, wire in (("l2", 172), ("compact", 160)):
        p = fast_point("nic", msg_bytes=128, messages=1000, framing=framing)
        assert (p["latency_cycles"], p["completion_cycles"], p["ii_cycles"],
                p["wire_bytes"], p["ctrl_ops"]["credit_updates"]) == (11, 7, 3, wire, 3)
        assert p["ctrl_bytes"] == 0


# -- RDMA -----------------------------------------------------------------------------

RDMA_GRID = [
    # (msg_bytes, qps, cache_entries, messages)
    *[(size, 1, 16, 12) for size in (8, 64, 128, 256, 1024, 4096)],
    (128, 16, 16, 40), (4096, 16, 64, 40), (8, 16, 256, 40),          # wrap twice
    (1024, 256, 16, 520), (64, 256, 256, 520),                        # wrap twice
    (256, 1024, 64, 2056),                                            # wrap twice
    (128, 4096, 256, 300),                                            # first pass only
]


@pytest.mark.parametrize("msg_bytes,qps,cache_entries,messages", RDMA_GRID)
def test_rdma_grid(msg_bytes, qps, cache_entries, messages):
    # A host memory of 2**15 words holds the largest scenario (1024 QPs x 3 WQEs).
    _same("rdma", msg_bytes=msg_bytes, messages=messages, qps=qps,
          cache_entries=cache_entries, depth=1 << 15)


@pytest.mark.parametrize("knobs", [
    # Long links: several ACKs outstanding, CQEs written in bursts.
    dict(msg_bytes=128, qps=20, link_latency=300, mem_latency=8, messages=48),
    dict(msg_bytes=1, qps=3, link_latency=1024, mem_latency=1, messages=30),
    # Fast host memory: the ACK is back before the next message is done.
    dict(msg_bytes=100, qps=17, link_latency=6, mem_latency=2, messages=40),
    # Segmented messages: 20 frames of a 256-byte path MTU.
    dict(msg_bytes=5000, qps=2, pmtu_log2=8, messages=6),
])
def test_rdma_other_regimes(knobs):
    _same("rdma", **knobs)


def test_rdma_headline_numbers():
    # docs/rdma.md: 1000 WRITEs of 128 B over 1 QP and over 4096 QPs, RTL = model.
    one = fast_point("rdma", msg_bytes=128, messages=1000, qps=1)
    many = fast_point("rdma", msg_bytes=128, messages=1000, qps=4096)
    assert (one["latency_cycles"], one["completion_cycles"], one["ii_cycles"]) == \
        (151, 285, 143)
    assert (many["latency_cycles"], many["completion_cycles"], many["ii_cycles"]) == \
        (279, 413, 207)


# -- both -----------------------------------------------------------------------------

@pytest.mark.parametrize("design,knobs", [("nic", {"framing": "l2"}), ("rdma", {})])
def test_one_message(design, knobs):
    p = _same(design, msg_bytes=64, messages=1, **knobs)
    assert p["ii_cycles"] == (0 if design == "nic" else None)


@pytest.mark.parametrize("design,knobs", [("nic", {"framing": "compact", "peers": 7}),
                                          ("rdma", {"qps": 4096})])
def test_a_million_messages(design, knobs):
    """A million messages come out whole and in order (the speed is measured by
    `make bench`, not asserted here)."""
    a = fast_messages(design, msg_bytes=256, messages=1_000_000, **knobs)
    assert set(a) == set(MESSAGE_KEYS)
    assert all(v.dtype == np.int64 and v.shape == (1_000_000,) for v in a.values())
    assert np.all(np.diff(a["accept"]) > 0)


BAD = [
    ("nic", dict(framing="compact", msg_bytes=0), "msg_bytes"),
    ("nic", dict(framing="compact", msg_bytes=8192), "msg_bytes"),
    ("nic", dict(framing="compact", msg_bytes=17, width=8, mem_words=2), "msg_bytes"),
    ("nic", dict(framing="compact", messages=0), "messages"),
    ("nic", dict(framing="compact", messages=2.0), "messages"),
    ("nic", dict(framing="compact", messages=True), "messages"),
    ("nic", dict(), "framing"),
    ("nic", dict(framing="eth"), "framing"),
    ("nic", dict(framing="l2", peers=0), "peers"),
    ("nic", dict(framing="l2", peers=255), "peers"),
    ("nic", dict(framing="l2", width=12), "width"),
    ("nic", dict(framing="l2", width=True), "width"),
    ("nic", dict(framing="l2", link_latency=0), "link_latency"),
    ("nic", dict(framing="l2", link_latency=1025), "link_latency"),
    ("nic", dict(framing="l2", mem_words=1), "mem_words"),
    ("nic", dict(framing="l2", max_payload=100), "max_payload"),
    ("nic", dict(framing="l2", max_payload=32), "max_payload"),
    ("nic", dict(framing="l2", max_payload=8192), "max_payload"),
    ("nic", dict(framing="l2", qps=2), "unknown knob"),
    ("rdma", dict(msg_bytes=0), "msg_bytes"),
    ("rdma", dict(msg_bytes=65537), "msg_bytes"),
    ("rdma", dict(qps=0), "qps"),
    ("rdma", dict(qps=4097), "qps"),
    ("rdma", dict(cache_entries=8), "cache_entries"),
    ("rdma", dict(cache_entries=24), "cache_entries"),
    ("rdma", dict(cache_entries=512), "cache_entries"),
    ("rdma", dict(mem_latency=0), "mem_latency"),
    ("rdma", dict(mem_latency=65), "mem_latency"),
    ("rdma", dict(link_latency=1025), "link_latency"),
    ("rdma", dict(depth=1000), "depth"),
    ("rdma", dict(mr_entries=3), "mr_entries"),
    ("rdma", dict(pmtu_log2=7), "pmtu_log2"),
    ("rdma", dict(pmtu_log2=13), "pmtu_log2"),
    ("rdma", dict(framing="l2"), "unknown knob"),
    ("ethernet", dict(), "design"),
]


@pytest.mark.parametrize("design,kw,name", BAD)
def test_bad_parameters_raise(design, kw, name):
    args = dict({"msg_bytes": 64, "messages": 4}, **kw)
    for run in (fast_point, cycle_point, fast_messages):
        with pytest.raises(ValueError, match=name):
            run(design, **args)


def test_cycle_model_too_big_for_host_memory():
    # The fast path has no host memory; the cycle model's scenario must fit ``depth``.
    assert fast_point("rdma", msg_bytes=4096, messages=300)["messages"] == 300
    with pytest.raises(ValueError, match="depth"):
        cycle_point("rdma", msg_bytes=4096, messages=300)
