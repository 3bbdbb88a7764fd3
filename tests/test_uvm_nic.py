"""The pyuvm environment of the NIC top (tb/nic/uvm) on Verilator and Icarus, and its
pieces that need no simulator (item constraints, intent, fault planning, coverage bins).

The co-simulation runs every ``@pyuvm.test`` of :mod:`tb.nic.uvm.tests` in one
simulation on the same top as tests/test_cosim_nic.py (one build per simulator and
framing), then reads what the tests left in the run folder: ``scoreboard.json`` (every
scoreboard's counts) and ``coverage.json``. ``UVM_SEEDS`` (comma separated, default 1)
sets the seeds; ``scripts/regress.py`` runs many and reads ``REGRESS_DIR`` records.
"""

import json
import os
import random

import pytest
from test_cosim_nic import nic_params
from uvm_runs import check_scoreboards, regress_record

from spec.checks import silence
from spec.nic import COUNTERS
from tb.cosim import run_cosim
from tb.nic.uvm.agent import plan_faults
from tb.nic.uvm.config import NicConfig
from tb.nic.uvm.coverage import COVERAGE_FILE, Covergroups, merge_reports, size_bins
from tb.nic.uvm.items import ERROR_KINDS, EXPECTED_DROP, MAX_SIZE, StoreItem
from tb.nic.uvm.sequences import Budget

SEEDS = [int(s) for s in os.environ.get("UVM_SEEDS", "1").split(",") if s.strip()]
#: Stores per pyuvm test (five tests per simulation).
COUNT = 40
GOOD_TESTS = ("NicBaseTest", "NicAllGoodTest", "NicErrorsTest", "NicHotspotTest")
NEGATIVE = "NicBrokenScoreboardTest"


def _cfg(framing, **kw):
    top, params = nic_params(framing)
    silence(top)
    depths = {"cmd_depth": 2048, "event_depth": 2048, "fault_depth": 64, **kw}
    return NicConfig.from_params(params, **depths)


def _items(cfg, seed, count, kinds=ERROR_KINDS):
    """``count`` items as a sequence draws them (kinds in turn), within a Budget."""
    rng, budget, out = random.Random(seed), Budget(cfg), []
    gaps = {p: (rng.randrange(1, 1 << 16), rng.choice((0, 32, 160))) for p in range(cfg.nodes)}
    for k in range(count):
        src = rng.randrange(cfg.nodes)
        it = StoreItem(f"s{k}").randomize(rng, cfg, error=kinds[k % len(kinds)], src=src,
                                          gap=gaps[src][1], stall_seed=gaps[src][0],
                                          accept=budget.fits)
        budget.take(it)
        out.append(it)
    return out, {p: gaps[p] for p in range(cfg.nodes)}


# -- no simulator ---------------------------------------------------------------------
@pytest.mark.parametrize("framing", ["compact", "l2"])
def test_items_meet_their_constraints(framing):
    """Every drawn item meets every constraint, and its error kind is one the receiver
    sees: the counter of :data:`EXPECTED_DROP` is among its frames' outcomes."""
    cfg = _cfg(framing)
    for seed in range(20):
        items, _ = _items(cfg, seed, 30)
        for it in items:
            bad = [n for n, ok in it.constraints(cfg).items() if not ok]
            assert not bad, f"{it}: {bad}"
            out = it.outcomes(cfg)
            assert EXPECTED_DROP[it.error] in out, f"{it}: {out}"
            assert (set(out) == {"frames_ok"}) == (it.error == "none"), f"{it}: {out}"
            assert 1 <= it.size <= MAX_SIZE and len(it.payload) == it.size


def test_randomize_names_the_failed_constraint():
    cfg = _cfg("compact")
    with pytest.raises(RuntimeError, match="budget"):
        StoreItem("x").randomize(random.Random(1), cfg, accept=lambda _: False, tries=5)


@pytest.mark.parametrize("framing", ["compact", "l2"])
@pytest.mark.parametrize("windowed", [True, False])
def test_fault_plan_and_intent_agree_with_the_model(framing, windowed):
    """The driver's fault plan corrupts exactly the frames the fcs items aim at: the
    model, run with those faults, counts what the items' intent says, port by port."""
    cfg = _cfg(framing, windowed=windowed)
    kinds = ERROR_KINDS if windowed else tuple(k for k in ERROR_KINDS if k != "unauthorised")
    items, stalls = _items(cfg, 3, 36, kinds)
    faults, targets, _ = plan_faults(cfg, items, stalls)
    assert len(targets) == sum(it.error == "fcs" for it in items) > 0
    want = cfg.model().run({p: [it.store() for it in items if it.src == p]
                            for p in range(cfg.nodes)}, cfg.node_ids, stalls, faults,
                           window_writes=cfg.window_writes())
    intent = {p: dict.fromkeys(COUNTERS, 0) for p in range(cfg.nodes)}
    for it in items:
        for reason in it.outcomes(cfg):
            intent[cfg.port_of(it.dst)][reason] += 1
    assert {p: want["counters"][p] for p in range(cfg.nodes)} == intent


@pytest.mark.parametrize("depth", [300, 2048])
def test_budget_keeps_a_hotspot_within_the_recorders(depth):
    """Every store to port 0: the budget keeps room for the stores still to come, so all
    ``COUNT`` are drawn and the port's write recorder never overflows."""
    cfg = _cfg("l2", event_depth=depth)
    for seed in range(10):
        budget, rng = Budget(cfg), random.Random(seed)
        for k in range(COUNT):
            it = StoreItem(f"s{k}").randomize(
                rng, cfg, port=0, error=ERROR_KINDS[k % len(ERROR_KINDS)],
                accept=lambda it, b=budget, left=COUNT - k - 1: b.fits(it, left))
            budget.take(it)
        assert budget.used["wr"][0] <= depth and max(budget.used["tx"]) <= depth


def test_size_bins_partition_the_sizes():
    bins = size_bins(512)
    covered = [s for _, lo, hi in bins for s in range(lo, hi + 1)]
    assert covered == list(range(1, MAX_SIZE + 1))
    assert {"1", "63", "64", "65", "511", "512", "513", "1024", "4096"} <= {b[0] for b in bins}


def test_coverage_merge_sums_bins():
    cfg = _cfg("l2")
    a, b = Covergroups(cfg), Covergroups(cfg)
    a.hit("error", "fcs")
    b.hit("error", "fcs")
    b.hit("error", "none")
    m = merge_reports([a.report(), b.report()])
    assert m["groups"]["error"]["bins"]["fcs"] == 2
    assert m["groups"]["error"]["hit"] == 2
    with pytest.raises(KeyError):
        a.hit("error", "nonsense")


# -- co-simulation --------------------------------------------------------------------
def _check_run(run_dir):
    # The negative test: its scoreboard found exactly the value corrupted on purpose.
    check_scoreboards(run_dir, GOOD_TESTS, NEGATIVE, lambda m: m.startswith("frames_ok"))
    cov = json.loads((run_dir / COVERAGE_FILE).read_text())
    assert set(GOOD_TESTS) <= set(cov["tests"])
    for where in (cov["merged"], cov["tests"]["NicErrorsTest"]):
        err = where["groups"]["error"]["bins"]
        assert all(err[k] > 0 for k in ERROR_KINDS), err
        out = where["groups"]["outcome"]["bins"]
        assert all(out[c] > 0 for c in COUNTERS), out
    drops = cov["tests"]["NicAllGoodTest"]["groups"]["outcome"]["bins"]
    assert set(c for c, v in drops.items() if v) == {"frames_ok"}, drops
    return cov


@pytest.mark.slow_variants("verilator-l2-*", reason=(
    "Verilator runs the compact environment (make test-all: both on both)"))
@pytest.mark.slow_variants("icarus-compact-1", reason=(
    "the pyuvm NIC bench runs compact framing on Verilator and L2 framing on Icarus"))
@pytest.mark.slow_variants("icarus-l2-1", reason=(
    "make test runs the pyuvm NIC bench on Verilator (compact framing); make regress runs it "
    "on both simulators for every seed, and the L2 NIC top runs its directed scenarios on "
    "Icarus"))
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("framing", ["compact", "l2"])
def test_uvm_nic(sim, framing, seed, test_id):
    """Five pyuvm tests in one simulation: base, all-good, errors-heavy, hot-spot (three
    by factory override of the sequence) and the broken scoreboard (expected to fail)."""
    top, params = nic_params(framing, seed=seed, count=COUNT)
    rec = {"regression": "nic_uvm", "sim": sim, "framing": framing, "seed": seed,
           "status": "fail"}
    with regress_record(rec, "sim", "framing", "seed") as r:
        run_dir = run_cosim(top, name=f"nic_top_{framing}", test_module="tb.nic.uvm.tests",
                            sim=sim, test_id=test_id, params=params)
        r.ran(run_dir)
        r.passed(_check_run(run_dir))
