"""The AETH MSN on the wire under selective repeat, checked independently of the golden
model (:func:`tb.rdma.wirecheck.msn_problems`: the count of request messages the ACK or
NAK acknowledges, from the request frames the requester sent).

The responder places only WRITE ONLY frames out of order (docs/recovery.md, "RDMA:
selective repeat"), so each placed PSN it consumes is one message: the MSN counts
messages, not PSNs, with multi-frame WRITEs among the placed ones. These runs are the
golden model's (fast); tests/test_cosim_rdma_recovery.py checks the MSN on the RTL's
wire, which equals the model's frame for frame.
"""

import zlib

import pytest
from scapy.contrib.roce import AETH, BTH, opcode
from scapy.layers.l2 import Ether

from tb.rdma.cocotb_rdma import config, run_model, scenario
from tb.rdma.wirecheck import msn_problems

#: Selective repeat over three QPs, 1 to 5 frames per message at a 256-byte path MTU,
#: about 10 % of the WRITE frames and 5 % of the ACKs dropped.
LOSSY_MULTI_FRAME = dict(kind="writes", messages=40, sizes=[1, 255, 256, 257, 700, 64],
                         qps=3, pmtu_log2=8, ack_timeout=1024, selective=1,
                         faults_ab=dict(seed=39, drop_rate=6554),
                         faults_ba=dict(seed=40, drop_rate=3000))
_WRITE_FIRST = opcode("RC", "RDMA_WRITE_FIRST")[0]
_ACKNOWLEDGE = opcode("RC", "ACKNOWLEDGE")[0]


def qp_pairs(v):
    """Requester QPN -> responder QPN of the scenario's verbs ``v``."""
    return {q.qpn_a: q.qpn_b for q in v.qps.values()}


def wire_msn_problems(p, frames, top=None):
    """:func:`msn_problems` of a co-simulation's recorded ``frames`` (``[[cycle, hex]]``
    of both links in cycle order, the run's ``out_json``) for run parameters ``p``."""
    cfg, knobs = config(top or {}, p)
    wire = [bytes.fromhex(text) for _, text in frames]
    return msn_problems(wire, wire, qp_pairs(scenario(p, cfg, knobs)[0]))


def model_wire(p, top=None):
    """``(requests, responses, qp pairs, model)`` of the golden model's run of ``p``:
    the A->B and B->A frames and requester QPN -> responder QPN."""
    cfg, knobs = config(top or {}, p)
    v, inject, _ = scenario(p, cfg, knobs)
    model = run_model(cfg, v, inject, (1, 0))
    return ([f for _, f in model["wire_ab"]], [f for _, f in model["wire_ba"]], qp_pairs(v),
            model)


@pytest.fixture(scope="module")
def lossy():
    return model_wire(LOSSY_MULTI_FRAME)


def test_msn_counts_messages_with_multi_frame_writes_placed_around(lossy):
    """Frames placed out of order, multi-frame WRITEs on the wire, frames lost on both
    links: every ACK and NAK carries the MSN the request stream implies."""
    requests, responses, pairs, model = lossy
    assert model["resp"]["sr_placed"] > 0
    assert model["links"]["ab"]["dropped"] > 0 and model["links"]["ba"]["dropped"] > 0
    assert any(f[42] == _WRITE_FIRST for f in requests)
    problems, checked = msn_problems(requests, responses, pairs)
    assert problems == []
    assert checked == sum(f[42] == _ACKNOWLEDGE for f in responses) > 0


def _forged(frame, msn):
    """``frame`` (an ACKNOWLEDGE, bytes with FCS) with AETH MSN ``msn``, its ICRC and FCS
    made anew (scapy, zlib)."""
    pkt = Ether(frame[:-4])
    pkt[AETH].msn = msn
    pkt[BTH].icrc = None
    body = bytes(pkt)
    return body + zlib.crc32(body).to_bytes(4, "little")


@pytest.mark.parametrize("nak", [False, True])
def test_msn_check_finds_an_msn_one_off(lossy, nak):
    """An ACK (or a NAK) whose MSN is one more than it should be is reported, by its
    index, and nothing else is."""
    requests, responses, pairs, _ = lossy
    k = next(k for k, f in enumerate(responses)
             if f[42] == _ACKNOWLEDGE and (f[54] >> 5 != 0) == nak)
    msn = int.from_bytes(responses[k][55:58], "big")
    forged = list(responses)
    forged[k] = _forged(responses[k], msn + 1)
    problems, _ = msn_problems(requests, forged, pairs)
    assert len(problems) == 1 and f" {k} (" in problems[0], problems


def test_msn_check_needs_every_message_end():
    """A request stream that lacks a message's last frame makes every later ACK of its
    QP wrong: the check counts messages from the requests, not from the responses."""
    requests, responses, pairs, _ = model_wire(dict(LOSSY_MULTI_FRAME, faults_ab={},
                                                    faults_ba={}, qps=1, messages=6))
    first_end = next(k for k, f in enumerate(requests) if f[42] != _WRITE_FIRST)
    problems, checked = msn_problems(requests[:first_end] + requests[first_end + 1:],
                                     responses, pairs)
    assert checked > 0 and len(problems) == checked, problems
