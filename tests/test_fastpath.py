"""The fast path (analysis.fastpath) against the cycle-level models (analysis.points).

Every grid point runs both and asserts equal metric dicts and equal per-message cycles
(accept, remote write, completion, wire bytes of every message). No simulator; about
half a minute on one core (the cycle model costs ~4 ms per RDMA message, so 4096 QPs
are run for part of their first pass only; every other QP count wraps twice).
"""


import numpy as np
import pytest

from analysis.fastpath import fast_messages, fast_point, fast_run
from analysis.points import MESSAGE_KEYS, METRIC_KEYS, RDMA_DEFAULTS, cycle_point, cycle_run
from analysis.rdma.fastpath import EXACT_KEYS as RDMA_EXACT
from analysis.rdma.fastpath import TOLERANCES as RDMA_TOLERANCES
from analysis.workloads.decode_trace import dispatch_bytes
from pymodel.rdma.metrics import READ_BITS, RECORD_BITS
from spec.formats.roce import HOST_WORD_BITS
from spec.host import PROFILES
from spec.rdma_engine import LADDER, REQUESTER_DEFAULTS
from spec.rdma_responder import RX_BEATS

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

# -- both -----------------------------------------------------------------------------

def test_one_message():
    p = _same("nic", msg_bytes=64, messages=1, framing="l2")
    assert p["ii_cycles"] == 0


@pytest.mark.parametrize("design,knobs", [("nic", {"framing": "compact", "peers": 7})])
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
    ("nic", dict(framing="l2", attachment="cxl"), "attachment"),
    ("nic", dict(framing="l2", attachment="pcie", width=32), "width"),
    ("nic", dict(framing="l2", attachment="pcie", peers=16), "peers"),
    ("nic", dict(framing="l2", attachment="pcie", mem_words=8192), "mem_words"),
    ("rdma", dict(msg_bytes=0), "msg_bytes"),
    ("rdma", dict(msg_bytes=65537), "msg_bytes"),
    ("rdma", dict(qps=0), "qps"),
    ("rdma", dict(qps=4097), "qps"),
    ("rdma", dict(cache_entries=8), "cache_entries"),
    ("rdma", dict(cache_entries=24), "cache_entries"),
    ("rdma", dict(cache_entries=512), "cache_entries"),
    ("rdma", dict(link_latency=1025), "link_latency"),
    ("rdma", dict(pmtu_log2=7), "pmtu_log2"),
    ("rdma", dict(pmtu_log2=13), "pmtu_log2"),
    ("rdma", dict(host="pcie6"), "host"),
    ("rdma", dict(rung="faster"), "rung"),
    ("rdma", dict(ring_every=-1), "ring_every"),
    ("rdma", dict(framing="l2"), "unknown knob"),
    ("rdma", dict(windows=128), "windows"),
    ("rdma", dict(windows=768), "windows"),
    ("rdma", dict(windows=8192), "windows"),
    ("ethernet", dict(), "design"),
]


@pytest.mark.parametrize("design,kw,name", BAD)
def test_bad_parameters_raise(design, kw, name):
    args = dict({"msg_bytes": 64, "messages": 4}, **kw)
    runs = (fast_point, cycle_point, fast_messages) if design == "nic" else (cycle_point,)
    for run in runs:
        with pytest.raises(ValueError, match=name):
            run(design, **args)


RDMA_GRID = [
    (128, dict(rung="pipelined")), (128, dict(rung="+doorbell batching 16")),
    (128, dict(rung="+ACK coalescing")), (8, dict(rung="pipelined")),
    (1024, dict(rung="pipelined")), (128, dict(rung="+ACK coalescing", host="on_die")),
    (128, dict(rung="pipelined", qps=16)),
    (128, dict(rung="+ACK coalescing", qps=64, cache_entries=16)),
    (128, dict(rung="+ACK coalescing", qps=256, cache_entries=256)),
    # Contexts pinned until their ACKs (window state per cache entry): the rate follows
    # the round trip, not the fill.
    (128, dict(rung="+ACK coalescing", qps=64, cache_entries=16, windows=0)),
    (128, dict(rung="pipelined", qps=256, cache_entries=64, windows=0)),
    # Contexts of one word (a fill is one completion) and of 16 (two request TLPs at
    # the pcie MRRS of 512 bytes, eight completions at its RCB of 128), with misses.
    (128, dict(rung="+ACK coalescing", qps=64, cache_entries=16, qpc_bytes=64)),
    (128, dict(rung="pipelined", qps=64, cache_entries=16, qpc_bytes=1024)),
    # 256 QPs in turn over 64 entries with contexts of 16 words: the fills of a pass
    # over the entries (24 cycles each on host interface A's down direction) are served
    # before its WQE reads, so an entry is held far longer than on an idle engine.
    (128, dict(rung="pipelined", qps=256, cache_entries=64, qpc_bytes=1024)),
]


def _assert_rdma_agrees(fast, slow):
    """The fast path's RDMA point against the cycle model's: counts exact, timing within
    the stated tolerances."""
    for key in RDMA_EXACT:
        want = slow[key]
        if isinstance(want, dict):
            assert fast[key].keys() == want.keys(), key
            for k in want:
                assert fast[key][k] == pytest.approx(want[k], rel=1e-12, abs=1e-12), (key, k)
        else:
            assert fast[key] == pytest.approx(want, rel=1e-12), key
    for key, tol in RDMA_TOLERANCES.items():
        assert fast[key] == pytest.approx(slow[key], rel=tol, abs=1e-9), key


@pytest.mark.slow_variants("128B-pipelined-64-16-1024", reason=(
    "contexts of 16 words with misses: the 256-QP point over 64 entries runs the same fill "
    "path (two request TLPs, eight completions) in make test, the 64-QP point over 16 entries "
    "at qpc_bytes 64 the same miss rate"))
@pytest.mark.parametrize("size,kw", RDMA_GRID,
                         ids=[f"{s}B-" + "-".join(str(v) for v in kw.values())
                              for s, kw in RDMA_GRID])
def test_rdma_fast_path_against_the_cycle_model(size, kw):
    """The RDMA fast path: counts exact, timing within the stated tolerances."""
    fast = fast_point("rdma", msg_bytes=size, messages=600, **kw)
    slow = cycle_point("rdma", msg_bytes=size, messages=600, **kw)
    _assert_rdma_agrees(fast, slow)


#: WRITEs of several frames (4 KiB path MTU): the KV blocks of the inference section
#: (16 tokens of Llama-3-70B's K or V at TP8 are 4 KiB, 64 tokens 16 KiB) and DeepEP's
#: messages (7,168-byte FP8 dispatch, 14,336-byte BF16 combine), up to the engine's
#: 64 KiB. 1 QP, and 248 QPs (DeepEP's EP32 peers x 8 QPs, 248 > 16 cache entries: every
#: message misses) on the ``on_die`` host profile (the inference section's pairing), and
#: behind ``pcie`` at 1 QP. Few messages keep the cycle model to seconds; a message of
#: 12 KiB and more holds half the 512-word payload FIFO or more, so its frames' reads
#: wait for room frame by frame.
LARGE_WRITES = ([(kib, 1, "on_die") for kib in (4, 8, 12, 16, 32, 64)]
                + [(kib, 248, "on_die") for kib in (4, 8, 12, 16, 32, 64)]
                + [(kib, 1, "pcie") for kib in (12, 16)])


@pytest.mark.slow_variants("64KiB-*", reason=(
    "the Inference section of make report checks the fast path against the cycle model at the "
    "same sizes and QP counts (scripts/reporting/inference_fastpath.py); make test runs 4 to "
    "32 KiB at 1 QP and 4 to 16 KiB at 248 QPs"))
@pytest.mark.slow_variants("32KiB-248qp-on_die", reason=(
    "the Inference section of make report checks the fast path against the cycle model at the "
    "same sizes and QP counts (scripts/reporting/inference_fastpath.py)"))
@pytest.mark.parametrize("kib,qps,host", LARGE_WRITES,
                         ids=[f"{k}KiB-{q}qp-{h}" for k, q, h in LARGE_WRITES])
def test_rdma_fast_path_large_writes(kib, qps, host):
    """The fast path at 4 to 64 KiB WRITEs: counts exact, timing within the stated
    tolerances of the cycle model. The ii is also checked against the wire by hand: a
    WRITE of ``kib`` KiB is ``kib / 4`` frames of 4,096 B, each 64 beats of payload plus
    its header beat(s), so no design can send one faster than ``16 * kib`` cycles."""
    kw = dict(msg_bytes=kib * 1024, messages=24 if qps > 1 else 16, qps=qps, host=host,
              rung="pipelined", latency_messages=2)
    fast, slow = fast_point("rdma", **kw), cycle_point("rdma", **kw)
    _assert_rdma_agrees(fast, slow)
    assert fast["ii_cycles"] > 16 * kib


#: DeepEP's EP32 sends over 248 QPs (31 peers x 8) on the 16-entry context cache; the
#: carriers of the inference section run 2,000 messages a point, and from a few hundred
#: messages on the entries' recurrence (the pinned regime) sets the rate: 4 KiB WRITEs
#: (KV blocks of 16 tokens) and DeepEP's FP8 dispatch puts of DeepSeek-V3 (hidden 7,168:
#: 7,408 bytes).
PINNED_WRITES = (4096, dispatch_bytes(7168))


@pytest.mark.parametrize("size", PINNED_WRITES)
def test_rdma_pinned_state_fits_its_buffers(size):
    """In the pinned regime (a message in flight per cache entry) the state in flight is
    no more than the engine's buffers hold: both nodes' read tags, a window record per
    entry, the WQE and payload FIFOs full, a context fill per entry at each node and the
    responder's receive beats full (the capacities of :mod:`spec.rdma_engine`,
    :mod:`spec.rdma_responder` and the ``on_die`` profile, not the fast path's)."""
    entries = RDMA_DEFAULTS["cache_entries"]
    fast = fast_point("rdma", msg_bytes=size, messages=600, qps=248, host="on_die",
                      rung="pipelined", latency_messages=2)
    full = (READ_BITS * 2 * PROFILES["on_die"].tags + RECORD_BITS * entries
            + HOST_WORD_BITS * (REQUESTER_DEFAULTS["wqe_words"]
                                + REQUESTER_DEFAULTS["payload_words"] + 2 * entries
                                + RX_BEATS))
    assert 0 < fast["inflight_bits"] <= full


@pytest.mark.slow(reason=(
    "the cycle model takes about 15 s a point at 600 messages over 248 QPs; make test "
    "checks the pinned regime's state against its buffers "
    "(test_rdma_pinned_state_fits_its_buffers) and the 248-QP points at 24 messages"))
@pytest.mark.parametrize("size", PINNED_WRITES)
def test_rdma_fast_path_pinned_writes_against_the_cycle_model(size):
    """WRITEs over 248 QPs on 16 entries, long enough for the pinned regime: counts exact,
    timing within the stated tolerances of the cycle model."""
    kw = dict(msg_bytes=size, messages=600, qps=248, host="on_die", rung="pipelined",
              latency_messages=2)
    _assert_rdma_agrees(fast_point("rdma", **kw), cycle_point("rdma", **kw))


def test_rdma_one_qp_is_the_same_pinned_or_free():
    """A single QP has its own cache entry and never misses after the warm-up, so where
    its window state lives changes nothing: every rung's point is the same with
    ``windows`` 0 (pinned contexts) and the default (window state per QP), on both the
    fast path and the cycle model."""
    for rung, _ in LADDER:
        kw = dict(msg_bytes=128, messages=200, rung=rung)
        assert fast_point("rdma", windows=0, **kw) == fast_point("rdma", **kw), rung
    for rung in ("pipelined", LADDER[-1][0]):
        kw = dict(msg_bytes=128, messages=200, rung=rung)
        assert cycle_point("rdma", windows=0, **kw) == cycle_point("rdma", **kw), rung


def test_rdma_free_contexts_do_not_wait_for_the_ack():
    """4096 QPs round robin over 16 entries, every message a miss, WQEs and payloads
    read from host memory: an entry is held at least through its fill, the WQE read and
    the payload read, three PCIe reads (``read_latency`` 560 cycles each), so free
    contexts give an ii above 3 * 560 / 16 = 105 cycles; pinned ones are held further,
    through the frame, the link and the ACK, so their ii is higher. The fast path
    follows the cycle model in both (within its tolerance)."""
    kw = dict(msg_bytes=128, messages=300, qps=4096, cache_entries=16, rung="pipelined")
    pinned = fast_point("rdma", windows=0, **kw)["ii_cycles"]
    free = fast_point("rdma", **kw)["ii_cycles"]
    assert 3 * PROFILES["pcie"].read_latency / 16 < free < pinned
    for w, fast in ((0, pinned), (4096, free)):
        slow = cycle_point("rdma", windows=w, **kw)["ii_cycles"]
        assert fast == pytest.approx(slow, rel=RDMA_TOLERANCES["ii_cycles"])


#: ACK coalescing over interleaved QPs: (QPs, cache entries, ACKs of the run), the ACKs
#: worked out by hand from the rules of analysis.scenarios.rdma.coalesced_ack_requests
#: and the engine's per-QP count (every 16th message of a QP since its last request,
#: signalled ones, and where the host asks). 400 WRITEs of 128 B after the warm-up
#: message (message 0, alone on QP 0, signalled: 1 ACK); message j is on QP j % qps and
#: is signalled when (j // qps) % 64 == 63; a WRITE is 4 wire beats.
#: - 2 QPs: 200 messages each. QP 1 (i = 0..199) asks at its count (i = 15, 31, ...),
#:   its signalled i = 63, 127, 191 fall on the count, and at its last (199): 13. QP 0
#:   (i = 1..200, after the warm-up) asks at 16, 32, 48, its signalled 63, 79, 95, 111,
#:   127, 143, 159, 175, 191 and its last, 200: 13. 1 + 26 = 27.
#: - 4 QPs: 100 each; QPs 1..3 at 15, 31, 47, 63, 79, 95 and 99; QP 0 at 16, 32, 48,
#:   63 (signalled), 79, 95 and 100: 7 each, 1 + 28 = 29.
#: - 12 QPs: no message is signalled (j // 12 < 63); QP q has n_q = 34 (q = 1..4) or 33
#:   messages and asks ceil(n_q / 16) = 3 times: 1 + 36 = 37.
#: - 20 QPs over 256 entries (each QP its own entry at both ends): 20 messages each; a
#:   QP's next message is 20 messages (80 beats) on, so from its oldest unasked message
#:   to the end of the next one after its k-th unasked are 80 k + 4 beats, above the
#:   1,024 of the timer's guard at k = 13: each QP asks at its 13th and its 20th (last)
#:   message, 1 + 40 = 41. Over 16 entries (QPs share them) every message asks: 401.
ACK_POINTS = [(2, 16, 27), (4, 16, 29), (12, 16, 37), (20, 256, 41), (20, 16, 401)]


@pytest.mark.parametrize("qps,entries,acks", ACK_POINTS)
def test_rdma_fast_path_ack_coalescing_over_qps(qps, entries, acks):
    """The fast path's ACK requests follow the host's per-QP rule: the ACKs sent and
    received equal the cycle model's and the hand count."""
    kw = dict(msg_bytes=128, messages=400, qps=qps, cache_entries=entries,
              rung="+ACK coalescing")
    fast, slow = fast_point("rdma", **kw), cycle_point("rdma", **kw)
    for kind in ("acks_sent", "acks_received"):
        assert fast["ctrl_ops"][kind] == slow["ctrl_ops"][kind], kind
        assert round(fast["ctrl_ops"][kind] * 401) == acks, kind


def test_rdma_fast_path_refuses_what_it_does_not_cover():
    with pytest.raises(ValueError, match="steady state"):
        fast_point("rdma", msg_bytes=128, messages=2)
    with pytest.raises(ValueError, match="mr_cache"):
        fast_point("rdma", msg_bytes=128, messages=200, mr_cache=2)


def test_rdma_fast_path_refuses_a_backlog_behind_the_fills_at_node_b():
    """256 QPs over 256 entries, contexts of 1,024 bytes: each of the 256 compulsory
    misses at node B fills 8 completions of 128 bytes (the pcie RCB), each
    ceil((128 + 20) / 63) = 3 cycles on host interface B's down direction, 24 cycles a
    message, while the WRITEs of 128 bytes (4 beats) may arrive one per 4 cycles: 5/6
    of the frames wait. Over 300 messages (20.5 fill cycles a message on average) that
    is about 240 frames, above 0.9 of the 64 + 192 header entries and verify jobs: the
    responder would drop frames (the cycle model drops some and waits for the transport
    timeout), so the fast path refuses. Over 200 messages, 167 frames fit."""
    kw = dict(msg_bytes=128, qps=256, cache_entries=256, qpc_bytes=1024)
    with pytest.raises(ValueError, match="receive buffers would overflow"):
        fast_point("rdma", messages=300, **kw)
    assert fast_point("rdma", messages=200, **kw)["ii_cycles"] > 0


def test_rdma_cycle_point_ladder_ends():
    """The RDMA points API on the pipelined engine: one message at a time is more than
    a hundred times slower than the fully optimised engine, which runs at the wire's
    4 beats per 128-byte frame; RDMA points carry the host metrics."""
    slow = cycle_point("rdma", msg_bytes=128, messages=8, rung="sequential",
                       latency_messages=2)
    fast = cycle_point("rdma", msg_bytes=128, messages=200, rung="+ACK coalescing",
                       latency_messages=2)
    assert slow["ii_cycles"] > 100 * fast["ii_cycles"]
    assert fast["ii_cycles"] == 4
    assert fast["host_bytes"] < slow["host_bytes"]
    assert set(fast["host_tlps"]) == {"read_req", "write", "completion", "mmio"}
