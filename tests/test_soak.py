"""scripts/soak.py: every chunk of both designs compared with the golden model, a broken
model caught in a later chunk, the options checked, the designs run as executor jobs."""

import json

import pytest

from scripts import soak

#: A short soak: the NIC's first chunk (64 stores per node) and 3 more of 256 per node;
#: the RDMA engine's 600 WRITEs in 3 chunks of 200 (one simulation). Default fault rates.
#: Each test has its own seed (the run folders are named by it), none the default soak's.
SHORT = ["--messages", "3000", "--nic-chunk", "256", "--rdma-messages", "600",
         "--rdma-chunk", "200", "--jobs", "1"]


def test_bad_scheduler_is_a_clear_error(capsys, tmp_path):
    """No simulator runs: an empty or unreachable --scheduler, or --jobs 0, is named."""
    assert soak.main(["--scheduler", "", "--out", str(tmp_path)]) == 2
    assert "--scheduler" in capsys.readouterr().err
    assert soak.main(["--jobs", "0", "--out", str(tmp_path)]) == 2
    assert "--jobs" in capsys.readouterr().err
    assert soak.main(["--scheduler", "tcp://127.0.0.1:9", "--connect-timeout", "1",
                      "--out", str(tmp_path)]) == 2
    assert "--scheduler tcp://127.0.0.1:9: cannot reach" in capsys.readouterr().err
    assert not (tmp_path / "soak.json").exists()


def test_chunk_options_are_checked():
    with pytest.raises(SystemExit):
        soak._args(["--connect-timeout", "0"])
    for bad in (["--nic-chunk", "0"], ["--nic-chunk", str(soak.NIC_CHUNK + 1)],
                ["--rdma-chunk", str(soak.RDMA_CHUNK + 1)],
                ["--nic-switch-drops", str(soak.SWITCH_DROPS + 1)],
                ["--nic-switch-drops", "-1"]):
        with pytest.raises(SystemExit):
            soak._args(bad)
    assert soak._args([]).nic_switch_drops == 0
    assert soak._args(["--nic-switch-drops", "3"]).nic_switch_drops == 3


@pytest.mark.slow(reason=(
    "its own Verilator build of the soak's top with the per-peer retry; make test runs "
    "the in-switch drops and their recovery on the W = 16 top (test_cosim_nic_peer.py, "
    "Icarus) and in the model (test_nic_switch_loss_model.py)"))
@pytest.mark.cosim
def test_nic_soak_with_switch_drops(tmp_path, capsys):
    """--nic-switch-drops: the NIC with the per-peer retry over faulty links, the switch
    dropping 2 frames at each egress per chunk: every chunk equals the model, nothing
    lost or corrupted, every drop counted and recovered."""
    args = ["--only", "nic", "--messages", "600", "--nic-chunk", "16", "--nic-switch-drops",
            "2", "--jobs", "1", "--seed", "7", "--out", str(tmp_path)]
    assert soak.main(args) == 0
    out = json.loads((tmp_path / "soak.json").read_text())["nic"]
    _check_chunks(out, 1 + -(-(600 - 4 * 64) // (4 * 16)))
    assert out["lost"] == out["corrupted_bytes"] == out["hangs"] == out["mismatches"] == 0
    assert out["switch_dropped"] == 4 * 2 * out["chunks"]
    assert out["recovered"] >= out["switch_dropped"] and out["peer_resent"] > 0
    assert "FAILED" not in capsys.readouterr().out


def test_failures_need_every_chunk_compared_and_no_mismatch():
    good = dict(lost=0, corrupted_bytes=0, hangs=0, mismatches=0, chunks=3,
                chunks_compared=3)
    assert soak.failures({"nic": good, "rdma": good}) == []
    assert soak.failures({"nic": dict(good, chunks_compared=2)}) == [
        "nic.chunks_compared (2 of 3 chunks)"]
    assert soak.failures({"rdma": dict(good, mismatches=1)}) == ["rdma.mismatches"]
    assert soak.failures({"rdma": dict(good, chunks=0, chunks_compared=0)})


def test_jobs_and_merge():
    """One NIC job; RDMA chunks in groups (one job for a short soak), whose figures add
    up; one ephemeral job."""
    args = soak._args(["--messages", "5000", "--rdma-chunk", "1000"])
    assert [(j[0], j[2], j[3]) for j in soak.jobs_of(args)] == [
        ("nic", 5000, None), ("rdma", 5000, (0, 5)), ("ephemeral", 5000, None)]
    args = soak._args(["--only", "rdma", "--messages", "5000", "--rdma-chunk", "1000",
                       "--rdma-group", "2"])
    assert [j[3] for j in soak.jobs_of(args)] == [(0, 2), (2, 4), (4, 5)]
    # By default, groups of RDMA_GROUP chunks: a long soak uses every worker.
    args = soak._args(["--only", "rdma", "--messages", str(1000 * (2 * soak.RDMA_GROUP + 1))])
    assert [j[3] for j in soak.jobs_of(args)] == [
        (0, soak.RDMA_GROUP), (soak.RDMA_GROUP, 2 * soak.RDMA_GROUP),
        (2 * soak.RDMA_GROUP, 2 * soak.RDMA_GROUP + 1)]
    parts = [dict(messages=2, lost=0, wall_s=1.25, token="a",
                  per_chunk=[{"chunk": 0}, {"chunk": 1}]),
             dict(messages=1, lost=0, wall_s=2.0, token="b", per_chunk=[{"chunk": 2}])]
    assert soak.merge(parts) == dict(messages=3, lost=0, wall_s=3.2, token="b",
                                     per_chunk=[{"chunk": 0}, {"chunk": 1}, {"chunk": 2}],
                                     recovery_cycles_per_damaged_frame=0.0)


def test_recovery_per_damaged_frame_is_of_the_sums():
    """The ratio of the merged figures is the summed cycles over the summed damaged
    frames, not a sum of the jobs' ratios: (300 + 100) / (3 + 1) = 100; no damaged frame
    gives 0."""
    parts = [dict(recovered=3, recovery_cycles=300), dict(recovered=1, recovery_cycles=100)]
    merged = soak.merge(parts)
    assert merged["recovery_cycles"] == 400 and merged["recovered"] == 4
    assert merged["recovery_cycles_per_damaged_frame"] == 100.0
    assert soak.merge([dict(recovered=0, recovery_cycles=0)])[
        "recovery_cycles_per_damaged_frame"] == 0.0
    assert soak.merge([dict(recovered=3, recovery_cycles=10)])[
        "recovery_cycles_per_damaged_frame"] == 3.3


def test_last_nic_write():
    """The NIC's delivery ends at the latest write cycle of any receiver (``(items,
    cycles)`` per node), whatever the order of the nodes; nothing written gives 0."""
    from tb.soak.recovery import last_nic_write

    assert last_nic_write({0: ([1, 2], [10, 40]), 1: ([], []), 2: ([3], [25])}) == 40
    assert last_nic_write({0: ([], [])}) == 0


def test_nic_chunk_recovery_against_the_fault_free_run():
    """The NIC's baseline is the model's run of the same chunk with every fault rate 0:
    a chunk run without faults costs 0 recovery cycles (whatever the seed), and a chunk
    whose wires damage frames costs the cycles by which its last memory write is later
    than the last write of the run with no faults (computed here from the two runs)."""
    import random

    from pymodel.fabric.faulty_link import FaultSettings, rate_per_65535
    from pymodel.nic.system import NicSystemModel
    from spec.nic import link_credits
    from tb.soak.cocotb_nic_soak import chunk_stores
    from tb.soak.recovery import nic_chunk_recovery

    w, nodes, words = 64, 4, 256
    model = NicSystemModel(w, "compact", nodes, 2, words, 256, link_credits(w, 256),
                           retry=True)
    rng = random.Random(7)
    stores = chunk_stores(rng, nodes, w, words * w, 16)
    stalls = {q: (3 + q, 64) for q in range(nodes)}
    mem = {q: [rng.getrandbits(8 * w) for _ in range(words)] for q in range(nodes)}
    nodes_ = list(range(nodes))
    clean = model.run(stores, nodes_, stalls, link_settings=FaultSettings(seed=9), mem=mem)
    assert nic_chunk_recovery(model, stores, stalls, FaultSettings(seed=9), mem, clean) == 0
    assert nic_chunk_recovery(model, stores, stalls, FaultSettings(seed=4), mem, clean) == 0
    faulty = FaultSettings(seed=9, corrupt_rate=rate_per_65535(0.1),
                           drop_rate=rate_per_65535(0.02))
    run = model.run(stores, nodes_, stalls, link_settings=faulty, mem=mem)
    assert sum(v["tx_resent_frames"] for v in run["links"].values()) > 0
    last = {name: max(c for q in nodes_ for c in r["wr"][q][1])
            for name, r in (("clean", clean), ("faulty", run))}
    assert nic_chunk_recovery(model, stores, stalls, faulty, mem, run) == (
        last["faulty"] - last["clean"])


def _check_chunks(figures, chunks, broken=None):
    """Every chunk compared; mismatches in chunk ``broken`` only."""
    per = figures["per_chunk"]
    assert figures["chunks"] == chunks == len(per) == figures["chunks_compared"]
    assert [c["chunk"] for c in per] == list(range(chunks))
    assert all(c["compared"] for c in per)
    assert sum(c["messages"] for c in per) == figures["messages"]
    bad = [c["chunk"] for c in per if c["mismatches"]]
    assert bad == ([] if broken is None else [broken])
    assert figures["mismatches"] == sum(c["mismatches"] for c in per)


@pytest.mark.slow(reason=(
    "tests/test_soak.py checks the chunk bookkeeping and the NIC model's carried memories "
    "without a simulator; make test-all co-simulates the short soak"))
@pytest.mark.cosim
def test_short_soak_compares_every_chunk(tmp_path, capsys):
    """Both designs over faulty links, several chunks each, every one compared with the
    model: nothing lost or corrupted, no mismatch, exit code 0, the recovery figures
    summed over the chunks; and both without faults: 0 recovery cycles."""
    assert soak.main(SHORT + ["--seed", "3", "--out", str(tmp_path)]) == 0
    out = json.loads((tmp_path / "soak.json").read_text())
    _check_chunks(out["nic"], 4)
    _check_chunks(out["rdma"], 3)
    assert out["nic"]["messages"] == 4 * (64 + 3 * 256)
    assert out["rdma"]["messages"] == 600
    for d in ("nic", "rdma"):
        assert out[d]["lost"] == out[d]["corrupted_bytes"] == out[d]["hangs"] == 0
    printed = capsys.readouterr().out
    assert "chunks_compared" in printed and "FAILED" not in printed
    for d in ("nic", "rdma"):
        _check_recovery(out[d])
    assert out["nic"]["replay_cycles"] >= 0 and "cqe_delay_cycles" in out["rdma"]
    # Without faults nothing is damaged, resent or later than the fault-free model run.
    quiet = ["--corrupt-rate", "0", "--drop-rate", "0", "--dup-rate", "0", "--messages",
             "300", "--nic-chunk", "16", "--rdma-messages", "100", "--rdma-chunk", "100",
             "--jobs", "1", "--seed", "3", "--out", str(tmp_path / "quiet")]
    assert soak.main(quiet) == 0
    out = json.loads((tmp_path / "quiet" / "soak.json").read_text())
    _check_chunks(out["nic"], 2)
    _check_chunks(out["rdma"], 1)
    for d in ("nic", "rdma"):
        _check_recovery(out[d])
        for key in ("recovered", "retransmissions", "recovery_cycles",
                    "recovery_cycles_per_damaged_frame"):
            assert out[d][key] == 0, (d, key)
        assert all(c["recovery_cycles"] == 0 for c in out[d]["per_chunk"])
    assert out["nic"]["replay_cycles"] == out["rdma"]["cqe_delay_cycles"] == 0


def _check_recovery(figures):
    """The recovery figures add up over the chunks, and per damaged frame is their
    ratio."""
    per = figures["per_chunk"]
    for key in ("recovered", "recovery_cycles"):
        assert figures[key] == sum(c[key] for c in per), key
    ratio = figures["recovery_cycles"] / figures["recovered"] if figures["recovered"] else 0
    assert figures["recovery_cycles_per_damaged_frame"] == round(ratio, 1)


@pytest.mark.slow(reason="make test-all: a broken model caught in chunk 2 of both designs")
@pytest.mark.cosim
def test_broken_model_is_caught_in_a_later_chunk(tmp_path, capsys):
    """The model of chunk 2 (not the first) is fed a wrong stimulus: that chunk, and
    only that one, shows mismatches, in both designs, and the soak fails."""
    args = ["--seed", "4", "--break-model-chunk", "2", "--out", str(tmp_path),
            "--rdma-group", "1", "--jobs", "2"]        # the RDMA chunks as 3 jobs
    assert soak.main(SHORT + args) == 1
    out = json.loads((tmp_path / "soak.json").read_text())
    _check_chunks(out["nic"], 4, broken=2)
    _check_chunks(out["rdma"], 3, broken=2)
    printed = capsys.readouterr().out
    assert "nic.mismatches" in printed and "rdma.mismatches" in printed


def test_nic_model_carries_memories_between_chunks():
    """The NIC model's ``mem``: a run from given memories is the run from zeros with
    those memories under its writes (cycles, counters and write events unchanged), and
    a wrong size is named."""
    import random

    from pymodel.fabric.faulty_link import FaultSettings, rate_per_65535
    from pymodel.nic.system import NicSystemModel
    from spec.nic import link_credits
    from tb.soak.cocotb_nic_soak import chunk_stores

    w, nodes, words = 64, 4, 256
    model = NicSystemModel(w, "compact", nodes, 2, words, 256, link_credits(w, 256),
                           retry=True)
    rng = random.Random(5)
    stores = chunk_stores(rng, nodes, w, words * w, 16)
    settings = FaultSettings(seed=9, corrupt_rate=rate_per_65535(0.05))
    stalls = {q: (3 + q, 64) for q in range(nodes)}
    before = {q: [rng.getrandbits(8 * w) for _ in range(words)] for q in range(nodes)}
    zero = model.run(stores, list(range(nodes)), stalls, link_settings=settings)
    carried = model.run(stores, list(range(nodes)), stalls, link_settings=settings,
                        mem=before)
    for key in ("wr", "counters", "cycles", "links"):
        assert carried[key] == zero[key]
    for q in range(nodes):
        written = {a for a, _ in zero["wr"][q][0]}
        assert written
        for a in range(words):
            if a not in written:
                assert carried["mem"][q][a] == before[q][a]
        # Each write covers the low bytes of its word; the rest keeps the old bytes.
        want = list(before[q])
        for s in (s for p in stores for s in stores[p] if s.dst == q):
            for k in range(0, len(s.payload), w):
                a, chunk = (s.addr + k) // w, s.payload[k:k + w]
                old = want[a].to_bytes(w, "little")
                want[a] = int.from_bytes(chunk + old[len(chunk):], "little")
        assert carried["mem"][q] == want
    with pytest.raises(ValueError, match="mem holds 3 words"):
        model.run(stores, list(range(nodes)), stalls, link_settings=settings,
                  mem={0: [0, 0, 0]})


@pytest.mark.slow(reason="test_sweep.py and test_regress_cli.py run the executor on a "
                         "LocalCluster")
@pytest.mark.cosim
def test_soak_on_a_local_dask_cluster(tmp_path):
    """--scheduler local: the design's job runs on a Dask worker, with the same figures
    (two NIC chunks, both compared)."""
    args = ["--only", "nic", "--messages", "300", "--nic-chunk", "16", "--seed", "5",
            "--out"]
    assert soak.main(args + [str(tmp_path / "local"), "--jobs", "1"]) == 0
    assert soak.main(args + [str(tmp_path / "dask"), "--jobs", "1",
                             "--scheduler", "local"]) == 0
    local, dask = (json.loads((tmp_path / d / "soak.json").read_text())["nic"]
                   for d in ("local", "dask"))
    _check_chunks(dask, 2)
    for key in ("messages", "recovered", "retransmissions", "recovery_cycles", "cycles",
                "per_chunk"):
        assert dask[key] == local[key]


@pytest.mark.slow(reason=(
    "test_soak.py::test_jobs_and_merge checks the split and the sum without a simulator"))
@pytest.mark.cosim
def test_rdma_jobs_give_the_figures_of_one(tmp_path):
    """The RDMA chunks as one job or as one job each (two at a time): the same figures,
    chunk for chunk (each chunk's stimulus and faults depend on its index only)."""
    args = ["--only", "rdma", "--rdma-messages", "200", "--rdma-chunk", "100",
            "--seed", "6", "--out"]
    assert soak.main(args + [str(tmp_path / "one"), "--jobs", "1"]) == 0
    assert soak.main(args + [str(tmp_path / "two"), "--jobs", "2", "--rdma-group", "1"]) == 0
    one, two = (json.loads((tmp_path / d / "soak.json").read_text())["rdma"]
                for d in ("one", "two"))
    _check_chunks(two, 2)
    skip = ("wall_s", "token")
    assert {k: v for k, v in two.items() if k not in skip} == {
        k: v for k, v in one.items() if k not in skip}
