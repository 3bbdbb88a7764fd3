"""`make sim`'s command line: rung aliases, the whole description in --help, the RDMA
link latency, the inline limit named by its option, rows labelled once."""

import json

import pytest

from scripts import sim
from spec.rdma_engine import LADDER, MAX_INLINE_WORDS


def _error(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        sim.parse_args(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


def test_inline_rung_over_the_limit_names_the_option(capsys):
    """An inline rung carries at most MAX_INLINE_WORDS words of 64 bytes in the WQE
    (3 x 64 = 192): 200 bytes are refused before anything is built, naming the option
    and the limit."""
    limit = 64 * MAX_INLINE_WORDS
    err = _error(["--design", "rdma", "--rung", "bf-inline", "--msg-bytes", "200"], capsys)
    assert f"--msg-bytes must be at most {limit}" in err
    for rung in ("+unsignalled 1/64", "best"):
        err = _error(["--design", "rdma", "--rung", rung, "--msg-bytes", str(limit + 1)],
                     capsys)
        assert f"at most {limit}" in err
    args = sim.parse_args(["--design", "rdma", "--rung", "bf-inline", "--msg-bytes",
                           str(limit)])
    assert args.knobs["rung"] == "+WQE by MMIO, inline"
    args = sim.parse_args(["--design", "rdma", "--rung", "db-batch", "--msg-bytes", "200"])
    assert args.knobs["rung"] == "+doorbell batching 16"


def test_rung_aliases_name_ladder_rungs_and_old_names_work(capsys):
    names = [name for name, _ in LADDER]
    assert set(sim.RUNG_ALIASES.values()) == set(names)
    for alias, name in sim.RUNG_ALIASES.items():
        assert sim.parse_args(["--design", "rdma", "--rung", alias]).knobs["rung"] == name
    for name in names:
        assert sim.parse_args(["--design", "rdma", "--rung", name]).knobs["rung"] == name
    assert sim.RUNG_ALIASES["best"] == LADDER[-1][0]
    assert "--rung: rung must be one of" in _error(["--design", "rdma", "--rung", "fast"],
                                                   capsys)


def test_help_lists_aliases_and_the_whole_description(capsys):
    with pytest.raises(SystemExit):
        sim.parse_args(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    doc = " ".join(sim.__doc__.split())
    assert doc.split(". ")[1] in out              # past the first line's sentence
    assert doc.split(". ")[-1].rstrip(".") in out  # and to the end
    for alias in sim.RUNG_ALIASES:
        assert alias in out
    assert "[nic, rdma] link latency" in out


def test_link_latency_is_an_option_of_both_designs(capsys):
    assert sim.parse_args(["--design", "rdma", "--link-latency", "1"]).knobs[
        "link_latency"] == 1
    assert sim.parse_args(["--design", "nic", "--link-latency", "1"]).knobs[
        "link_latency"] == 1
    assert "--link-latency must be" in _error(
        ["--design", "rdma", "--link-latency", "0"], capsys)


def test_row_label_says_each_thing_once():
    """A headline label (which names its own QPs and entries) is the row's label; a
    ladder rung gets its QPs, entries and host appended."""
    best = {"design": "rdma", "rung": "best, 4096 QPs / 16 entries", "qps": 4096,
            "cache_entries": 16, "host": "pcie"}
    assert sim._cell(best, "row", None, "{}") == "best, 4096 QPs / 16 entries"
    rung = dict(best, rung="pipelined", qps=1)
    assert sim._cell(rung, "row", None, "{}") == "pipelined, 1 QP / 16 entries, pcie"
    assert sim._cell(dict(rung, link_latency=1), "row", None, "{}") == (
        "pipelined, 1 QP / 16 entries, pcie, link latency 1")
    read = {"design": "rdma", "op": "read", "qps": 1, "fabric": "pod"}
    assert sim._cell(read, "row", None, "{}") == "read, 1 QP, pod"
    level = dict(rung, fabric="pod", header="scaleup", reliability="link-retry+go-back-N")
    assert sim._cell(level, "row", None, "{}") == (
        "pipelined, 1 QP / 16 entries, pcie, link-retry+go-back-N, scaleup header, pod")
    nic = {"design": "nic", "framing": "l2", "peers": 1, "attachment": "pcie",
           "fabric": "pod", "completion": "e2e", "reliability": "link-retry"}
    assert sim._cell(nic, "row", None, "{}") == (
        "l2, 1 peers, pcie, pod, e2e completion, link-retry")
    assert sim._cell(dict(nic, peer_retry=True), "row", None, "{}") == (
        "l2, 1 peers, pcie, pod, e2e completion, link-retry, per-peer retry")
    assert sim._cell(dict(nic, attachment="integrated", fabric="board", completion="credit",
                          reliability="none"), "row", None, "{}") == "l2, 1 peers"


@pytest.mark.slow(reason=(
    "test_cosim_rdma_link_latency.py co-simulates the same one-cycle-link point on Icarus, and "
    "test_sim_cli.py::test_user_point_on_icarus runs the CLI on Icarus"))
def test_rdma_point_at_link_latency_1_on_icarus(tmp_path):
    """An RDMA point on one-cycle links (20 WRITEs of 128 B, the pipelined rung) runs on
    Icarus: RTL = model in every metric, and the row says its link latency."""
    rc = sim.main(["--sim", "icarus", "--design", "rdma", "--link-latency", "1", "--rung",
                   "pipelined", "--messages", "20", "--out", str(tmp_path)])
    assert rc == 0
    (row,) = json.loads((tmp_path / "point.json").read_text())
    assert (row["design"], row["link_latency"], row["messages"]) == ("rdma", 1, 20)
    assert row["mismatches"] == 0
    for key in ("latency_cycles", "ii_cycles", "wire_bytes", "completion_cycles"):
        assert row[f"{key}_rtl"] == row[f"{key}_model"], key
