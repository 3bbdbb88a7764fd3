"""The 'where the gap comes from' table's rows, jobs and printing (no simulator)."""

import pytest

from spec.fabric_profiles import FABRIC_PROFILES
from tb import gap_table

LEVEL_KEYS = ("attachment", "fabric", "completion", "reliability", "header")


@pytest.mark.parametrize("profile", list(FABRIC_PROFILES))
def test_each_row_changes_one_factor(profile):
    rows = gap_table.gap_settings(profile)
    assert len(rows) >= 7
    first = rows[0][2]
    assert (first["attachment"], first["fabric"], first["completion"], first["reliability"],
            first["header"]) == ("integrated", "board", "credit", "none", "compact")
    for (_, _, before), (name, _, after), (_, _, change) in zip(
            rows[:-1], rows[1:], gap_table.GAP_FACTORS[1:], strict=True):
        changed = {k for k in after if after.get(k) != before.get(k)}
        expected = {k for k, v in change.items()
                    if (profile if v == "{profile}" else v) != before.get(k)}
        assert changed == expected, name
    last = rows[-1][2]
    assert rows[-1][1] == "rdma" and last["qps"] == 4096 and last["header"] == "roce"
    assert last["fabric"] == profile and last["attachment"] == "pcie"


def test_board_fabric_row_is_a_no_op_and_runs_once():
    board = gap_table.gap_settings("board")
    names = [n for n, _, _ in board]
    k = names.index("fabric profile")
    assert board[k][2] == board[k - 1][2]
    side = len(gap_table.SIDE_ROWS)
    jobs = gap_table.gap_jobs("icarus", ("board",), messages=10, msg_bytes=128)
    assert len(jobs) == len(board) - 1 + side
    both = gap_table.gap_jobs("icarus", ("board", "pod"), messages=10, msg_bytes=128)
    # pod shares the rows before the fabric changes with board; the side rows (beside
    # rows after it) are its own
    assert len(both) == len(jobs) + len(board) - k + side


def test_bad_profile_named():
    with pytest.raises(ValueError, match="profile must be one of"):
        gap_table.gap_settings("campus")


def test_finish_gap_orders_rows_and_checks_count():
    jobs = gap_table.gap_jobs("icarus", ("board", "pod"), messages=10, msg_bytes=128)
    results = [{"design": "x", "latency_cycles_rtl": 10 + k, "ii_cycles_rtl": 3.0,
                "mismatches": 0, "frames": [], "cycles": 1} for k in range(len(jobs))]
    rows = gap_table.finish_gap(results, ("board", "pod"), messages=10, msg_bytes=128)
    n, side = len(gap_table.GAP_FACTORS), len(gap_table.SIDE_ROWS)
    assert [r["gap_row"] for r in rows] == list(range(n + side)) * 2
    assert all("frames" not in r for r in rows)
    board = [r for r in rows if r["gap_profile"] == "board"]
    assert board[3]["latency_cycles_rtl"] == board[4]["latency_cycles_rtl"]
    eth = [f[0] for f in gap_table.GAP_FACTORS].index("Ethernet header")
    assert [r.get("gap_side_of") for r in board] == [None] * n + [n - 1, eth]
    with pytest.raises(ValueError, match="distinct points"):
        gap_table.finish_gap(results[:-1], ("board", "pod"), 10, 128)
    lines = gap_table.gap_table_lines(rows, "pod")
    assert lines[0].startswith("Where the gap comes from (pod)")
    assert len(lines) == 3 + n + side
    assert lines[3].split()[-3:] == ["0", "-", "-"]          # row 0: nothing above it
    assert lines[4].split()[-2:] == ["+1", "+0"]             # latency 10 -> 11, ii 3 -> 3
    # the side row against the row it stands beside (row 7), not the row above it
    pod = [r for r in rows if r["gap_profile"] == "pod"]
    want = pod[n]["latency_cycles_rtl"] - pod[n - 1]["latency_cycles_rtl"]
    assert lines[3 + n].split()[0] == f"{n}<{n - 1}"
    assert lines[3 + n].split()[-2] == f"{want:+d}"


def test_sim_gap_option_checked():
    from scripts.sim import parse_args

    assert parse_args(["--gap", "none"]).gap == ()
    assert parse_args(["--gap", "pod,board,pod"]).gap == ("pod", "board")
    with pytest.raises(SystemExit):
        parse_args(["--gap", "campus"])


def test_report_section_has_a_table_per_profile():
    from scripts.reporting.gap import gap_section

    jobs = gap_table.gap_jobs("icarus", ("board", "pod"), messages=10, msg_bytes=128)
    results = [{"design": "nic", "latency_cycles_rtl": 11, "ii_cycles_rtl": 3.0,
                "ctrl_ops_rtl": {"credits": 2.0, "acks": 0.5}, "inflight_bits_rtl": 4608,
                "mismatches": 0} for _ in jobs]
    rows = gap_table.finish_gap(results, ("board", "pod"), 10, 128)
    md = gap_section(rows, ("board", "pod"), 10, 128, "icarus").splitlines()
    assert "### At `board`" in md and "### At `pod`" in md
    table = [line for line in md if line.startswith("| ") and "factor" not in line]
    assert len(table) == 2 * (len(gap_table.GAP_FACTORS) + len(gap_table.SIDE_ROWS))
    first = [c.strip() for c in table[0].strip("|").split("|")]
    assert first[:3] == ["0", "NIC as built", "nic"]
    assert "2.50" in first and "4,608" in first      # control ops summed, bits grouped
    n = len(gap_table.GAP_FACTORS)
    assert table[n].startswith(f"| {n} (beside {n - 1}) | 4096 QPs, best cache |")
    assert table[n + 1].startswith(f"| {n + 1} (beside 5) | NIC at 4096 destinations |")
    assert any('ARGS="--gap board,pod --gap-destinations"' in line for line in md)


def test_rows_at_4096_destinations_on_request():
    """Without ``destinations`` the jobs and rows leave out the side rows of the NIC at
    4,096 destinations (one a profile) and keep every other row and its number; with it
    (the default) the row's point carries ``destinations`` to run_point."""
    wide = [r for r in gap_table.SIDE_ROWS if gap_table.WIDE_SETTING in r[2]]
    assert len(wide) == 1
    every = gap_table.gap_jobs("icarus", ("board", "pod"), 10, 128)
    some = gap_table.gap_jobs("icarus", ("board", "pod"), 10, 128, destinations=False)
    assert len(every) == len(some) + 2
    assert [kw.get("destinations") for _, _, kw in every if kw.get("destinations")] == [
        4096, 4096]
    assert not any("destinations" in kw for _, _, kw in some)
    results = [{"design": "nic", "mismatches": 0} for _ in some]
    rows = gap_table.finish_gap(results, ("board", "pod"), 10, 128, destinations=False)
    n = len(gap_table.GAP_FACTORS)
    assert [r["gap_row"] for r in rows] == list(range(n + len(gap_table.SIDE_ROWS) - 1)) * 2
    assert all(r["gap_factor"] != wide[0][0] for r in rows)
    from scripts.sim import parse_args

    assert parse_args(["--gap-destinations"]).gap_destinations
    with pytest.raises(SystemExit):
        parse_args(["--gap-destinations", "--design", "nic"])


@pytest.mark.parametrize("argv,named", [
    (["--design", "nic", "--completion", "bogus"], "--completion"),
    (["--design", "rdma", "--completion", "e2e"], "--completion"),
    (["--design", "rdma", "--header", "ipoib"], "--header"),
    (["--design", "nic", "--header", "roce"], "--header"),
    (["--link-retry"], "--link-retry"),
    (["--design", "rdma", "--topology", "ring"], "--topology"),
    (["--design", "nic", "--topology", "switch"], "--topology"),
    (["--design", "rdma", "--topology", "switch", "--header", "scaleup"], "--header"),
])
def test_level_field_options_named_when_bad(argv, named, capsys):
    from scripts.sim import parse_args

    with pytest.raises(SystemExit):
        parse_args(argv)
    assert named in capsys.readouterr().err


def test_level_field_options_reach_the_point():
    from scripts.sim import parse_args

    nic = parse_args(["--design", "nic", "--fabric", "pod", "--completion", "e2e",
                      "--link-retry", "--attachment", "pcie"])
    assert {k: nic.knobs[k] for k in ("fabric", "completion", "link_retry", "attachment")} \
        == {"fabric": "pod", "completion": "e2e", "link_retry": True, "attachment": "pcie"}
    rdma = parse_args(["--design", "rdma", "--fabric", "pod", "--header", "scaleup",
                       "--link-retry"])
    assert (rdma.knobs["header"], rdma.knobs["link_retry"]) == ("scaleup", True)
    switch = parse_args(["--design", "rdma", "--fabric", "pod", "--link-retry", "--topology",
                         "switch"])
    assert (switch.knobs["topology"], switch.knobs["fabric"]) == ("switch", "pod")


def _level_cases():
    """(profile, row) of every row after the first (the engine's rows on the NIC's
    switch, as the NIC's)."""
    for profile in FABRIC_PROFILES:
        for k in range(1, len(gap_table.gap_settings(profile))):
            yield pytest.param(profile, k, id=f"{profile}-{k}")


@pytest.mark.parametrize("profile,k", list(_level_cases()))
def test_each_row_changes_at_most_its_own_level_key(profile, k):
    """Each row built from its predecessor: the level-field keys derived from the rows'
    actual comparison keys (those their points carry), not from the declared settings,
    differ in the factor's own key only (none for the design's own factors)."""
    from spec.metrics import LEVEL_KEYS, level_keys

    rows = gap_table.gap_settings(profile)
    (_, d0, s0), (name, d1, s1) = rows[k - 1], rows[k]
    before = level_keys(gap_table.row_keys(d0, s0))
    after = level_keys(gap_table.row_keys(d1, s1))
    changed = {key for key in LEVEL_KEYS if before[key] != after[key]}
    own = gap_table.FACTOR_LEVEL[name]
    assert changed <= ({own} if own else set()), (name, changed)
    if own and (d0, s0) != (d1, s1):         # a no-op only where the settings are equal
        assert changed == {own}, name


def test_level_keys_catch_a_row_that_changes_two_keys():
    """The check above on made-up pairs: the engine with RoCEv2 (on the NIC's switch)
    against the NIC's compact framing changes the header class only; with the scale-up
    header it keeps the class but runs on RdmaTop's direct link (the fabric top routes
    RoCEv2 only), so the topology changes."""
    from spec.metrics import level_keys

    nic = level_keys(gap_table.row_keys("nic", dict(
        attachment="pcie", fabric="pod", completion="e2e", reliability="link-retry",
        header="compact")))
    engine = dict(attachment="pcie", fabric="pod", completion="e2e",
                  reliability="link-retry", qps=1, cache_entries=16, rung="pipelined")
    short = level_keys(gap_table.row_keys("rdma", dict(engine, header="scaleup")))
    roce = level_keys(gap_table.row_keys("rdma", dict(engine, header="roce")))
    assert {k for k in nic if nic[k] != short[k]} == {"topology"}
    assert {k for k in nic if nic[k] != roce[k]} == {"header_class"}
    with pytest.raises(ValueError, match="header must be one of"):
        level_keys(dict(nic, header="ipoib", reliability="none"))
    with pytest.raises(ValueError, match="lacks the comparison key"):
        level_keys({"fabric": "pod"})


def _fake_run_jobs(offset=0):
    """A ``run_jobs`` without a simulator: each point's figures a function of its
    arguments (those the co-simulation and the model alone share), ``offset`` added to
    the model-alone points'."""
    from tb.gap_shares import SHARE_METRICS

    def run(jobs, workers):
        out = []
        for _, fn, kw in jobs:
            point = {k: v for k, v in sorted(kw.items())
                     if k not in ("sim", "test_id", "messages", "msg_bytes")}
            figure = sum(ord(c) for c in repr(point)) % 997 + (
                offset if fn.__name__ == "model_point" else 0)
            row = {"design": "nic" if "framing" in kw else "rdma", "mismatches": 0,
                   **{f"{m}_model": figure for m, _ in SHARE_METRICS},
                   **{f"{m}_rtl": figure for m, _ in SHARE_METRICS}}
            out.append(row)
        return out
    return run


def test_run_gap_attaches_shares_and_checks_the_model_alone():
    from scripts.reporting.gap import gap_section, run_gap
    from tb.gap_shares import SHARE_METRICS

    rows = run_gap("icarus", ("board",), 10, 128, _fake_run_jobs(), 1)
    assert "shapley" not in rows[0]
    walk = [r for r in rows if "gap_side_of" not in r]
    assert len(walk) == len(gap_table.GAP_FACTORS)
    assert all("shapley" not in r for r in rows if "gap_side_of" in r)   # not a factor
    for prev, r in zip(walk[:-1], walk[1:], strict=True):
        for m, _ in SHARE_METRICS:
            assert r["table_order"][m] == r[f"{m}_model"] - prev[f"{m}_model"]
            lo, hi = r["range"][m]
            assert lo <= r["shapley"][m] <= hi
    from tb.gap_shares import GAMES

    for suffix, _, factors, _ in GAMES:
        have = [r["gap_factor"] for r in walk if "shapley" + suffix in r]
        assert have == list(factors), suffix
    md = gap_section(rows, ("board",), 10, 128, "icarus")
    assert "Each factor's share over all orders at `board`" in md
    assert sum(line.startswith("| 4096 QPs |") for line in md.splitlines()) == sum(
        "4096 QPs" in factors for _, _, factors, _ in GAMES)
    assert "the NIC at 4,096 destinations (zipf)" in md
    with pytest.raises(RuntimeError, match="the model alone gives"):
        run_gap("icarus", ("board",), 10, 128, _fake_run_jobs(offset=1), 1)


def test_run_gap_checks_row_9_against_the_model_alone():
    """Row 9 (the NIC at 4,096 destinations) is a point of the round-robin game: a model
    alone that differs on the destination points only is caught at that row."""
    from scripts.reporting.gap import run_gap

    fake = _fake_run_jobs()

    def run(jobs, workers):
        out = fake(jobs, workers)
        for (_, fn, kw), row in zip(jobs, out, strict=True):
            if fn.__name__ == "model_point" and kw.get("destinations"):
                row["wire_bytes_model"] += 1
        return out
    n = len(gap_table.GAP_FACTORS) + len(gap_table.SIDE_ROWS) - 1
    with pytest.raises(RuntimeError, match=f"row {n}: the model alone gives wire_bytes"):
        run_gap("icarus", ("board",), 10, 128, run, 1)


def test_finish_gap_checks_the_rows_comparison_keys():
    """A result whose comparison keys are not those of its row's settings is refused; the
    keys the level-field test derives are the rows' own."""
    jobs = gap_table.gap_jobs("icarus", ("board",), messages=10, msg_bytes=128)
    settings = {}
    for _, design, s in gap_table.gap_settings("board") + [
            (name, design, s) for name, design, s, _ in gap_table.side_settings("board")]:
        settings.setdefault((design, tuple(sorted(s.items()))), (design, s))
    results = [dict(gap_table.row_keys(*v), mismatches=0) for v in settings.values()]
    assert len(results) == len(jobs)
    rows = gap_table.finish_gap(results, ("board",), 10, 128)
    assert [r["topology"] for r in rows] == ["switch"] * len(rows)
    results[0] = dict(results[0], header="l2")
    with pytest.raises(ValueError, match="comparison keys"):
        gap_table.finish_gap(results, ("board",), 10, 128)


@pytest.mark.parametrize("profile", list(FABRIC_PROFILES))
def test_completion_means_the_same_from_the_end_to_end_row_on(profile):
    """From the end-to-end completion's row on, both designs' rows count a message
    complete when a record of its completion is in the sender's host memory (the NIC's
    completion record, the engine's CQE: ``completion_at`` ``host-memory``); before it,
    at the link credit."""
    rows = gap_table.gap_settings(profile)
    at = [gap_table.row_keys(design, s)["completion_at"] for _, design, s in rows]
    first = [name for name, _, _ in rows].index("end-to-end completion")
    assert at[:first] == ["link-credit"] * first
    assert at[first:] == ["host-memory"] * (len(rows) - first)


@pytest.mark.parametrize("profile", list(FABRIC_PROFILES))
def test_side_rows_change_one_thing_and_no_level_key(profile):
    """A side row is the row it stands beside with its own change only (the engine's best
    cache beside its 16 direct-mapped entries; the NIC's 4,096 destinations beside its
    L2 row), no level-field key changed, and its point carries the change (the cache's
    entries and ways reach the top, the destinations run_point)."""
    from spec.metrics import level_keys
    from spec.rdma_engine import CACHE_WAYS

    rows = gap_table.gap_settings(profile)
    sides = gap_table.side_settings(profile)
    assert len(sides) == len(gap_table.SIDE_ROWS) >= 1
    for (name, design, s, k), (_, _, change) in zip(sides, gap_table.SIDE_ROWS,
                                                      strict=True):
        _, d0, s0 = rows[k]
        assert design == d0
        assert {key for key in set(s) | set(s0) if s.get(key) != s0.get(key)} == set(change)
        assert level_keys(gap_table.row_keys(d0, s0)) == level_keys(
            gap_table.row_keys(design, s)), name
        point = gap_table.point_of(design, s)
        assert {key: point[key] for key in change} == change
    best = dict(sides[0][2])
    assert sides[0][3] == [n for n, _, _ in rows].index("4096 QPs")
    # the largest cache a build takes (RdmaFabricTop: 16 to 256 entries), ways it builds
    assert best["cache_entries"] == 256 and best["cache_ways"] in CACHE_WAYS
    assert rows[sides[0][3]][2]["cache_entries"] == 16
    assert gap_table.point_of("rdma", rows[sides[0][3]][2]).get("cache_ways", 1) == 1


def test_nic_at_4096_destinations_is_row_5_with_destinations():
    """The wide side row: row 5's NIC (PCIe, end-to-end completion with records, link
    retry, L2) with ``destinations`` 4096, the engine's QPs of row 7, round robin as
    the engine's; its area parts are the wide blocks, named, not measured."""
    from scripts.area_proxies.gap import side_parts

    for profile in FABRIC_PROFILES:
        rows = gap_table.gap_settings(profile)
        name, design, s, k = gap_table.side_settings(profile)[1]
        assert (name, design, k) == ("NIC at 4096 destinations", "nic", 5)
        assert s == dict(rows[5][2], destinations=rows[7][2]["qps"],
                         popularity="round_robin")
        point = gap_table.point_of(design, s)
        assert point["popularity"] == s["popularity"]
        assert (point["attachment"], point["completion"], point["retry"],
                point["framing"], point["records"]) == ("pcie", "e2e", True, "l2", 16)
        parts = side_parts(profile)[1][2]
        assert {"tracker_memory_d4096", "completion_keyed_d4096",
                "completion_recorder_queue_d4096"} <= set(parts)
