"""Every co-simulation run has a folder of its own, whatever the length of its id
(tb.run_dirs.run_dir_name), and a point's figures come from the run that produced them."""

import pytest

from tb.run_dirs import RUN_DIR_CHARS, run_dir_name


def test_short_ids_keep_their_name():
    assert run_dir_name("point-1000x128") == "point-1000x128"
    assert run_dir_name("a" * RUN_DIR_CHARS) == "a" * RUN_DIR_CHARS


def test_long_ids_that_share_a_prefix_get_distinct_folders():
    """Two ids that agree on far more than the folder name's length (the back-to-back
    and the one-at-a-time run of one point) get two folders, each of at most
    RUN_DIR_CHARS characters."""
    stem = "verilator_pdoorbell_batching_16_q997_c64_pcie_n96_b193_pod_retry_scaleup_w4"
    names = {run_dir_name(stem + "_qpc1024" + tail) for tail in ("_bw", "_lat")}
    assert len(names) == 2
    assert all(len(n) <= RUN_DIR_CHARS for n in names)
    assert all(n.startswith(stem[:40]) for n in names)


def test_ids_that_differ_only_in_unsafe_characters_stay_apart():
    names = {run_dir_name(t) for t in ("a b", "a_b", "a/b", "a:b")}
    assert len(names) == 4
    assert all(set(n) <= set("abcdef0123456789_-") for n in names)


@pytest.mark.parametrize("bad", ["", None, 7])
def test_a_test_id_must_be_a_string(bad):
    with pytest.raises(ValueError, match="test_id"):
        run_dir_name(bad)


@pytest.mark.slow_variants("icarus", reason=(
    "Verilator runs the same two points; the folder names do not depend on the simulator"))
def test_long_point_tag_reports_its_own_figures(sim):
    """An RDMA point under a tag past the folder-name length gives the figures of the same
    point under a short tag: its back-to-back and one-at-a-time runs no longer share a
    folder (where the back-to-back figures were read from the one-at-a-time run)."""
    from tb.rdma.headline import run_point

    point = dict(msg_bytes=193, messages=8, qps=3, rung="+doorbell batching 16")
    long_tag = "user_point_" + "x" * 100
    rows = [run_point(sim, **point, test_id=tag) for tag in ("short", long_tag)]
    for row in rows:
        row.pop("frames")
        assert row["mismatches"] == 0
    assert rows[0] == rows[1]
    assert rows[0]["ii_cycles_rtl"] < rows[0]["latency_cycles_rtl"]
