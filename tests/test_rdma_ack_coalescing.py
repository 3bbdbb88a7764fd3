"""ACK coalescing over interleaved QPs (analysis/scenarios/rdma.py, writes_scenario and
coalesced_ack_requests) on the cycle-level model: the engine counts per QP, the host
asks only on each QP's last WQE (and where the transport timer or shared cache entries
need it), so round robin over QPs coalesces as one QP does. Expected counts are worked
out by hand from the rules in the docstrings."""

import pytest

from analysis.rdma.point import build, run_model
from analysis.scenarios.rdma import ACK_SPAN_BEATS, coalesced_ack_requests
from spec.rdma_engine import ACK_COALESCE, LADDER

BEST = dict(LADDER)["+ACK coalescing"]


def _run(msg_bytes, messages, qps, knobs, cache_entries=16):
    cfg, v = build(msg_bytes, messages, qps=qps, cache_entries=cache_entries, knobs=knobs,
                   depth=1 << 20)
    return run_model(cfg, v)


@pytest.mark.parametrize("messages", [121, 401])
def test_round_robin_over_12_qps_coalesces_per_qp(messages):
    """The ladder's last rung (WQEs by MMIO, inline, 1 CQE in 64, AckReq every 16th
    message of a QP) over 12 QPs, 128 B, after the warm-up message (message 0, alone on
    QP 0, signalled: one ACK). Message j is on QP j % 12; QP q has n_q messages after
    the warm-up. No message is one of the 64th signalled ones (j // 12 < 63), so the
    ACKs of QP q are its 16th, 32nd, ... message and its last: ceil(n_q / 16). The
    timer's guard never acts: a QP's 15 unasked messages and the 11 x 15 of the other
    QPs between them are 12 x 16 x 4 = 768 beats at most (a 128-byte WRITE is 206
    bytes, 4 beats), below ACK_SPAN_BEATS. 121 messages: 1 + 12 x ceil(10 / 16) = 13
    ACKs, not one per WRITE."""
    assert 12 * 16 * 4 <= ACK_SPAN_BEATS
    per_qp = [len(range(q, messages, 12)) - (q == 0) for q in range(12)]
    want = 1 + sum(-(-n // 16) for n in per_qp)
    run = _run(128, messages, 12, BEST)
    assert run["resp"]["acks"] == want
    assert run["req"]["acks"] == want
    assert run["req"]["timeouts"] == 0 and run["req"]["retransmissions"] == 0
    assert run["req"]["retired"] == messages
    if messages == 121:
        assert want == 13


def test_without_coalescing_every_message_asks():
    """``ack_every`` 1 (the rungs below the last): no WQE carries the host's request and
    the engine asks on every message: one ACK per WRITE."""
    knobs = dict(BEST, ack_every=1, ack_frames=0)
    assert coalesced_ack_requests(50, [128], 12, warmup=1, **knobs) == [False] * 50
    run = _run(128, 49, 12, knobs)
    assert run["resp"]["acks"] == 49


def test_qps_sharing_cache_entries_ask_at_every_message():
    """64 QPs over 16 entries: QPs share entries, and a QP's unacknowledged message
    would pin an entry others wait for, so every WQE asks (the host's flag)."""
    assert coalesced_ack_requests(200, [128], 64, cache_entries=16, **BEST) == [True] * 200
    flags = coalesced_ack_requests(200, [128], 16, cache_entries=16, **BEST)
    assert sum(flags) == 16          # each QP's last message only


def test_timer_guard_of_large_messages():
    """4,096-byte WRITEs by MMIO (payload read, not inline), 1 CQE in 64, coalescing
    every 16, over 16 QPs. A WRITE ONLY of 4,096 bytes is 14 + 20 + 8 + 12 + 16 + 4,096
    + 4 + 4 = 4,174 bytes, 66 beats; a QP's next message comes 16 messages (1,056
    beats) after its previous one, more than ACK_SPAN_BEATS (1,024), so every message
    asks: no timer expires (16 messages of a QP unasked would span 16 x 16 x 96 cycles,
    far beyond the 4,096-cycle timer). Over 2 QPs the QP's next message is 2 x 66 = 132
    beats on: a message asks when the beats from its QP's oldest unasked message to the
    QP's next one would pass 1,024, 66 x (2i + 3) > 1,024 at its (i + 1)-th message
    with i = 7: every 8th message of a QP (QP 1's messages 126 and 127 are signalled,
    (j // 2) % 64 == 63, after its first three requests)."""
    knobs = dict(bf=1, signal_every=64, **ACK_COALESCE)
    flags = coalesced_ack_requests(401, [4096], 16, warmup=1, **knobs)
    assert all(flags[1:])
    run = _run(4096, 401, 16, knobs)
    assert run["req"]["timeouts"] == 0 and run["req"]["retransmissions"] == 0
    flags = coalesced_ack_requests(401, [4096], 2, warmup=1, **knobs)
    qp1 = [flags[j] for j in range(1, 401, 2)]          # QP 1: 200 messages
    assert [k for k, f in enumerate(qp1) if f][:3] == [7, 15, 23] and qp1[-1]
    run = _run(4096, 401, 2, knobs)
    assert run["req"]["timeouts"] == 0 and run["req"]["retransmissions"] == 0


def test_bad_cache_entries_is_named():
    with pytest.raises(ValueError, match="cache_entries"):
        coalesced_ack_requests(10, [128], 2, cache_entries=0, **BEST)


@pytest.mark.parametrize("entries,flags", [(256, 40), (16, 401)])
def test_cocotb_scenario_uses_the_cache_entries_in_use(entries, flags):
    """The co-simulation's WRITE scenario asks with the run's ``cache_entries``: 20 QPs
    of 128 B WRITEs on the last rung, 401 messages with the warm-up. Over 256 entries
    each QP has its own; a QP's next message is 20 messages (80 beats) on, so the host
    asks at the 13th unasked message of a QP (80 x 13 + 4 > ACK_SPAN_BEATS) and at its
    last (the 20th), 2 x 20 = 40 flags (the warm-up, signalled, is the engine's own
    request). Over 16 entries QPs share them and every WQE carries the flag."""
    from pymodel.fields import unpack
    from spec.formats.roce import WQE_ACK_REQ, WQE_LAYOUT
    from tb.rdma.cocotb_rdma import config, scenario
    params = dict(kind="writes", messages=401, sizes=[128], qps=20, rung="+ACK coalescing",
                  warmup=4000, cache_entries=entries)
    cfg, knobs = config({}, params)
    v, _, _ = scenario(params, cfg, knobs)
    assert sum(bool(unpack(WQE_LAYOUT, m.wqe[0])["flags"] & WQE_ACK_REQ)
               for m in v.messages) == flags
