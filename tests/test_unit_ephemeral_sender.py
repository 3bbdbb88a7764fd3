"""The ephemeral sender: RTL against its twin cycle for cycle in the Amaranth simulator
(random configurations), co-simulated on Icarus and Verilator, and its parameters
refused by name."""

import random

import pytest

from rtl.ephemeral.sender import EphemeralSender
from tb.amsim import run_sim
from tb.cosim import run_cosim
from tb.ephemeral_sender import messages, model_events

KEY_BITS = 12


def _rtl_events(entries, ack_slots, knobs, msgs, release, cycles):
    """The RTL in the Amaranth simulator for ``cycles`` cycles, message ``k`` offered from
    cycle ``release[k]`` until taken: ``(sends, closes, counters)`` as
    :func:`tb.ephemeral_sender.model_events`."""
    dut = EphemeralSender(entries, ack_slots, KEY_BITS)
    sends, closes, end = [], [], {}

    async def bench(ctx):
        for name in ("idle", "ack_every", "ii", "completion"):
            ctx.set(getattr(dut, name), knobs[name])
        k = 0
        for t in range(cycles):
            offered = k < len(msgs) and t >= release[k]
            ctx.set(dut.msg.valid, offered)
            if offered:
                ctx.set(dut.msg.payload, {"dest": msgs[k][0], "last": msgs[k][1]})
            if ctx.get(dut.sent.valid):
                assert offered and ctx.get(dut.msg.ready)
                s = ctx.get(dut.sent.payload)
                sends.append((t, s.entry, bool(s.asked), bool(s.opened)))
                k += 1
            if ctx.get(dut.closed.valid):
                closes.append((t, ctx.get(dut.closed.payload)))
            await ctx.tick()
        for name in ("opens", "closes", "full_waits", "stale", "used", "used_max",
                     "acks_pending"):
            end[name] = ctx.get(getattr(dut, name))

    run_sim(dut, bench, deadline_cycles=cycles + 10)
    return sends, closes, end


@pytest.mark.parametrize("seed", range(4))
def test_sender_rtl_equals_twin(seed):
    """Random pool sizes, idle times, ACK spacing, issue spacing, ACK delays, ACK queue
    sizes and posting gaps: every send (cycle, entry, asked, opened), every close (cycle,
    key) and the counters at the end equal the twin's."""
    rng = random.Random(seed)
    entries = rng.choice([4, 8, 16])
    lookahead = rng.randrange(0, entries + 1)     # at most entries: no deadlock
    knobs = dict(entries=entries, idle=rng.randrange(1, 40), ack_every=rng.randrange(1, 20),
                 ii=rng.randrange(1, 6), completion=rng.randrange(1, 120),
                 ack_slots=rng.choice([2, 4, 64]))
    n = 300
    msgs = messages(seed, n, rng.randrange(2, 3 * entries), lookahead)
    release, t = [], 0
    for _ in range(n):
        t += rng.choice([0, 0, 0, 1, 7])
        release.append(t)
    want_s, want_c, model = model_events(msgs, knobs, release)
    end = (want_s[-1][0] if want_s else 0) + 2 * knobs["completion"] + 200
    got_s, got_c, counters = _rtl_events(entries, knobs["ack_slots"],
                                         {k: knobs[k] for k in ("idle", "ack_every", "ii",
                                                                "completion")},
                                         msgs, release, end)
    assert got_s == want_s
    assert got_c == want_c
    assert counters == dict(model.pool.count, used=model.pool.used,
                            used_max=model.pool.used_max, acks_pending=len(model.acks))
    assert model.pool.count["closes"] > 0 and any(a for _, _, a, _ in want_s)


@pytest.mark.parametrize("kw,name", [(dict(entries=3, ack_slots=8), "entries"),
                                     (dict(entries=512, ack_slots=8), "entries"),
                                     (dict(entries=8, ack_slots=6), "ack_slots"),
                                     (dict(entries=8, ack_slots=1), "ack_slots")])
def test_bad_sender_parameters_are_named(kw, name):
    with pytest.raises(ValueError, match=name):
        EphemeralSender(**kw)


@pytest.mark.slow_variants("verilator", reason=(
    "Icarus runs the same top and messages in make test; the sender's RTL = twin "
    "comparisons run in the Amaranth simulator (test_sender_rtl_equals_twin)"))
def test_sender_cosim(sim, test_id):
    """The exported Verilog on Icarus and Verilator: 400 messages over 24 peers (uniform)
    through a pool of 8, ACK requests and CLOSEs; every send, CLOSE and the counters equal
    the twin's."""
    from rtl.tops.ephemeral_sender_top import EphemeralSenderTop

    run_cosim(EphemeralSenderTop(8, 16, 512), name="ephemeral_sender_8",
              test_module="tb.cocotb_ephemeral_sender", sim=sim, test_id=test_id,
              params=dict(entries=8, ack_slots=16, idle=12, ack_every=6, ii=2,
                          completion=40, lookahead=8, popularity="uniform", peers=24,
                          messages=400, seed=3))


@pytest.mark.slow(reason=(
    "exports a further top (the point's ACK queue and depth) and co-simulates the datapath "
    "on RdmaFabricTop (1,000 messages, about 2 minutes on Icarus); in make test the "
    "sender's RTL = twin runs on test_sender_cosim, the composition of the row (sources, "
    "the datapath's figures against the model's, the frames' wire bytes) in "
    "tests/test_ephemeral_sim_point.py, the options' checks in "
    "tests/test_sim_option_space.py; make sim's gap table co-simulates the same datapath "
    "(row 6, 0 mismatches)"))
def test_make_sim_ephemeral_point(tmp_path):
    """`make sim --design ephemeral` on a small point on Icarus: exit 0, no mismatch, and
    every figure co-simulated (the sender's flow and the engine's datapath at 1 QP on
    RdmaFabricTop) and equal to the model point's."""
    import json

    from scripts import sim
    from tb.ephemeral.sim_point import SOURCES

    rc = sim.main(["--sim", "icarus", "--design", "ephemeral", "--peers", "64",
                   "--pool-entries", "16", "--messages", "300", "--out", str(tmp_path)])
    assert rc == 0
    (row,) = json.loads((tmp_path / "point.json").read_text())
    assert (row["design"], row["peers"], row["pool_entries"]) == ("ephemeral", 64, 16)
    assert row["mismatches"] == 0
    assert row["sources"] == SOURCES
    for key, source in row["sources"].items():
        assert source.startswith("co-simulated"), key
        assert row[f"{key}_rtl"] is not None, key
        assert row[f"{key}_rtl"] == pytest.approx(row[f"{key}_model"]), key
