"""The ephemeral context pool: RTL against its twin cycle for cycle (Amaranth simulator and
co-simulation on Icarus and Verilator), and the contract checked on its own: allocate on
first use, find again, close on idle, wait when full, refuse a packet of a closed context,
a forged open and one sender exhausting the pool."""

import pytest

from pymodel.ephemeral.pool import ContextPoolModel
from rtl.ephemeral.pool import ContextPool
from spec.ephemeral import Verdict
from tb.amsim import run_sim
from tb.cosim import run_cosim
from tb.ephemeral_pool import Holder, model_trace, stimulus

KEY_BITS = 12


def _rtl_trace(entries, idle, stim, drops=None):
    """The RTL in the Amaranth simulator on ``stim`` (and ``drops``, per cycle an entry
    or None): per cycle ``(presented lookup, verdict, entry, closed key)`` as
    :func:`tb.ephemeral_pool.model_trace`, and the counters at the end."""
    dut = ContextPool(entries, KEY_BITS)
    seen, end = [], {}

    async def bench(ctx):
        ctx.set(dut.idle, idle)
        hold = Holder()
        for k, (offer, done) in enumerate(stim):
            drop = drops[k] if drops else None
            ctx.set(dut.drop.valid, drop is not None)
            ctx.set(dut.drop.payload, drop or 0)
            req = hold.present(offer)
            ctx.set(dut.req.valid, req is not None)
            if req is not None:
                ctx.set(dut.req.payload, {"key": req[0], "open": req[1], "count": req[2]})
            ctx.set(dut.done.valid, done is not None)
            ctx.set(dut.done.payload, done or 0)
            verdict = entry = None
            if req is not None:
                verdict = ctx.get(dut.verdict)
                if verdict in (Verdict.HIT, Verdict.OPENED):
                    entry = ctx.get(dut.entry)
            closed = ctx.get(dut.closed.payload) if ctx.get(dut.closed.valid) else None
            ready = ctx.get(dut.req.ready)
            hold.taken(req is not None and ready)
            seen.append((req, verdict, entry, closed))
            await ctx.tick()
        for name in ("opens", "closes", "full_waits", "stale", "used", "used_max"):
            end[name] = ctx.get(getattr(dut, name))

    run_sim(dut, bench, deadline_cycles=len(stim) + 10)
    return seen, end


@pytest.mark.parametrize("entries,keys,idle", [(2, 3, 1), (8, 12, 5), (8, 40, 30),
                                              (16, 30, 20)])
def test_pool_rtl_equals_twin(entries, keys, idle):
    """Random lookups (opening or not, counting or not), random completions (of valid and
    invalid entries): every cycle's verdict, entry and closed key and the counters at the
    end equal the twin's; the run saw every verdict and closed entries."""
    stim = stimulus(entries * 100 + keys, 1500, entries, keys)
    got, end = _rtl_trace(entries, idle, stim)
    want, model = model_trace(stim, entries, idle)
    assert got == want
    assert end == dict(model.count, used=model.used, used_max=model.used_max)
    verdicts = {v for _, v, _, _ in got}
    assert {Verdict.HIT, Verdict.OPENED, Verdict.STALE} <= verdicts
    assert model.count["closes"] > 0


@pytest.mark.parametrize("entries,keys,idle", [(2, 3, 1), (8, 12, 5)])
def test_pool_drops_rtl_equals_twin(entries, keys, idle):
    """As above with a drop in a third of the cycles (any entry, valid or not, the one
    looked up or scanned in the same cycle too): RTL = twin every cycle; a dropped
    context is gone (its key's next lookup without ``open`` is STALE) and ``closes``
    counts the scan's closes only."""
    import random

    stim = stimulus(entries * 100 + keys + 1, 1500, entries, keys)
    rng = random.Random(entries)
    drops = [rng.randrange(entries) if rng.random() < 0.3 else None for _ in stim]
    got, end = _rtl_trace(entries, idle, stim, drops)
    want, model = model_trace(stim, entries, idle, drops=drops)
    assert got == want
    assert end == dict(model.count, used=model.used, used_max=model.used_max)
    assert model.count["opens"] > model.count["closes"] + model.used     # drops happened
    m = ContextPoolModel(4, 50)
    m.cycle((9, 1, 0))
    m.cycle(None, None, 0)
    assert m.lookup(9, 0) == (Verdict.STALE, None) and m.used == 0
    assert all(m.cycle()[2] is None for _ in range(60)) and m.count["closes"] == 0


def _step(model, req=None, done=None, times=1):
    out = None
    for _ in range(times):
        out = model.cycle(req, done)
    return out


def test_contract_open_hit_close_on_idle():
    """The first lookup of a key opens a context, the next finds it; with nothing
    outstanding it closes within ``idle + entries`` cycles of its last activity (the scan
    visits each entry once per ``entries`` cycles), never before ``idle``."""
    entries, idle = 4, 10
    m = ContextPoolModel(entries, idle)
    assert _step(m, (7, 1, 0))[:2] == (Verdict.OPENED, 0)
    assert _step(m, (7, 1, 0))[:2] == (Verdict.HIT, 0)
    last = 1                                       # the cycle of the last activity
    closed_at = None
    for c in range(2, 2 + idle + entries + 1):
        if _step(m)[2] == 7:
            closed_at = c
            break
    assert closed_at is not None and idle <= closed_at - last < idle + entries
    assert _step(m, (7, 0, 0))[0] == Verdict.STALE      # late packet: refused
    assert m.count == dict(opens=1, closes=1, full_waits=0, stale=1)


def test_contract_outstanding_holds_the_context():
    """A context with an outstanding message never closes, however long it idles; its
    completion lets it close."""
    m = ContextPoolModel(2, 3)
    _step(m, (5, 1, 1))
    assert all(_step(m)[2] is None for _ in range(100))
    _step(m, done=0)
    assert any(_step(m)[2] == 5 for _ in range(3 + 2 + 1))


def test_pool_full_waits_then_proceeds():
    """With every entry holding an outstanding message, a new key's lookup is not taken
    (FULL, counted each cycle) and nothing changes; once one completes and idles out, the
    same lookup opens a context in the freed entry."""
    m = ContextPoolModel(2, 2)
    _step(m, (1, 1, 1))
    _step(m, (2, 1, 1))
    for _ in range(20):
        assert _step(m, (3, 1, 1))[0] == Verdict.FULL
    assert m.count["full_waits"] == 20 and m.used == 2
    _step(m, (3, 1, 1), done=1)             # key 2's ACK
    verdict = None
    for _ in range(10):
        verdict, entry, _ = _step(m, (3, 1, 1))
        if verdict != Verdict.FULL:
            break
    assert verdict == Verdict.OPENED and entry == 1
    assert m.where == {1: 0, 3: 1}


def test_forged_opens_and_one_sender_exhausting_the_pool():
    """A sender that forges opens for many keys fills the pool (each forged context has
    nothing outstanding) and then waits; the honest context keeps its entry, and the
    forged ones close after ``idle``: bounded, counted, nothing else changed."""
    entries, idle = 4, 6
    m = ContextPoolModel(entries, idle)
    _step(m, (100, 1, 1))                    # the honest sender's context, a message out
    full = 0
    for k in range(50):
        verdict, _, _ = _step(m, (200 + k, 1, 0))
        full += verdict == Verdict.FULL
    assert full > 0 and m.count["full_waits"] == full
    assert m.where[100] == 0 and m.outs[0] == 1
    assert m.count["opens"] - 1 == m.count["closes"] + (m.used - 1)
    _step(m, times=idle + entries + 1)
    assert m.used == 1 and m.where == {100: 0}


@pytest.mark.parametrize("bad", [0, 3, 512, True, "8"])
def test_bad_entries_are_named(bad):
    with pytest.raises(ValueError, match="entries"):
        ContextPool(bad, KEY_BITS)
    if not isinstance(bad, int) or isinstance(bad, bool) or bad & (bad - 1) or bad < 2:
        with pytest.raises(ValueError, match="entries"):
            ContextPoolModel(bad, 4)


@pytest.mark.parametrize("bad", [0, 17, False])
def test_bad_key_bits_are_named(bad):
    with pytest.raises(ValueError, match="key_bits"):
        ContextPool(8, bad)


@pytest.mark.parametrize("bad", [0, 1 << 16, "3"])
def test_bad_idle_is_named(bad):
    with pytest.raises(ValueError, match="idle"):
        ContextPoolModel(8, bad)


@pytest.mark.slow_variants("verilator-*", reason=(
    "Icarus runs the same top and stimulus in make test; the pool's RTL = twin comparisons "
    "run in the Amaranth simulator (test_pool_rtl_equals_twin)"))
@pytest.mark.parametrize("entries,keys,idle", [(8, 20, 12)])
def test_pool_cosim(sim, entries, keys, idle, test_id):
    """The exported Verilog on Icarus and Verilator: random lookups and completions, every
    cycle's verdict, entry and closed key and the counters equal the twin's."""
    run_cosim(ContextPool(entries, KEY_BITS), name=f"context_pool_{entries}",
              test_module="tb.cocotb_ephemeral_pool", sim=sim, test_id=test_id,
              params=dict(entries=entries, key_bits=KEY_BITS, idle=idle, keys=keys,
                          seed=7, cycles=3000, offer=0.6, open=0.8, done=0.4))
