"""The mutation fuzzer (analysis/scenarios/fuzz.py), its model-free invariant checks
(tb/fuzz_checks.py), a small fuzz chunk of each receiver in co-simulation, and the
options of scripts/fuzz.py. The big runs are ``make fuzz`` (docs/fuzz.md)."""

import json
import random
import zlib

import pytest
from amaranth.lib import data

from analysis.scenarios.fuzz import (
    FIXES,
    KINDS,
    NIC_SENTINEL,
    RDMA_SENTINEL_QPN,
    ROCE_FIELDS,
    Mutator,
    nic_chunk,
    nic_fields,
    rdma_chunk,
    roce_refresh,
)
from pymodel.fcs import fcs_ok
from spec.formats.nic import Framing, header_layout
from spec.formats.roce import WRITE_RETH_HEADER
from tb.cosim import CosimFailure
from tb.fuzz_checks import (
    counted_once,
    outside_windows,
    read_bytes,
    tail_missing,
    writes_outside,
)
from tb.fuzz_runner import run_fuzz

NIC_ARGS = dict(width=16, mem_words=128, max_payload=256)


def _leaves(layout, prefix=""):
    """``{dotted name: (bit offset, width)}`` of a layout's leaf fields, walked here
    with the layout's own member list (independently of the fuzzer's walk)."""
    out = {}
    for name, field in layout:
        if isinstance(field.shape, data.StructLayout):
            for sub, (off, width) in _leaves(field.shape, f"{prefix}{name}.").items():
                out[sub] = (field.offset + off, width)
        else:
            out[f"{prefix}{name}"] = (field.offset, field.width)
    return out


def _nic(seed=1, chunk=0, frames=400, framing="compact"):
    return nic_chunk(seed, chunk, frames, framing, NIC_ARGS["width"], NIC_ARGS["mem_words"],
                     NIC_ARGS["max_payload"])


def test_every_kind_and_fix_is_produced():
    r = rdma_chunk(1, 0, 600)
    labels = {(m.kind, m.fix) for m in r.frames}
    assert set(KINDS) <= {k for k, _ in labels}
    for kind in ("bitflip", "field", "truncate", "extend"):
        assert {f for k, f in labels if k == kind} == set(FIXES), kind
    n = _nic(framing="l2")
    assert set(KINDS) <= {m.kind for m in n.frames}
    assert {m.fix for m in n.frames if m.kind == "field"} == {"none", "fcs"}


def test_same_seed_same_frames_other_seed_other_frames():
    a, b, c = rdma_chunk(3, 2, 200), rdma_chunk(3, 2, 200), rdma_chunk(4, 2, 200)
    assert [m.frame for m in a.frames] == [m.frame for m in b.frames]
    assert [m.frame for m in a.frames] != [m.frame for m in c.frames]
    assert [m.frame for m in rdma_chunk(3, 3, 200).frames] != [m.frame for m in a.frames]
    x, y = _nic(seed=5), _nic(seed=5)
    assert [m.frame for m in x.frames] == [m.frame for m in y.frames]
    assert [m.frame for m in x.frames] != [m.frame for m in _nic(seed=6).frames]


def test_every_header_field_of_the_spec_is_rewritten():
    want = set(_leaves(WRITE_RETH_HEADER))
    assert {f.name for f in ROCE_FIELDS} == want
    assert {m.field for m in rdma_chunk(1, 0, 600).frames if m.field} == want
    for framing in Framing:
        names = set(_leaves(header_layout(framing)))
        assert {m.field for m in _nic(framing=framing.value).frames if m.field} == names


def test_a_field_rewrite_changes_only_that_field():
    """A ``field`` mutant without a fix differs from its frame only inside the field."""
    r = rdma_chunk(1, 0, 10)
    frame = next(m.frame for m in r.frames if m.kind == "valid" and len(m.frame) > 80)
    mut = Mutator(random.Random(9), ROCE_FIELDS, roce_refresh, ("none",), {"field": 1})
    for f in ROCE_FIELDS:
        m = mut.mutate(frame, "field")
        assert m.field == f.name
        diff = int.from_bytes(m.frame, "little") ^ int.from_bytes(frame, "little")
        assert diff, f.name
        assert diff >> (f.offset + f.width) == 0 and diff & ((1 << f.offset) - 1) == 0, f.name
    # A field beyond the end of a short frame is passed over for the next one.
    short = frame[:60] + zlib.crc32(frame[:60]).to_bytes(4, "little")
    m = Mutator(random.Random(1), ROCE_FIELDS, roce_refresh, ("none",), {"field": 1})
    m._field_turn = [f.name for f in ROCE_FIELDS].index("reth.rkey")
    got = m.mutate(short, "field")
    assert got.field == ROCE_FIELDS[0].name and got.frame != short   # wrapped round
    names = _leaves(header_layout("l2"))
    assert {f.name: (f.offset, f.width) for f in nic_fields("l2")} == names


def test_fixed_mutants_pass_the_fcs_and_raw_ones_keep_lengths():
    r = rdma_chunk(2, 0, 600)
    fixed = [m for m in r.frames if m.fix != "none"]
    assert fixed and all(fcs_ok(m.frame) for m in fixed)
    # crc: the ICRC (zlib over the masked IP datagram, written out here) is right.
    for m in (m for m in fixed if m.fix == "crc" and len(m.frame) >= 62):
        body = bytearray(m.frame[:-8])
        for k in (15, 22, 24, 25, 40, 41, 46):
            body[k] = 0xFF
        assert zlib.crc32(b"\xff" * 8 + bytes(body[14:])).to_bytes(4, "little") == \
            m.frame[-8:-4]
    flips = [m for m in r.frames if m.kind == "bitflip" and m.fix == "none"]
    assert flips and not any(fcs_ok(m.frame) for m in flips)
    valid = {m.frame for m in r.frames if m.kind == "valid"}
    assert all(len(m.frame) in {len(v) for v in valid} for m in flips)


def test_the_sentinel_is_never_a_mutants_target():
    r = rdma_chunk(1, 0, 1500)
    for m in r.frames[:r.fuzz_frames]:
        if len(m.frame) >= 54:
            assert int.from_bytes(m.frame[47:50], "big") != RDMA_SENTINEL_QPN
    n = _nic(frames=1500)
    assert all(m.frame[1] != NIC_SENTINEL[0] for m in n.frames[:n.fuzz_frames])


# -- The invariant checks must fail when they should ----------------------------------------

def test_outside_windows_catches_one_byte():
    words = [0] * 8
    assert outside_windows(words, {}, [(64, 128)], 64) == []
    words[1] = 0xAB << 8                         # inside [64, 192)
    assert outside_windows(words, {}, [(64, 128)], 64) == []
    words[4] = 0x01 << (8 * 63)                  # byte 319: outside
    bad = outside_windows(words, {}, [(64, 128)], 64)
    assert len(bad) == 1 and "0x13f" in bad[0]
    assert outside_windows(words, {4: 0x01 << (8 * 63)}, [(64, 128)], 64) == []


def test_writes_outside_catches_a_stray_byte_enable():
    assert writes_outside([(2, 0xFFFF), (3, 0x1)], [(32, 64)], 16) == []
    assert len(writes_outside([(2, 0xFFFF), (6, 0x1)], [(32, 64)], 16)) == 1
    assert len(writes_outside([(1, 0x8000)], [(32, 64)], 16)) == 1


def test_counted_once_and_tail():
    c = {"ok": 3, "bad": 2}
    assert counted_once(c, ("ok", "bad"), 5) == []
    assert len(counted_once(c, ("ok", "bad"), 6)) == 1
    assert len(counted_once({"ok": "x", "bad": 5}, ("ok", "bad"), 5)) == 1   # X bits
    assert len(counted_once({"ok": "x", "bad": 5}, ("ok", "bad"), 8)) == 2
    words = [int.from_bytes(bytes(range(16)), "little"), 0]
    assert tail_missing(read_bytes(words, 16), {2: bytes([2, 3, 4])}) == []
    assert len(tail_missing(read_bytes(words, 16), {14: bytes([14, 15, 1])})) == 1


# -- Co-simulation: a small chunk per design ------------------------------------------------

def _records(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_fuzz_chunk_rdma(sim, test_id, tmp_path):
    """A hundred RoCEv2 fuzz frames on the default RdmaTop (the build the other RDMA
    co-simulations share; 32 fillers before the tail): 0 mismatches, 0 violations, every
    outcome counted."""
    out = tmp_path / "rdma.jsonl"
    run_fuzz("rdma", sim=sim, seed=11, chunks=[0], frames=100, out=out, test_id=test_id,
             rdma_top={}, fillers=32)
    (r,) = _records(out)
    assert r["mismatches"] == 0 and r["violations"] == [] and r["hangs"] == 0
    assert r["frames"] == 100 and sum(r["by_outcome"].values()) == r["injected"]
    assert r["by_outcome"]["frames_ok"] > 0 and r["by_outcome"]["fcs_bad"] > 0
    # Node B's QP in ERR (RDMA_ERR_QPN) took frames and dropped them, counted; its MR is
    # outside the writable windows, so a write there would be a violation above.
    assert r["by_outcome"]["qp_err"] > 0


def test_the_fuzz_reaches_a_qp_in_err():
    """The RDMA chunk has valid WRITEs to node B's QP in ERR (whose context says ERR)."""
    from analysis.scenarios.fuzz import RDMA_ERR_QPN, rdma_chunk
    from spec.formats.roce import QpState
    chunk = rdma_chunk(11, 0, 100, fillers=32)
    v = chunk.verbs
    ctx = v.context(v.mem_b, v.qpc_base_b, RDMA_ERR_QPN)
    assert ctx["state"] == QpState.ERR.value
    to_err = [m for m in chunk.frames[:chunk.fuzz_frames]
              if len(m.frame) > 54 and int.from_bytes(m.frame[47:50], "big") == RDMA_ERR_QPN]
    assert len(to_err) >= 2


#: One framing per simulator, to keep ``make test`` fast; ``make fuzz`` runs both
#: framings (its NIC chunks alternate them).
NIC_FRAMING = {"verilator": "compact", "icarus": "l2"}


def test_fuzz_chunk_nic(sim, test_id, tmp_path):
    """200 NIC fuzz frames on NicRxTop: 0 mismatches, 0 violations."""
    framing = NIC_FRAMING[sim]
    out = tmp_path / "nic.jsonl"
    run_fuzz("nic", sim=sim, seed=11, chunks=[0], frames=200, out=out, test_id=test_id,
             framing=framing)
    (r,) = _records(out)
    assert r["mismatches"] == 0 and r["violations"] == [] and r["hangs"] == 0
    assert r["frames"] == 200 and sum(r["by_outcome"].values()) == r["injected"]
    assert r["by_outcome"]["frames_ok"] > 0 and r["by_outcome"]["drop_fcs"] > 0


@pytest.mark.cosim
def test_fuzz_sabotage_is_reported(tmp_path):
    """The co-simulated checks have teeth: a model counter off by one is a mismatch, and
    with the sentinel's window left out of the allowed ones its tail writes are
    violations; the run fails (on Icarus only: the checks are the same Python on both
    simulators)."""
    out = tmp_path / "nic.jsonl"
    with pytest.raises(CosimFailure):
        run_fuzz("nic", sim="icarus", seed=12, chunks=[0], frames=50, out=out,
                 test_id="fuzz_sabotage", framing="l2", sabotage=("model", "windows"))
    (r,) = _records(out)
    assert r["mismatches"] >= 1
    assert any("outside every window" in v for v in r["violations"])
    assert r["hangs"] == 0


def test_nic_rx_top_rejects_a_bad_depth():
    from rtl.tops.nic_rx_top import NicRxTop
    with pytest.raises(ValueError, match="beats"):
        NicRxTop(beats=0)


def test_model_twin_plays_beats_back_to_back_from_their_release():
    from pymodel.nic.rx_top import play_cycles
    assert play_cycles([5, 5, 5, 20, 20, 21]) == [5, 6, 7, 20, 21, 22]


# -- scripts/fuzz.py options -------------------------------------------------------------

@pytest.mark.parametrize("argv, name", [
    (["--design", "foo"], "--design"), (["--frames", "0"], "--frames"),
    (["--chunk", "1000000"], "--chunk"), (["--sim", "xsim"], "--sim"),
    (["--per-run", "0"], "--per-run"), (["--seed", "-1"], "--seed"),
])
def test_bad_options_are_named(argv, name, capsys):
    from scripts.fuzz import parse
    with pytest.raises(SystemExit) as exc:
        parse(argv)
    assert exc.value.code == 2
    assert name in capsys.readouterr().err


# -- READ and atomic frames in the RDMA fuzz -------------------------------------------------

#: BTH opcodes (IBTA Vol 1 table 38), read off the frames here independently of the
#: fuzzer's own table.
_READ_REQ, _READ_RSP, _ATOMIC_ACK, _ATOMICS = 0x0C, (0x0D, 0x0E, 0x0F, 0x10), 0x12, (0x13,
                                                                                    0x14)


def _opcodes(frames):
    return [m.frame[42] for m in frames if len(m.frame) > 42 and m.kind not in ("filler",
                                                                                 "tail")]


def test_the_rdma_fuzz_with_reads_sends_read_and_atomic_frames_and_mutants_of_them():
    """With ``reads`` the fuzz (three chunks of 1,500 frames) has READ requests, atomics
    (both opcodes), READ RESPONSEs and ATOMIC ACKNOWLEDGEs, each also as a mutant (not
    kind ``valid``); without it, none of those opcodes but from a mutation."""
    chunks = [rdma_chunk(3, k, 1500, reads=True) for k in range(3)]
    fuzz = [m for c in chunks for m in c.frames[:c.fuzz_frames] if len(m.frame) > 42]
    for want in (_READ_REQ, _ATOMIC_ACK, *_ATOMICS):
        assert any(m.frame[42] == want and m.kind == "valid" for m in fuzz), hex(want)
        assert any(m.frame[42] == want and m.kind != "valid" for m in fuzz), hex(want)
    assert any(m.frame[42] in _READ_RSP for m in fuzz)
    plain = rdma_chunk(3, 0, 600)
    valid = [m for m in plain.frames[:plain.fuzz_frames] if m.kind == "valid"]
    assert not {_READ_REQ, _ATOMIC_ACK, *_ATOMICS, *_READ_RSP} & set(_opcodes(valid))


def test_frame_kind_and_atomic_psns():
    from analysis.scenarios.fuzz import atomic_psns, frame_kind
    from pymodel.rdma.frames import Endpoint
    from pymodel.rdma.read_frames import atomic_request_frame, read_request_frame
    from pymodel.rdma.verbs import IP_A, IP_B, MAC_A, MAC_B
    from spec.formats.roce import OpCode
    a, b = Endpoint(MAC_A, IP_A), Endpoint(MAC_B, IP_B)
    add = [atomic_request_frame(OpCode.RC_FETCH_ADD, a, b, 1, 5, psn, 0x1000, 0x1234, 1)
           for psn in (7, 7, 8)]
    other_qp = atomic_request_frame(OpCode.RC_CMP_SWAP, a, b, 1, 6, 9, 0x1000, 0x1234, 1)
    read = read_request_frame(a, b, 1, 5, 10, 0x1000, 0x1234, 64)
    assert [frame_kind(f) for f in (add[0], other_qp, read, b"\0" * 20)] == [
        "atomic", "atomic", "read_request", "short"]
    assert atomic_psns([*add, other_qp, read], 5) == {7, 8}


def test_executed_at_most():
    from tb.fuzz_checks import executed_at_most
    assert executed_at_most("atomics", 3, 3) == []
    assert "executed 4 times" in executed_at_most("atomics", 4, 3)[0]
    assert "reads" in executed_at_most("atomics", "x", 3)[0]


#: A heavier READ mix than make fuzz's for a chunk of 100 frames (a few READs and
#: atomics in it: analysis.scenarios.fuzz.RDMA_READ_MIX is tuned for long chunks).
TEST_READ_MIX = dict(read_request=0.04, atomic=0.03, response=0.1)


@pytest.mark.slow_variants("verilator", reason=(
    "the shared feature top's Verilator build (tb.rdma.runner.FEATURES_TOP) is made only "
    "by make test-all; Icarus runs the same chunk in make test"))
def test_fuzz_chunk_rdma_reads(sim, test_id, tmp_path):
    """A hundred RoCEv2 fuzz frames with READs and atomics (and their mutants) on the
    top with node B's READ responder that the READ co-simulations share: 0 mismatches
    (every READ RESPONSE and ATOMIC ACKNOWLEDGE beat on the B->A link and the memories
    included), 0 violations (no atomic executed twice), READs and atomics executed."""
    from tb.rdma.runner import FEATURES_TOP
    out = tmp_path / "rdma.jsonl"
    run_fuzz("rdma", sim=sim, seed=11, chunks=[0], frames=100, out=out, test_id=test_id,
             rdma_top=FEATURES_TOP, fillers=32, read_mix=TEST_READ_MIX)
    (r,) = _records(out)
    assert r["mismatches"] == 0 and r["violations"] == [] and r["hangs"] == 0
    assert sum(r["by_outcome"].values()) == r["injected"]
    assert r["by_frame"]["read_request"] > 0 and r["by_frame"]["atomic"] > 0
    assert r["by_effect"]["read_reqs"] > 0 and r["by_effect"]["atomics"] > 0
