"""The fuzz of the NIC's memory receiver (analysis/scenarios/fuzz_mem.py): the frames and
mutants it makes, its model-free checks (tb/nic/cocotb_mem_fuzz.py) on the golden
model's run and on runs broken on purpose, and a small chunk in co-simulation on the
NicMemTop the load and atomic co-simulations build (tests/test_cosim_nic_mem.py)."""

import json
import zlib

import pytest

from analysis.scenarios.fuzz_mem import nic_mem_chunk
from pymodel.nic.mem_frames import parse_mem_header
from pymodel.nic.mem_system import NicMemSystemModel
from spec.formats.nic_mem import MEM_WIDTH, MemOp
from tb.fuzz_runner import NIC_MEM_FUZZ_TOP, max_chunk, run_fuzz
from tb.nic.cocotb_mem_fuzz import allowed_windows, chunk_memories, mem_chunk_invariants

#: The top of tests/test_cosim_nic_mem.py (its _run): the same build.
TEST_TOP = dict(NIC_MEM_FUZZ_TOP, raws=16, events=512)
MODEL_KEYS = ("nodes", "framing", "fabric", "tags", "mem_words", "max_payload")


def _chunk(seed=1, k=0, frames=400):
    t = NIC_MEM_FUZZ_TOP
    return nic_mem_chunk(seed, k, frames, t["framing"], t["nodes"], t["mem_words"],
                         t["max_payload"], t["tags"])


def test_every_op_is_sent_valid_and_mutated_each_frame_fits_a_beat():
    chunk = _chunk()
    seen = set()
    for m in chunk.frames:
        body = m.frame[:-4]
        assert 1 <= len(m.frame) <= MEM_WIDTH               # one beat, FCS included
        assert zlib.crc32(body).to_bytes(4, "little") == m.frame[-4:]
        if len(body) >= 10:                                  # the compact header
            seen.add((parse_mem_header("compact", body)["mem"]["op"], m.kind == "valid"))
    for op in MemOp:
        assert (op.value, True) in seen and (op.value, False) in seen, op
    assert {m.kind for m in chunk.frames} >= {"valid", "bitflip", "field", "truncate",
                                              "extend", "duplicate", "reorder"}
    assert {m.fix for m in chunk.frames} == {"none", "fcs"}    # none: kept as they were


def test_a_frame_is_sent_by_the_node_its_source_names():
    chunk = _chunk(frames=200)
    for m, p in zip(chunk.frames, chunk.sender, strict=True):
        if len(m.frame) - 4 >= 10:
            assert p == parse_mem_header("compact", m.frame[:-4])["src"] % 3


def _model_run(chunk, seed=1, k=0):
    model = NicMemSystemModel(**{key: NIC_MEM_FUZZ_TOP[key] for key in MODEL_KEYS})
    mem = chunk_memories(model.nodes, model.mem_words, seed, k)
    want = model.run(chunk.cmds, raws=chunk.raws(), mem={q: list(v) for q, v in mem.items()})
    writes = {q: [(a, be) for _, a, be in want["wr"][q]] for q in range(model.nodes)}
    landed = {q: len(want["rsp"][q]) for q in range(model.nodes)}
    return mem, want, writes, landed


def _check(chunk, mem, want, writes, landed, outstanding=None):
    return mem_chunk_invariants(chunk, "compact", 3, mem, want["mem"], writes,
                                want["counters"], landed,
                                outstanding or want["outstanding"])


def test_the_checks_pass_on_the_model_and_catch_broken_runs():
    """The model's run of a chunk meets every check; a write moved outside the allowed
    bytes, a counter one too many, a command's response missing, a tag left busy and
    requests answered twice are each reported."""
    chunk = _chunk(frames=300)
    mem, want, writes, landed = _model_run(chunk)
    assert _check(chunk, mem, want, writes, landed) == []
    assert any(writes.values()) and want["counters"][0]["req_ok"] > 0
    # A stray byte enable: node 0's first byte that no command lands in and no atomic
    # addresses (found here by brute force over the windows).
    windows = allowed_windows(chunk, "compact", 3)[0]
    byte = next(b for b in range(MEM_WIDTH * NIC_MEM_FUZZ_TOP["mem_words"])
                if not any(base <= b < base + n for base, n in windows))
    stray = {q: list(v) for q, v in writes.items()}
    stray[0] = stray[0] + [(byte // MEM_WIDTH, 1 << byte % MEM_WIDTH)]
    assert any(f"touches byte {byte:#x}" in v
               for v in _check(chunk, mem, want, stray, landed))
    changed = {q: list(v) for q, v in want["mem"].items()}
    changed[0][byte // MEM_WIDTH] ^= 1 << 8 * (byte % MEM_WIDTH)
    assert any(f"byte {byte:#x} outside every window changed" in v
               for v in _check(chunk, mem, dict(want, mem=changed), writes, landed))
    broken = json.loads(json.dumps(want["counters"]))
    broken = {int(q): c for q, c in broken.items()}
    broken[1]["drop_malformed"] += 1
    assert any("add up to" in v for v in _check(chunk, mem, dict(want, counters=broken),
                                                writes, landed))
    assert any("commands' responses landed" in v
               for v in _check(chunk, mem, want, writes, {**landed, 0: landed[0] - 1}))
    assert any("tags still busy" in v
               for v in _check(chunk, mem, want, writes, landed, {0: 1, 1: 0, 2: 0}))
    assert any("credit errors" in v for v in mem_chunk_invariants(
        chunk, "compact", 3, mem, want["mem"], writes, want["counters"], landed,
        want["outstanding"], credit_errors=1))
    twice = {int(q): c for q, c in json.loads(json.dumps(want["counters"])).items()}
    twice[2]["req_ok"] += 1000
    assert any("at most" in v for v in _check(chunk, mem, dict(want, counters=twice),
                                              writes, landed))


def test_the_nic_chunk_size_fits_both_nic_targets():
    assert max_chunk("nic") <= max_chunk("nic-mem") == NIC_MEM_FUZZ_TOP["raws"]


@pytest.mark.slow_variants("verilator", reason=(
    "the same Python checks as on Icarus, which runs this chunk in make test on the "
    "NicMemTop build of test_cosim_nic_mem.py; make test-all runs both"))
def test_fuzz_chunk_nic_mem(sim, test_id, tmp_path):
    """Two chunks of 30 mutated memory frames (up to 16 per node: the raw players of the
    shared build) beside 4 commands per node: 0 mismatches, 0 violations, every op
    sent."""
    out = tmp_path / "mem.jsonl"
    run_fuzz("nic-mem", sim=sim, seed=11, chunks=[0, 1], frames=30, out=out,
             test_id=test_id, nic_mem_top=TEST_TOP)
    records = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(records) == 2
    for r in records:
        assert r["mismatches"] == 0 and r["violations"] == [] and r["hangs"] == 0
        assert r["frames"] == 30 and r["by_outcome"]["mem.req_ok"] > 0
    kinds = set().union(*(r["by_frame"] for r in records))
    assert {"load", "fetch_add", "cmp_swap", "response"} <= kinds
