"""The RDMA soak's chunks in one simulation (tb/soak/cocotb_rdma_soak.py, a reset per
chunk): each chunk's figures those of the same chunk alone in its simulation, a broken
model caught in its chunk of a group, the group's parameters checked, and a simulation
that leaves no figures counted as lost chunks."""

import json

import pytest

from scripts import soak
from tb.cosim import CosimFailure
from tb.rdma.runner import run_rdma
from tb.soak import rdma

#: Two chunks of 20 WRITEs at fault rates high enough that short chunks recover frames.
SMALL = ["--only", "rdma", "--rdma-messages", "40", "--rdma-chunk", "20",
         "--corrupt-rate", "0.02", "--drop-rate", "0.02", "--dup-rate", "0.02"]


def _args(*extra):
    return soak._args([*SMALL, *extra])


@pytest.mark.cosim
def test_group_gives_each_chunk_the_figures_of_its_own_simulation(test_id):
    """Two chunks in one simulation, with a chunk between them whose model stops (its
    cycle limit), and each in a simulation of its own (the default RdmaTop, Verilator):
    the same figures, chunk for chunk (every metric, counter, recovery delay and wire
    frame with its cycles), with frames damaged and recovered; the stopped chunk fails
    with the model's error and leaves no figures, and the group's test fails."""
    args = _args("--seed", "21")
    runs = [rdma.chunk_params(args, index, 20, "t") for index in (0, 1)]
    alone = [run_rdma({}, params=run, sim="verilator", test_id=f"{test_id}_{k}")
             / run["out_json"] for k, run in enumerate(runs)]
    stops = dict(rdma.chunk_params(args, 2, 20, "t"), model_limit=10)
    group = f"{test_id}_group"
    with pytest.raises(CosimFailure, match="1 of 1 cocotb tests failed"):
        run_rdma({}, test_module="tb.soak.cocotb_rdma_soak", sim="verilator",
                 params={"chunks": [runs[0], stops, runs[1]]}, test_id=group)
    for k, run in enumerate(runs):
        got = dict(rdma.chunk_file(group, run, "json", "t"), token="t")
        want = json.loads(alone[k].read_text())
        assert got == want, k
        assert want["mismatches"] == 0 and want["messages"] == 20
        assert rdma.chunk_file(group, run, "status.json", "t") == {"token": "t",
                                                                    "failed": None}
    assert rdma.chunk_file(group, stops, "json", "t") is None
    assert "RuntimeError" in rdma.chunk_file(group, stops, "status.json", "t")["failed"]
    damaged = sum(json.loads(path.read_text())["counters"][f"{link}_{kind}"]
                  for path in alone for link in ("ab", "ba")
                  for kind in ("dropped", "corrupted", "duplicated"))
    assert damaged > 0


@pytest.mark.cosim
def test_broken_model_in_the_second_chunk_of_a_group_is_caught_there(monkeypatch, capsys):
    """``--break-model-chunk 1`` with both chunks in one simulation (on the default
    RdmaTop): chunk 1 alone has mismatches and fails, chunk 0 is equal to the model, and
    both are compared and counted."""
    monkeypatch.setattr(rdma, "TOP", {})
    monkeypatch.setattr(rdma, "OPT", None)
    args = _args("--seed", "22", "--break-model-chunk", "1")
    args.rdma_per_sim = 2
    figures = rdma.soak_rdma(args, 40)
    per = figures["per_chunk"]
    assert [c["chunk"] for c in per] == [0, 1]
    assert all(c["compared"] for c in per)
    assert per[0]["mismatches"] == 0 and per[1]["mismatches"] > 0
    assert figures["mismatches"] == per[1]["mismatches"]
    assert figures["failed_chunks"] == 1 and figures["chunks_compared"] == 2
    assert figures["messages"] == 40 and figures["hangs"] == 0
    assert "chunk 1: FAILED" in capsys.readouterr().out
    assert soak.failures({"rdma": dict(figures, wall_s=0)}) == ["rdma.mismatches"]


@pytest.mark.parametrize("params,needle", [
    ({"chunks": []}, "non-empty list"),
    ({"chunks": [{"kind": "writes"}], "seed": 1}, "unknown parameter(s) ['seed']"),
    ({"chunks": [{"kind": "writes", "messages": 1, "top": {}, "out_json": "a.json"}]},
     "without a top of its own"),
    ({"chunks": [{"kind": "writes", "messages": 1}]}, "with an out_json"),
    ({"chunks": [{"kind": "writes", "messages": 1, "out_json": "a.json", "colour": 1}]},
     "chunk 0: unknown parameter(s)"),
    ({"chunks": [rdma.chunk_params(_args("--seed", "25"), 0, 1, "t")] * 2},
     "same out_json"),
])
def test_group_parameters_are_refused_by_name(params, needle):
    with pytest.raises(ValueError) as err:
        rdma.check_group_params(params)
    assert needle in str(err.value)


def test_group_params_are_the_chunks_params():
    """A group's chunks are the soak's chunks (each accepted on its own), the broken
    chunk's model alone delayed."""
    args = _args("--seed", "23", "--break-model-chunk", "1")
    runs = [rdma.chunk_params(args, index, 20, "t") for index in (0, 1)]
    rdma.check_group_params({"top": rdma.TOP, "chunks": runs})
    assert [run.get("model_mmio_delay", 0) for run in runs] == [0, 1]
    assert [run["out_json"] for run in runs] == ["soak_chunk0.json", "soak_chunk1.json"]
    assert runs[0]["faults_ab"] != runs[1]["faults_ab"]


def test_simulation_without_figures_counts_its_chunks_lost(monkeypatch, capsys):
    """A group whose simulation fails before any chunk: every chunk of it counts as not
    compared, lost, a hang and failed, with a line naming why."""
    def crash(*args, **kwargs):
        raise CosimFailure("verilator: the simulator crashed")

    monkeypatch.setattr(rdma, "run_rdma", crash)
    figures = rdma.soak_rdma(_args("--seed", "24"), 40)
    assert figures["chunks"] == 2 and figures["chunks_compared"] == 0
    assert figures["lost"] == 40 and figures["hangs"] == 2 and figures["failed_chunks"] == 2
    assert [c["compared"] for c in figures["per_chunk"]] == [False, False]
    assert capsys.readouterr().out.count("the simulator crashed") == 2
