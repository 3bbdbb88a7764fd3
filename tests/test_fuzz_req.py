"""The requester's fuzz (``make fuzz`` design ``rdma-req``): the stream of
:mod:`analysis.scenarios.fuzz_req`, the model-free checks of :mod:`tb.rdma.cocotb_req_fuzz`
on the twin, and one co-simulated chunk."""

import json
from collections import Counter

import pytest

from analysis.scenarios.fuzz import frame_kind, roce_refresh
from analysis.scenarios.fuzz_req import (
    HOSTILE,
    QP_A,
    A,
    B,
    _accepts,
    _plen,
    beats_of,
    forged,
    req_chunk,
)
from pymodel.packet import frame_to_beats
from pymodel.rdma.read_frames import read_response_frame
from pymodel.rdma.req.read_top import run_read_top
from rtl.tops.read_requester_top import FIFO_DEPTHS
from spec.formats.roce import OpCode, Syndrome
from tb.fuzz_runner import max_chunk, run_fuzz
from tb.rdma.cocotb_req_fuzz import OUTCOMES, TIMEOUT, chunk_invariants


def _twin(chunk, **kw):
    beats = [b for m in chunk.frames for b in frame_to_beats(m.frame, 64)]
    return run_read_top(beats, chunk.issues, [], timeout=kw.get("timeout", TIMEOUT),
                        slots=16, ord=16, depth=1 << 12, fifo_depths=FIFO_DEPTHS)


def _check(chunk, w):
    return chunk_invariants(chunk, w["count"], w["overflow"], [x for _, x in w["o"]],
                            [x for _, x in w["done"]])


def test_the_chunk_is_deterministic_exact_and_fits_the_player():
    a, b = req_chunk(3, 2, 200), req_chunk(3, 2, 200)
    assert [m.frame for m in a.frames] == [m.frame for m in b.frames]
    assert [m.frame for m in req_chunk(3, 3, 200).frames] != [m.frame for m in a.frames]
    for k in range(5):
        c = req_chunk(1, k, 255)
        assert c.fuzz_frames == 255 and len(c.frames) == 255 + 2
        assert sum(beats_of(m.frame) for m in c.frames) <= 1024
    assert max_chunk("rdma-req") == 255
    with pytest.raises(ValueError, match="frames must be 1 to"):
        req_chunk(1, 0, 600)


def test_the_stream_holds_every_hostile_kind_mutation_and_response_opcode():
    chunks = [req_chunk(1, k, 200) for k in range(4)]
    frames = [m for c in chunks for m in c.frames]
    assert {m.field for m in frames if m.kind == "hostile"} == {f"hostile.{h}"
                                                                for h in HOSTILE}
    kinds = Counter(m.kind for m in frames)
    for kind in ("valid", "bitflip", "field", "truncate", "extend", "duplicate", "reorder"):
        assert kinds[kind] > 0, kind
    ops = Counter(m.frame[42] for m in frames if frame_kind(m.frame) != "short")
    for op in (OpCode.RC_RDMA_READ_RESPONSE_FIRST, OpCode.RC_RDMA_READ_RESPONSE_MIDDLE,
               OpCode.RC_RDMA_READ_RESPONSE_LAST, OpCode.RC_RDMA_READ_RESPONSE_ONLY,
               OpCode.RC_ATOMIC_ACKNOWLEDGE, OpCode.RC_ACKNOWLEDGE):
        assert ops[op.value] > 0, op
    # The QP B's PSNs wrap round 2**24 within a chunk.
    assert any(i["psn"] < 16 for i in chunks[0].issues if i["qpn"] != QP_A)


def test_forged_names_only_a_frame_the_requester_would_take_for_the_honest_one():
    honest = read_response_frame(OpCode.RC_RDMA_READ_RESPONSE_ONLY, B, A, 1, QP_A, 7,
                                 Syndrome.ACK, 9, bytes(range(64)))
    table = {(QP_A, 7): (_accepts(honest[42], _plen(honest)), honest)}
    body = bytearray(honest[:-4])
    body[70] ^= 1                                     # a payload byte
    assert forged(roce_refresh(bytes(body), "crc"), table)         # ICRC made right
    assert not forged(roce_refresh(bytes(body), "fcs"), table)     # ICRC wrong
    longer_frame = roce_refresh(honest[:-8] + bytes(4) + honest[-8:-4], "crc")
    assert not forged(longer_frame, table)          # 4 bytes more than its IPv4 length
    other_type = bytearray(honest[:-4])
    other_type[12] = 0x86                           # not IPv4
    assert not forged(roce_refresh(bytes(other_type), "crc"), table)
    assert not forged(honest, table)
    longer = read_response_frame(OpCode.RC_RDMA_READ_RESPONSE_ONLY, B, A, 1, QP_A, 7,
                                 Syndrome.ACK, 9, bytes(68))
    assert not forged(longer, table)
    nak = read_response_frame(OpCode.RC_RDMA_READ_RESPONSE_ONLY, B, A, 1, QP_A, 7, 0x61,
                              9, bytes(64))
    assert not forged(nak, table)
    other_psn = read_response_frame(OpCode.RC_RDMA_READ_RESPONSE_ONLY, B, A, 1, QP_A, 8,
                                    Syndrome.ACK, 9, bytes(64))
    assert not forged(other_psn, table)


def test_the_twin_meets_the_invariants_and_reaches_every_outcome():
    """Six chunks through the twin: no violation; every outcome but ``overflow`` seen,
    the timer's re-requests too."""
    total = Counter()
    for k in range(6):
        c = req_chunk(5, k, 200)
        w = _twin(c)
        assert _check(c, w) == []
        total.update(w["count"])
        total["overflow"] += w["overflow"]
    for name in OUTCOMES[:-1] + ("rewinds", "timeouts"):
        assert total[name] > 0, name


def test_the_invariants_catch_a_lost_write_an_extra_completion_and_a_frame_not_counted():
    c = req_chunk(5, 0, 200)
    w = _twin(c)
    writes, done = [x for _, x in w["o"]], [x for _, x in w["done"]]
    assert "host memory differs" in chunk_invariants(c, w["count"], 0, writes[1:], done)[0]
    assert "completions" in chunk_invariants(c, w["count"], 0, writes, done + done[:1])[0]
    fewer = dict(w["count"], bad=w["count"]["bad"] - 1)
    assert "add up to" in chunk_invariants(c, fewer, 0, writes, done)[0]
    more = dict(w["count"], responses=w["count"]["responses"] + 1, bad=w["count"]["bad"] - 1)
    assert "honest ones sent" in chunk_invariants(c, more, 0, writes, done)[0]


def test_a_zero_length_read_completes():
    """IBTA allows an RDMA READ of 0 bytes (one READ RESPONSE ONLY without payload): the
    RTL (Amaranth simulator) and its twin accept it and complete it once, with one host
    word that enables no byte and carries its mark; the READ after it lands."""
    from tb.rdma.intake_bench import responses, run_intake
    frames = [f for _, f in responses(QP_A, 100, b"", 8) + responses(QP_A, 101, b"xy", 8)]
    issues = [dict(atomic=0, qpn=QP_A, psn=100, pmtu_log2=8, laddr=4096, length=0),
              dict(atomic=0, qpn=QP_A, psn=101, pmtu_log2=8, laddr=8192, length=2)]
    r = run_intake(frames, issues)                 # RTL = twin in every cycle
    assert r["count"]["responses"] == 2 and r["count"]["malformed"] == 0
    assert [(d["qpn"], d["psn"]) for d in r["done"]] == [(QP_A, 100), (QP_A, 101)]
    assert [(o["addr"], o["be"], o["mark"], o["tag"]) for o in r["o"]] == [
        (64, 0, 1, QP_A), (128, 0b11, 1, QP_A)]


@pytest.mark.slow_variants("verilator", reason=(
    "ReadRequesterTop's Verilator build is made only by make test-all "
    "(tests/test_cosim_rdma_read_requester.py); Icarus runs the same chunk in make test"))
def test_fuzz_chunk_rdma_req(sim, test_id, tmp_path):
    """Two hundred requester fuzz frames on ReadRequesterTop: 0 mismatches (every host
    write, completion, re-request and counter with its cycle), 0 violations, no hang;
    accepted, dropped and malformed responses all seen."""
    out = tmp_path / "req.jsonl"
    run_fuzz("rdma-req", sim=sim, seed=7, chunks=[0], frames=200, out=out, test_id=test_id)
    (r,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert r["mismatches"] == 0 and r["violations"] == [] and r["hangs"] == 0
    assert r["frames"] == 200 and sum(r["by_outcome"].values()) == r["injected"]
    for name in ("responses", "duplicates", "malformed", "bad"):
        assert r["by_outcome"][name] > 0, name
    assert r["by_frame"]["read_response"] > 0 and r["by_frame"]["atomic_ack"] > 0


def test_bad_chunk_for_the_requester_is_named(capsys):
    from scripts.fuzz import parse

    with pytest.raises(SystemExit) as exc:
        parse(["--design", "rdma-req", "--chunk", "256"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--chunk must be 1 to 255 for design rdma-req, not 256" in err
    assert parse(["--design", "rdma-req"]).designs == ("rdma-req",)
