"""`make sweep`: the sweep file's checks, its rows against the model called directly, the
executor's order, and the same sweep on a Dask LocalCluster."""

import json
from pathlib import Path

import pytest

from scripts import sweep as sweep_cli
from scripts.executor import ExecutorError, make_executor
from scripts.sweep_spec import SweepError, load_sweep, parse_sweep

ROOT = Path(__file__).resolve().parent.parent

SMALL = """
name = "small"
design = "rdma"
messages = 60
[fixed]
rung = "pipelined"
[axes]
qps = [1, 32]
msg_bytes = [64, 256]
"""


@pytest.mark.parametrize("text, field", [
    ("design = 'rdma'\ncolour = 1\n[axes]\nqps = [1]", "colour: unknown key"),
    ("design = 'ethernet'\n[axes]\nqps = [1]", "design: must be 'nic' or 'rdma'"),
    ("design = 'rdma'", "axes: must be a table"),
    ("design = 'rdma'\n[axes]\nqps = []", "axes.qps: must be a non-empty list"),
    ("design = 'rdma'\n[axes]\nqpz = [1]", "axes.qpz: not a knob of rdma"),
    ("design = 'rdma'\n[axes]\nqps = [1, 0]", "axes.qps: value 0: qps must be"),
    ("design = 'rdma'\n[axes]\nqps = ['many']", "axes.qps: value 'many'"),
    ("design = 'rdma'\n[axes]\nqps = [[1]]", "axes.qps: value [1]: must be a number"),
    ("design = 'rdma'\n[axes]\nqps = [1, 1]", "axes.qps: a value is repeated"),
    ("design = 'rdma'\n[fixed]\nqps = 2\n[axes]\nqps = [1]", "axes.qps: also in [fixed]"),
    ("design = 'rdma'\n[fixed]\nhost = 'cxl'\n[axes]\nqps = [1]", "fixed: host must be"),
    ("design = 'rdma'\nmessages = 0\n[axes]\nqps = [1]", "messages: must be an integer"),
    ("design = 'nic'\n[axes]\npeers = [1, 300]", "axes.peers: value 300"),
    ("design = 'rdma'\n[axes]\nqps = [1]\n[rtl]\nsim = 'xsim'\npoints = [{qps = 1}]",
     "rtl.sim: must be one of"),
    ("design = 'rdma'\n[axes]\nqps = [1]\n[rtl]\npoints = [{qps = 2}]",
     "rtl.points[0]: must name exactly one point"),
    ("design = 'rdma'\n[axes]\nqps = [1]\n[rtl]\npoints = [{cache_entries = 16}]",
     "rtl.points[0]: must be a table of axis = value"),
    ("design = 'rdma'\n[axes]\nqps = [1]\n[rtl]\nwaves = 1\npoints = [{qps = 1}]",
     "rtl.waves: unknown key"),
    ("design = 'rdma'\n[axes", "not valid TOML"),
])
def test_bad_sweep_files_name_the_field(text, field):
    with pytest.raises(SweepError) as exc:
        parse_sweep(text, where="x.toml")
    assert str(exc.value).startswith("sweep file x.toml: ")
    assert field in str(exc.value)


def test_bad_options_and_files_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("design = 'rdma'\n[axes]\nqps = [0]\n")
    assert sweep_cli.main([str(bad)]) == 2
    assert "axes.qps: value 0" in capsys.readouterr().err
    assert sweep_cli.main([str(tmp_path / "missing.toml")]) == 2
    assert "cannot read it" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        sweep_cli.main([str(bad), "--jobs", "0"])
    good = tmp_path / "good.toml"
    good.write_text(SMALL)
    assert sweep_cli.main([str(good), "--scheduler", ""]) == 2
    assert "--scheduler" in capsys.readouterr().err


@pytest.mark.parametrize("script", ["sweep", "report", "soak", "regress"])
def test_every_cluster_script_checks_connect_timeout(script, tmp_path, capsys):
    """scripts.executor.add_cluster_options: one --connect-timeout for the four scripts
    that take --scheduler, each refusing a value that is not positive."""
    import importlib

    mod = importlib.import_module(f"scripts.{script}")
    spec = tmp_path / "s.toml"
    spec.write_text(SMALL)
    argv = ([str(spec)] if script == "sweep" else []) + ["--connect-timeout", "0"]
    with pytest.raises(SystemExit):
        mod.main(argv)
    assert "--connect-timeout must be positive" in capsys.readouterr().err


def test_executor_options_are_checked():
    with pytest.raises(ExecutorError, match="--jobs"):
        make_executor(0)
    with pytest.raises(ExecutorError, match="--scheduler"):
        make_executor(1, scheduler="")


def test_unreachable_scheduler_is_named():
    with pytest.raises(ExecutorError, match="--scheduler tcp://127.0.0.1:9"):
        with make_executor(1, scheduler="tcp://127.0.0.1:9", connect_timeout=1) as ex:
            ex.map(abs, [1])


def _slow_square(x):
    import time

    time.sleep(0.02 * (5 - x))
    return x * x


@pytest.mark.parametrize("jobs", [1, 2])
def test_local_executor_keeps_the_order(jobs):
    seen = []
    with make_executor(jobs) as ex:
        assert ex.map(_slow_square, range(5), progress=seen.append) == [0, 1, 4, 9, 16]
    assert sorted(seen) == [0, 1, 4, 9, 16]


def _direct(sweep):
    """The same points evaluated by the model's own entry points, not through sweep.py."""
    from analysis.fastpath import fast_point

    out = []
    for p in sweep.points:
        knobs = {k: v for k, v in p.items() if k != "msg_bytes"}
        out.append(fast_point("rdma", msg_bytes=p["msg_bytes"],
                              messages=max(sweep.messages, 3 * p["qps"]), **knobs))
    return out


def test_small_sweep_locally_and_on_a_dask_local_cluster(tmp_path):
    """Rows in axis order (the last axis fastest), each equal to the model evaluated
    directly; the same rows from a Dask LocalCluster of two workers."""
    sweep = parse_sweep(SMALL)
    assert [(p["qps"], p["msg_bytes"]) for p in sweep.points] == [
        (1, 64), (1, 256), (32, 64), (32, 256)]
    local = sweep_cli.run_sweep(sweep, jobs=2, log=lambda *_: None)
    direct = _direct(sweep)
    for row, want, point in zip(local, direct, sweep.points, strict=True):
        assert row["model_source"] == "fast"
        assert {k: row[k] for k in point} == point
        for key in ("ii_cycles", "latency_cycles", "wire_bytes", "host_bytes", "ctrl_ops"):
            assert row[f"{key}_model"] == want[key], (point, key)
    on_dask = sweep_cli.run_sweep(sweep, jobs=2, scheduler="local", log=lambda *_: None)
    strip = [{k: v for k, v in r.items() if k != "model_s"} for r in local]
    assert [{k: v for k, v in r.items() if k != "model_s"} for r in on_dask] == strip


def test_example_files_parse():
    for name in ("example.toml", "nic_sizes.toml"):
        sweep = load_sweep(ROOT / "sweeps" / name)
        assert sweep.points and len(sweep.points) == len(
            {json.dumps(p, sort_keys=True) for p in sweep.points})
    example = load_sweep(ROOT / "sweeps" / "example.toml")
    assert example.rtl_sim == "icarus" and len(example.rtl_points) == 2


@pytest.mark.cosim
def test_sweep_writes_files_and_an_rtl_row(tmp_path):
    """A NIC sweep of two model points and one co-simulated on Icarus: the files are
    written, the RTL row equals its model row on every metric, 0 mismatches. (L2, 2
    peers, 16 stores of 200 B: the top of tests/test_sim_cli.py's user point, so the
    two tests share one export and build.)"""
    spec = tmp_path / "nic.toml"
    spec.write_text('name = "t"\ndesign = "nic"\nmessages = 16\n'
                    '[fixed]\nframing = "l2"\npeers = 2\n[axes]\n'
                    'msg_bytes = [64, 200]\n[rtl]\nsim = "icarus"\nmessages = 16\n'
                    'points = [{msg_bytes = 200}]\n')
    out = tmp_path / "out"
    assert sweep_cli.main([str(spec), "--out", str(out), "--jobs", "1"]) == 0
    rows = json.loads((out / "results.json").read_text())
    assert [r["simulator"] for r in rows] == ["model", "model", "icarus"]
    assert (out / "results.csv").read_text().count("\n") == 4
    assert (out / "ii_cycles.png").stat().st_size > 1000
    rtl = rows[2]
    assert rtl["mismatches"] == 0
    for key in ("ii_cycles", "wire_bytes", "latency_cycles"):
        assert rtl[f"{key}_rtl"] == rtl[f"{key}_model"]
