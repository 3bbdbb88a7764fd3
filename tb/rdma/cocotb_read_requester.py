"""cocotb test of ReadRequesterTop: the requester's READ and atomic blocks against their
twins (:func:`pymodel.rdma.req.read_top.run_read_top`), every recorded item and its cycle,
every player's cycles, the intake's counters; and the outcome against IBTA's rules, derived
from the operations (not from the code under test): every READ byte and atomic original
value at its local address, one completion per operation in order, the request frames
equal to :mod:`pymodel.rdma.read_frames`' and passing the hand and scapy checkers."""

import random

import cocotb

from pymodel.fields import pack, unpack
from pymodel.packet import beats_to_frames, frame_to_beats, pack_beat
from pymodel.rdma.frames import ack_frame
from pymodel.rdma.req.read_top import run_read_top
from pymodel.rdma.req.request_framer import request_frame
from rtl.rdma.req.request_framer import request_layout
from rtl.tops.read_requester_top import FIFO_DEPTHS
from spec.formats.packet import packet_layout
from spec.formats.roce import Syndrome
from spec.host import wr_layout
from spec.rdma_read_req import INTAKE_COUNTERS, done_layout, issue_layout, rewind_layout
from tb.cosim import cosim_params
from tb.harness import Harness
from tb.rdma.intake_bench import LEAD, QP_A, QP_B, mixed, random_requests, responses
from tb.rdma.wirecheck import wire_problems
from tb.resp_frames import A, B
from tb.scoreboard import Scoreboard

#: The top's parameters (rtl.tops.read_requester_top.ReadRequesterTop's defaults).
SLOTS, ORD, DEPTH = 16, 16, 1 << 12


def scenario(seed):
    """Frames, issues, request descriptors and what IBTA says the requester ends with.

    Ten operations on two QPs answered in order, with a duplicate, an ACK and a bad-FCS
    frame among the answers; then a READ of 3 packets whose second response is lost
    (the gap re-requests it; the READ is answered whole again) and an atomic whose
    ACKNOWLEDGE is lost (the timer re-requests it after 60 ACKs of no progress; the
    repeated ACKNOWLEDGE follows)."""
    rng = random.Random(seed)
    ops = mixed(rng)
    good = [f for answer in ops.answers for _, f in answer]
    bad = bytearray(good[0])
    bad[-1] ^= 1
    ack = ack_frame(B, A, 0x100, QP_A, 5, Syndrome.ACK, 3)
    frames = good[:3] + [good[1], ack, bytes(bad)] + good[3:]
    ops.read(QP_A, 3 * 512 - 100, 9)
    ops.atomic(QP_B)
    read = [f for _, f in ops.answers[-2]]
    atomic = ops.answers[-1][0][1]
    frames += [read[0], read[2]] + read + [ack] * 60 + [atomic]
    lead = [ack_frame(B, A, 0x100, QP_B, 1, Syndrome.ACK, 3)] * LEAD
    assert responses                    # (the READ answers above are built by it)
    return lead + frames, ops, random_requests(rng, 20)


@cocotb.test()
async def read_requester(dut):
    p = cosim_params()
    timeout = p["timeout"]
    frames, ops, reqs = scenario(p["seed"])
    beats = [b for f in frames for b in frame_to_beats(f, 64)]
    want = run_read_top(beats, ops.issues, reqs, timeout=timeout, slots=SLOTS, ord=ORD,
                        depth=DEPTH, fifo_depths=FIFO_DEPTHS)
    lay = {"wr": wr_layout(DEPTH), "ops_done": done_layout(), "rewind": rewind_layout(),
           "req_frames": packet_layout(64)}
    want["wr"], want["ops_done"] = want.pop("o"), want.pop("done")

    harness = Harness(dut)
    harness.set("timeout", timeout)
    harness.load_player("frames", beats)
    harness.load_player("issue", [pack(issue_layout(DEPTH), i) for i in ops.issues])
    harness.load_player("req", [pack(request_layout(), r) for r in reqs])
    for name in lay:
        harness.arm_recorder(name, len(want[name]))
    await harness.reset()
    await harness.wait_done([f"{n}__done" for n in lay] + ["frames__done", "issue__done",
                                                          "req__done"],
                            timeout_cycles=4 * want["cycles"] + 1000)
    sb = Scoreboard(dut._log)
    got = {}
    for name in lay:
        items, stamps = harness.recorded(name)
        got[name] = [unpack(lay[name], v) for v in items]
        if name == "req_frames":
            exp = [pack_beat(64, *b) for _, b in want[name]]
            items = [pack(lay[name], dict(g, data=g["data"] & ((1 << 8 * g["nbytes"]) - 1)))
                     for g in got[name]]
            sb.compare(f"{name} items", items, exp)
        else:
            sb.compare(f"{name} items", items, [pack(lay[name], v) for _, v in want[name]])
        sb.compare(f"{name} cycles", stamps, [c for c, _ in want[name]], fmt=str)
    sb.compare("issue cycles", harness.played_stamps("issue", len(ops.issues)),
               want["issue_taken"], fmt=str)
    for name in INTAKE_COUNTERS:
        sb.equal(f"intake {name}", int(getattr(dut, f"intake__{name}").value),
                 want["count"][name])
    for name in lay:
        sb.equal(f"{name} overflow", int(getattr(dut, f"{name}__overflow").value), 0)
    sb.equal("rx overflow", int(dut.rx_overflow.value), want["overflow"])
    # IBTA's outcome, from the operations.
    mem = {}
    for w in got["wr"]:
        for k in range(64):
            if w["be"] >> k & 1:
                mem[64 * w["addr"] + k] = (w["data"] >> (8 * k)) & 0xFF
    sb.equal("requester memory", mem == ops.expect, True)
    sb.equal("completions", [(d["qpn"], d["psn"], d["atomic"]) for d in got["ops_done"]],
             ops.last)
    rew = [(r["qpn"], r["psn"]) for r in got["rewind"]]
    sb.equal("first re-request (the gap)", rew[:1], [(QP_A, ops.answers[-2][1][0])])
    sb.equal("timer re-requests (the atomic)",
             set(rew[1:]), {(QP_B, ops.answers[-1][0][0])})
    frames_out = beats_to_frames([pack_beat(64, g["data"], g["nbytes"], g["first"],
                                            g["last"]) for g in got["req_frames"]], 64)
    sb.equal("request frames", frames_out == [request_frame(r) for r in reqs], True)
    sb.equal("request frame problems", [p for _, p in wire_problems(frames_out) if p], [])
    sb.check()
    dut._log.info("%d frames, %d operations, %d requests in %d cycles", len(frames),
                  len(ops.issues), len(reqs), want["cycles"])
