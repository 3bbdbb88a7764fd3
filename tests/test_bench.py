"""scripts/bench.py and scripts/benchmark/: options, the bench.json shape (a tiny
golden-model run), the readers of results.xml and of the `make test` record. No
co-simulation runs here."""

import datetime
import json
import sys

import pytest

from scripts import bench
from scripts.benchmark import alone, cosim, make_test, models

SPEC_KEYS = {"model_cycle_msgs_per_s", "model_fast_msgs_per_s", "rtl_cycles_per_s",
             "rtl_msgs_per_s", "run_phase_cycles_per_s", "clock_only_cycles_per_s",
             "make_test_wall_s", "make_sim_wall_s"}


@pytest.mark.parametrize("argv, option", [
    (["--only", "models"], "--only"),
    (["--sims", "vcs"], "--sims"),
    (["--sims", "verilator,questa"], "--sims"),
    (["--sims", ","], "--sims"),
    (["--designs", "tcp"], "--designs"),
    (["--messages", "0"], "--messages"),
    (["--messages", "ten"], "--messages"),
    (["--icarus-messages", "-5"], "--icarus-messages"),
    (["--fast-messages", "1.5"], "--fast-messages"),
    (["--repeats", "0"], "--repeats"),
    (["--verilator-opt=-O9"], "--verilator-opt"),
    (["--verilator-opt", "fast"], "--verilator-opt"),
])
def test_bad_option_is_an_error_naming_it(argv, option, capsys):
    with pytest.raises(SystemExit) as exc:
        bench.parse_args(argv)
    assert exc.value.code == 2
    assert option in capsys.readouterr().err


def test_bad_verilator_opt_environment_is_an_error(monkeypatch, capsys):
    monkeypatch.setenv("VERILATOR_OPT", "-O7")
    with pytest.raises(SystemExit) as exc:
        bench.parse_args([])
    assert exc.value.code == 2
    assert "VERILATOR_OPT" in capsys.readouterr().err


def test_defaults(monkeypatch):
    monkeypatch.delenv("VERILATOR_OPT", raising=False)
    args = bench.parse_args([])
    assert args.only == "all" and args.sims == ("verilator", "icarus")
    assert args.designs == ("nic", "rdma")
    assert (args.messages, args.icarus_messages, args.fast_messages) == (1000, 200, 1_000_000)
    assert args.verilator_opt == "-O1" and not args.no_waves and not args.run_tests
    args = bench.parse_args(["--messages", "7", "--sims", "Icarus, icarus", "--no-waves"])
    assert args.fast_messages == 7000 and args.sims == ("icarus",) and args.no_waves
    monkeypatch.setenv("VERILATOR_OPT", "-O2")
    assert bench.parse_args([]).verilator_opt == "-O2"
    for text in ("-O1", "O1", "o1", "1"):
        assert bench.parse_args([f"--verilator-opt={text}"]).verilator_opt == "-O1"
    assert bench.parse_args(["--verilator-opt", "Os"]).verilator_opt == "-Os"


def test_steps_cover_every_simulator_key():
    args = bench.parse_args(["--only", "rtl"])
    keys = {(sim, waves) for what, (sim, waves), _ in bench._steps(args)}
    assert len(bench._steps(args)) == 8
    assert {s + ("_waves" if w else "") for s, w in keys} == set(bench.SIM_KEYS)
    args = bench.parse_args(["--only", "rtl", "--no-waves", "--sims", "icarus",
                             "--designs", "rdma"])
    assert bench._steps(args) == [("rtl", ("icarus", False), "rdma")]
    assert [s[:2] for s in bench._steps(bench.parse_args(["--only", "model"]))] == \
        [("model", "cycle")] * 2 + [("model", "fast")] * 2


def test_model_only_run_writes_the_json(tmp_path, capsys):
    out = tmp_path / "deep" / "bench.json"
    rc = bench.main(["--only", "model", "--messages", "20", "--fast-messages", "2000",
                     "--repeats", "1", "--out", str(out)])
    assert rc == 0
    report = json.loads(out.read_text())
    assert SPEC_KEYS <= set(report) and set(report) - SPEC_KEYS == {"meta", "runs"}
    for key in ("model_cycle_msgs_per_s", "model_fast_msgs_per_s"):
        assert set(report[key]) == {"nic", "rdma"}
        assert all(isinstance(v, float) and v > 0 for v in report[key].values()), key
    for key in ("rtl_cycles_per_s", "rtl_msgs_per_s", "run_phase_cycles_per_s",
                "clock_only_cycles_per_s"):
        assert set(report[key]) == set(bench.SIM_KEYS)
        assert all(v == {"nic": None, "rdma": None} for v in report[key].values())
    wall = report["make_test_wall_s"]
    assert wall is None or (isinstance(wall, float) and wall > 0)
    assert [(r["kind"], r["design"], r["messages"]) for r in report["runs"]] == [
        ("model", "nic", 20), ("model", "rdma", 20), ("model", "nic", 2000),
        ("model", "rdma", 2000)]
    assert report["meta"]["msg_bytes"] == 128
    printed = capsys.readouterr().out
    assert "[1/4] model cycle nic, 20 messages" in printed and "[4/4]" in printed
    assert "wrote" in printed


def test_missing_model_is_reported_not_fatal(tmp_path, monkeypatch):
    def missing(kind):
        raise ImportError(f"No module named 'pymodel.{kind}'")
    monkeypatch.setattr(models, "_model_function", missing)
    out = tmp_path / "b.json"
    assert bench.main(["--only", "model", "--designs", "nic", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["model_cycle_msgs_per_s"] == {"nic": None, "rdma": None}
    assert all("not available" in r["error"] for r in report["runs"])


def test_failing_measurement_gives_exit_1(tmp_path, monkeypatch):
    def broken(kind):
        def point(*args, **kwargs):
            raise ValueError("bad point")
        return point
    monkeypatch.setattr(models, "_model_function", broken)
    out = tmp_path / "b.json"
    assert bench.main(["--only", "model", "--designs", "rdma", "--out", str(out)]) == 1
    runs = json.loads(out.read_text())["runs"]
    assert [r["error"] for r in runs] == ["ValueError: bad point"] * 2


RESULTS_XML = """<?xml version='1.0' encoding='utf-8'?>
<testsuites name="cocotb tests"><testsuite name="m" tests="1" time="3.6">
<testcase classname="m" name="t" time="3.621"><properties>
<property name="sim_time_unit" value="{unit}" />
<property name="sim_time_duration" value="30220.0" />
</properties></testcase></testsuite></testsuites>"""


def test_read_results_xml(tmp_path):
    path = tmp_path / "results.xml"
    path.write_text(RESULTS_XML.format(unit="ns"))
    assert cosim.read_results_xml(path) == (3.621, 30220.0)
    path.write_text(RESULTS_XML.format(unit="us"))
    assert cosim.read_results_xml(path) == (3.621, 30220000.0)
    path.write_text(RESULTS_XML.format(unit="parsec"))
    with pytest.raises(ValueError, match="sim_time_unit"):
        cosim.read_results_xml(path)


def test_read_make_test(tmp_path):
    path = tmp_path / "make_test_wall_s.json"
    assert make_test.read_make_test(path) is None
    path.write_text("{not json")
    assert make_test.read_make_test(path) is None
    path.write_text(json.dumps({"make_test_wall_s": "soon"}))
    assert make_test.read_make_test(path) is None
    path.write_text(json.dumps({"make_test_wall_s": 371.5, "finished": "x", "commit": None}))
    assert make_test.read_make_test(path)["make_test_wall_s"] == 371.5


def test_run_tests_times_the_command_when_it_records_nothing(tmp_path):
    path = tmp_path / "rec.json"
    record = make_test.run_make_test((sys.executable, "-c", "import time; time.sleep(0.2)"),
                                 path)
    assert json.loads(path.read_text()) == record
    assert record["passed"] is True and 0.1 <= record["make_test_wall_s"] < 30
    datetime.datetime.fromisoformat(record["finished"])
    record = make_test.run_make_test((sys.executable, "-c", "raise SystemExit(3)"),
                                 tmp_path / "rec2.json")
    assert record["passed"] is False


def test_run_tests_keeps_the_makefiles_own_record(tmp_path):
    path = tmp_path / "rec.json"
    writer = ("import datetime, json, sys; open(sys.argv[1], 'w').write(json.dumps("
              "{'make_test_wall_s': 123.0, 'passed': True, 'commit': 'abc', 'finished': "
              "datetime.datetime.now(datetime.UTC).isoformat()}))")
    record = make_test.run_make_test((sys.executable, "-c", writer, str(path)), path)
    assert record["make_test_wall_s"] == 123.0 and record["commit"] == "abc"
    # a record older than the run is replaced by the time measured here
    path.write_text(json.dumps({"make_test_wall_s": 5.0, "finished": "2001-01-01T00:00:00"}))
    record = make_test.run_make_test((sys.executable, "-c", "pass"), path)
    assert record["make_test_wall_s"] < 30 and record["finished"] > "2002"


def test_read_make_sim_record(tmp_path):
    """The headline `make sim` record is read by its own key; a make test record is not
    taken for it."""
    path = tmp_path / "make_sim_wall_s.json"
    path.write_text(json.dumps({"make_test_wall_s": 371.5}))
    assert make_test.read_make_test(path, "make_sim_wall_s") is None
    path.write_text(json.dumps({"make_sim_wall_s": 46.4, "passed": True}))
    assert make_test.read_make_test(path, "make_sim_wall_s")["make_sim_wall_s"] == 46.4


def test_phases_are_read_from_the_log():
    log = ("  0.00ns INFO  cocotb.rdma_top  model 7187 cycles; simulator in 0.05 s\n"
           "  9.00ns INFO  cocotb.rdma_top  phases (s): scenario 0.011, model 0.308, "
           "load 0.072, run 0.054\n")
    assert cosim.read_phases(log) == {"scenario": 0.011, "model": 0.308, "load": 0.072,
                                      "run": 0.054}
    assert cosim.read_phases("no such line\n") is None
    assert cosim.read_phases("phases (s): model fast\n") is None


def test_rdma_capacity_is_the_largest_scenario_that_fits(monkeypatch):
    import tb.rdma.cocotb_rdma as rdma

    def scenario(p, cfg, knobs):
        if p["messages"] > 1234:
            raise ValueError("host memory A of 32768 words is full")
        return None, [], None

    monkeypatch.setattr(rdma, "scenario", scenario)
    cosim.rdma_capacity.cache_clear()
    try:
        assert cosim.rdma_capacity(limit=1 << 16) == 1234
        assert cosim.rdma_capacity(limit=1000) == 1000
    finally:
        cosim.rdma_capacity.cache_clear()


def test_rdma_capacity_fits_the_recorders():
    """Without a limit the recorders bound it: one beat more than they hold would be lost."""
    from spec.rdma_engine import TOP_DEFAULTS

    cap = cosim.rdma_capacity()
    assert 1000 <= cap <= TOP_DEFAULTS["events"]
    assert cap * 4 <= TOP_DEFAULTS["wire_beats"]     # a 128-byte WRITE is 4 beats of 64 B


def _fake_build_dir(tmp_path):
    (tmp_path / "top.v").write_text("module top(input clk, input rst); endmodule\n")
    (tmp_path / "public.vlt").write_text("`verilator_config\n")
    return tmp_path


@pytest.mark.parametrize("extra, option", [
    (["--opt", "O9"], "--opt"),
    (["--cycles", "0"], "--cycles"),
    (["--repeats", "two"], "--repeats"),
    (["--callgrind-cycles", "-1"], "--callgrind-cycles"),
    (["--cxx-flags", "O2"], "--cxx-flags"),
])
def test_alone_bad_option_is_an_error_naming_it(tmp_path, extra, option, capsys):
    with pytest.raises(SystemExit) as exc:
        alone.parse_args([str(_fake_build_dir(tmp_path)), *extra])
    assert exc.value.code == 2
    assert option in capsys.readouterr().err


def test_alone_refuses_a_folder_that_is_not_a_build(tmp_path, capsys):
    (tmp_path / "top.v").write_text("module top; endmodule\n")
    with pytest.raises(SystemExit) as exc:
        alone.parse_args([str(tmp_path)])
    assert exc.value.code == 2
    assert "not a Verilator build folder" in capsys.readouterr().err
    args = alone.parse_args([str(_fake_build_dir(tmp_path)), "--opt", "O2"])
    assert args.opt == "-O2" and args.cycles == 200_000 and not args.callgrind
    assert args.cxx_flags == ""
    args = alone.parse_args([str(_fake_build_dir(tmp_path)), "--cxx-flags=-fgcse  -ftree-pre"])
    assert args.cxx_flags == "-fgcse -ftree-pre"
