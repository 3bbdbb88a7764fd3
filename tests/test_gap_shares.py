"""Each factor's share in any order (tb/gap_shares.py): the Shapley arithmetic on games
whose values are known, the subsets' points against the table's rows (no simulator)."""

from itertools import combinations

import pytest

from spec.fabric_profiles import FABRIC_PROFILES
from tb import gap_shares, gap_table


def test_additive_game_gives_each_factor_its_own_part():
    """A game that is a sum of the factors' own parts: every order gives each factor
    exactly its part, so share, least and most are that part."""
    parts = {"a": 3.0, "b": -2.0, "c": 10.0}
    got = gap_shares.shapley(lambda s: sum(parts[f] for f in s), tuple(parts))
    assert got == {f: (pytest.approx(p), p, p) for f, p in parts.items()}


def test_interaction_is_split_evenly_and_the_range_shows_the_orders():
    """``v = 100`` only when both ``x`` and ``y`` are in (a pure interaction), ``z``
    adds 1: by symmetry ``x`` and ``y`` get 50 each (each adds 0 when first, 100 when
    second), ``z`` 1; the shares add up to v(all) - v(none)."""
    def value(s):
        return 100 * ({"x", "y"} <= s) + ("z" in s)
    got = gap_shares.shapley(value, ("x", "y", "z"))
    assert got["x"] == (pytest.approx(50), 0, 100)
    assert got["y"] == (pytest.approx(50), 0, 100)
    assert got["z"] == (pytest.approx(1), 1, 1)
    assert sum(v[0] for v in got.values()) == pytest.approx(value({"x", "y", "z"}))


def test_shares_add_up_to_the_whole_gap_on_a_random_game():
    import random

    rng = random.Random(7)
    factors = tuple("abcde")
    table = {frozenset(c): rng.uniform(-50, 50) for n in range(6)
             for c in combinations(factors, n)}
    got = gap_shares.shapley(table.__getitem__, factors)
    assert sum(v[0] for v in got.values()) == pytest.approx(
        table[frozenset(factors)] - table[frozenset()])
    for phi, lo, hi in got.values():
        assert lo <= phi <= hi


@pytest.mark.parametrize("profile", list(FABRIC_PROFILES))
def test_table_prefixes_are_the_tables_rows(profile):
    """The subset of the first ``k`` factors is row ``k`` of the table, design and
    settings: the table's order is one of the orders the shares go over."""
    rows = gap_table.gap_settings(profile)
    for k, (_, design, settings) in enumerate(rows):
        assert gap_shares.subset_point(profile, gap_shares.FACTORS[:k]) == (design, settings)


def test_subsets_keep_the_other_keys_and_name_bad_factors():
    design, s = gap_shares.subset_point("pod", ["QP engine, 1 QP"])
    assert design == "rdma"
    assert (s["attachment"], s["fabric"], s["header"], s["reliability"], s["qps"]) == (
        "on_die", "board", "scaleup", "none", 1)
    # Without the engine 4096 QPs are the NIC's row 0: one destination.
    assert gap_shares.subset_point("pod", ["4096 QPs"]) == gap_shares.subset_point("pod", [])
    with pytest.raises(ValueError, match="unknown factor"):
        gap_shares.subset_point("pod", ["topology"])


def test_share_jobs_run_each_point_once():
    jobs, index = gap_shares.share_jobs("board", messages=10)
    k = len(gap_shares.FACTORS)
    assert len(index) == 2 ** k
    # board: the fabric is a no-op; the NIC ignores the QPs, the engine the completion.
    assert len(jobs) == 2 * 2 ** (k - 3)
    assert sorted(set(index.values())) == list(range(len(jobs)))


def test_factor_shares_from_rows():
    """factor_shares on made-up rows (each job's figure its position): the shares add up
    to the last row minus row 0, the table figure is the difference along the table's
    prefixes, and the factors that do nothing once the engine is in (the NIC's
    completion) or without it (the QPs) have a range that reaches 0."""
    jobs, index = gap_shares.share_jobs("pod", messages=10)
    rows = [{"design": "rdma", **{f"{m}_model": j * j for m, _ in gap_shares.SHARE_METRICS}}
            for j in range(len(jobs))]
    got = gap_shares.factor_shares(rows, index)
    f = gap_shares.FACTORS

    def v(subset):
        return rows[index[frozenset(subset)]]["latency_cycles_model"]
    total = sum(got[x]["latency_cycles"]["shapley"] for x in f)
    assert total == pytest.approx(v(f) - v(()), abs=0.01)
    for k, x in enumerate(f):
        assert got[x]["latency_cycles"]["table"] == v(f[:k + 1]) - v(f[:k])
        lo, hi = got[x]["latency_cycles"]["range"]
        assert lo <= got[x]["latency_cycles"]["shapley"] <= hi
    for x in ("end-to-end completion", "4096 QPs"):
        lo, hi = got[x]["latency_cycles"]["range"]
        assert lo <= 0 <= hi


def test_host_bytes_of_the_integrated_nic_is_zero():
    assert gap_shares.metric_value({"design": "nic", "host_bytes_model": None},
                                   "host_bytes") == 0
    with pytest.raises(ValueError, match="no 'latency_cycles'"):
        gap_shares.metric_value({"design": "nic"}, "latency_cycles")


def test_cli_checks_its_options(capsys):
    with pytest.raises(SystemExit):
        gap_shares.main(["campus"])
    with pytest.raises(SystemExit):
        gap_shares.main(["pod", "--messages", "5"])
    assert "--messages must be at least 20" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        gap_shares.main(["pod", "--only", "QP engine, 1 QP", "--on", "topology"])
    assert "unknown factor(s)" in capsys.readouterr().err


def test_factor_shares_games_of_some_factors():
    """The walk to 1 QP and a game with a factor applied throughout (its shares add up to
    the difference between all applied and only the fixed ones); bad names named."""
    jobs, index = gap_shares.share_jobs("board", messages=10)
    rows = [{"design": "rdma", **{f"{m}_model": j * 3 for m, _ in gap_shares.SHARE_METRICS}}
            for j in range(len(jobs))]
    f = gap_shares.FACTORS
    assert list(gap_shares.factor_shares(rows, index, f[:-1])) == list(f[:-1])
    game = ("same attachment", "QP engine, 1 QP")
    got = gap_shares.factor_shares(rows, index, game, on=("end-to-end completion",))
    m = gap_shares.SHARE_METRICS[0][0]

    def v(subset):
        return rows[index[frozenset(subset)]][f"{m}_model"]
    assert sum(got[x][m]["shapley"] for x in game) == pytest.approx(
        v(game + ("end-to-end completion",)) - v(("end-to-end completion",)))
    with pytest.raises(ValueError, match="some of"):
        gap_shares.factor_shares(rows, index, ("topology",))
    with pytest.raises(ValueError, match="some of"):
        gap_shares.factor_shares(rows, index, game, on=("same attachment",))


def test_model_points_equal_the_models_own_runner():
    """The co-simulation's model side run alone (tb/nic/headline.model_point,
    tb/rdma/headline.model_point) against analysis.points.cycle_point, the model's own
    runner of a point, where both measure the same run."""
    from analysis.points import cycle_point
    from spec.rdma_engine import LADDER
    from tb.nic.headline import model_point as nic_point
    from tb.rdma.headline import model_point as rdma_point

    nic = nic_point("compact", 128, 40, latency_messages=0)
    ref = cycle_point("nic", msg_bytes=128, messages=40, framing="compact")
    for key in ("ii_cycles", "wire_bytes", "inflight_bits", "ctrl_ops"):
        assert nic[f"{key}_model"] == ref[key], key
    rung = LADDER[-1][0]
    rdma = rdma_point(128, 20, rung=rung, host="on_die", header="scaleup")
    ref = cycle_point("rdma", msg_bytes=128, messages=20, rung=rung, host="on_die",
                      header="scaleup")
    for key in ("ii_cycles", "wire_bytes", "host_bytes", "inflight_bits",
                "latency_cycles", "completion_cycles"):
        assert rdma[f"{key}_model"] == ref[key], key
    assert rdma["topology"] == "direct-link" and nic["topology"] == "switch"


def test_state_kinds():
    """The NIC's endpoint state is its completion state, the rest of in flight is fabric
    buffer; the replay buffer a size: at ``pod`` a 125-cycle link and 17-beat frames
    give a round trip of 2 x 125 + 2 x 17 + 8 = 292 beats, 309 with a frame more, 512
    as a power of two, x 512 bits (spec.fabric.retry_sizes); RDMA frames of 66 beats:
    2 x 125 + 132 + 8 + 66 = 456, also 512 beats. At ``board`` (2-cycle links) 64 and
    256 beats."""
    from tb.nic.headline import _point_params, state_kinds
    from tb.rdma.headline import state_kinds as rdma_kinds

    _, _, p, _ = _point_params("l2", 128, 10, 1, None, "pcie", "pod", True, "e2e", 0,
                               None)
    got = state_kinds(134_180, p)
    assert got["endpoint_state_bits"] + got["fabric_buffer_bits"] == 134_180
    assert got["replay_buffer_bits"] == 512 * 512
    _, _, p, _ = _point_params("compact", 128, 10, 1, None, "integrated", "board", False,
                               "credit", 0, None)
    assert state_kinds(4608, p) == {"endpoint_state_bits": 0, "fabric_buffer_bits": 4608,
                                    "replay_buffer_bits": 0}
    assert rdma_kinds(7692, "board", True) == {"endpoint_state_bits": 7692,
                                               "fabric_buffer_bits": 0,
                                               "replay_buffer_bits": 256 * 512}
    assert rdma_kinds(55_610, "pod", True)["replay_buffer_bits"] == 512 * 512
    assert rdma_kinds(55_610, "pod", False)["replay_buffer_bits"] == 0


@pytest.mark.parametrize("profile", list(FABRIC_PROFILES))
def test_destination_games_reach_row_9(profile):
    """In the games with destinations ``4096 QPs`` on the NIC's row 5 is side row 9 (its
    popularity the game's); it puts the NIC at 4,096 destinations only with both the
    Ethernet header and the end-to-end completion; once the engine is in, its 4096 QPs
    take the game's popularity off round robin, and everywhere else the game's points
    are the ones at one destination."""
    f = gap_shares.FACTORS
    (name, design, s, k), = [r for r in gap_table.side_settings(profile)
                             if gap_table.WIDE_SETTING in r[2]]
    peers = f[-1]
    assert gap_shares.subset_point(profile, f[:k] + (peers,), s["popularity"]) == (design, s)
    for pop in gap_shares.DEST_POPULARITIES:
        got = gap_shares.subset_point(profile, f[:k] + (peers,), pop)
        assert got == (design, dict(s, popularity=pop))
        for n in range(len(f) + 1):
            for subset in combinations(f, n):
                wide = gap_shares.subset_point(profile, subset, pop)
                one = gap_shares.subset_point(profile, subset)
                nic_wide = {"Ethernet header", "end-to-end completion", peers} <= set(subset) \
                    and "QP engine, 1 QP" not in subset
                assert (gap_table.WIDE_SETTING in wide[1]) == nic_wide, subset
                engine = {"QP engine, 1 QP", peers} <= set(subset)
                if engine and pop != "round_robin":
                    assert wide == (one[0], dict(one[1], popularity=pop)), subset
                elif not nic_wide:
                    assert wide == one, subset
    with pytest.raises(ValueError, match="destinations must be None or one of"):
        gap_shares.subset_point(profile, (), "uniform")


def test_game_jobs_add_the_destination_points_once():
    """game_jobs holds share_jobs' points first, then the NIC's points at 4,096
    destinations of each popularity and the engine's at 4096 QPs off round robin, each
    once; every game's index covers every subset."""
    jobs, index = gap_shares.share_jobs("pod", messages=10)
    every, indexes = gap_shares.game_jobs("pod", messages=10)
    k = len(gap_shares.FACTORS)
    assert indexes[None] == index
    assert [label for label, _, _ in every[:len(jobs)]] == [label for label, _, _ in jobs]
    extra = [kw for _, _, kw in every[len(jobs):]]
    nic = [kw for kw in extra if "destinations" in kw]
    engine = [kw for kw in extra if "destinations" not in kw]
    assert nic and all(kw["destinations"] == 4096 for kw in nic)
    assert engine and all(kw["qps"] == 4096 and kw["popularity"] != "round_robin"
                          for kw in engine)
    keys = [tuple(sorted(kw.items())) for kw in extra]
    assert len(set(keys)) == len(keys)
    assert {kw["popularity"] for kw in nic} == set(gap_shares.DEST_POPULARITIES)
    for pop in gap_shares.DEST_POPULARITIES:
        assert len(indexes[pop]) == 2 ** k
        used = {j for j in indexes[pop].values() if j >= len(jobs)}
        assert used == {len(jobs) + i for i, kw in enumerate(extra) if kw["popularity"] == pop}


def test_destination_game_shares_from_rows():
    """factor_shares on made-up rows in a game with destinations: the shares add up to
    the game's whole gap, its engine at 4096 QPs by the popularity minus row 0 (round
    robin: the same as the game at one destination, its table figure of ``4096 QPs``
    still the engine's step), and ``4096 QPs`` now moves the NIC."""
    jobs, indexes = gap_shares.game_jobs("pod", messages=10)
    rows = [{"design": "nic", **{f"{m}_model": j * j for m, _ in gap_shares.SHARE_METRICS}}
            for j in range(len(jobs))]
    f = gap_shares.FACTORS
    m = gap_shares.SHARE_METRICS[0][0]
    one = gap_shares.factor_shares(rows, indexes[None])
    for pop in gap_shares.DEST_POPULARITIES:
        got = gap_shares.factor_shares(rows, indexes[pop])
        whole = (rows[indexes[pop][frozenset(f)]][f"{m}_model"]
                 - rows[indexes[pop][frozenset()]][f"{m}_model"])
        assert sum(got[x][m]["shapley"] for x in f) == pytest.approx(whole, abs=0.01)
        if pop == "round_robin":
            assert whole == pytest.approx(sum(one[x][m]["shapley"] for x in f), abs=0.01)
            assert got[f[-1]][m]["table"] == one[f[-1]][m]["table"]
        assert got[f[-1]][m]["shapley"] != one[f[-1]][m]["shapley"]


def test_destination_points_pass_the_nic_checks():
    """Each NIC point at 4,096 destinations of the games is one the NIC's co-simulation
    takes: run_point's checks (nothing built) accept its arguments."""
    from tb.nic.headline import run_point

    jobs, indexes = gap_shares.game_jobs("board", messages=10)
    wide = [kw for _, _, kw in jobs if "destinations" in kw]
    assert wide
    for kw in wide[:2]:
        assert run_point("icarus", check_only=True, **kw) is None
