"""`make sim` with a design point of the user's (scripts/sim.py --design ...): the
options are checked before anything is built (an error names the option), and a small
point co-simulates on Icarus with RTL = model."""

import json
import zlib

import pytest

from pymodel.pcap import read_pcapng
from scripts import sim
from spec.formats.scaleup import LINKTYPE_SCALEUP


@pytest.mark.parametrize("argv,needle", [
    (["--qps", "4"], "--qps: give --design too"),
    (["--design", "nic", "--qps", "4"], "--qps: not an option of --design nic"),
    (["--design", "rdma", "--cache-entries", "24"], "--cache-entries must be"),
    (["--design", "rdma", "--qps", "0"], "--qps: qps must be"),
    (["--design", "rdma", "--host", "cxl"], "--host: host must be one of"),
    (["--design", "rdma", "--rung", "fast"], "--rung: rung must be one of"),
    (["--design", "rdma", "--rung", "pipelined", "--messages", "100000", "--msg-bytes",
      "4096"], "host memory"),
    (["--design", "nic", "--peers", "16"], "--peers: peers must be 1 to 15"),
    (["--design", "nic", "--attachment", "cxl"], "--attachment: attachment must be"),
    (["--design", "nic", "--max-payload", "100"], "--max-payload must be"),
    (["--design", "ethernet"], "invalid choice"),
    (["--msg-bytes", "0"], "--msg-bytes must be 1 to 4096"),
    (["--jobs", "0"], "--jobs must be at least 1"),
    (["--gap", "none", "--gap-destinations"], "--gap-destinations: a row of the gap table"),
    (["--selective"], "--selective: an option of --design rdma"),
    (["--design", "nic", "--selective"], "--selective: an option of --design rdma"),
    (["--design", "rdma", "--mr-cache", "3"], "--mr-cache must be 0"),
    (["--design", "rdma", "--mr-cache", "512"], "--mr-cache must be 0"),
    (["--design", "rdma", "--mrs", "17"], "--mrs: mrs must be"),
    (["--design", "nic", "--mr-cache", "2"], "--mr-cache: not an option of --design nic"),
    (["--design", "rdma", "--rung", "fastest"], "seq, pipelined, db-batch, bf-inline"),
    (["--design", "rdma", "--qpc-bytes", "96"], "--qpc-bytes must be one of"),
    (["--design", "rdma", "--qpc-bytes", "1024", "--qps", "2049", "--messages", "8"],
     "--qps: qps 2049 and --qpc-bytes 1024: the context table holds 2048"),
    (["--design", "nic", "--gap", "board"], "--gap: an option of the headline"),
    (["--design", "rdma", "--jobs", "2"], "--jobs: an option of the headline"),
])
def test_bad_options_name_the_option(argv, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        sim.parse_args(argv)
    assert exc.value.code == 2
    assert needle in capsys.readouterr().err


def test_point_defaults():
    args = sim.parse_args(["--design", "rdma", "--qps", "64"])
    assert args.knobs == {"qps": 64, "rung": "+ACK coalescing"}
    args = sim.parse_args(["--design", "nic", "--peers", "2"])
    assert args.knobs == {"peers": 2, "framing": "compact"}
    assert sim.parse_args([]).design is None
    args = sim.parse_args(["--design", "rdma", "--selective"])
    assert args.knobs == {"rung": "+ACK coalescing", "selective": 1}


def test_user_point_on_icarus(tmp_path):
    """A NIC point of the user's (L2, 2 peers, 20 stores of 200 B) runs on Icarus: one
    row, every metric RTL = model, written to point.json."""
    rc = sim.main(["--sim", "icarus", "--design", "nic", "--framing", "l2", "--peers", "2",
                   "--messages", "20", "--msg-bytes", "200", "--out", str(tmp_path)])
    assert rc == 0
    (row,) = json.loads((tmp_path / "point.json").read_text())
    assert (row["design"], row["framing"], row["peers"], row["messages"]) == ("nic", "l2", 2,
                                                                              20)
    assert row["mismatches"] == 0
    for key in ("latency_cycles", "ii_cycles", "wire_bytes", "completion_cycles"):
        assert row[f"{key}_rtl"] == row[f"{key}_model"], key
    # The point's L2 frames in point.pcap: Ethernet, each with a good FCS, 20 stores of
    # 200 B each at least one frame.
    linktype, frames = read_pcapng(tmp_path / "point.pcap")
    assert linktype == 1 and len(frames) >= 20
    assert all(zlib.crc32(f[:-4]).to_bytes(4, "little") == f[-4:] for f in frames)


@pytest.mark.slow(reason=(
    "a build of its own (about 2 min of CPU); make test co-simulates the per-peer retry on "
    "NicTop (test_cosim_nic_peer.py) and link retry under e2e completion "
    "(test_cosim_nic_e2e_combos.py) on Icarus"))
@pytest.mark.parametrize("attachment", ["integrated", "pcie"])
def test_user_point_with_per_peer_and_link_retry(tmp_path, attachment):
    """``--peer-retry`` with ``--link-retry`` (e2e completion, the per-peer window over
    reliable links) runs as one point on either attachment: every metric RTL = model,
    and the row says both."""
    rc = sim.main(["--design", "nic", "--peer-retry", "64", "--link-retry", "--completion",
                   "e2e", "--attachment", attachment, "--messages", "60",
                   "--out", str(tmp_path)])
    assert rc == 0
    (row,) = json.loads((tmp_path / "point.json").read_text())
    assert (row["peer_retry"], row["reliability"], row["completion"],
            row["attachment"]) == (True, "link-retry", "e2e", attachment)
    assert row["mismatches"] == 0
    for key in ("latency_cycles", "ii_cycles", "wire_bytes", "completion_cycles"):
        assert row[f"{key}_rtl"] == row[f"{key}_model"], key


@pytest.mark.slow(reason=(
    "an export of NicMemTop with link retry of its own (about 30 s on Icarus); make test "
    "co-simulates the loads and atomics over faulty reliable links on Icarus "
    "(test_cosim_nic_mem.py, test_link_retry_loads_and_atomics_match_model) and checks "
    "the options in test_nic_mem_model.py"))
@pytest.mark.parametrize("op", ["load", "atomic"])
def test_user_mem_point_with_link_retry(op, tmp_path):
    """``--op load|atomic --link-retry`` runs as one point on NicMemTop(link_retry=True):
    every metric RTL = model, and the row (and its line in the table) says link retry."""
    from scripts.sim_table import _cell

    rc = sim.main(["--sim", "icarus", "--design", "nic", "--op", op, "--link-retry",
                   "--messages", "40", "--out", str(tmp_path)])
    assert rc == 0
    (row,) = json.loads((tmp_path / "point.json").read_text())
    assert (row["op"], row["reliability"], row["messages"]) == (op, "link-retry", 40)
    assert row["mismatches"] == 0
    assert _cell(row, "row", None, "{}").endswith("link-retry")
    for key in ("latency_cycles", "burst_latency_cycles", "ii_cycles", "peak_outstanding"):
        assert row[f"{key}_rtl"] == row[f"{key}_model"], key


@pytest.mark.parametrize("row,linktype", [
    ({"design": "nic", "framing": "l2"}, 1),
    ({"design": "nic", "framing": "compact"}, None),
    ({"design": "rdma", "framing": "rocev2"}, 1),
    ({"design": "rdma", "framing": "scaleup"}, LINKTYPE_SCALEUP),
    ({"design": "ephemeral"}, None),
])
def test_point_pcap_link_type(row, linktype):
    assert sim.point_pcap(row) == linktype


def test_long_rdma_point_is_checked_at_once(capsys):
    """The point of a user's report: 997 QPs of 1 KiB contexts (more than the old node-B
    QPN layout allowed) is accepted before anything is built, and 2049 are refused
    naming both options."""
    argv = ["--design", "rdma", "--fabric", "pod", "--link-retry", "--header", "scaleup",
            "--cache-entries", "64", "--cache-ways", "4", "--qpc-bytes", "1024", "--rung",
            "db-batch", "--msg-bytes", "193", "--messages", "96"]
    args = sim.parse_args(argv + ["--qps", "997"])
    assert (args.knobs["qps"], args.knobs["qpc_bytes"]) == (997, 1024)
    with pytest.raises(SystemExit):
        sim.parse_args(argv + ["--qps", "2049"])
    err = capsys.readouterr().err
    assert "--qps" in err and "--qpc-bytes" in err


def test_jobs_from_the_environment(monkeypatch):
    """`make sim` passes JOBS in the environment, so a point (which takes no --jobs) and
    the headline both start; a JOBS that is no number is refused naming it."""
    monkeypatch.setenv("JOBS", "3")
    assert sim.parse_args([]).jobs == 3
    assert sim.parse_args(["--design", "nic"]).design == "nic"
    monkeypatch.setenv("JOBS", "two")
    with pytest.raises(SystemExit):
        sim.parse_args([])


def test_option_names_in_errors():
    """Knob names with an underscore become the options users type; a leading knob name
    gains its option; prose is left alone."""
    assert sim.option_names("qpc_bytes must be 64") == "--qpc-bytes must be 64"
    assert (sim.option_names("qps 9 and qpc_bytes 1024: use fewer messages")
            == "--qps: qps 9 and --qpc-bytes 1024: use fewer messages")
    assert sim.option_names("the --cache-entries given") == "the --cache-entries given"


def _square_after(x, nap):
    import time

    time.sleep(nap)
    return x * x


@pytest.mark.parametrize("workers", [1, 2])
def test_run_jobs_keeps_the_order_of_the_jobs(workers, capsys):
    """Results come back in the jobs' order whatever order they finish in (the first
    job sleeps longest); each finished job is reported."""
    jobs = [(f"job {k}", _square_after, dict(x=k, nap=0.05 * (4 - k))) for k in range(4)]
    assert sim.run_jobs(jobs, workers) == [0, 1, 4, 9]
    assert capsys.readouterr().out.count(" done: job ") == 4


def test_a_failed_point_cosimulation_ends_with_fail(monkeypatch, tmp_path, capsys):
    """A co-simulation of a ``--design`` point that fails or crashes (not a counted
    mismatch) ends ``make sim`` with exit status 1 and a ``FAIL`` line naming the design
    and the failure, not a traceback; nothing is written."""
    from tb.cosim import CosimFailure

    def failing(args):
        raise CosimFailure("rdma_fabric_pair (verilator): the test failed\nsecond line")

    monkeypatch.setattr(sim, "run_design_point", failing)
    rc = sim.main(["--design", "ephemeral", "--messages", "16", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 1
    assert "[sim] FAIL: a co-simulation of the ephemeral point failed" in err
    assert "rdma_fabric_pair (verilator): the test failed / second line" in err
    assert not (tmp_path / "point.json").exists()
