"""The ephemeral receiver's fuzz (analysis/scenarios/fuzz_ephemeral.py, the ``ephemeral``
target of ``make fuzz``): its streams, its model-free checks fed runs that break them,
RTL = twin on a chunk in the Amaranth simulator, a chunk in co-simulation, and its
option of scripts/fuzz.py. The big runs are ``make fuzz`` (docs/fuzz.md)."""

import json

import pytest

from analysis.scenarios.fuzz_ephemeral import ACTIONS, FIELDS, SENTINEL, fuzz_chunk
from spec.ephemeral import RECV_OUTCOMES
from tb.ephemeral_receiver import invariant_errors, model_events, sentinel_errors
from tb.fuzz_runner import EPHEMERAL_FUZZ_TOP, run_fuzz

ENTRIES = EPHEMERAL_FUZZ_TOP["entries"]


def _twin_run(c):
    outs, delivers, acks, closes, twin = model_events(c["pkts"], c["release"], ENTRIES,
                                                      c["idle"])
    return outs, delivers, acks, closes, twin


def test_chunks_hold_every_action_and_field_and_repeat_by_seed():
    """Every action of :data:`ACTIONS` and every field of :data:`FIELDS` shows up over a
    few chunks; a chunk is a pure function of ``(seed, chunk)``; arrivals one a cycle at
    most; the sentinel sends at least every ``idle // 2`` cycles and only it carries its
    source."""
    seen, fields = set(), set()
    for k in range(4):
        c = fuzz_chunk(3, k, 1500)
        assert len(c["pkts"]) == 1500
        assert all(b > a for a, b in zip(c["release"], c["release"][1:], strict=False))
        mine = [t for p, t in zip(c["pkts"], c["release"], strict=True) if p[0] == SENTINEL]
        assert mine[0] == 1 and max(b - a for a, b in zip(mine, mine[1:], strict=False)) \
            <= c["idle"] // 2
        assert c["by_mutation"]["sentinel"] == len(mine)
        seen |= set(c["by_mutation"])
        fields |= set(c["by_field"])
    assert set(ACTIONS) - {"mutate"} | {"mutant", "sentinel"} <= seen
    assert fields == set(FIELDS)
    assert fuzz_chunk(3, 1, 300) == fuzz_chunk(3, 1, 300)
    assert fuzz_chunk(3, 1, 300)["pkts"] != fuzz_chunk(4, 1, 300)["pkts"]


def test_twin_meets_the_checks_and_the_checks_catch_broken_runs():
    """The twin's run of a chunk meets every model-free check and sees every outcome; a
    delivery twice, a sentinel packet lost, an ACK missing and a counter off by one are
    each reported."""
    c = fuzz_chunk(1, 0, 2000)
    outs, delivers, acks, _, twin = _twin_run(c)
    assert invariant_errors(c["pkts"], outs, delivers, twin.count) == []
    assert sentinel_errors(c["pkts"], outs, delivers, acks, SENTINEL) == []
    assert all(twin.count[o] > 0 for o in RECV_OUTCOMES), twin.count
    pkts = c["pkts"]
    k = next(i for i, (_, o, _) in enumerate(outs) if o == "delivered")
    # The same PSN delivered again later in the same context.
    t, e, s, psn = next(d for d in delivers if d[0] == outs[k][0])
    bad_pkts = pkts + [(s, psn, 0, 0, 0)]
    bad_outs = outs + [(outs[-1][0] + 1, "delivered", e)]
    bad_del = delivers + [(outs[-1][0] + 1, e, s, psn)]
    count = dict(twin.count, delivered=twin.count["delivered"] + 1)
    assert any("twice" in v for v in invariant_errors(bad_pkts, bad_outs, bad_del, count))
    assert any("tally" in v for v in invariant_errors(
        pkts, outs, delivers, dict(twin.count, gap=twin.count["gap"] + 1)))
    ks = next(i for i, p in enumerate(pkts) if p[0] == SENTINEL and i > 0)
    lost = list(outs)
    lost[ks] = (outs[ks][0], "gap", outs[ks][2])
    assert sentinel_errors(pkts, lost, delivers, acks, SENTINEL)
    first = next(a for a in acks if a[1] == SENTINEL)
    assert sentinel_errors(pkts, outs, delivers, [a for a in acks if a != first], SENTINEL)


def test_fuzz_chunk_rtl_equals_twin_in_amaranth():
    """A fuzz chunk (600 packets) on the RTL in the Amaranth simulator: every outcome,
    delivery, ACK, idle close and counter equals the twin's."""
    from tests.test_unit_ephemeral_receiver import _both

    c = fuzz_chunk(2, 5, 600)
    _both(ENTRIES, c["idle"], c["pkts"], c["release"])


@pytest.mark.slow_variants("verilator", reason=(
    "Icarus runs the same top and chunks in make test; the checks are the same Python"))
def test_fuzz_chunk_ephemeral(sim, test_id, tmp_path):
    """Two fuzz chunks of 1,000 packets on EphemeralReceiverTop (the co-simulation test's
    build): 0 mismatches, violations and hangs, every outcome counted."""
    out = tmp_path / "eph.jsonl"
    run_fuzz("ephemeral", sim=sim, seed=11, chunks=[0, 1], frames=1000, out=out,
             test_id=test_id)
    records = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["chunk"] for r in records] == [0, 1]
    for r in records:
        assert r["mismatches"] == 0 and r["violations"] == [] and r["hangs"] == 0
        assert r["frames"] == 1000 and sum(r["by_outcome"].values()) == r["injected"]
    assert all(sum(r["by_outcome"][o] for r in records) > 0 for o in RECV_OUTCOMES)


@pytest.mark.parametrize("argv", [["--design", "ephemeral", "--chunk", "2049"],
                                  ["--design", "ephemeral", "--chunk", "0"]])
def test_bad_chunk_for_ephemeral_is_named(argv, capsys):
    from scripts.fuzz import parse

    with pytest.raises(SystemExit) as exc:
        parse(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--chunk" in err and "ephemeral" in err
    assert parse(["--design", "all"]).designs == ("nic", "rdma", "rdma-req", "ephemeral")
    assert parse([]).designs == ("nic", "rdma", "rdma-req", "ephemeral")
    assert parse(["--design", "both"]).designs == ("nic", "rdma")
