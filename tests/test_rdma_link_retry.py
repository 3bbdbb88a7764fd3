"""The RDMA engine over reliable links (RdmaTop's ``link_retry``), golden model only: the
fault-free reliable link's closed timing against the stepped ReliableLinkModel, what the
option costs per message (derived from the link's timing), the refusals, and the
parameter checks. The co-simulations are in tests/test_cosim_rdma_link_retry.py."""

import dataclasses
import random

import pytest

import pymodel.rdma.system as rdma_system
from analysis.rdma.point import reduce_run, run_model
from analysis.scenarios.rdma import writes_scenario
from pymodel.fabric.faulty_link import FaultSettings
from pymodel.fabric.reliable_link import ReliableLinkModel
from pymodel.fcs import fcs_bytes
from pymodel.packet import frame_chunks, pack_beat, unpack_beat
from pymodel.rdma.links import LinkLimit, ReliableSteps, ReliableStream, retry_counters
from pymodel.rdma.system import Config
from rtl.tops.rdma_top import RdmaTop
from spec.fabric import retry_sizes
from spec.formats.roce import ACK_HEADER, ICRC_BYTES, WRITE_RETH_HEADER, header_bytes
from spec.rdma import LINK_FRAME_BEATS
from spec.rdma_engine import LADDER
from tb.rdma.cocotb_rdma import check_params, config
from tb.rdma.testbench import member_port, retry_counter_port

BEST = LADDER[-1][0]
MESSAGES, WARMUP = 33, 1200


def _frame(rng, nbytes):
    body = bytes(rng.randrange(256) for _ in range(nbytes))
    return body + fcs_bytes(body)


def _traffic(seed, frames, latency):
    """``[(cycles, frame)]``: frames of 1 to LINK_FRAME_BEATS beats, some back to back,
    some after a gap, some with gaps inside."""
    rng, c, out = random.Random(seed), 0, []
    for _ in range(frames):
        n = rng.choice([1, 2, 4, rng.randrange(1, LINK_FRAME_BEATS + 1)])
        fr = _frame(rng, max(64 * n - rng.randrange(64) - 4, 1))
        beats = len(frame_chunks(fr, 64))
        c += rng.choice([0, 0, 1, 3, 2 * latency + 20])
        cycles = []
        for _ in range(beats):
            cycles.append(c)
            c += 1 + (rng.random() < 0.1)
        out.append((cycles, fr))
    return out


def _stepped(latency, traffic):
    """The stepped model's output ``[(cycles, frame)]`` and its counters."""
    model = ReliableLinkModel(64, latency, LINK_FRAME_BEATS)
    beats = {c: pack_beat(64, *ch) for cycles, fr in traffic
             for c, ch in zip(cycles, frame_chunks(fr, 64), strict=True)}
    out, cur, cyc = [], bytearray(), []
    c = 0
    while beats or model.busy():
        assert model.ready() or c not in beats
        flat = model.cycle(c, beats.pop(c, None))
        if flat is not None:
            data, nbytes, _, last = unpack_beat(64, flat)
            cur += data.to_bytes(64, "little")[:nbytes]
            cyc.append(c)
            if last:
                out.append((cyc, bytes(cur)))
                cur, cyc = bytearray(), []
        c += 1
    return out, model


@pytest.mark.parametrize("latency", [1, 6, 50])
def test_closed_timing_is_the_stepped_models(latency):
    traffic = _traffic(latency, 60, latency)
    stream = ReliableStream(latency)
    closed = [x for cycles, fr in traffic for x in stream.send(cycles, fr)]
    stepped, model = _stepped(latency, traffic)
    assert closed == stepped
    steps = ReliableSteps(latency, LINK_FRAME_BEATS, FaultSettings())
    steps.model = model
    assert stream.counters == steps.counters
    assert stream.counters["rx_frames_ok"] == len(traffic)


def test_fault_free_timing_from_the_contract():
    """ReliableLink's Timing: a frame of n beats taken in c .. c+n-1 leaves in
    c + n + latency + 1 .. (one cycle in the replay buffer, the wire, n - 1 cycles of
    store and forward, one to judge)."""
    rng = random.Random(3)
    for latency, n, c in ((1, 1, 0), (6, 4, 10), (6, 66, 5), (400, 2, 7)):
        fr = _frame(rng, 64 * n - 8)
        [(out, data)] = ReliableStream(latency).send(list(range(c, c + n)), fr)
        assert out == list(range(c + n + latency + 1, c + 2 * n + latency + 1))
        assert _stepped(latency, [(list(range(c, c + n)), fr)])[0] == [(out, data)]


def _writes(retry, faults=None, rung=BEST, messages=MESSAGES):
    p = dict(kind="writes", messages=messages, sizes=[128], qps=1, rung=rung, warmup=WARMUP)
    if faults:
        p.update(faults_ab=faults, faults_ba=dict(faults, seed=faults["seed"] + 1))
    cfg, knobs = config({"link_retry": retry}, p)
    v = writes_scenario(messages, [128], 1, depth=cfg.depth, mr_entries=cfg.mr_entries,
                        warmup=WARMUP, **knobs)
    cfg = dataclasses.replace(cfg, cq_base=v.cq_base, cq_log2=v.cq_log2)
    run = run_model(cfg, v)
    return run, reduce_run(v, run, messages)


def _beats(nbytes):
    return -(-nbytes // 64)


#: 128-byte WRITE ONLY (Ethernet + IPv4 + UDP + BTH + RETH, payload, ICRC, FCS) and ACK
#: (with AETH) frames, in beats.
WRITE_BEATS = _beats(header_bytes(WRITE_RETH_HEADER) + 128 + ICRC_BYTES + 4)
ACK_BEATS = _beats(header_bytes(ACK_HEADER) + ICRC_BYTES + 4)


def test_cost_of_the_reliable_links_follows_their_timing():
    """Per message, latency grows by the WRITE's extra cycles on the A->B link (n + 1,
    from the timing above), completion by those and the ACK's on B->A; the steady-state
    rate does not change."""
    assert (WRITE_BEATS, ACK_BEATS) == (4, 2)      # 206 and 66 bytes
    plain_run, plain = _writes(False)
    retry_run, retry = _writes(True)
    assert retry["ii_cycles"] == plain["ii_cycles"]
    assert [b - a for a, b in zip(plain["latency"], retry["latency"], strict=True)] == \
        [WRITE_BEATS + 1] * MESSAGES
    assert retry["completion_cycles"] - plain["completion_cycles"] == \
        WRITE_BEATS + 1 + ACK_BEATS + 1
    links = retry_run["links"]
    assert links["ab"]["rx_frames_ok"] == retry_run["req"]["frames"] == MESSAGES
    assert links["ba"]["rx_frames_ok"] == len(retry_run["wire_ba"]) > 0
    assert retry_run["mem_b"] == plain_run["mem_b"]


def test_stepped_without_faults_equals_the_closed_timing(monkeypatch):
    _, closed = _writes(True)
    monkeypatch.setattr(rdma_system, "faulty", lambda settings: True)
    _, stepped = _writes(True)
    assert stepped == closed


def test_link_retry_recovers_drops_below_the_engine():
    """A few % of frames dropped each way: the links resend them, the engine's go-back-N
    never fires, every WRITE lands once."""
    run, row = _writes(True, faults=dict(seed=5, drop_rate=2000))
    links = run["links"]
    assert links["ab"]["dropped"] + links["ba"]["dropped"] > 0
    assert links["ab"]["tx_resent_frames"] + links["ba"]["tx_resent_frames"] > 0
    assert run["req"]["retransmissions"] == 0 and run["req"]["timeouts"] == 0
    assert links["ab"]["rx_frames_ok"] == MESSAGES
    _, plain = _writes(False)
    assert len(row["completion"]) == MESSAGES and row["latency_cycles"] > \
        plain["latency_cycles"]


def test_a_full_replay_buffer_is_refused():
    """The engines have no backpressure: a beat offered while the replay buffer is full
    would be lost, so the model refuses the run (the RTL raises ``<link>_full``)."""
    tx_depth = retry_sizes(6, LINK_FRAME_BEATS)[0]
    link = ReliableSteps(6, LINK_FRAME_BEATS, FaultSettings(seed=1, drop_rate=65535))
    fr = _frame(random.Random(1), 64 * LINK_FRAME_BEATS - 8)
    with pytest.raises(LinkLimit, match="replay buffer is full"):
        c = 0
        for _ in range(tx_depth // LINK_FRAME_BEATS + 2):
            link.feed(list(range(c, c + LINK_FRAME_BEATS)), fr)
            for _ in range(LINK_FRAME_BEATS):
                link.deliver(c)
                link.take(c)
                c += 1


def test_a_bad_fcs_is_refused_on_a_reliable_link():
    bad = bytearray(_frame(random.Random(2), 100))
    bad[5] ^= 1
    with pytest.raises(LinkLimit, match="bad FCS"):
        ReliableStream(6).send([0, 1], bytes(bad))
    with pytest.raises(LinkLimit, match="bad FCS"):
        ReliableSteps(6, LINK_FRAME_BEATS, FaultSettings(drop_rate=1)).feed([0, 1],
                                                                            bytes(bad))


def _verilog_ports(top):
    return {"__".join(map(str, path)) for path, _, _ in top.signature.flatten(top)}


def test_counters_are_the_tops_ports():
    """Every counter the run reports and every setting it sets is a port of the top (by
    the Verilog name the testbench reads), and the plain top has none of the retry's."""
    ports = _verilog_ports(RdmaTop(link_retry=True))
    for link in ("ab", "ba"):
        for name in retry_counters():
            assert retry_counter_port(link, name) in ports, name
        for name in ("tag_rate", "ack_drop_rate", "ack_corrupt_rate", "drop_rate"):
            assert member_port(f"{link}_settings", name) in ports, name
    plain = _verilog_ports(RdmaTop())
    assert retry_counter_port("ab", "tx_frames") not in plain
    assert retry_counter_port("ab", "full") not in plain
    assert member_port("ab_settings", "tag_rate") not in plain
    assert member_port("ab_counters", "dropped") in plain


@pytest.mark.parametrize("value", [1, "yes", None])
def test_link_retry_must_be_a_bool(value):
    with pytest.raises(ValueError, match="link_retry"):
        RdmaTop(link_retry=value)
    with pytest.raises(ValueError, match="link_retry"):
        Config(link_retry=value)
    with pytest.raises(ValueError, match="link_retry"):
        check_params(dict(kind="writes", messages=1, sizes=[64], qps=1,
                          top={"link_retry": value}))


def test_params_accept_link_retry_and_its_settings():
    base = dict(kind="writes", messages=1, sizes=[64], qps=1)
    check_params(dict(base, top={"link_retry": True}, faults_ab={"tag_rate": 100},
                      expect={"ab_tx_resent_frames": 0}))
    with pytest.raises(ValueError, match="tag_rate.*link_retry"):
        check_params(dict(base, top={}, faults_ab={"tag_rate": 100}))
    with pytest.raises(ValueError, match="ab_tx_frames"):
        check_params(dict(base, top={}, expect={"ab_tx_frames": 1}))
