"""``scripts/soak.py --mix``: the mix and its option errors, the jobs it makes, the
NIC's load/atomic chunks and the RDMA engine's mixed chunks against the golden model
(model only: fast), and one co-simulated mixed soak per design (slow)."""

import json
import random

import pytest

from analysis.scenarios.mix import PRESETS, counts, op_sequence, parse_mix
from pymodel.nic.mem_system import NicMemSystemModel
from scripts import soak
from spec.formats.roce import CqeStatus
from tb.rdma import reads
from tb.rdma.cocotb_rdma import config, run_model, scenario
from tb.rdma.cocotb_rdma_budget import check_budget_params
from tb.rdma.runner import run_rdma
from tb.soak.nic_mem import chunk_checks, chunk_commands, chunk_memories
from tb.soak.rdma import MIXED_ACK_TIMEOUT, MIXED_TOP, SIZES, link_faults


def test_mix_parses_weights_and_presets():
    assert parse_mix("70:20:10") == (70, 20, 10)
    assert parse_mix("0:1:0") == (0, 1, 0)
    assert parse_mix("mixed") == PRESETS["mixed"]
    assert parse_mix("writes") == (1, 0, 0)
    for bad in ("", "1:2", "1:2:3:4", "a:b:c", "-1:1:1", "0:0:0", "1.5:1:1", None):
        with pytest.raises(ValueError, match="--mix"):
            parse_mix(bad)


def test_mix_counts_are_exact_shares():
    """Largest remainder: the counts add up to n and each is within one of its share."""
    assert counts((70, 20, 10), 2000) == {"write": 1400, "read": 400, "atomic": 200}
    for weights in ((1, 1, 1), (3, 0, 2), (0, 0, 5), (7, 2, 1)):
        for n in (1, 2, 7, 100, 1001):
            got = counts(weights, n)
            assert sum(got.values()) == n
            for w, c in zip(weights, got.values(), strict=True):
                assert abs(c - n * w / sum(weights)) < 1
    seq = op_sequence((1, 1, 1), 30, random.Random(4))
    assert sorted(seq) == sorted(["write"] * 10 + ["read"] * 10 + ["atomic"] * 10)
    assert seq != sorted(seq)            # shuffled


def test_bad_mix_option_is_named_before_any_simulation(capsys):
    for bad in ("1:2", "0:0:0", "lots"):
        with pytest.raises(SystemExit):
            soak._args(["--mix", bad])
        assert "--mix" in capsys.readouterr().err
    assert soak._args([]).mix == (1, 0, 0)   # the WRITE-only soak by default


def test_selective_with_reads_and_atomics_is_accepted():
    """``--selective`` with READs or atomics in the mix is a soak like any other: the
    option is taken, and the RDMA chunks are mixed ones with the port set."""
    for mix in ("mixed", "1:1:0", "1:0:1"):
        args = soak._args(["--selective", "--mix", mix])
        assert args.selective and any(args.mix[1:])
        assert ("rdma", 1000) in [(j[0], j[2]) for j in soak.jobs_of(
            soak._args(["--selective", "--mix", mix, "--messages", "1000"]))]


def test_mix_jobs():
    """The writes go to the NIC's stores over faulty links, the loads and atomics to
    NicMemTop; no job for a part of no messages; the RDMA engine runs all of them; the
    ephemeral receiver's soak (writes only) its ``--messages``."""
    args = soak._args(["--messages", "3000", "--rdma-messages", "500", "--mix", "70:20:10"])
    assert [(j[0], j[2]) for j in soak.jobs_of(args)] == [
        ("nic", 2100), ("nic_mem", 900), ("rdma", 500), ("ephemeral", 3000)]
    args = soak._args(["--messages", "3000"])
    assert [(j[0], j[2]) for j in soak.jobs_of(args)] == [("nic", 3000), ("rdma", 3000),
                                                         ("ephemeral", 3000)]
    args = soak._args(["--messages", "300", "--mix", "0:2:1", "--only", "nic"])
    assert [(j[0], j[2]) for j in soak.jobs_of(args)] == [("nic_mem", 300)]


def test_failures_need_every_operation_checked():
    good = dict(lost=0, corrupted_bytes=0, hangs=0, mismatches=0, chunks=1,
                chunks_compared=1, reads=4, reads_ok=4, atomics=2, atomics_ok=2)
    assert soak.failures({"rdma": good}) == []
    assert soak.failures({"rdma": dict(good, atomics_ok=1)}) == [
        "rdma.atomics_ok (1 of 2)"]


def test_rdma_mixed_faults_at_full_rates_on_both_links():
    """A mixed soak (READs and atomics) runs both links at the soak's rates, the B->A
    link that carries the READ RESPONSEs too (corrupt, duplicate, drop), as the
    WRITE-only soak does; the two links' patterns differ (their own seeds)."""
    args = soak._args(["--mix", "mixed", "--corrupt-rate", "0.01", "--dup-rate", "0.01"])
    faults = link_faults(args, 3)
    for kind in ("corrupt_rate", "dup_rate", "drop_rate"):
        assert faults["faults_ba"][kind] == faults["faults_ab"][kind] > 0, kind
    assert faults["faults_ba"]["seed"] != faults["faults_ab"]["seed"]
    writes = link_faults(soak._args(["--corrupt-rate", "0.01"]), 3)
    assert writes == link_faults(soak._args(["--corrupt-rate", "0.01", "--mix", "mixed"]), 3)


def test_nic_mem_chunk_against_the_model():
    """The model's run of a chunk passes the model-free checks (each load's bytes, each
    atomic's old value and slot, every command answered); a flipped byte anywhere, or
    a response missing, is caught."""
    top = dict(nodes=4, framing="compact", fabric="board", mem_words=2048, max_payload=256)
    model = NicMemSystemModel(**top)
    mem = chunk_memories(4, 2048, 1, 0)
    cmds, expect = chunk_commands(random.Random(2), (2, 1), 4, 2048, 24, mem)
    want = model.run(cmds, mem={q: list(v) for q, v in mem.items()})
    landed = {q: len(want["rsp"][q]) for q in range(4)}
    status = {q: [r[2] for r in want["rsp"][q]] for q in range(4)}
    fig, bad = chunk_checks(cmds, expect, mem, want["mem"], landed, status,
                            want["outstanding"])
    assert bad == []
    assert fig["loads"] + fig["atomics"] == 96 and fig["loads"] == 64
    assert fig["loads_ok"] == 64 and fig["atomics_ok"] == 32 and fig["lost"] == 0
    for q, word in ((1, 5), (2, 512), (3, 2047)):     # source, atomic slots, answers
        broken = {p: list(v) for p, v in want["mem"].items()}
        broken[q][word] ^= 1 << 3
        assert chunk_checks(cmds, expect, mem, broken, landed, status,
                            want["outstanding"])[0]["corrupted_bytes"] == 1
    fig, bad = chunk_checks(cmds, expect, mem, want["mem"], {**landed, 0: 23},
                            {**status, 0: status[0][:-1]}, want["outstanding"])
    assert fig["lost"] == 1 and bad


def test_rdma_mixed_chunk_against_the_model():
    """A small mixed chunk without faults on the soak's mixed top: the golden model's
    host memories pass the model-free checks (each READ's bytes, each atomic's old value
    and word, each WRITE's bytes, one successful CQE per operation per QP in order)."""
    p = dict(kind="mixed", top=MIXED_TOP, messages=40, mix="mixed", sizes=[64, 1025, 300],
             qps=4, pmtu_log2=10, seed=3, ack_timeout=4096)
    cfg, knobs = config(MIXED_TOP, p)
    v, inject, _ = scenario(p, cfg, knobs)
    model = run_model(cfg, v, inject, (1, 0))
    got = _memories(cfg, model)
    sb = Board()
    fig = reads.mixed_checks(sb, v, got)
    assert sb.mismatches == []
    assert (fig["writes"], fig["reads"], fig["atomics"]) == (28, 8, 4)
    assert fig["writes_ok"] + fig["reads_ok"] + fig["atomics_ok"] == 40
    assert fig["lost"] == 0 and fig["corrupted_bytes"] == 0
    laddr = next(op[1] for op in v.ops if op[0] == "read")
    got["mem_a"][laddr // 64] ^= 1
    v.cq_next = 0                        # poll the CQ again from its start
    assert reads.mixed_checks(Board(), v, got)["reads_ok"] == 7


class Board:
    """A scoreboard that keeps what differs."""

    def __init__(self):
        self.mismatches = []

    def equal(self, what, got, want):
        if got != want:
            self.mismatches.append(what)


def _memories(cfg, model):
    """The model's host memories and responder counters, as the bench reads the RTL's."""
    got = {side: [model[side].get(k, 0) for k in range(cfg.depth)]
           for side in ("mem_a", "mem_b")}
    got["resp"] = model["resp"]
    return got


#: A small mixed chunk whose lost READs fill the response table: 12 operations on one QP
#: of the soak's mixed top with 2 response-intake slots, 10% drops on A->B (FaultSettings
#: seed 1: the link drops frames 0 and 6; docs/recovery.md, "READs and atomics under
#: loss").
LOST_READS_TOP = dict(MIXED_TOP, reads=2)
LOST_READS = dict(kind="mixed", messages=12, mix="mixed", sizes=SIZES, qps=1, seed=1,
                  ack_timeout=MIXED_ACK_TIMEOUT, faults_ab=dict(seed=1, drop_rate=6554))


def test_rdma_mixed_lost_reads_with_a_full_response_table_end():
    """12 operations (9 WRITEs, 2 READs, 1 atomic: 70:20:10 of 12 is 8.4, 2.4 and 1.2,
    the one left to the tie of largest remainders' earlier op, the WRITE) on one QP of
    the soak's mixed top with 2 response-intake slots (``reads=2``), 10% drops on A->B
    (FaultSettings seed 1: the link drops frames 0 and 6, so the WRITE of PSN 0 is lost
    and node B discards both READs behind it as out of sequence): both slots are held
    by READs no response answers until they are resent, the atomic waits for a slot at
    the head of the frame sender, and node B's PSN-sequence NAK queues a rewind whose
    walk needs the atomic's record. The atomic goes without a frame once it has waited
    the transport timeout, the walk resends both READs in their slots and the atomic
    as a take. Every operation ends with its successful CQE and the model-free checks;
    the golden model alone (the RTL: test_rdma_mixed_lost_reads_cosim)."""
    model = twelve_mixed_end_well(LOST_READS_TOP, LOST_READS)
    assert model["links"]["ab"]["dropped"] >= 2
    # The atomic's first send left without a frame; no frame lost at the sender's output
    # mux (its READ counters: spec.rdma_read_req.SENDER_COUNTERS).
    assert model["req"]["read_req_unframed"] >= 1 and model["req"]["read_lost_frames"] == 0


def twelve_mixed_end_well(top, p):
    """The golden model of the 12-operation mixed chunk ``p`` on ``top``: every operation
    ends with its successful CQE and the model-free checks (9 WRITEs, 2 READs, 1 atomic:
    70:20:10 of 12 is 8.4, 2.4 and 1.2, the one left to the tie of largest remainders'
    earlier op, the WRITE), nothing lost or corrupted; returns the model's run."""
    p = dict(p, top=top)
    cfg, knobs = config(top, p)
    v, inject, _ = scenario(p, cfg, knobs)
    model = run_model(cfg, v, inject, (1, 0))
    sb = Board()
    fig = reads.mixed_checks(sb, v, _memories(cfg, model))
    assert sb.mismatches == []
    assert (fig["writes"], fig["reads"], fig["atomics"]) == (9, 2, 1)
    assert (fig["writes_ok"], fig["reads_ok"], fig["atomics_ok"]) == (9, 2, 1)
    assert fig["lost"] == 0 and fig["corrupted_bytes"] == 0
    return model


@pytest.mark.slow(reason="RdmaTop with 2 response-intake slots, a top of its own (its builds)")
def test_rdma_mixed_lost_reads_cosim(sim, test_id):
    """The case above in co-simulation on both simulators: RTL = model on every beat of
    both links, every counter, both memories and every cycle (the atomic's wait for a
    slot bounded by the transport timeout, its request consumed without a frame, the
    walk's resends in their slots and the take), and the model-free checks of a mixed
    chunk: every operation's successful CQE, READ bytes, atomic values, WRITEs once."""
    run_rdma(LOST_READS_TOP, params=dict(LOST_READS), sim=sim, test_id=test_id)


@pytest.mark.slow(reason="a Verilator build of NicMemTop of the soak's own size")
def test_nic_mem_soak_compares_every_chunk(tmp_path):
    """Two chunks of loads and atomics on NicMemTop: every chunk compared with the
    model, every operation checked."""
    assert soak.main(["--only", "nic", "--messages", "1200", "--mix", "0:2:1", "--seed",
                      "11", "--jobs", "1", "--out", str(tmp_path)]) == 0
    nic = json.loads((tmp_path / "soak.json").read_text())["nic_mem"]
    assert nic["chunks"] == nic["chunks_compared"] == 2 and nic["mismatches"] == 0
    assert nic["loads"] + nic["atomics"] == 1200 and nic["atomics"] == 400
    assert nic["loads_ok"] == nic["loads"] and nic["atomics_ok"] == nic["atomics"]


#: A clean-link mixed RDMA soak of 50-operation chunks (seed 3): the transport timeout
#: of a mixed chunk never fires, and no frame is sent again.
CLEAN_RDMA = ["--only", "rdma", "--messages", "0", "--rdma-chunk", "50", "--mix", "mixed",
              "--corrupt-rate", "0", "--drop-rate", "0", "--dup-rate", "0", "--seed", "3",
              "--jobs", "1"]


@pytest.mark.slow(reason="a Verilator build of RdmaTop with reads of the soak's own size")
def test_rdma_mixed_soak_compares_every_chunk(tmp_path):
    """One mixed chunk of 50 operations (35 WRITEs, 10 READs, 5 atomics) on clean links:
    RTL = model on every beat and word, every operation checked without the model."""
    assert soak.main([*CLEAN_RDMA, "--rdma-messages", "50", "--out", str(tmp_path)]) == 0
    rdma = json.loads((tmp_path / "soak.json").read_text())["rdma"]
    assert rdma["chunks_compared"] == 1 and rdma["mismatches"] == 0
    assert (rdma["writes"], rdma["reads"], rdma["atomics"]) == (35, 10, 5)
    assert rdma["writes_ok"] + rdma["reads_ok"] + rdma["atomics_ok"] == 50


@pytest.mark.slow(reason="a Verilator build of RdmaTop with reads of the soak's own size")
def test_rdma_mixed_soak_write_before_read(tmp_path):
    """Chunks 0 to 2 of the same soak. In chunk 2 a 3-beat WRITE ONLY is taken by the
    WRITE chain while its inserters still send the last beat of the frame before (the
    case this chunk reaches), and a READ request of the same QP is next: the request
    must wait for the WRITE ONLY's last beat (two WRITE frames in flight), as in the
    model, or the two chains send in the same cycles and the WRITE is lost on the
    wire."""
    assert soak.main([*CLEAN_RDMA, "--rdma-messages", "150", "--out", str(tmp_path)]) == 0
    rdma = json.loads((tmp_path / "soak.json").read_text())["rdma"]
    assert rdma["chunks_compared"] == 3 and rdma["mismatches"] == 0
    assert rdma["retransmissions"] == 0 and rdma["reads_ok"] == rdma["reads"] == 30


def test_rdma_budget_run_parameters_are_checked():
    good = dict(LOST_READS, top=LOST_READS_TOP, budget=1000, out_json="b.json")
    check_budget_params(good)
    for key, bad in (("budget", 0), ("budget", "many"), ("out_json", ""), ("kind", "writes"),
                     ("qps", 0)):
        with pytest.raises(ValueError, match=key):
            check_budget_params(dict(good, **{key: bad}))


@pytest.mark.slow(reason="a Verilator build of RdmaTop with 2 response slots")
def test_rdma_rtl_ends_the_lost_reads_chunk():
    """The RTL, run without the model for 100,000 cycles (six transport timeouts) on
    :data:`LOST_READS`, must write one successful CQE per operation."""
    folder = run_rdma(LOST_READS_TOP, params=dict(LOST_READS, budget=100_000,
                                                  out_json="budget.json"),
                      test_module="tb.rdma.cocotb_rdma_budget", test_id="lost_reads")
    got = json.loads((folder / "budget.json").read_text())
    assert got["cqes"] == [CqeStatus.SUCCESS.value] * 12 and got["ops"] == 12


def _retry_exceeded(selective, seed):
    """CQEs with RETRY_EXC_ERR of 200 mixed operations (70:20:10) on 4 QPs of the soak's
    mixed top, A->B clean, B->A dropping 3000/65535 of its frames, the golden model."""
    p = dict(kind="mixed", messages=200, mix="mixed", sizes=SIZES, qps=4, seed=seed,
             ack_timeout=MIXED_ACK_TIMEOUT, selective=selective,
             faults_ba=dict(seed=seed + 7, drop_rate=3000), top=MIXED_TOP)
    cfg, knobs = config(MIXED_TOP, p)
    v, inject, _ = scenario(p, cfg, knobs)
    got = _memories(cfg, run_model(cfg, v, inject, (1, 0)))
    cqes = v.poll_cq(dict(enumerate(got["mem_a"])), len(v.mix_ops))
    assert len(cqes) == 200
    return sum(c["status"] == CqeStatus.RETRY_EXC_ERR.value for c in cqes)


@pytest.mark.parametrize("seed", [4, 5])
def test_selective_repeat_recovers_lost_read_responses(seed):
    """Selective repeat with READs and atomics over a B->A link that drops 4.6 % of its
    frames: no QP ends in RETRY_EXC_ERR, as with go-back-N. The response intake keeps
    no response out of order, so a QP with a READ or atomic in its window goes back N
    (docs/recovery.md, "READs and atomics under selective repeat"); resending its oldest
    message alone loses every response after the gap and lets the timer resend a WRITE
    whose cumulative ACK waits behind an unanswered READ until RETRY_EXC_ERR (1 to 4 QPs
    of seeds 3 to 6). The RTL: tests/test_cosim_rdma_read_links.py."""
    assert _retry_exceeded(1, seed) == 0
