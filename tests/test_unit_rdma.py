"""Unit tests of the RDMA engine's pieces: wire format, framing, checks, parameters."""

import dataclasses
import random
import zlib

import pytest
from amaranth import Module
from amaranth.lib import wiring
from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from analysis.rdma.point import build, run_model
from analysis.scenarios.rdma import seed_dropping_only
from pymodel.fabric.faulty_link import FaultSettings, FaultyLinkModel
from pymodel.fields import pack
from pymodel.packet import beats_to_frames, frame_to_beats, unpack_beat
from pymodel.rdma.frames import Endpoint, ack_frame, ipv4_checksum, write_frame
from pymodel.rdma.links import LinkBeats, LinkStream
from rtl.common.fcs_inserter import FcsInserter
from rtl.rdma.context_cache import ContextCache
from rtl.rdma.frame_check import FrameCheck
from rtl.rdma.icrc_inserter import IcrcInserter
from rtl.rdma.req.requester import Requester
from rtl.rdma.resp.responder import Responder
from rtl.rdma.write_framer import WriteFramer, segment_layout
from rtl.tops.rdma_top import RdmaTop
from spec.formats.roce import OpCode, Syndrome
from spec.rdma_engine import SIM_TIMEOUT, TIMEOUT_BITS
from spec.rdma_responder import MrTableShape
from tb.amsim import get_all, put_all, run_sim
from tb.rdma.frame_check_bench import damaged, frame_check_verdicts
from tb.rdma.wirecheck import frame_problems, hand_problems, wire_problems

A = Endpoint(0x02_00_00_00_00_01, 0x0A_00_00_01)
B = Endpoint(0x02_00_00_00_00_02, 0x0A_00_00_02)
SIZES = [1, 2, 3, 4, 5, 10, 11, 54, 55, 58, 59, 60, 63, 64, 65, 127, 128, 129, 256, 4096]
WRITES = [OpCode.RC_RDMA_WRITE_ONLY, OpCode.RC_RDMA_WRITE_FIRST,
          OpCode.RC_RDMA_WRITE_MIDDLE, OpCode.RC_RDMA_WRITE_LAST]


def test_write_frames_decode_independently():
    """Model frames: scapy reads the right fields; FCS, IP checksum and ICRC are
    recomputed without the project's CRC code."""
    rng = random.Random(5)
    seen = 0
    for op in WRITES:
        for n in SIZES:
            payload = rng.randbytes(n)
            f = write_frame(op, A, B, 0x123, 0x4567, 0xABCDE, True, payload,
                            va=0x1234_5678_9ABC, rkey=0xDEAD, dma_length=99999)
            assert frame_problems(f) == []
            p = Ether(f[:-4])
            assert p[UDP].dport == 4791 and p[UDP].sport == 0xC000 | 0x123
            assert p[IP].len == len(f) - 14 - 4
            assert p[BTH].opcode == op.value and p[BTH].dqpn == 0x4567
            assert p[BTH].psn == 0xABCDE and p[BTH].ackreq == 1
            assert p[BTH].padcount == -n % 4
            rest = bytes(p[BTH].payload)
            if op in (OpCode.RC_RDMA_WRITE_ONLY, OpCode.RC_RDMA_WRITE_FIRST):
                assert rest[:16] == (0x1234_5678_9ABC).to_bytes(8, "big") \
                    + (0xDEAD).to_bytes(4, "big") + (99999).to_bytes(4, "big")
                rest = rest[16:]
            assert rest[:n] == payload and rest[n:] == bytes(-n % 4)
            seen += 1
    ack = ack_frame(B, A, 0x4567, 0x123, 77, Syndrome.NAK_REMOTE_ACCESS, 5)
    assert frame_problems(ack) == [] and len(ack) == 66
    assert Ether(ack[:-4])[BTH].opcode == OpCode.RC_ACKNOWLEDGE.value
    assert seen == len(WRITES) * len(SIZES)



def _refcs(frame):
    return bytes(frame[:-4]) + zlib.crc32(bytes(frame[:-4])).to_bytes(4, "little")


def test_hand_decoder_agrees_with_scapy():
    """The hand decoder of ``wire_problems`` gives scapy's verdict on good frames and on
    each kind of damage (FCS, IP checksum, ICRC, not RoCEv2), and a damaged frame of a
    shape seen before is still caught (only by the hand decoder)."""
    rng = random.Random(11)
    frames = [write_frame(WRITES[k % 4], A, B, 7, 9, k, k % 2 == 0, rng.randbytes(n))
              for k, n in enumerate(SIZES)]
    frames.append(ack_frame(B, A, 9, 7, 3, Syndrome.ACK, 1))
    damaged = []
    for f in frames[:6]:
        fcs = bytearray(f)
        fcs[-2] ^= 1
        ip = bytearray(f)
        ip[18] ^= 0x40                          # IP identification: also under the ICRC
        icrc = bytearray(f)
        icrc[50] ^= 0x01                                  # a BTH / RETH byte under the ICRC
        port = bytearray(f)
        port[36:38] = (4792).to_bytes(2, "big")
        damaged += [(bytes(fcs), ["FCS"]), (_refcs(ip), ["IP checksum", "ICRC"]),
                    (_refcs(icrc), ["ICRC"]), (_refcs(port), ["not RoCEv2"])]
    for f in frames:
        assert hand_problems(f) == frame_problems(f) == []
    for f, want in damaged:
        assert frame_problems(f) == want
        assert hand_problems(f) == want
    masked = bytearray(frames[0])
    masked[15] ^= 0xFF                                    # TOS: masked out of the ICRC
    masked[24:26] = b"\0\0"
    masked[24:26] = ipv4_checksum(bytes(masked[14:34])).to_bytes(2, "big")
    assert hand_problems(_refcs(masked)) == frame_problems(_refcs(masked)) == []
    run = frames + [f for f, _ in damaged]
    verdicts = wire_problems(run)
    assert [k for k, _ in verdicts] == list(range(len(run)))
    assert [p for _, p in verdicts] == [[]] * len(frames) + [w for _, w in damaged]

def _tx_path():
    m = Module()
    m.submodules.framer = framer = WriteFramer()
    m.submodules.icrc = icrc = IcrcInserter()
    m.submodules.fcs = fcs = FcsInserter(64)
    wiring.connect(m, framer.o, icrc.i)
    wiring.connect(m, icrc.o, fcs.i)
    return m, framer, fcs


@pytest.mark.parametrize("pattern", [(1,), (1, 1, 1, 0)])
def test_tx_path_matches_model(pattern):
    """WriteFramer -> IcrcInserter -> FcsInserter gives the model's frames byte for byte,
    every opcode and edge size, with and without backpressure and data gaps."""
    m, framer, fcs = _tx_path()
    rng = random.Random(len(pattern))
    segs, words, want = [], [], []
    for op in WRITES:
        for n in SIZES:
            payload = rng.randbytes(n)
            segs.append(pack(segment_layout(), opcode=op, ack_req=1, dmac=B.mac, smac=A.mac,
                             sip=A.ip, dip=B.ip, src_qp=0x1234, dest_qp=0x55, psn=77,
                             va=0x1000, rkey=0xABC, dma_length=n, length=n))
            junk = payload + rng.randbytes(-n % 64)        # bytes past the end are junk
            words += [int.from_bytes(junk[k:k + 64], "little") for k in range(0, len(junk), 64)]
            want.append(write_frame(op, A, B, 0x1234, 0x55, 77, True, payload, va=0x1000,
                                    rkey=0xABC, dma_length=n))
    nbeats = sum(-(-len(f) // 64) for f in want)
    got = []

    async def seg_bench(ctx):
        await put_all(ctx, framer.i_seg, segs, pattern)

    async def data_bench(ctx):
        await put_all(ctx, framer.i_data, words, pattern)

    async def out_bench(ctx):
        got.extend(await get_all(ctx, fcs.o, nbeats, pattern))

    run_sim(m, seg_bench, data_bench, out_bench, deadline_cycles=20_000)
    frames = beats_to_frames([g for g, _ in got], 64)
    assert len(frames) == len(want)
    for k, (g, w) in enumerate(zip(frames, want, strict=True)):
        assert g == w, f"frame {k}"


def test_frame_check_judges_fcs_and_icrc():
    """FrameCheck: good frames pass; a bad ICRC (FCS fixed up) and a bad FCS are told
    apart; the length is counted."""
    rng = random.Random(9)
    cases = [(damaged(write_frame(WRITES[k % 4], A, B, 1, 2, 3, False, rng.randbytes(n)),
                      k % 3), k % 3) for k, n in enumerate(SIZES)]
    for fcs_ok, icrc_ok, length, n, kind in frame_check_verdicts(FrameCheck(), cases):
        assert length == n
        assert (fcs_ok, icrc_ok) == {0: (1, 1), 1: (1, 0), 2: (0, 1)}[kind]


def test_model_cache_misses_grow_with_qps():
    """The golden model: one QP hits after the first miss; 4096 QPs round robin over 16
    entries miss on every message on both nodes, write back the contexts they updated,
    and send more slowly (the entries are held while their QP has work in flight)."""
    res = {}
    for qps in (1, 4096):
        cfg, v = build(128, 40, qps=qps, warmup=False)
        res[qps] = run_model(cfg, v)
    assert res[1]["req"]["misses"] == 1 and res[1]["resp"]["misses"] == 1
    assert res[4096]["req"]["misses"] == 40 and res[4096]["resp"]["misses"] == 40
    assert res[4096]["req"]["writebacks"] == 40 - 16
    span = {q: r["wire_ab"][-1][0][0] - r["wire_ab"][0][0][0] for q, r in res.items()}
    assert span[4096] > 2 * span[1]


@pytest.mark.parametrize("make, word", [
    (lambda: ContextCache(8, 1024, {}), "entries"),
    (lambda: ContextCache(24, 1024, {}), "power of two"),
    (lambda: ContextCache(512, 1024, {}), "entries"),
    (lambda: Responder(mr=MrTableShape(3)), "MR table"),
    (lambda: IcrcInserter(32), "width"),
    (lambda: WriteFramer(16), "width"),
    (lambda: FrameCheck(7), "width"),
    (lambda: RdmaTop(host="pcie6"), "host profile"),
    (lambda: RdmaTop(link_latency=0), "latency"),
    (lambda: RdmaTop(colour=1), "colour"),
    (lambda: RdmaTop(mmio=0), "mmio"),
    (lambda: RdmaTop(timeout=0), "transport timeout"),
    (lambda: RdmaTop(timeout=1 << TIMEOUT_BITS), "transport timeout"),
    (lambda: RdmaTop(timeout=100.0), "transport timeout"),
    (lambda: Requester(timeout=63), "transport timeout"),
    (lambda: Requester(timeout=True), "transport timeout"),
    (lambda: Requester(retry_limit=8), "retry limit"),
    (lambda: RdmaTop(retry_limit=-1), "retry limit"),
    (lambda: RdmaTop(mr_cache=3), "mr_cache"),
    (lambda: RdmaTop(read_words=3), "read_words"),
])
def test_bad_parameters_raise(make, word):
    with pytest.raises(ValueError, match=word):
        make()


@pytest.mark.parametrize("settings", [
    FaultSettings(seed=3, drop_rate=6554, corrupt_rate=6554, dup_rate=6554),
    FaultSettings(seed=8, drop_rate=3277, drop_burst=3, corrupt_rate=9830, corrupt_burst=2,
                  dup_rate=13107, dup_burst=2),
    FaultSettings(),
])
def test_link_stream_matches_faulty_link_model(settings):
    """The engine model's frame-by-frame link, and its beat-by-beat one (``LinkBeats``,
    node A's with READs), equal the faulty-link golden model (whole run at once) beat
    for beat and cycle for cycle, counters included, on frames of 1 to 70 beats with
    random gaps (duplicates make beats wait)."""
    rng = random.Random(settings.seed)
    frames, cycle = [], 0
    for _ in range(120):
        frame = rng.randbytes(rng.choice([60, 66, 200, 1000, 4174]))
        nb = -(-len(frame) // 64)
        frames.append((list(range(cycle, cycle + nb)), frame))
        cycle += nb + rng.choice([0, 0, 1, 5, 80])
    stream = LinkStream(6, settings, max_frame_beats=66, fifo_depth=128)
    got = []
    for cycles, frame in frames:
        for out, data in stream.send(cycles, frame):
            got += list(zip(out, frame_to_beats(data, 64), strict=True))
    sent = [(c, b) for cycles, frame in frames
            for c, b in zip(cycles, frame_to_beats(frame, 64), strict=True)]
    want, counters = FaultyLinkModel(64, 6, 66, 128).run(sent, settings)
    assert got == want
    assert stream.counters == counters
    beats = LinkBeats(6, settings, max_frame_beats=66, fifo_depth=128)
    by_beat, whole = [], []
    for c, b in sent:
        data, nbytes, first, last = unpack_beat(64, b)
        for out, beat, frame in beats.push(c, dict(data=data, nbytes=nbytes,
                                                   first=first, last=last)):
            by_beat.append((out, beat))
            if frame is not None:
                whole.append(frame)
    assert by_beat == [(c, dict(zip(("data", "nbytes", "first", "last"),
                                    unpack_beat(64, b), strict=True))) for c, b in want]
    assert whole == beats_to_frames([b for _, b in want], 64)
    assert beats.counters == counters
    if settings.drop_rate:
        assert counters["dropped"] and counters["corrupted"] and counters["duplicated"]


def test_model_recovers_every_message():
    """The engine model over faulty links, without the RTL: every posted WRITE lands
    exactly once in node B's buffer (checked against the posted data, not the model),
    every CQE is SUCCESS and in order per QP, and recovery was needed (NAKs, timeouts,
    resends); with the same faults the NAK-free timeout case resends only the lost
    frame."""
    cfg, v = build(1, 20, qps=3, pmtu_log2=8, warmup=False)
    from analysis.scenarios.rdma import writes_scenario
    v = writes_scenario(20, [1, 255, 256, 257, 700, 64], 3, pmtu_log2=8)
    cfg = dataclasses.replace(
        cfg, faults_ab=FaultSettings(seed=5, drop_rate=6554, corrupt_rate=3277,
                                     dup_rate=3277),
        faults_ba=FaultSettings(seed=6, drop_rate=6554, dup_rate=3277), timeout=1024,
        cq_base=v.cq_base, cq_log2=v.cq_log2)
    r = run_model(cfg, v)
    for base, want in v.expected_mr_bytes().items():
        have = b"".join(r["mem_b"].get(base // 64 + k, 0).to_bytes(64, "little")
                        for k in range(-(-len(want) // 64)))[:len(want)]
        assert have == want
    cqes = v.poll_cq(r["mem_a"], 20)
    assert sorted(c["wr_id"] for c in cqes) == [0x1000_0000 + k for k in range(20)]
    for q in range(3):
        mine = [c["sq_index"] for c in cqes if c["qpn"] == q]
        assert mine == sorted(mine) and len(mine) == len(range(q, 20, 3))
    assert {c["status"] for c in cqes} == {0}
    assert r["resp"]["words"] == sum(-(-len(p) // 64) for _, p in v.posted)
    assert r["req"]["retransmissions"] and r["req"]["seq_naks"] and r["req"]["timeouts"]
    assert r["req"]["retired"] == 20

    cfg, v = build(128, 4, qps=1, warmup=False)
    cfg = dataclasses.replace(
        cfg, faults_ab=FaultSettings(seed=seed_dropping_only(3), drop_rate=3277),
        timeout=SIM_TIMEOUT)
    r = run_model(cfg, v)
    assert (r["req"]["timeouts"], r["req"]["seq_naks"], r["req"]["retransmissions"]) \
        == (1, 0, 1)
    last_sent = r["wire_ab"][3][0][0]
    resent = r["wire_ab"][4][0][0]
    assert resent - last_sent > cfg.timeout


@pytest.mark.parametrize("build, ports", [
    ({}, set()), (dict(mr_cache=16), {"resp_mr"}), (dict(read_words=128), {"resp_read"}),
])
def test_rdma_top_counter_ports_follow_the_responders_build(build, ports):
    """RdmaTop has the responder's MR-cache and READ counters as ports exactly when its
    build has them (:func:`spec.rdma_responder.build_counters`)."""
    members = set(RdmaTop(**build).signature.members)
    assert members & {"resp_mr", "resp_read"} == ports
