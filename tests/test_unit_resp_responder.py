"""The whole pipelined responder against its twin (Amaranth simulator), and both against
the store-and-forward responder's model for what they decide."""

import random

import pytest

from pymodel.packet import beats_to_frames, pack_beat
from pymodel.rdma.engine import Config, HostMemory, beats_of
from pymodel.rdma.engine import ResponderModel as StoreAndForwardModel
from pymodel.rdma.resp.responder import ResponderModel
from rtl.rdma.resp.responder import Responder
from rtl.rdma.resp.sizes import DROP_REASONS, SEQUENCE_COUNTERS
from tb.resp_bench import beat_schedule, run_responder
from tb.resp_frames import responder_scenario

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


def _nonzero(mem):
    return {a: v for a, v in mem.items() if v}


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
    seen = [k for k in DECISIONS if run.counters[k]]
    assert set(seen) >= {"frames_ok", "acks", "words", "misses", "writebacks", "fcs_bad",
                         "truncated", "malformed", "icrc_bad", "unknown_qp", "psn_nak",
                         "access_nak", "duplicates", "out_of_order"}, run.counters
    assert run.counters["fills_max"] >= 2


def test_bad_parameters_name_them():
    cases = [
        (dict(cache_entries=24), "cache entries"),
        (dict(cache_entries=8), "cache entries"),
        (dict(depth=1000), "depth"),
        (dict(mr_entries=3), "MR table"),
        (dict(rx_beats=10), "rx_beats"),
        (dict(rx_frames=0), "rx_frames"),
        (dict(jobs=5000), "jobs"),
        (dict(ack_jobs=0), "ack_jobs"),
        (dict(colour=3), "colour"),
    ]
    for kwargs, word in cases:
        with pytest.raises(ValueError, match=word):
            Responder(**kwargs)
        if "depth" not in kwargs and "entries" not in "".join(kwargs):
            with pytest.raises(ValueError, match=word):
                ResponderModel(**kwargs)
