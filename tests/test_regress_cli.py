"""`make regress` (scripts/regress.py): its option checks, an unreachable --scheduler,
a failed job as a row (all without a simulator), and one real run of the RDMA pyuvm
environment on Icarus through a Dask LocalCluster."""

import json
import time

import pytest

from scripts import regress
from scripts.executor import ItemFailed, make_executor


@pytest.mark.parametrize("argv, words", [
    (["--seeds", "0"], "--seeds must be at least 1, not 0"),
    (["--jobs", "0"], "--jobs must be at least 1, not 0"),
    (["--sims", "xsim"], "--sims: unknown simulator(s) ['xsim']"),
    (["--sims", ","], "--sims: unknown simulator(s) []"),
    (["--only", "pcie_uvm"], "--only: unknown regression(s) ['pcie_uvm']"),
    (["--connect-timeout", "0"], "--connect-timeout must be positive"),
    (["--timeout", "-1"], "--timeout must be 0 (none) or positive"),
    (["--seeds", "many"], "--seeds: invalid int value"),
])
def test_bad_options_exit_2_naming_the_option(argv, words, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        regress.main(argv + ["--out", str(tmp_path)])
    assert exc.value.code == 2
    assert words in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_empty_scheduler_is_named(capsys, tmp_path):
    assert regress.main(["--scheduler", "", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--scheduler must be 'local' or a Dask scheduler address" in err
    assert not (tmp_path / "summary.json").exists()


def test_unreachable_scheduler_is_named_within_the_timeout(capsys, tmp_path):
    """Nothing listens on port 9: a clear error naming --scheduler, within the connect
    timeout (plus Dask's start-up), and no job ran."""
    t0 = time.monotonic()
    rc = regress.main(["--scheduler", "tcp://127.0.0.1:9", "--connect-timeout", "2",
                       "--out", str(tmp_path)])
    took = time.monotonic() - t0
    err = capsys.readouterr().err
    assert rc == 2
    assert "regress.py: error: --scheduler tcp://127.0.0.1:9: cannot reach a Dask " \
           "scheduler there" in err
    assert took < 2 + 10, took
    assert not (tmp_path / "records").exists() and not (tmp_path / "summary.json").exists()


def _boom(x):
    if x == 2:
        raise RuntimeError("no luck")
    return x * 10


@pytest.mark.parametrize("jobs", [1, 2])
def test_executor_errors_return_keeps_the_other_items(jobs):
    seen = []
    with make_executor(jobs) as ex:
        out = ex.map(_boom, [1, 2, 3], progress=seen.append, errors="return")
        with pytest.raises(RuntimeError, match="no luck"):
            ex.map(_boom, [1, 2, 3])
        with pytest.raises(ValueError, match="errors must be"):
            ex.map(_boom, [1], errors="ignore")
    assert out[0] == 10 and out[2] == 30
    assert isinstance(out[1], ItemFailed) and out[1].item == 2
    assert "RuntimeError: no luck" in str(out[1])
    assert len(seen) == 3


def _fake_job(job):
    """A job that fails in each way a real one can, by seed: pytest fails with a record,
    pytest dies before any record, the job function itself raises."""
    res = dict(job, rc=0, records=[], host="h", log="/nowhere/pytest.log", seconds=0.5)
    rec = {"regression": job["regression"], "sim": job["sim"], "seed": job["seed"],
           "status": "pass", "seconds": 0.4}
    if job["seed"] == 1:
        res["records"] = [dict(rec, coverage_report={
            "hit": 1, "total": 2, "percent": 50.0,
            "groups": {"error": {"hit": 1, "total": 2, "bins": {"fcs": 3, "none": 0}}}})]
    elif job["seed"] == 2:
        res.update(rc=1, error="pytest exit code 1", log_tail=["E   AssertionError: x"],
                   records=[dict(rec, status="fail", error="AssertionError: x")])
    elif job["seed"] == 3:
        res.update(rc=2, error="pytest exit code 2", log_tail=["ERROR collecting"])
    else:
        raise OSError("disk full")
    return res


def test_failed_jobs_are_rows_with_their_error(monkeypatch, capsys, tmp_path):
    """Seeds 1..4 of one regression on one simulator (no simulator runs: the job is
    replaced): a pass, a failed run, a job without records and a job that raised each
    give their row, the summary is written, the coverage merges the passing run, exit 1."""
    monkeypatch.setattr(regress, "run_job", _fake_job)
    rc = regress.main(["--seeds", "4", "--sims", "icarus", "--only", "rdma_uvm",
                       "--jobs", "1", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 1
    progress = [line for line in out.splitlines() if line.startswith("[regress] ")]
    assert progress[0].startswith("[regress] 4 jobs (rdma_uvm x 4 seeds x icarus) on 1 local")
    assert [p.split()[1] for p in progress[1:]] == ["1/4", "2/4", "3/4", "4/4"]
    assert "rdma_uvm seed 4 icarus: no record (OSError: disk full)" in progress[4]
    summary = json.loads((tmp_path / "summary.json").read_text())
    runs = summary["runs"]
    assert [(r["seed"], r["status"]) for r in runs] == [
        (1, "pass"), (2, "fail"), (3, "missing"), (4, "missing")]
    assert runs[2]["error"] == "pytest exit code 2"
    assert "OSError: disk full" in runs[3]["error"]
    assert all("coverage_report" not in r for r in runs)
    assert [j["seed"] for j in summary["jobs"]] == [1, 2, 3, 4]
    cov = json.loads((tmp_path / "coverage.json").read_text())
    assert cov["rdma_uvm"]["groups"]["error"]["bins"] == {"fcs": 3, "none": 0}
    assert "  | E   AssertionError: x" in out
    assert "1/4 runs passed in" in out and "REGRESSION FAILED" in out


@pytest.mark.slow(reason=(
    "its simulation is test_uvm_rdma[icarus-1]; the regression's options, scheduler errors and "
    "failed jobs are tested without a simulator (about 50 s saved)"))
@pytest.mark.cosim
def test_one_real_run_through_a_dask_local_cluster(tmp_path, capsys):
    """rdma_uvm, seed 1, on Icarus, as a job on a LocalCluster of one worker: the run
    passes, its record and coverage come back, exit 0."""
    t0 = time.monotonic()
    rc = regress.main(["--seeds", "1", "--sims", "icarus", "--only", "rdma_uvm",
                       "--jobs", "1", "--scheduler", "local", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    summary = json.loads((tmp_path / "summary.json").read_text())
    (run,) = summary["runs"]
    assert (run["regression"], run["sim"], run["seed"], run["status"]) == (
        "rdma_uvm", "icarus", 1, "pass")
    assert run["coverage"] > 50
    assert summary["scheduler"] == "local" and summary["jobs"][0]["rc"] == 0
    merged = json.loads((tmp_path / "coverage.json").read_text())["rdma_uvm"]
    assert merged["hit"] > 0 and merged["hit"] <= merged["total"]
    assert "[regress] 1/1 rdma_uvm seed 1 icarus: pass in" in out
    assert "1/1 runs passed" in out
    assert (tmp_path / "records" / "rdma_uvm" / "icarus-seed1" / "pytest.log").exists()
    print(f"regression through --scheduler local: {time.monotonic() - t0:.0f} s")
