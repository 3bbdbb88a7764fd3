"""The responder's verify stage with READs under selective repeat (``reads``,
``selective`` = 1): the RTL against its twin, cycle for cycle, and the outcome against
the rule of docs/recovery.md, "READs and atomics under selective repeat"."""

import pytest

from pymodel.rdma.resp.verify import VERIFY_COUNTERS, VerifyModel
from rtl.rdma.resp.verify import Verify
from spec.formats.roce import Syndrome
from spec.rdma_responder import IRD, MrTableShape, read_packets
from tb.stage_harness import compare_stage
from tests.test_unit_resp_stages import _TableEnv, _WithEnv

ENTRIES, JOBS, DEPTH, MRS = 16, 8, 1 << 14, 16
PMTU_LOG2 = 8
MR = dict(valid=1, remote_write=1, remote_read=1, remote_atomic=1, key=0x21,
          base=1 << 12, length=1 << 16)
STATIC = dict(valid=1, dest_qp=7, dmac=1, smac=2, dip=3, sip=4, pmtu_log2=PMTU_LOG2)


def _only(psn, k, ack_req=0):
    """A WRITE ONLY of one 64-byte word at word ``k`` of the MR."""
    return dict(check=1, rest=2, qpn=3, entry=3, psn=psn, ack_req=ack_req, reth=1, last=1,
                va=MR["base"] + 64 * k, rkey=MR["key"], dma_len=64, plen=64, data=k + 1,
                read=0, atomic=0, cmp=0)


def _read(psn, length):
    return dict(_only(psn, 40, ack_req=1), read=1, dma_len=length, plen=0, data=0)


class _Saving(_WithEnv):
    """The twin with the response sender's ``save_*`` ports taken from the side inputs
    (the RTL's: an atomic executed in this cycle)."""

    def step(self, c, side):
        if side["save_valid"]:
            self.twin.save(side["save_qpn"], side["save_psn"], side["save_orig"])
        return super().step(c, side)


def _run_verify(expected_psn, stimulus, *, selective, rate, cycles, seed, saves=()):
    """The verify stage (``reads``) and its twin on ``stimulus`` with every entry's
    group at ``expected_psn`` (MSN 5), cycle for cycle; ``saves``: one ``(qpn, psn,
    orig)`` on the ``save_*`` ports per cycle from cycle 0. Returns ``(dut, outputs,
    env, twin)``."""
    groups = [dict(expected_psn=expected_psn, nak_sent=0, msn=5, resp_va=0, resp_left=0)
              for _ in range(ENTRIES)]
    env, box = _TableEnv(groups), {}

    def side_in(c, peek):
        qpn, psn, orig = saves[c] if c < len(saves) else (0, 0, 0)
        return {"filled.ready": 1, "ctx.data": STATIC,
                "group.data": env.groups[peek("group.addr")], "mr_data": MR,
                "done_addr": 3, "held_addr": 3, "selective": selective,
                "save_valid": int(c < len(saves)), "save_qpn": qpn, "save_psn": psn,
                "save_orig": orig}

    def make(fifos):
        box["t"] = VerifyModel(fifos["i"], fifos["w"], fifos["ack"], ENTRIES, JOBS, DEPTH,
                               env, selective=selective, reads=True)
        return _Saving(box["t"], env)

    dut = Verify(ENTRIES, JOBS, DEPTH, MrTableShape(MRS), reads=True)
    out = compare_stage(
        dut, make, inputs={"i": JOBS}, outputs={"w": 4, "ack": 4},
        stimulus={"i": stimulus}, cycles=cycles, seed=seed, push_rate=rate, pop_rate=rate,
        side_in=side_in, side_out=("group.we", "group.wdata", "held") + VERIFY_COUNTERS)
    return dut, out, env, box["t"]


@pytest.mark.parametrize("rate", [1.0, 0.5])
def test_read_at_expected_consumes_the_placed_psns_after_it(rate):
    """Expected PSN 10. WRITE ONLYs 11 and 12 are placed ahead of a lost one-packet READ
    of PSN 10; the READ resent consumes them (expected 13, MSN + 3). A three-packet
    READ of PSN 13 (response PSNs 13 to 15) is lost, the WRITE ONLY 16 after it is
    placed; the READ resent consumes it (expected 17). The requester's go-back-N
    resends of 11, 12 and 16 are then duplicates behind the expected PSN: ACKed
    cumulatively, never written again. Each WRITE is written once. (Shifting the bitmap
    by the READ's PSNs alone accepted 11 and 16 again at the expected PSN.)"""
    three = 3 << PMTU_LOG2
    assert read_packets(three, PMTU_LOG2) == 3
    stimulus = [_only(11, 1), _only(12, 2), _read(10, 64), _only(16, 6), _read(13, three),
                _only(11, 1, ack_req=1), _only(12, 2, ack_req=1), _only(16, 6, ack_req=1)]
    dut, out, env, twin = _run_verify(10, stimulus, selective=1, rate=rate, cycles=120,
                                      seed=5)
    w_layout = dut.w.payload.shape()
    written = [int(x.addr) - (MR["base"] >> 6) for x in
               (w_layout.from_bits(v) for _, v in out["w"]) if x.write]
    assert sorted(written) == [1, 2, 6]             # each WRITE once
    ack_layout = dut.ack.payload.shape()
    acks = [ack_layout.from_bits(v) for _, v in out["ack"]]
    reads = [(int(a.psn), int(a.msn)) for a in acks if a.read]
    assert reads == [(10, 6), (13, 9)]                # each READ answered once, in order
    dup = [int(a.psn) for a in acks if not a.read and a.syndrome == Syndrome.ACK.value]
    assert dup == [16, 16, 16]                         # cumulative: expected 17 - 1
    assert env.groups[3]["expected_psn"] == 17 and env.groups[3]["msn"] == 10
    assert not twin.held(3)


@pytest.mark.parametrize("fillers", [0, 15])
def test_repeated_atomic_is_answered_from_the_newest_saved_result(fillers):
    """QP 3 holds two saved results of PSN 100 (an atomic 2**24 PSNs after another with
    at most IRD atomics between, or a QPN used again): A, then B. A repeat of PSN 100 can
    only be of the newer, so it is answered with B, whichever slot each is in: A in slot
    0 and B in slot 1 (``fillers`` 0), or, after 15 other results of the QP, A in the last
    slot and B in slot 0 (``fillers`` 15, the ring wrapped). RTL = twin cycle for cycle."""
    assert fillers < IRD
    a, b = 0xA0A0_0000_0000_000A, 0xB0B0_0000_0000_000B
    saves = [(3, 150 + i, i + 1) for i in range(fillers)] + [(3, 100, a), (3, 100, b)]
    behind = [_only(190 + k % 8, 1) for k in range(len(saves) + 4)]     # duplicates
    repeat = dict(_only(100, 0), reth=0, dma_len=8, plen=0, data=0, atomic=1)
    dut, out, _, _ = _run_verify(200, behind + [repeat], selective=0, rate=1.0, cycles=80,
                                 seed=7, saves=saves)
    ack_layout = dut.ack.payload.shape()
    atomics = [ack_layout.from_bits(v) for _, v in out["ack"]]
    atomics = [(int(x.psn), int(x.swap)) for x in atomics if x.atomic]
    assert atomics == [(100, b)]
    assert not out["w"] or all(not w.write for w in map(dut.w.payload.shape().from_bits,
                                                         (v for _, v in out["w"])))
