"""The whole pipelined responder against its twin (Amaranth simulator), and both against
the store-and-forward responder's model for what they decide."""

import random

import pytest

from pymodel.fields import pack
from pymodel.packet import beats_to_frames, pack_beat
from pymodel.rdma.config import Config as RdmaConfig
from pymodel.rdma.frames import write_frame
from pymodel.rdma.resp.responder import ResponderModel
from rtl.rdma.resp.responder import Responder
from spec.formats.roce import MR_LAYOUT, QPC_LAYOUT, OpCode
from spec.rdma_engine import ContextCacheShape
from spec.rdma_responder import DROP_REASONS, SEQUENCE_COUNTERS, MrTableShape, mr_table_base
from tb.rdma.reference_responder import Config, HostMemory, beats_of
from tb.rdma.reference_responder import StoreAndForwardResponder as StoreAndForwardModel
from tb.resp_bench import TbHost, beat_schedule, run_responder
from tb.resp_frames import A, B, responder_scenario

#: Counters both responders must agree on whatever the timing.
DECISIONS = ("frames_ok", "acks", "words", "lookups", "misses", "writebacks") \
    + DROP_REASONS + SEQUENCE_COUNTERS


def ack_frames(run):
    return beats_to_frames([pack_beat(64, b["data"], b["nbytes"], b["first"], b["last"])
                            for _, b in run.acks], 64)


def store_and_forward(scenario, cache_entries=16, depth=1 << 14, mr_entries=16):
    """The decisions of today's responder model on the same frames, one at a time."""
    cfg = Config(cache_entries=cache_entries, depth=depth, mr_entries=mr_entries,
                 qpc_base_b=scenario.qpc_base)
    mem = HostMemory(depth, scenario.mem)
    old = StoreAndForwardModel(cfg, mem, scenario.mr_table)
    acks = []
    for k, frame in enumerate(scenario.frames):
        start = k * 100_000
        sent = old.receive(frame, list(range(start, start + beats_of(len(frame)))))
        if sent is not None:
            acks.append(sent[1])
    counters = dict(old.count, lookups=old.cache.lookups, misses=old.cache.misses,
                    writebacks=old.cache.writebacks)
    return acks, counters, mem.words


def assert_each_frame_counted_once(run, frames):
    verdicts = ("frames_ok",) + DROP_REASONS + SEQUENCE_COUNTERS
    assert sum(run.counters[k] for k in verdicts) == len(frames)


def _nonzero(mem):
    return {a: v for a, v in mem.items() if v}


@pytest.mark.slow_variants("1-0.0-0.0", reason=(
    "the second variant runs the same mixed traffic with gaps and backpressure; RdmaTop's "
    "co-simulation runs the responder back to back"))
@pytest.mark.parametrize("seed,gaps,stall", [(1, 0.0, 0.0), (2, 0.2, 0.3)])
def test_mixed_traffic_matches_model_and_store_and_forward(seed, gaps, stall):
    rng = random.Random(seed)
    sc = responder_scenario(rng, qps=10, messages=60, qpn_range=48, bad_rate=0.15,
                            loss_rate=0.1, unknown_rate=0.08)
    schedule, _ = beat_schedule(sc.frames, rng, gaps)
    run = run_responder(sc.frames, sc.mem, sc.mr_table, qpc_base=sc.qpc_base, latency=30,
                        schedule=schedule, seed=seed, o_stall=stall, wr_stall=stall,
                        rd_stall=stall)
    acks, counters, mem = store_and_forward(sc)
    assert ack_frames(run) == acks
    assert {k: run.counters[k] for k in DECISIONS} == {k: counters[k] for k in DECISIONS}
    assert _nonzero(run.mem) == _nonzero(mem)
    assert run.counters["overflow"] == 0
    assert_each_frame_counted_once(run, sc.frames)
    seen = [k for k in DECISIONS if run.counters[k]]
    assert set(seen) >= {"frames_ok", "acks", "words", "misses", "writebacks", "fcs_bad",
                         "truncated", "malformed", "icrc_bad", "unknown_qp", "psn_nak",
                         "access_nak", "duplicates", "out_of_order"}, run.counters
    assert run.counters["fills_max"] >= 2


def test_bad_parameters_name_them():
    cases = [
        (dict(depth=1000), "depth"),
        (dict(rx_beats=10), "rx_beats"),
        (dict(rx_frames=0), "rx_frames"),
        (dict(jobs=5000), "jobs"),
        (dict(ack_jobs=0), "ack_jobs"),
        (dict(colour=3), "colour"),
    ]
    for kwargs, word in cases:
        with pytest.raises(ValueError, match=word):
            Responder(**kwargs)
        with pytest.raises(ValueError, match=word):
            ResponderModel(**kwargs)
    # The context cache's shape is checked where it is built (spec), and only a shape is
    # taken for it.
    for entries in (8, 24, 512):
        with pytest.raises(ValueError, match="cache_entries"):
            ContextCacheShape(entries)
    for bad in (16, dict(entries=16)):
        with pytest.raises(ValueError, match="ContextCacheShape"):
            Responder(bad)
        with pytest.raises(ValueError, match="ContextCacheShape"):
            ResponderModel(bad)
    # So is the MR table's.
    for entries in (1, 3, 512):
        with pytest.raises(ValueError, match="MR table"):
            MrTableShape(entries)
    for bad in (16, dict(entries=16)):
        with pytest.raises(ValueError, match="MrTableShape"):
            Responder(mr=bad)
        with pytest.raises(ValueError, match="MrTableShape"):
            ResponderModel(mr=bad)


def one_qp_stream(n, size=128, qpn=7, psn=(1 << 24) - 10, qpc_base=16):
    """``n`` back-to-back WRITE ONLY frames of ``size`` bytes to one QP, each with
    AckReq, consecutive PSNs (wrapping), all inside one MR."""
    rng = random.Random(n)
    mem = {qpc_base + qpn: pack(QPC_LAYOUT, valid=1, pmtu_log2=12, dest_qp=99,
                                expected_psn=psn, msn=5, dmac=A.mac, smac=B.mac,
                                dip=A.ip, sip=B.ip)}
    base = 1 << 18
    mr = [pack(MR_LAYOUT, valid=1, remote_write=1, key=0x1234_0000, base=base,
               length=1 << 19)]
    frames = [write_frame(OpCode.RC_RDMA_WRITE_ONLY, A, B, 0x100, qpn,
                          (psn + k) & 0xFFFFFF, True, rng.randbytes(size),
                          va=base + (k * size) % (1 << 19), rkey=0x1234_0000,
                          dma_length=size)
              for k in range(n)]
    return frames, mem, mr, qpc_base


@pytest.mark.slow(reason=(
    "RdmaTop's co-simulations run the responder back to back behind the pcie host interface "
    "(test_cosim_rdma.py: the headline rows and the ladder rungs)"))
@pytest.mark.parametrize("latency", [20, 563])
def test_back_to_back_128_byte_writes_keep_up(latency):
    """1000 WRITE ONLY frames of 128 bytes (206 bytes: 4 beats) back to back to one QP,
    from a cold cache: the first frame misses (a fill of ``latency`` cycles; 563 is
    what a fill takes over the host interface's pcie profile), the rest hit. Nothing is
    dropped, and once the backlog of the miss is gone the ACKs leave one per frame time
    (4 cycles), each 3 cycles after its frame's last beat."""
    n = 1000
    frames, mem, mr, qpc_base = one_qp_stream(n)
    schedule, spans = beat_schedule(frames)
    run = run_responder(frames, mem, mr, qpc_base=qpc_base, latency=latency,
                        schedule=schedule)
    cnt = run.counters
    assert cnt["frames_ok"] == cnt["acks"] == n and cnt["words"] == 2 * n
    assert cnt["overflow"] == 0 and cnt["misses"] == 1 and cnt["lookups"] == n
    assert [len(s) for s in spans] == [4] * n and spans[-1][-1] == 4 * n - 1
    starts = [c for c, b in run.acks if b["first"]]
    assert len(starts) == n
    lag = [a - s[-1] for a, s in zip(starts, spans, strict=True)]
    steady = [k for k in range(n) if lag[k] == 3]
    first_steady = steady[0]
    assert steady == list(range(first_steady, n))       # from then on, every frame
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert set(gaps[first_steady:]) == {4}
    # The backlog drains at the responder's own rate: an ACK every 2 cycles.
    assert first_steady > 1 and set(gaps[1:first_steady - 1]) == {2}
    # Payload words reach wr 4 and 5 cycles after the frame's last beat, in steady state.
    marks = [c for c, w in run.writes if w["mark"]]
    assert all(m - s[-1] == 5 for m, s in zip(marks[first_steady:], spans[first_steady:],
                                                strict=True))
    backlog = cnt["jobs_max"]
    assert backlog >= (latency - 10) // 4
    print(f"\nlatency {latency}: steady from frame {first_steady}, ACK lag 3, backlog "
          f"{backlog} jobs, {cnt['rx_beats_max']} beats, {cnt['rx_frames_max']} entries")


def test_many_qps_misses_overlap():
    """32 QPs in turn over 16 entries, 128-byte messages back to back, 100-cycle fills:
    every frame misses, up to one fill per entry is outstanding, a miss on an entry
    whose QP still has frames in flight waits for them; decisions as store and forward.
    (16 fills per 100 cycles is slower than the wire: the backlog grows but stays
    within the buffers for these 150 frames.)"""
    rng = random.Random(21)
    sc = responder_scenario(rng, qps=32, messages=150, sizes=[128], bad_rate=0,
                            dup_rate=0, loss_rate=0, access_rate=0, unknown_rate=0,
                            round_robin=True)
    run = run_responder(sc.frames, sc.mem, sc.mr_table, qpc_base=sc.qpc_base, latency=100)
    acks, counters, mem = store_and_forward(sc)
    assert ack_frames(run) == acks
    assert {k: run.counters[k] for k in DECISIONS} == {k: counters[k] for k in DECISIONS}
    assert _nonzero(run.mem) == _nonzero(mem)
    assert_each_frame_counted_once(run, sc.frames)
    cnt = run.counters
    assert cnt["frames_ok"] == 150 and cnt["misses"] == 150
    assert cnt["writebacks"] == 150 - 16 and cnt["fills_max"] == 16
    assert run.model.header.busy_waits > 0


@pytest.mark.slow_variants("4", reason="seed 3 runs the same overflow scenario")
@pytest.mark.parametrize("seed", [3, 4])
def test_receive_overflow_matches_model(seed):
    """Small receive buffers behind misses: frames that find no room are dropped whole
    (``overflow``), exactly when the model says; every frame is still counted once."""
    rng = random.Random(seed)
    sc = responder_scenario(rng, qps=20, messages=70, qpn_range=512,
                            sizes=[1, 64, 128, 300, 1000], loss_rate=0)
    schedule, _ = beat_schedule(sc.frames, rng, 0.05)
    run = run_responder(sc.frames, sc.mem, sc.mr_table, qpc_base=sc.qpc_base, latency=60,
                        schedule=schedule, sizes=dict(rx_beats=80, rx_frames=4, jobs=6),
                        seed=seed, wr_stall=0.2)
    cnt = run.counters
    assert cnt["overflow"] > 5 and cnt["frames_ok"] > 5 and cnt["psn_nak"] > 0
    assert cnt["rx_frames_max"] <= 4 and cnt["jobs_max"] <= 6 and 16 < cnt["rx_beats_max"] <= 80
    assert_each_frame_counted_once(run, sc.frames)


def _model_run(sc, schedule, latency, skip):
    """The twin alone with a test host, stepping every cycle or only the cycles that
    ``next_event`` (and the inputs) say can change something."""
    model = ResponderModel(qpc_base=sc.qpc_base, mr_table=sc.mr_table)
    host = TbHost(sc.mem, latency)
    acks, stepped, c, end = [], 0, 0, max(schedule)
    while c <= end or model.next_event(c - 1) is not None or host.pending:
        out = model.present()
        rd_taken, wr_taken, rd_data = host.step(c, out.rd_req, out.wr)
        model.step(c, schedule.get(c), rd_data, rd_req_taken=rd_taken, wr_taken=wr_taken)
        if out.o is not None:
            acks.append((c, out.o["data"]))
        model.commit()
        stepped += 1
        nxt = model.next_event(c)
        if skip and nxt is None:
            later = [t for t in (min((t for t in schedule if t > c), default=None),
                                 host.pending[0][0] if host.pending else None) if t]
            nxt = min(later) if later else c + 1
        c = nxt if skip else c + 1
    return acks, host.writes, model.counters, stepped


def test_model_idle_skipping_changes_nothing():
    """Stepping the twin only in the cycles ``next_event`` or an input name gives the
    same outputs, cycle for cycle, as stepping it in every cycle."""
    rng = random.Random(8)
    sc = responder_scenario(rng, qps=6, messages=40)
    schedule = {}
    for k in range(0, len(sc.frames), 3):             # bursts of 3 frames, 400 apart
        schedule.update(beat_schedule(sc.frames[k:k + 3], rng, 0.2, start=400 * k)[0])
    full = _model_run(sc, schedule, 40, skip=False)
    skipped = _model_run(sc, schedule, 40, skip=True)
    assert full[:3] == skipped[:3]
    assert full[2]["frames_ok"] > 20 and skipped[3] < full[3] * 0.8


@pytest.mark.slow_variants("4-4", "32-5", reason=(
    "the 2-line cache runs the same random traffic against the twin"))
@pytest.mark.parametrize("mr_cache,seed", [(2, 3), (4, 4), (32, 5)])
def test_mr_cache_matches_model_and_store_and_forward(mr_cache, seed):
    """The MR table in host memory behind an MR cache of ``mr_cache`` lines: the RTL and
    its twin cycle for cycle (run_responder compares every cycle and the counters), and
    the same decisions, ACK/NAKs and memory as the on-chip table's store-and-forward
    model; frames use 14 of the 16 MRs at random (hits, misses, conflicts), and a fifth
    of the messages break an MR rule (wrong key, bounds, alignment, invalid MR, no write
    right), which must still be NAKed."""
    rng = random.Random(seed)
    sc = responder_scenario(rng, qps=6, messages=50, qpn_range=32, access_rate=0.2)
    # Gaps between beats, so that a run of conflict misses (each a read of 40 cycles and
    # more) does not overflow the receive buffers (overflow drops are the responder's
    # defined outcome, but not the store-and-forward model's).
    schedule, _ = beat_schedule(sc.frames, rng, 0.9)
    run = run_responder(sc.frames, sc.mem, sc.mr_table, qpc_base=sc.qpc_base, latency=40,
                        schedule=schedule, seed=seed, rd_stall=0.2,
                        mr_shape=MrTableShape(cache=mr_cache))
    assert run.counters["overflow"] == 0
    acks, counters, mem = store_and_forward(sc)
    assert ack_frames(run) == acks
    assert {k: run.counters[k] for k in DECISIONS} == {k: counters[k] for k in DECISIONS}
    table = mr_table_base(1 << 14, 16)
    assert {a: v for a, v in _nonzero(run.mem).items() if a < table} == _nonzero(mem)
    assert run.counters["access_nak"] > 0
    assert_each_frame_counted_once(run, sc.frames)
    # Every MR read was one word at the table's address of an MR index.
    mr_reads = [a for _, a in run.reads if a >= table]
    assert len(mr_reads) == run.counters["mr_misses"]
    assert run.counters["mr_lookups"] >= run.counters["mr_misses"] >= len(set(mr_reads))
    if mr_cache < 16:               # fewer lines than MRs in use: conflicts
        assert run.counters["mr_misses"] > len(set(mr_reads))
    else:                           # every MR fits: compulsory misses only
        assert run.counters["mr_misses"] == len(set(mr_reads))


def test_mr_cache_hit_costs_nothing_and_miss_costs_a_read():
    """Back-to-back WRITE ONLY frames to one QP and one MR: with an MR cache the first
    frame waits for its MR read as well as its context fill (issued in parallel, the MR
    read one cycle later: the verify stage sees the miss when the frame reaches it), the
    others hit: every ACK leaves at most 1 cycle later than with the on-chip table."""
    frames, mem, mr, qpc_base = one_qp_stream(40)
    base = run_responder(frames, mem, mr, qpc_base=qpc_base, latency=100)
    cached = run_responder(frames, mem, mr, qpc_base=qpc_base, latency=100,
                           mr_shape=MrTableShape(cache=2))
    assert ack_frames(cached) == ack_frames(base)
    assert cached.counters["mr_lookups"] == 40 and cached.counters["mr_misses"] == 1
    delays = [c1 - c0 for (c0, _), (c1, _) in zip(base.acks, cached.acks, strict=True)]
    assert max(delays) <= 1 and delays[-1] >= 0


def test_mr_cache_bad_values_name_it():
    for bad in (1, 3, 512, -2, True):
        with pytest.raises(ValueError, match="mr_cache"):
            MrTableShape(cache=bad)
        with pytest.raises(ValueError, match="mr_cache"):
            RdmaConfig(mr_cache=bad)
