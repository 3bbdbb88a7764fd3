"""The requester's receipt of RDMA READ responses and ATOMIC ACKNOWLEDGEs
(:class:`rtl.rdma.req.response_intake.ResponseIntake`): RTL against its twin cycle for
cycle (Amaranth simulator), and the outcome against IBTA's rules, derived here from the
operations and the responder's data (not from the code under test): every byte of a READ
lands at its local address, an atomic's original value at its own, one completion per
operation in response order; a lost response makes the requester ask again from the
first PSN missing; duplicates are dropped; the ORD limit holds operations back."""

import random

import pytest
from amaranth.sim import Simulator

from pymodel.fields import pack
from pymodel.packet import beats_to_frames, pack_beat
from pymodel.rdma.frames import ack_frame
from pymodel.rdma.req.request_framer import RequestFramerModel, request_frame
from rtl.rdma.req.request_framer import RequestFramer, request_layout
from rtl.rdma.req.response_intake import ResponseIntake
from spec.formats.roce import OpCode, Syndrome
from spec.rdma_read_req import slot_bits
from tb.rdma.intake_bench import (
    LEAD,
    QP_A,
    QP_B,
    Ops,
    memory,
    mixed,
    random_requests,
    responses,
    run_intake,
)
from tb.rdma.wirecheck import wire_problems
from tb.resp_frames import A, B, refresh

OP = OpCode


@pytest.mark.slow_variants("2-*", "3-*", reason=(
    "seed 1 runs every path without backpressure; the mutated-responses test runs the "
    "intake with backpressure in make test"))
@pytest.mark.parametrize("seed,pop_rate,push_rate", [(1, 1.0, 1.0), (2, 0.5, 0.7),
                                                      (3, 0.3, 0.4)])
def test_intake_lands_reads_and_atomics_as_ibta_says(seed, pop_rate, push_rate):
    """Responses in order (the two QPs' operations in issue order), a duplicate of an
    accepted response, an ACK and a frame with a bad FCS among them: every byte lands
    where its operation says, one completion per operation, in order; the duplicate,
    the ACK and the bad frame are counted and change nothing."""
    rng = random.Random(seed)
    ops = mixed(rng)
    frames = [f for answer in ops.answers for _, f in answer]
    dup = frames[1]
    bad = bytearray(frames[0])
    bad[-1] ^= 1
    frames = frames[:3] + [dup, ack_frame(B, A, 0x100, QP_A, 5, Syndrome.ACK, 3),
                           bytes(bad)] + frames[3:]
    res = run_intake(frames, ops.issues, seed=seed, pop_rate=pop_rate, push_rate=push_rate)
    assert memory(res["o"]) == ops.expect
    assert [(d["qpn"], d["psn"], d["atomic"]) for d in res["done"]] == ops.last
    c = res["count"]
    assert c["responses"] == len(frames) - 3
    assert (c["duplicates"], c["other"], c["bad"]) == (1, 1 + LEAD, 1)
    assert c["gaps"] == c["malformed"] == c["unmatched"] == c["rewinds"] == 0
    assert not res["rewind"]
    # A host write per response frame ends with ``last``; an operation's last word marks.
    assert sum(w["last"] for w in res["o"]) == c["responses"]
    assert sum(w["mark"] for w in res["o"]) == len(ops.issues)


def test_intake_lost_response_asks_again_from_the_first_missing_psn():
    """A READ of 5 packets loses its second: the later three are gaps, and one re-request
    names the lost PSN; the responder's answer to the re-read (IBTA: a new READ from
    that PSN, so FIRST ... LAST of the bytes left) completes it, with every byte in
    place. An atomic whose ACKNOWLEDGE is lost is asked for again after the timeout
    (no progress meanwhile: 60 ACKs in between); its repeated ACKNOWLEDGE (the
    responder's saved result) completes it."""
    rng = random.Random(7)
    ops = Ops(rng)
    ops.read(QP_A, 5 * 256, 8)
    ops.atomic(QP_B)
    read, atomic = ops.answers
    data = bytes(ops.expect[ops.issues[0]["laddr"] + k] for k in range(5 * 256))
    lost_psn = read[1][0]
    again = responses(QP_A, lost_psn, data[256:], 8)
    fillers = [ack_frame(B, A, 0x100, QP_A, 1, Syndrome.ACK, 3)] * 60
    frames = ([read[0][1]] + [f for _, f in read[2:]] + [f for _, f in again] + fillers
              + [atomic[0][1]])
    res = run_intake(frames, ops.issues, timeout=40, push_rate=1.0)
    assert memory(res["o"]) == ops.expect
    assert [(d["qpn"], d["psn"], d["atomic"]) for d in res["done"]] == ops.last
    c = res["count"]
    assert c["gaps"] == 3 and c["responses"] == 1 + len(again) + 1
    assert res["rewind"][0] == dict(qpn=QP_A, psn=lost_psn)
    assert c["timeouts"] >= 1
    assert all(r == dict(qpn=QP_B, psn=atomic[0][0]) for r in res["rewind"][1:])
    assert c["rewinds"] == 1 + c["timeouts"] == len(res["rewind"])


def test_intake_holds_issues_at_the_ord_limit():
    """ORD 2: the third operation of a QP is taken only once the first one's last
    response has been decided (after the frame before it has left the stage)."""
    rng = random.Random(3)
    ops = Ops(rng)
    for _ in range(6):
        ops.read(QP_A, 300, 8)          # 2 packets each
    frames = [f for answer in ops.answers for _, f in answer]
    res = run_intake(frames, ops.issues, slots=4, ord=2, push_rate=1.0)
    assert memory(res["o"]) == ops.expect
    issue_at, hdr_at = res["taken"]["issue"], res["taken"]["hdr"]
    for i in range(2, 6):
        before_last_of = 2 * (i - 2)    # index of the frame before op i-2's last frame
        assert issue_at[i] > hdr_at[LEAD + before_last_of]
    assert issue_at[1] < hdr_at[LEAD]   # two go at once


def test_intake_rejects_bad_parameters():
    for kwargs, name in ((dict(slots=0), "slots"), (dict(slots=65), "slots"),
                         (dict(slots=4, ord=5), "ord"), (dict(ord=0), "ord")):
        with pytest.raises((ValueError, TypeError), match=name):
            ResponseIntake(**kwargs)


def test_slot_bits_counts_every_field():
    """Requester state per outstanding operation at 16 slots, 2**14 host words: valid,
    atomic, QPN 24, next and last PSN 24 each, PMTU 4, a byte address of 20 bits, 15
    bits of bytes left, started, rewound, and 16 bits of the age matrix."""
    assert slot_bits(1 << 14, 16) == 1 + 1 + 24 + 24 + 24 + 4 + 20 + 15 + 1 + 1 + 16


@pytest.mark.slow_variants("1.0", reason="ready 0.5 runs the same frames with backpressure")
@pytest.mark.parametrize("ready_rate", [1.0, 0.5])
def test_request_framer_matches_twin_and_the_wire(ready_rate):
    """RequestFramer against its twin cycle for cycle (descriptors offered at random,
    the link's ready at random): the same beats in the same cycles; every frame is a
    READ request (BTH + RETH) or an atomic request (BTH + AtomicETH) that the hand and
    scapy checkers pass (FCS, ICRC, IPv4 checksum, lengths), 78 and 90 bytes."""
    rng = random.Random(5)
    reqs = random_requests(rng, 40)
    dut, twin = RequestFramer(), RequestFramerModel()
    lay = request_layout()
    got = []

    async def bench(ctx):
        queue = list(reqs)
        for c in range(400):
            offer = queue[0] if queue and rng.random() < 0.8 else None
            ready = rng.random() < ready_rate
            ctx.set(dut.i.valid, offer is not None)
            if offer is not None:
                ctx.set(dut.i.payload.as_value(), pack(lay, offer))
            ctx.set(dut.o.ready, ready)
            taken, beat = twin.step(c, offer, ready)
            assert bool(ctx.get(dut.i.ready) and offer is not None) == taken, c
            have = None
            if ctx.get(dut.o.valid):
                p = dut.o.payload
                n = ctx.get(p.nbytes)
                have = (ctx.get(p.data) & ((1 << 8 * n) - 1), n, ctx.get(p.first),
                        ctx.get(p.last))
            assert have == (None if beat is None else
                            (beat[0], beat[1], int(beat[2]), int(beat[3]))), c
            if have is not None and ready:
                got.append(pack_beat(64, *have))
            if taken:
                queue.pop(0)
            await ctx.tick()
        assert not queue

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    frames = beats_to_frames(got, 64)
    assert frames == [request_frame(r) for r in reqs]
    assert all(not p for _, p in wire_problems(frames))
    for f, r in zip(frames, reqs, strict=True):
        assert len(f) == (78 if r["opcode"] == OP.RC_RDMA_READ_REQUEST.value else 90)
        assert f[42] == r["opcode"] and int.from_bytes(f[51:54], "big") == r["psn"]


def test_intake_mutated_responses_write_only_inside_operations():
    """Hostile input: good responses with random header bytes changed (ICRC and FCS
    made right again, so the checks behind them are what stops them) and with random
    lengths cut, mixed with the good ones. RTL = twin on every item and counter; every
    byte written lies inside an issued operation's local range (an atomic's 8 bytes);
    no operation completes twice; every frame is counted exactly once."""
    rng = random.Random(17)
    ops = mixed(rng)
    good = [f for answer in ops.answers for _, f in answer]
    frames = []
    for f in good:
        for _ in range(2):
            body = bytearray(f[:-8])
            for _ in range(rng.randrange(1, 4)):
                body[rng.randrange(14, min(len(body), 70))] ^= 1 << rng.randrange(8)
            if rng.random() < 0.3:
                body = body[:rng.randrange(48, len(body))]
            frames.append(refresh(body))
        frames.append(f)
    res = run_intake(frames, ops.issues, seed=3, pop_rate=0.6)
    inside = set()
    for iss in ops.issues:
        n = 8 if iss["atomic"] else iss["length"]
        inside.update(range(iss["laddr"], iss["laddr"] + n))
    assert set(memory(res["o"])) <= inside
    done = [(d["qpn"], d["psn"]) for d in res["done"]]
    assert len(done) == len(set(done))
    c = res["count"]
    assert sum(c[k] for k in ("responses", "duplicates", "gaps", "malformed", "unmatched",
                              "bad", "other")) == len(frames) + LEAD
    assert c["bad"] > 0 and c["responses"] > 0


def test_intake_takes_the_whole_read_sent_again():
    """Go-back-N of the engine sends a whole message again: a READ of 5 packets loses
    its second response; after the gap the READ is answered whole again (FIRST is now
    a duplicate, MIDDLE at the PSN missing continues it). Every byte lands; the
    completion follows the last response."""
    rng = random.Random(9)
    ops = Ops(rng)
    ops.read(QP_A, 5 * 256 - 40, 8)
    read = [f for _, f in ops.answers[0]]
    frames = [read[0]] + read[2:] + read
    res = run_intake(frames, ops.issues, push_rate=1.0)
    assert memory(res["o"]) == ops.expect
    assert [(d["qpn"], d["psn"]) for d in res["done"]] == [(QP_A, ops.last[0][1])]
    c = res["count"]
    assert (c["gaps"], c["rewinds"], c["duplicates"], c["responses"]) == (3, 1, 1, 5)
    assert res["rewind"] == [dict(qpn=QP_A, psn=ops.answers[0][1][0])]


def test_intake_limits_acks_to_before_the_first_psn_unanswered():
    """The ACK limit (compared with the twin every cycle, for both QPs in turn): at the
    end, QP A's last READ lost its last response, so an ACK of QP A covers only PSNs
    before that response's; QP B has nothing outstanding (no limit)."""
    rng = random.Random(12)
    ops = Ops(rng)
    ops.read(QP_A, 600, 8)
    ops.atomic(QP_B)
    ops.read(QP_A, 700, 8)
    frames = [f for answer in ops.answers for _, f in answer][:-1]
    res = run_intake(frames, ops.issues, push_rate=1.0)
    lost_psn = ops.answers[2][-1][0]
    assert res["twin"].limit(QP_A) == (1, lost_psn)
    assert res["twin"].limit(QP_B) == (0, 0)
    assert len(res["done"]) == 2
