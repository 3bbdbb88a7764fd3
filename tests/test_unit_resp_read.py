"""RDMA READ at the pipelined responder: RTL against its twin cycle for cycle (Amaranth
simulator), and both against what IBTA Vol 1 says the responses must be (derived here
from the request, the memory and the MTU, not from the code under test)."""

import random

import pytest

from pymodel.fields import pack
from pymodel.packet import beats_to_frames, pack_beat
from pymodel.rdma.frames import write_frame
from pymodel.rdma.read_frames import (
    atomic_ack_frame,
    atomic_request_frame,
    read_request_frame,
    read_response_frame,
)
from pymodel.rdma.resp.responder import ResponderModel
from rtl.rdma.resp.responder import Responder
from spec.formats.roce import MR_LAYOUT_RA, QPC_LAYOUT, OpCode, Syndrome
from spec.rdma_responder import MrTableShape, read_packets
from tb.rdma.wirecheck import scaleup_problems, wire_problems
from tb.resp_bench import run_responder
from tb.resp_frames import A, B

QPC_BASE = 16
DATA_BASE = 1 << 12            # word address of the MR's data
MR_KEY = 0x1234_5601           # MR index 1 of 16
READ_ONLY_KEY = 0x1234_5602    # MR index 2: remote write only (no remote read)
OP = OpCode


def _setup(rng, pmtu_log2=9, expected_psn=100, msn=7, qpn=3):
    mem = {QPC_BASE + qpn: pack(QPC_LAYOUT, dict(
        valid=1, pmtu_log2=pmtu_log2, dest_qp=0x77, expected_psn=expected_psn, msn=msn,
        dmac=A.mac, smac=B.mac, dip=A.ip, sip=B.ip))}
    for k in range(64):
        mem[DATA_BASE + k] = rng.getrandbits(512)
    mr = [0] * 16
    mr[1] = pack(MR_LAYOUT_RA, dict(valid=1, remote_write=1, remote_read=1, key=MR_KEY,
                                 base=64 * DATA_BASE, length=64 * 64))
    mr[2] = pack(MR_LAYOUT_RA, dict(valid=1, remote_write=1, remote_read=0, key=READ_ONLY_KEY,
                                 base=64 * DATA_BASE, length=64 * 64))
    return mem, mr


def _read(psn, va_word, length, rkey=MR_KEY, qpn=3, header="roce"):
    return read_request_frame(A, B, 0x100, qpn, psn, 64 * va_word, rkey, length,
                              header=header)


def _frames(run):
    return beats_to_frames([pack_beat(64, b["data"], b["nbytes"], b["first"], b["last"])
                            for _, b in run.acks], 64)


def _expected_responses(mem, psn, va_word, length, msn, pmtu_log2, header="roce"):
    """The READ RESPONSE frames IBTA prescribes: the data cut at the MTU, one PSN each
    from the request's, opcodes ONLY or FIRST/MIDDLE.../LAST, an AETH (ACK, the MSN)
    on all but MIDDLE."""
    data = b"".join(mem.get(DATA_BASE + va_word - DATA_BASE + k, 0).to_bytes(64, "little")
                    for k in range(-(-length // 64)))[:length]
    mtu = 1 << pmtu_log2
    n = max(1, -(-length // mtu))
    out = []
    for k in range(n):
        op = (OP.RC_RDMA_READ_RESPONSE_ONLY if n == 1 else
              OP.RC_RDMA_READ_RESPONSE_FIRST if k == 0 else
              OP.RC_RDMA_READ_RESPONSE_LAST if k == n - 1 else
              OP.RC_RDMA_READ_RESPONSE_MIDDLE)
        out.append(read_response_frame(op, B, A, 3, 0x77, psn + k, Syndrome.ACK, msn,
                                       data[k * mtu:(k + 1) * mtu], header=header))
    return out


#: READ lengths at a 512-byte MTU: empty, edge sizes around a word and the MTU, and
#: three packets (FIRST, MIDDLE, LAST).
LENGTHS = (0, 1, 63, 64, 65, 128, 200, 512, 513, 1500)


def test_read_responses_match_the_spec_and_the_model():
    """One READ of each of :data:`LENGTHS` in turn, each at the PSN after the previous
    one's responses."""
    rng = random.Random(1)
    mem, mr = _setup(rng)
    frames, want, psn = [], [], 100
    for k, length in enumerate(LENGTHS):
        frames.append(_read(psn, DATA_BASE + k, length))
        want += _expected_responses(mem, psn, DATA_BASE + k, length, 8 + k, 9)
        psn += read_packets(length, 9)
    run = run_responder(frames, mem, mr, qpc_base=QPC_BASE, read_words=128, latency=30)
    assert _frames(run) == want
    assert psn - 100 == sum(max(1, -(-n // 512)) for n in LENGTHS)
    assert run.counters["read_reqs"] == len(LENGTHS)
    assert run.counters["read_frames"] == len(want)
    assert run.counters["frames_ok"] == len(LENGTHS) and not run.writes
    # The requests consumed one PSN per response packet, and one MSN each.
    grp = run.model.cache.group_view("resp", 3)
    assert grp["expected_psn"] == psn and grp["msn"] == 7 + len(LENGTHS)


def test_next_request_after_a_read_uses_the_psn_after_its_responses():
    """A READ of 3 packets consumes PSNs 100-102: a WRITE at 103 is accepted, an ACK of
    it follows the responses on the wire, in order."""
    rng = random.Random(5)
    mem, mr = _setup(rng, pmtu_log2=8)
    write = write_frame(OP.RC_RDMA_WRITE_ONLY, A, B, 0x100, 3, 103, True, b"\x55" * 64,
                        va=64 * (DATA_BASE + 40), rkey=MR_KEY, dma_length=64)
    run = run_responder([_read(100, DATA_BASE, 600), write], mem, mr, qpc_base=QPC_BASE,
                        read_words=64, latency=25, o_stall=0.2, rd_stall=0.2, seed=3)
    frames = _frames(run)
    assert frames[:3] == _expected_responses(mem, 100, DATA_BASE, 600, 8, 8)
    assert frames[3][42] == OP.RC_ACKNOWLEDGE.value
    assert int.from_bytes(frames[3][51:54], "big") == 103
    assert run.counters["frames_ok"] == 2 and run.counters["psn_nak"] == 0


def test_repeated_read_is_read_again_and_answered_with_its_psn():
    rng = random.Random(7)
    mem, mr = _setup(rng)
    run = run_responder([_read(100, DATA_BASE, 64), _read(101, DATA_BASE + 1, 700),
                         _read(100, DATA_BASE, 64)], mem, mr, qpc_base=QPC_BASE,
                        read_words=128, latency=20)
    frames = _frames(run)
    first = _expected_responses(mem, 100, DATA_BASE, 64, 8, 9)
    second = _expected_responses(mem, 101, DATA_BASE + 1, 700, 9, 9)
    again = _expected_responses(mem, 100, DATA_BASE, 64, 9, 9)    # the current MSN
    assert frames == first + second + again
    assert run.counters["duplicates"] == 1 and run.counters["read_reqs"] == 3


def test_bad_reads_are_naked_remote_access_and_nothing_else_changes():
    """A bad rkey, an MR without the remote-read right, a READ beyond the MR and one at
    an unaligned VA, each followed by a good READ: each bad one is NAKed remote access
    error with its PSN and consumes it; the good ones are answered; nothing written."""
    rng = random.Random(11)
    mem, mr = _setup(rng)
    bad = [_read(100, DATA_BASE, 64, rkey=MR_KEY ^ 0x100),
           _read(102, DATA_BASE, 64, rkey=READ_ONLY_KEY),
           _read(104, DATA_BASE + 60, 5 * 64),
           read_request_frame(A, B, 0x100, 3, 106, 64 * DATA_BASE + 8, MR_KEY, 64)]
    frames, want = [], []
    for k, frame in enumerate(bad):
        frames += [frame, _read(101 + 2 * k, DATA_BASE + k, 64)]
        want.append(101 + 2 * k)
    run = run_responder(frames, mem, mr, qpc_base=QPC_BASE, read_words=128)
    got = _frames(run)
    for k in range(len(bad)):
        nak, good = got[2 * k], got[2 * k + 1]
        assert nak[42] == OP.RC_ACKNOWLEDGE.value
        assert nak[54] == Syndrome.NAK_REMOTE_ACCESS.value
        assert int.from_bytes(nak[51:54], "big") == 100 + 2 * k
        assert [good] == _expected_responses(mem, want[k], DATA_BASE + k, 64, 8 + k, 9)
    assert run.counters["access_nak"] == 4 and run.counters["read_reqs"] == 4
    assert not run.writes


def test_without_read_words_a_read_request_is_malformed():
    rng = random.Random(3)
    mem, mr = _setup(rng)
    run = run_responder([_read(100, DATA_BASE, 64)], mem, mr, qpc_base=QPC_BASE)
    assert run.counters["malformed"] == 1 and not run.acks


@pytest.mark.parametrize("bad", [32, 96, 2048, -1, True, "128"])
def test_bad_read_words_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match="read_words"):
        Responder(read_words=bad)


def test_read_words_with_an_mr_cache_is_refused_naming_it():
    with pytest.raises(ValueError, match="read_words"):
        Responder(read_words=128, mr=MrTableShape(cache=16))
    with pytest.raises(ValueError, match="read_words"):
        ResponderModel(read_words=128, mr=MrTableShape(cache=16))


@pytest.mark.parametrize("seed", [1, 2])
def test_random_reads_and_writes_with_stalls(seed):
    """READs of random lengths (0 to 3000 bytes) and WRITEs in PSN order on one QP, with
    a repeated READ now and then, stalls on ``o`` and the host read and write ports:
    RTL = model in every cycle; the responses are IBTA's and pass the independent
    scapy + zlib checks."""
    rng = random.Random(seed)
    mem, mr = _setup(rng, pmtu_log2=8 + seed)
    frames, want, psn, msn = [], [], 100, 7
    done = []                                   # (psn, va word, length) of READs sent
    for _ in range(8):
        if done and rng.random() < 0.2:
            p, w, n = rng.choice(done)
            frames.append(_read(p, w, n))
            want += _expected_responses(mem, p, w, n, msn, 8 + seed)
        elif rng.random() < 0.7:
            n = rng.choice([0, 1, 63, 64, 65, 256, 700, 3000 - 64 * 8])
            w = DATA_BASE + rng.randrange(8)
            frames.append(_read(psn, w, n))
            msn += 1
            want += _expected_responses(mem, psn, w, n, msn, 8 + seed)
            done.append((psn, w, n))
            psn += read_packets(n, 8 + seed)
        else:
            frames.append(write_frame(OP.RC_RDMA_WRITE_ONLY, A, B, 0x100, 3, psn,
                                      rng.random() < 0.5, rng.randbytes(40),
                                      va=64 * (DATA_BASE + 60), rkey=MR_KEY, dma_length=40))
            psn, msn = psn + 1, msn + 1
    run = run_responder(frames, mem, mr, qpc_base=QPC_BASE, read_words=64, latency=40,
                        o_stall=0.3, rd_stall=0.3, wr_stall=0.3, seed=seed)
    got = [fr for fr in _frames(run) if 0x0D <= fr[42] <= 0x10]
    assert got == want
    assert not [p for _, p in wire_problems(_frames(run)) if p]


def test_reads_behind_the_scaleup_header():
    """The same READs behind the 10-byte scale-up header: requests of one beat, responses
    with the scale-up header (26 or 22 header bytes), RTL = model, IBTA's frames, and
    every frame good for the independent scale-up checker."""
    rng = random.Random(9)
    mem, mr = _setup(rng, pmtu_log2=8)
    reads = [(100, DATA_BASE, 600), (103, DATA_BASE + 1, 0), (104, DATA_BASE + 2, 70)]
    run = run_responder([_read(p, w, n, header="scaleup") for p, w, n in reads], mem, mr,
                        qpc_base=QPC_BASE, read_words=64, header="scaleup", o_stall=0.2)
    want = []
    for k, (p, w, n) in enumerate(reads):
        want += _expected_responses(mem, p, w, n, 8 + k, 8, header="scaleup")
    frames = _frames(run)
    assert frames == want
    assert not [fr for fr in frames if scaleup_problems(fr)]


def test_read_sees_the_write_before_it():
    """A WRITE, then at once a READ of the same bytes: the READ's data read waits until
    the WRITE's words have left for the host, so the response carries the new bytes."""
    rng = random.Random(13)
    mem, mr = _setup(rng)
    payload = rng.randbytes(150)
    write = write_frame(OP.RC_RDMA_WRITE_ONLY, A, B, 0x100, 3, 100, False, payload,
                        va=64 * (DATA_BASE + 4), rkey=MR_KEY, dma_length=150)
    run = run_responder([write, _read(101, DATA_BASE + 4, 150)], mem, mr,
                        qpc_base=QPC_BASE, read_words=64, wr_stall=0.5, seed=4)
    want = read_response_frame(OP.RC_RDMA_READ_RESPONSE_ONLY, B, A, 3, 0x77, 101,
                               Syndrome.ACK, 9, payload)
    assert _frames(run) == [want]


ATOMIC_KEY = 0x1234_5603        # MR index 3: remote atomic allowed


def _atomic_setup(rng):
    mem, mr = _setup(rng)
    mr[3] = pack(MR_LAYOUT_RA, dict(valid=1, remote_atomic=1, key=ATOMIC_KEY,
                                 base=64 * DATA_BASE, length=64 * 64))
    return mem, mr


def _atomic(op, psn, va, swap, compare=0, rkey=ATOMIC_KEY):
    return atomic_request_frame(op, A, B, 0x100, 3, psn, va, rkey, swap, compare)


def _u64(mem, va):
    word = mem.get(va // 64, 0)
    return word >> (8 * (va % 64)) & ((1 << 64) - 1)


def test_atomics_execute_once_and_a_repeat_is_answered_from_the_saved_result():
    """FETCH & ADD, COMPARE & SWAP (equal, then not), a WRITE and a READ of the same
    word after them, then the first FETCH & ADD again (its ACK was lost): answered with
    the same original value, not executed again. Expected values from the arithmetic
    IBTA defines (9.4.5: the original value returned, add modulo 2**64; swap when
    equal), on the memory as the test set it."""
    rng = random.Random(21)
    mem, mr = _atomic_setup(rng)
    va = 64 * (DATA_BASE + 5) + 16
    v0 = _u64(mem, va)
    add, swap = (1 << 64) - 3, 0x1122334455667788
    v1 = (v0 + add) & ((1 << 64) - 1)
    frames = [_atomic(OP.RC_FETCH_ADD, 100, va, add),
              _atomic(OP.RC_CMP_SWAP, 101, va, swap, compare=v1),
              _atomic(OP.RC_CMP_SWAP, 102, va, 5, compare=v1),       # not equal now
              _read(103, DATA_BASE + 5, 64),
              _atomic(OP.RC_FETCH_ADD, 100, va, add)]                 # repeated
    run = run_responder(frames, mem, mr, qpc_base=QPC_BASE, read_words=64, latency=30,
                        o_stall=0.2, rd_stall=0.2, wr_stall=0.2, seed=2)
    got = _frames(run)
    want_orig = [v0, v1, swap]
    for k, orig in enumerate(want_orig):
        assert got[k] == atomic_ack_frame(B, A, 3, 0x77, 100 + k, Syndrome.ACK, 8 + k, orig)
    word = mem[DATA_BASE + 5] & ~(((1 << 64) - 1) << 128) | swap << 128
    assert got[3] == read_response_frame(OP.RC_RDMA_READ_RESPONSE_ONLY, B, A, 3, 0x77, 103,
                                         Syndrome.ACK, 11, word.to_bytes(64, "little"))
    assert got[4] == atomic_ack_frame(B, A, 3, 0x77, 100, Syndrome.ACK, 11, v0)
    assert _u64(run.mem, va) == swap                    # executed once each
    assert run.counters["atomics"] == 3 and run.counters["atomic_replays"] == 1
    assert not [p for _, p in wire_problems(got) if p]


def test_saved_atomic_results_are_kept_per_qp():
    """QP 3's FETCH & ADD, then 17 of QP 4 (another word), then QP 3's again (its ACK
    was lost): answered from its saved result although 17 atomics of another QP came
    after it; QP 4's first again (16 of its own after it: the IRD of 16, IBTA's
    responder resources per QP) dropped, its second answered; QP 3 + 2 * 4096's PSN 100
    (the same row, another QP) dropped. Each executed once (IBTA 9.4.5 arithmetic)."""
    rng = random.Random(25)
    mem, mr = _atomic_setup(rng)
    for qpn, dest, psn in ((4, 0x78, 200), (3 + 2 * 4096, 0x79, 300)):
        mem[QPC_BASE + qpn] = pack(QPC_LAYOUT, dict(
            valid=1, pmtu_log2=9, dest_qp=dest, expected_psn=psn, msn=0,
            dmac=A.mac, smac=B.mac, dip=A.ip, sip=B.ip))
    va, va4 = 64 * (DATA_BASE + 5) + 16, 64 * (DATA_BASE + 6) + 8
    v0, w0 = _u64(mem, va), _u64(mem, va4)

    def fa(qpn, psn, where, add):
        return atomic_request_frame(OP.RC_FETCH_ADD, A, B, 0x100, qpn, psn, where,
                                    ATOMIC_KEY, add)
    frames = ([fa(3, 100, va, 9)] + [fa(4, 200 + k, va4, 1) for k in range(17)]
              + [fa(3, 100, va, 9), fa(4, 200, va4, 1), fa(4, 201, va4, 1),
                 fa(3 + 2 * 4096, 100, va, 9)])
    run = run_responder(frames, mem, mr, qpc_base=QPC_BASE, read_words=64, latency=30,
                        o_stall=0.2, rd_stall=0.2, wr_stall=0.2, seed=5)
    m64 = (1 << 64) - 1
    want = ([atomic_ack_frame(B, A, 3, 0x77, 100, Syndrome.ACK, 8, v0)]
            + [atomic_ack_frame(B, A, 4, 0x78, 200 + k, Syndrome.ACK, 1 + k, (w0 + k) & m64)
               for k in range(17)]
            + [atomic_ack_frame(B, A, 3, 0x77, 100, Syndrome.ACK, 8, v0),
               atomic_ack_frame(B, A, 4, 0x78, 201, Syndrome.ACK, 17, (w0 + 1) & m64)])
    assert _frames(run) == want
    assert _u64(run.mem, va) == (v0 + 9) & m64 and _u64(run.mem, va4) == (w0 + 17) & m64
    assert run.counters["atomics"] == 18 and run.counters["atomic_replays"] == 2
    assert run.counters["duplicates"] == 4


def test_bad_atomics_are_naked_and_nothing_is_written():
    """Misaligned (NAK invalid request), bad rkey, no remote-atomic right, beyond the MR
    (NAK remote access error), each followed by a good FETCH & ADD of 1: only those
    execute, one after the other."""
    rng = random.Random(23)
    mem, mr = _atomic_setup(rng)
    va = 64 * (DATA_BASE + 2)
    bad = [(_atomic(OP.RC_FETCH_ADD, 100, va + 4, 1), Syndrome.NAK_INVALID_REQUEST),
           (_atomic(OP.RC_FETCH_ADD, 102, va, 1, rkey=ATOMIC_KEY ^ 0x100),
            Syndrome.NAK_REMOTE_ACCESS),
           (_atomic(OP.RC_FETCH_ADD, 104, va, 1, rkey=MR_KEY), Syndrome.NAK_REMOTE_ACCESS),
           (_atomic(OP.RC_FETCH_ADD, 106, 64 * (DATA_BASE + 64), 1),
            Syndrome.NAK_REMOTE_ACCESS)]
    frames = []
    for k, (frame, _) in enumerate(bad):
        frames += [frame, _atomic(OP.RC_FETCH_ADD, 101 + 2 * k, va, 1)]
    run = run_responder(frames, mem, mr, qpc_base=QPC_BASE, read_words=64)
    got = _frames(run)
    v = _u64(mem, va)
    for k, (_, syndrome) in enumerate(bad):
        nak = got[2 * k]
        assert nak[42] == OP.RC_ACKNOWLEDGE.value and nak[54] == syndrome.value
        assert got[2 * k + 1] == atomic_ack_frame(B, A, 3, 0x77, 101 + 2 * k,
                                                  Syndrome.ACK, 8 + k, (v + k) % 2**64)
    assert run.counters["access_nak"] == 4 and run.counters["atomics"] == 4
    assert [w["data"] for _, w in run.writes] == [(v + k + 1) % 2**64 for k in range(4)]
    assert all(w["addr"] == DATA_BASE + 2 and w["be"] == 0xFF for _, w in run.writes)


def test_a_reads_run_without_read_words_is_refused_before_any_build():
    from tb.rdma.cocotb_rdma import check_params
    with pytest.raises(ValueError, match="read_words"):
        check_params(dict(kind="reads", top={}))
    with pytest.raises(ValueError, match="read_words"):
        check_params(dict(kind="reads", top={"read_words": 100}))
    check_params(dict(kind="reads", top={"read_words": 64}))
