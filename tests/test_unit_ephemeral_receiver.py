"""The ephemeral receiver: its rules on hand-written hostile sequences (expectations from
docs/ephemeral.md's table), RTL against its twin cycle for cycle in the Amaranth simulator
on random hostile streams with the model-free invariants, co-simulated on Icarus and
Verilator, and its parameters refused by name."""

import random

import pytest

from analysis.scenarios.fuzz_ephemeral import hostile
from rtl.ephemeral.receiver import EphemeralReceiver
from spec.ephemeral import RECV_OUTCOMES, check_receiver
from tb.amsim import run_sim
from tb.cosim import run_cosim
from tb.ephemeral_receiver import invariant_errors, model_events, run_end

KEY_BITS = 12


def _rtl_events(entries, idle, pkts, cycles):
    """The RTL in the Amaranth simulator, packet ``k`` offered in cycle ``cycles[k]``:
    ``(outcomes, delivers, acks, closes, counters)`` as
    :func:`tb.ephemeral_receiver.model_events`, over as many cycles."""
    dut = EphemeralReceiver(entries, KEY_BITS)
    at = dict(zip(cycles, pkts, strict=True))
    end = run_end(cycles, entries, idle)
    outs, delivers, acks, closes, counters = [], [], [], [], {}

    async def bench(ctx):
        ctx.set(dut.idle, idle)
        for t in range(end):
            pkt = at.get(t)
            ctx.set(dut.pkt.valid, pkt is not None)
            if pkt is not None:
                ctx.set(dut.pkt.payload, dict(zip(("src", "psn", "open", "close", "off"), pkt,
                                                  strict=True)))
                assert ctx.get(dut.pkt.ready)
            if ctx.get(dut.outcome.valid):
                o = ctx.get(dut.outcome.payload)
                outs.append((t, RECV_OUTCOMES[o.outcome], o.entry))
            if ctx.get(dut.deliver.valid):
                d = ctx.get(dut.deliver.payload)
                delivers.append((t, d.entry, d.src, d.psn))
            if ctx.get(dut.ack.valid):
                a = ctx.get(dut.ack.payload)
                acks.append((t, a.src, a.psn))
            if ctx.get(dut.expired.valid):
                closes.append((t, ctx.get(dut.expired.payload)))
            await ctx.tick()
        for name in RECV_OUTCOMES + ("used", "used_max"):
            counters[name] = ctx.get(getattr(dut, name))

    run_sim(dut, bench, deadline_cycles=end + 10)
    return outs, delivers, acks, closes, counters


def _both(entries, idle, pkts, cycles):
    """RTL and twin on the same arrivals; asserts they agree event for event and returns
    the RTL's ``(outcomes, delivers, acks, closes, counters)``."""
    got = _rtl_events(entries, idle, pkts, cycles)
    outs, delivers, acks, closes, twin = model_events(pkts, cycles, entries, idle)
    assert got[0] == outs
    assert got[1] == delivers
    assert got[2] == acks
    assert got[3] == closes
    assert got[4] == dict(twin.count, used=twin.pool.used, used_max=twin.pool.used_max)
    return got


def test_receiver_rules_on_hostile_sequences():
    """Each row of the rules' table in RTL (and its twin, equal): an open packet whose
    context's first is missing (a nonzero offset) refused as a gap, the first's resend
    opening the context at its PSN and the refused one then delivered, a duplicate
    re-ACKed, a gap refused, a reopen after a lost CLOSE (its first packet lost too: the
    second refused, the first reopens), a CLOSE, a late packet of the closed context
    (stale), a late CLOSE (stale); then one sender's forged opens exhaust the pool of 4:
    refused as full while the genuine context still delivers, and the forged contexts
    close after ``idle`` without arrivals, after which an open is taken. Expectations
    written from the table."""
    idle, src = 20, 7
    seq = [  # (packet (src, psn, open, close, off), expected outcome)
        ((src, 100, 1, 0, 1), "gap"),         # the context's second; its first, 99, lost
        ((src, 99, 1, 0, 0), "opened"),       # the first, resent: opens at its PSN
        ((src, 100, 1, 0, 1), "delivered"),   # the second, resent (go-back-N)
        ((src, 99, 1, 0, 0), "duplicate"),    # resent, its ACK was lost
        ((src, 101, 0, 0, 0), "delivered"),
        ((src, 104, 0, 0, 0), "gap"),         # 102, 103 lost
        ((src, 901, 1, 0, 1), "gap"),         # the sender closed (CLOSE lost), reopened at
        ((src, 900, 1, 0, 0), "reopened"),    # 900, which was lost: refused, then resent
        ((src, 901, 1, 0, 1), "delivered"),
        ((src, 0, 0, 1, 0), "closed"),
        ((src, 901, 0, 0, 0), "stale"),       # a late copy after the CLOSE
        ((src, 0, 0, 1, 0), "stale"),         # a repeated CLOSE
        ((1, 50, 1, 0, 0), "opened"),         # the genuine sender that keeps delivering
        ((2000, 7, 1, 0, 0), "opened"),       # forged opens from one sender
        ((2001, 7, 1, 0, 0), "opened"),
        ((2002, 7, 1, 0, 0), "opened"),
        ((2003, 7, 1, 0, 0), "full"),
        ((2004, 7, 1, 0, 0), "full"),
        ((2005, 7, 1, 0, 3), "gap"),          # not a first packet: no open, not full
        ((1, 51, 0, 0, 0), "delivered"),
        ((1, 51, 0, 0, 0), "duplicate"),
        ((1, 52, 0, 0, 0), "delivered"),
    ]
    pkts = [p for p, _ in seq]
    cycles = list(range(1, len(pkts) + 1))
    # Keep source 1 alive while the forged contexts idle out, then try an open again.
    for k in range(4):
        pkts.append((1, 53 + k, 0, 0, 0))
        cycles.append(cycles[-1] + idle // 2)
    pkts.append((2005, 9, 1, 0, 0))
    cycles.append(cycles[-1] + 1)
    outs, delivers, acks, closes, counters = _both(4, idle, pkts, cycles)
    assert [o for _, o, _ in outs] == [o for _, o in seq] + ["delivered"] * 4 + ["opened"]
    assert [(s, p) for _, _, s, p in delivers] == [
        (7, 99), (7, 100), (7, 101), (7, 900), (7, 901), (1, 50), (2000, 7), (2001, 7),
        (2002, 7), (1, 51), (1, 52), (1, 53), (1, 54), (1, 55), (1, 56), (2005, 9)]
    assert [(s, p) for _, s, p in acks] == [
        (7, 99), (7, 100), (7, 99), (7, 101), (7, 900), (7, 901), (1, 50), (2000, 7),
        (2001, 7), (2002, 7), (1, 51), (1, 51), (1, 52), (1, 53), (1, 54), (1, 55),
        (1, 56), (2005, 9)]
    # The forged contexts closed on idle (the genuine one did not), so 2005 opens; after
    # the last packet every context closes on idle.
    assert sorted(k for t, k in closes if t < cycles[-1]) == [2000, 2001, 2002]
    assert sorted(k for t, k in closes if t > cycles[-1]) == [1, 2005]
    assert counters["full"] == 2 and counters["stale"] == 2 and counters["closed"] == 1
    assert counters["gap"] == 4
    assert sum(counters[o] for o in RECV_OUTCOMES) == len(pkts)
    assert invariant_errors(pkts, outs, delivers,
                            {o: counters[o] for o in RECV_OUTCOMES}) == []


@pytest.mark.parametrize("seed", range(4))
def test_receiver_rtl_equals_twin_on_hostile_streams(seed):
    """Random hostile streams (:func:`tb.ephemeral_receiver.hostile`: genuine senders,
    CLOSEs, lost CLOSEs, replays, gaps, forged opens, floods; PSNs across the 24-bit wrap
    for odd seeds) into random pool sizes and idle times: every outcome, delivery, ACK and
    idle close (with its cycle) and the counters equal the twin's, and the model-free
    invariants hold. Each stream has every outcome."""
    rng = random.Random(seed)
    entries, idle = rng.choice([4, 8, 16]), rng.randrange(4, 40)
    pkts, cycles = hostile(seed, 600, rng.randrange(2, 3 * entries), idle)
    outs, delivers, acks, closes, counters = _both(entries, idle, pkts, cycles)
    assert invariant_errors(pkts, outs, delivers,
                            {o: counters[o] for o in RECV_OUTCOMES}) == []
    assert all(counters[o] > 0 for o in RECV_OUTCOMES), counters
    assert closes


@pytest.mark.parametrize("kw,name", [(dict(entries=3), "entries"),
                                     (dict(entries=512), "entries"),
                                     (dict(entries=1), "entries")])
def test_bad_receiver_parameters_are_named(kw, name):
    with pytest.raises(ValueError, match=name):
        EphemeralReceiver(**kw)


@pytest.mark.parametrize("kw,name", [(dict(entries=6, idle=8), "entries"),
                                     (dict(entries=8, idle=0), "idle"),
                                     (dict(entries=8, idle=1 << 16), "idle")])
def test_bad_receiver_knobs_are_named(kw, name):
    from pymodel.ephemeral.receiver import ReceiverTwin

    with pytest.raises(ValueError, match=name):
        check_receiver(**kw)
    with pytest.raises(ValueError, match=name):
        ReceiverTwin(**kw)


@pytest.mark.slow_variants("verilator", reason=(
    "Icarus runs the same top and stream in make test; the receiver's RTL = twin "
    "comparisons run in the Amaranth simulator (test_receiver_rtl_equals_twin_on_hostile_"
    "streams)"))
def test_receiver_cosim(sim, test_id):
    """The exported Verilog on Icarus and Verilator: a hostile stream of 1,500 packets
    (genuine senders, CLOSEs and lost ones, replays, gaps, forged opens, floods) into a
    pool of 8; every outcome, delivery, ACK, idle close and counter equals the twin's and
    the invariants hold."""
    from rtl.tops.ephemeral_receiver_top import EphemeralReceiverTop

    run_cosim(EphemeralReceiverTop(8, 2048), name="ephemeral_receiver_8",
              test_module="tb.cocotb_ephemeral_receiver", sim=sim, test_id=test_id,
              params=dict(entries=8, idle=16, sources=12, packets=1500, seed=5))


@pytest.mark.parametrize("params,name", [(dict(entries=8, idle=0), "idle"),
                                         (dict(entries=6, idle=16), "entries"),
                                         (dict(entries=8, idle=16, depth=4), "depth")])
def test_bad_cosim_params_are_named(params, name):
    """The co-simulation's parameters are checked before anything is exported."""
    from rtl.tops.ephemeral_receiver_top import EphemeralReceiverTop

    with pytest.raises(ValueError, match=name):
        run_cosim(EphemeralReceiverTop(8, 16), name="ephemeral_receiver_bad",
                  test_module="tb.cocotb_ephemeral_receiver", sim="icarus",
                  params=dict(sources=4, packets=10, seed=1, **params))
