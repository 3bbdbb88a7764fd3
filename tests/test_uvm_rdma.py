"""The pyuvm environment of the RDMA engine (tb/rdma/uvm) on Verilator and Icarus, and its
pieces that need no simulator (item constraints, run planning, bad copies, intent, bins).

The co-simulation runs every ``@pyuvm.test`` of :mod:`tb.rdma.uvm.tests` in one
simulation on the top of tests/test_cosim_rdma.py (the defaults: one build per
simulator), then reads what the tests left in the run folder: ``scoreboard.json`` (every
scoreboard's counts) and ``coverage.json``. ``UVM_SEEDS`` (comma separated, default 1)
sets the seeds; ``scripts/regress.py`` runs many and reads ``REGRESS_DIR`` records.
"""

import json
import os
import random
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

from spec.rdma import DROP_REASONS
from tb.rdma.runner import run_rdma
from tb.rdma.uvm.config import RdmaConfig
from tb.rdma.uvm.coverage import OUTCOME_BINS, Covergroups, size_bins
from tb.rdma.uvm.items import (
    ACCESS_KINDS,
    ERROR_KINDS,
    EXPECTED_COUNTER,
    VARIANTS,
    WIRE_KINDS,
    QpSpec,
    WriteItem,
    size_limit,
)
from tb.rdma.uvm.plan import INJECT_BEATS, INJECT_FRAMES, bad_copy, plan_runs
from tb.rdma.uvm.scoreboard import RESULTS_FILE
from tb.rdma.uvm.sequences import Budget
from tb.rdma.wirecheck import frame_problems

SEEDS = [int(s) for s in os.environ.get("UVM_SEEDS", "1").split(",") if s.strip()]
#: Work requests per pyuvm test (five tests per simulation).
COUNT = 20
TOP = {}                   # the defaults: the build of tests/test_cosim_rdma.py
GOOD_TESTS = ("RdmaBaseTest", "RdmaAllGoodTest", "RdmaErrorsTest", "RdmaManyQpsTest")
NEGATIVE = "RdmaBrokenScoreboardTest"


def _items(seed, count, kinds=ERROR_KINDS, qps=5):
    """``count`` items with the kinds in turn over ``qps`` QPs (access errors on QPs of
    their own, as the sequences' closing rule would give), within a Budget."""
    cfg, rng = RdmaConfig(), random.Random(seed)
    pool = [QpSpec(rng.randrange(4096), 100 + q, rng.randint(8, 12), rng.randrange(1 << 24))
            for q in range(qps)]
    budget, out = Budget(cfg), []
    for k in range(count):
        kind = kinds[k % len(kinds)]
        if kind in WIRE_KINDS and not budget.wire_room():
            kind = "none"
        qp = (QpSpec(3000 + k, 3000 + k, rng.randint(8, 12), rng.randrange(1 << 24))
              if kind in ACCESS_KINDS else pool[k % qps])
        it = WriteItem(f"w{k}").randomize(rng, cfg, qp=qp, error=kind, gap=32, stall_seed=7,
                                          accept=budget.fits)
        budget.take(it)
        out.append(it)
    return cfg, out


# -- no simulator ---------------------------------------------------------------------
def test_items_meet_their_constraints():
    for seed in range(20):
        cfg, items = _items(seed, 30)
        for it in items:
            bad = [n for n, ok in it.constraints(cfg).items() if not ok]
            assert not bad, f"{it}: {bad}"
            assert EXPECTED_COUNTER[it.error] in it.outcomes(), it
            assert 1 <= it.size <= size_limit(it.qp.pmtu_log2) and len(it.payload) == it.size


def test_randomize_names_the_failed_constraint():
    cfg = RdmaConfig()
    with pytest.raises(RuntimeError, match="budget"):
        WriteItem("x").randomize(random.Random(1), cfg, qp=QpSpec(1, 2, 8, 0),
                                 accept=lambda _: False, tries=5)


@pytest.mark.parametrize("seed", range(8))
def test_plan_intent_agrees_with_the_model(seed):
    """Each planned run, on the golden model, raises exactly the responder counters and
    ACKs the items' intent says, and every inject run stays within the responder's
    buffers (so no overflow). QPs without traffic get contexts as well."""
    cfg, items = _items(seed, 24)
    idle = [QpSpec(500 + j, 600 + j, 8 + j % 5, j) for j in range(20)]
    runs = plan_runs(cfg, items, bad_qpn=4095, qps=idle)
    assert [r.kind for r in runs] == ["doorbell", "inject"]
    assert all(set(idle) <= set(r.qps) for r in runs)
    for run in runs:
        want = run.model()
        intent = Counter(dict.fromkeys(("frames_ok",) + DROP_REASONS, 0))
        for k in run.items:
            intent.update(items[k].outcomes())
        assert {n: want["resp"][n] for n in intent} == dict(intent), run.kind
        assert want["resp"]["acks"] == sum(items[k].acks() for k in run.items)
        if run.kind == "inject":
            assert len(run.inject) <= INJECT_FRAMES
            assert sum(-(-len(f) // 64) for f in run.inject) <= INJECT_BEATS
        else:
            assert len(want["completed"]) == len(run.items)


@pytest.mark.parametrize("kind", [k for k in ERROR_KINDS if k != "none"])
def test_every_variant_raises_its_counter(kind):
    """Each way of making each error kind, alone in its run on the golden model, raises
    its counter (and the item's own frames are still accepted)."""
    cfg = RdmaConfig()
    for variant in VARIANTS[kind]:
        for seed in range(3):
            rng = random.Random(seed)
            qp = QpSpec(7, 9, 8 + seed, (1 << 24) - 2)
            it = WriteItem("w").randomize(rng, cfg, qp=qp, error=kind, accept=Budget(cfg).fits)
            it.variant = variant
            (run,) = plan_runs(cfg, [it], bad_qpn=4095)
            resp = run.model()["resp"]
            got = {n: resp[n] for n in ("frames_ok",) + DROP_REASONS if resp[n]}
            assert got == dict(Counter(it.outcomes())), (kind, variant, got)


def test_bad_copies_fail_only_their_check():
    """A bad copy of a good frame breaks exactly what its kind says: scapy + zlib see a bad
    FCS only for fcs_bad; a bad ICRC for icrc_bad (and nothing else) and for truncated (its
    length is checked first); the others have both good."""
    cfg, items = _items(3, 1, kinds=("none",))
    frame = [f for _, f in plan_runs(cfg, items, 4095)[0].model()["wire_ab"]][0]
    assert frame_problems(frame) == []
    for kind in WIRE_KINDS:
        for variant in VARIANTS[kind]:
            for pick in (0, 7, 12345):
                bad = frame_problems(bad_copy(frame, kind, variant, pick, 4095))
                if kind == "fcs_bad":
                    assert "FCS" in bad
                elif kind in ("icrc_bad", "truncated"):
                    assert bad == ["ICRC"], (kind, variant, bad)
                else:
                    assert "FCS" not in bad and "ICRC" not in bad, (kind, variant, bad)


def test_size_bins_partition_the_sizes():
    for p in range(8, 13):
        bins = size_bins(p)
        covered = [s for _, lo, hi in bins for s in range(lo, hi + 1)]
        assert covered == list(range(1, size_limit(p) + 1))
        assert [b[0] for b in bins] == [b[0] for b in size_bins(8)]


def test_coverage_bins_name_every_kind_and_outcome():
    cg = Covergroups(RdmaConfig())
    assert list(cg.groups["error"]) == list(ERROR_KINDS)
    assert set(cg.groups["outcome"]) == set(OUTCOME_BINS) == {"frames_ok", *DROP_REASONS} - {
        "overflow"}
    with pytest.raises(KeyError):
        cg.hit("error", "nonsense")


# -- co-simulation --------------------------------------------------------------------
def _record(rec):
    """One line for scripts/regress.py, when it asked for records."""
    folder = os.environ.get("REGRESS_DIR")
    if folder:
        path = Path(folder) / f"{rec['regression']}-{rec['sim']}-{rec['seed']}.json"
        path.write_text(json.dumps(rec))


def _check_run(run_dir):
    sb = json.loads((run_dir / RESULTS_FILE).read_text())
    for name in GOOD_TESTS:
        s = sb[name]
        assert s["mismatch_count"] == 0, f"{name}: {s['mismatches']}"
        assert s["checked"] > 0 and s["frames"] > 0 and s["left_over"] == 0, s
    # The negative test: its scoreboard found exactly the value corrupted on purpose, and
    # cocotb scored the failure as expected (a pass in results.xml, "failed as expected").
    neg = sb[NEGATIVE]
    assert neg["scoreboard"] == "BrokenScoreboard"
    assert neg["mismatch_count"] == 1, neg
    assert neg["mismatches"][0].split(":")[1].strip() == "responder frames_ok", neg
    cases = {c.get("name"): c for c in ET.parse(run_dir / "results.xml").iter("testcase")}
    assert set(GOOD_TESTS) | {NEGATIVE} <= set(cases)
    assert not any(cases[n].find(t) is not None for n in cases for t in ("failure", "error"))
    log = (run_dir / "sim.log").read_text()
    assert NEGATIVE in log and "failed as expected" in log
    cov = json.loads((run_dir / "coverage.json").read_text())
    assert set(GOOD_TESTS) <= set(cov["tests"])
    for where in (cov["merged"], cov["tests"]["RdmaErrorsTest"]):
        err = where["groups"]["error"]["bins"]
        assert all(err[k] > 0 for k in ERROR_KINDS), err
        out = where["groups"]["outcome"]["bins"]
        assert all(out[c] > 0 for c in OUTCOME_BINS), out
    good = cov["tests"]["RdmaAllGoodTest"]["groups"]
    assert {c for c, v in good["outcome"]["bins"].items() if v} == {"frames_ok"}, good
    assert {c for c, v in good["cqe_status"]["bins"].items() if v} == {"SUCCESS"}, good
    return cov


@pytest.mark.parametrize("seed", SEEDS)
def test_uvm_rdma(sim, seed, test_id):
    """Five pyuvm tests in one simulation: base, all-good, errors-heavy, many-QPs (three
    by factory override of the sequence) and the broken scoreboard (expected to fail)."""
    rec = {"regression": "rdma_uvm", "sim": sim, "seed": seed, "status": "fail"}
    t0 = time.perf_counter()
    try:
        run_dir = run_rdma(TOP, test_module="tb.rdma.uvm.tests", sim=sim, test_id=test_id,
                           params={"seed": seed, "count": COUNT})
        rec["run_dir"] = str(run_dir)
        rec["seconds"] = round(time.perf_counter() - t0, 1)
        cov = _check_run(run_dir)
        rec.update(status="pass", coverage=cov["merged"]["percent"],
                   errors_hit=cov["merged"]["groups"]["error"]["hit"],
                   coverage_groups={g: [d["hit"], d["total"]]
                                    for g, d in cov["merged"]["groups"].items()})
    except BaseException as exc:
        rec["error"] = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        raise
    finally:
        rec.setdefault("seconds", round(time.perf_counter() - t0, 1))
        _record(rec)
