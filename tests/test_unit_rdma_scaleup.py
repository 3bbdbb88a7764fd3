"""The scale-up header option of the RDMA engine (spec/formats/scaleup.py): its layout,
its frames in the model, and the RTL blocks that build and judge them, in the Amaranth
simulator against the model."""

import random
import zlib

import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from pymodel.fields import pack
from pymodel.packet import beats_to_frames, frame_to_beats, unpack_beat
from pymodel.rdma.frames import Endpoint, ack_frame, scaleup_icrc, write_frame
from pymodel.rdma.req.requester import ack_frame_ok
from pymodel.rdma.resp.header import parse_header
from pymodel.rdma.system import Config
from rtl.common.fcs_inserter import FcsInserter
from rtl.rdma.ack_framer import AckFramer
from rtl.rdma.ack_receiver import AckReceiver
from rtl.rdma.frame_check import FrameCheck
from rtl.rdma.icrc_inserter import IcrcInserter
from rtl.rdma.req.requester import Requester
from rtl.rdma.resp.responder import Responder
from rtl.rdma.write_framer import WriteFramer, segment_layout
from rtl.tops.rdma_top import RdmaTop
from spec.formats.roce import OpCode, Syndrome
from spec.formats.scaleup import (
    SCALEUP_BYTES,
    SCALEUP_CHECK_MIN_BYTES,
    SCALEUP_LAYOUT,
    framing,
)
from spec.rdma_stages import ack_layout
from tb.amsim import get_all, put_all, run_sim
from tb.cosim import check_params
from tb.rdma.frame_check_bench import damaged, frame_check_verdicts
from tb.rdma.wirecheck import scaleup_problems

A = Endpoint(0x02_00_00_00_00_01, 0x0A_00_01_01)
B = Endpoint(0x02_00_00_00_00_02, 0x0A_00_01_02)
SIZES = [1, 2, 3, 4, 5, 18, 19, 26, 27, 42, 43, 63, 64, 65, 127, 128, 129, 256, 4096]
WRITES = [OpCode.RC_RDMA_WRITE_ONLY, OpCode.RC_RDMA_WRITE_FIRST,
          OpCode.RC_RDMA_WRITE_MIDDLE, OpCode.RC_RDMA_WRITE_LAST]


def _refcs(frame):
    return bytes(frame[:-4]) + zlib.crc32(bytes(frame[:-4])).to_bytes(4, "little")


def test_layout_is_at_most_12_bytes_and_fields_are_where_documented():
    """The header is 10 bytes (at most 12, the brief's bound; Tomahawk Ultra's is 10):
    dst 0-1, src 2-3, type 4, hop_limit 5, length 6-7, entropy 8-9."""
    assert SCALEUP_BYTES == 10 <= 12
    offsets = {name: SCALEUP_LAYOUT[name].offset // 8 for name in
               ("dst", "src", "type", "hop_limit", "length", "entropy")}
    assert offsets == {"dst": 0, "src": 2, "type": 4, "hop_limit": 5, "length": 6,
                       "entropy": 8}
    f = framing("scaleup")
    # BTH 12, RETH 16, AETH 4 (IBTA) behind the 10 bytes.
    assert (f.reth_bytes, f.plain_bytes, f.ack_bytes) == (10 + 12 + 16, 10 + 12, 10 + 12 + 4)


def test_frames_of_the_model_have_the_documented_bytes():
    """A 128-byte WRITE ONLY: 10 + 12 + 16 + 128 + ICRC 4 + FCS 4 = 174 bytes, 3 beats
    (RoCEv2: 14 + 20 + 8 + 12 + 16 + 128 + 4 + 4 = 206, 4 beats); every field decoded by
    hand; the ICRC a plain CRC-32 with bytes 5 and 14 read as 0xFF."""
    payload = bytes(range(128))
    f = write_frame(OpCode.RC_RDMA_WRITE_ONLY, A, B, 0x1234, 0x55, 77, True, payload,
                    va=0x1000, rkey=0xABC, dma_length=128, header="scaleup")
    roce = write_frame(OpCode.RC_RDMA_WRITE_ONLY, A, B, 0x1234, 0x55, 77, True, payload,
                       va=0x1000, rkey=0xABC, dma_length=128)
    assert len(f) == 174 and -(-len(f) // 64) == 3
    assert len(roce) == 206 and -(-len(roce) // 64) == 4
    assert f[0:2] == (0x0102).to_bytes(2, "big") and f[2:4] == (0x0101).to_bytes(2, "big")
    assert f[4] == 0x1B and f[5] == 64
    assert int.from_bytes(f[6:8], "big") == 12 + 16 + 128 + 4
    assert int.from_bytes(f[8:10], "big") == 0xC000 | 0x1234
    assert f[10:] [:12] == roce[42:54]                  # the same BTH
    assert f[22:38] == roce[54:70]                      # the same RETH
    assert f[38:166] == payload
    masked = bytearray(f[:-8])
    masked[5] = masked[14] = 0xFF
    assert zlib.crc32(bytes(masked)).to_bytes(4, "little") == f[-8:-4]
    assert zlib.crc32(f[:-4]).to_bytes(4, "little") == f[-4:]
    # hop_limit and FECN/BECN are variant: the ICRC does not see them.
    g = bytearray(f)
    g[5], g[14] = 3, g[14] | 0xC0
    assert scaleup_icrc(bytes(g[:-8])) == f[-8:-4]
    assert scaleup_problems(f) == []
    ack = ack_frame(B, A, 2, 0x1234, 77, Syndrome.ACK, 5, header="scaleup")
    assert len(ack) == 34 and ack_frame_ok(ack, "scaleup") and scaleup_problems(ack) == []
    assert not ack_frame_ok(ack)                          # not a RoCEv2 ACK


def test_header_roce_frames_are_unchanged():
    """``header="roce"`` is the default: the same bytes as without the option."""
    rng = random.Random(3)
    for op in WRITES:
        for n in (1, 128, 4096):
            p = rng.randbytes(n)
            assert (write_frame(op, A, B, 7, 9, 11, False, p, va=64, rkey=3, dma_length=n,
                                header="roce")
                    == write_frame(op, A, B, 7, 9, 11, False, p, va=64, rkey=3,
                                   dma_length=n))
    assert ack_frame(A, B, 1, 2, 3, 0x1F, 4, header="roce") == ack_frame(A, B, 1, 2, 3,
                                                                         0x1F, 4)


@pytest.mark.parametrize("make", [
    lambda: WriteFramer(header="ethernet"), lambda: IcrcInserter(header="x"),
    lambda: FrameCheck(header=None), lambda: AckFramer("su"), lambda: AckReceiver(""),
    lambda: Requester(header="SCALEUP"), lambda: Responder(header="rocev2"),
    lambda: RdmaTop(header="sue")])
def test_bad_header_raises_naming_it(make):
    with pytest.raises(ValueError, match="header"):
        make()


def test_bad_header_is_refused_by_the_model_and_the_cosim_params():
    with pytest.raises(ValueError, match="header"):
        Config(header="sunh")
    with pytest.raises(ValueError, match="header"):
        check_params("tb.rdma.cocotb_rdma", dict(kind="writes", messages=2, sizes=[128],
                                                 qps=1, top={"header": "sunh"}))
    check_params("tb.rdma.cocotb_rdma", dict(kind="writes", messages=2, sizes=[128], qps=1,
                                             top={"header": "scaleup"}))


def _tx_path():
    m = Module()
    m.submodules.framer = framer = WriteFramer(header="scaleup")
    m.submodules.icrc = icrc = IcrcInserter(header="scaleup")
    m.submodules.fcs = fcs = FcsInserter(64)
    wiring.connect(m, framer.o, icrc.i)
    wiring.connect(m, icrc.o, fcs.i)
    return m, framer, fcs


@pytest.mark.parametrize("pattern", [(1,), (1, 1, 1, 0)])
def test_tx_path_matches_model(pattern):
    """WriteFramer -> IcrcInserter -> FcsInserter with the scale-up header gives the
    model's frames byte for byte, every opcode and edge size (frames of 1 to 66 beats),
    with and without backpressure and data gaps."""
    m, framer, fcs = _tx_path()
    rng = random.Random(len(pattern))
    segs, words, want = [], [], []
    for op in WRITES:
        for n in SIZES:
            payload = rng.randbytes(n)
            segs.append(pack(segment_layout(), opcode=op, ack_req=1, dmac=B.mac, smac=A.mac,
                             sip=A.ip, dip=B.ip, src_qp=0x1234, dest_qp=0x55, psn=77,
                             va=0x1000, rkey=0xABC, dma_length=n, length=n))
            junk = payload + rng.randbytes(-n % 64)
            words += [int.from_bytes(junk[k:k + 64], "little") for k in range(0, len(junk), 64)]
            want.append(write_frame(op, A, B, 0x1234, 0x55, 77, True, payload, va=0x1000,
                                    rkey=0xABC, dma_length=n, header="scaleup"))
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
    if pattern == (1,):
        # Back to back: one beat per cycle, no gap between frames.
        cycles = [c for _, c in got]
        assert cycles == list(range(cycles[0], cycles[0] + nbeats))


def test_ack_path_matches_model():
    """AckFramer -> IcrcInserter -> FcsInserter (scale-up): the model's 34-byte ACK, one
    beat, one a cycle."""
    m = Module()
    m.submodules.framer = framer = AckFramer("scaleup")
    m.submodules.icrc = icrc = IcrcInserter(header="scaleup")
    m.submodules.fcs = fcs = FcsInserter(64)
    wiring.connect(m, framer.o, icrc.i)
    wiring.connect(m, icrc.o, fcs.i)
    rng = random.Random(5)
    jobs, want = [], []
    for _ in range(8):
        j = dict(dmac=A.mac, smac=B.mac, sip=B.ip, dip=A.ip, src_qp=rng.randrange(1 << 24),
                 dest_qp=rng.randrange(1 << 24), psn=rng.randrange(1 << 24),
                 syndrome=rng.choice([0x1F, 0x60, 0x62]), msn=rng.randrange(1 << 24))
        jobs.append(pack(ack_layout(), **j))
        want.append(ack_frame(Endpoint(j["smac"], j["sip"]), Endpoint(j["dmac"], j["dip"]),
                              j["src_qp"], j["dest_qp"], j["psn"], j["syndrome"], j["msn"],
                              header="scaleup"))
    got = []

    async def in_bench(ctx):
        await put_all(ctx, framer.i, jobs)

    async def out_bench(ctx):
        got.extend(await get_all(ctx, fcs.o, len(want)))

    run_sim(m, in_bench, out_bench, deadline_cycles=2_000)
    assert beats_to_frames([g for g, _ in got], 64) == want
    assert [c for _, c in got] == list(range(got[0][1], got[0][1] + len(want)))


def _bad_acks():
    """Good and bad scale-up ACK frames, with the model's verdict."""
    good = ack_frame(B, A, 2, 0x77, 10, Syndrome.ACK, 3, header="scaleup")
    cases = [good]
    t = bytearray(good)
    t[4] = 0x11                                    # wrong type, ICRC and FCS redone
    t[-8:-4] = scaleup_icrc(bytes(t[:-8]))
    cases.append(_refcs(t))
    t = bytearray(good)
    t[7] += 4                                      # wrong length, ICRC and FCS redone
    t[-8:-4] = scaleup_icrc(bytes(t[:-8]))
    cases.append(_refcs(t))
    t = bytearray(good)
    t[-6] ^= 0x08                                  # bad ICRC, FCS redone
    cases.append(_refcs(t))
    t = bytearray(good)
    t[-1] ^= 0x01                                  # bad FCS
    cases.append(bytes(t))
    w = write_frame(OpCode.RC_RDMA_WRITE_ONLY, B, A, 2, 0x77, 10, False, b"abcd",
                    header="scaleup")              # a good frame, not an ACKNOWLEDGE
    cases.append(w)
    roce = ack_frame(B, A, 2, 0x77, 10, Syndrome.ACK, 3)   # a RoCEv2 ACK
    cases.append(roce)
    cases.append(good)
    return cases


def test_ack_receiver_drops_and_counts_bad_frames_as_the_model():
    """AckReceiver (scale-up): a wrong ``type``, a wrong ``length``, a bad ICRC, a bad
    FCS, a WRITE and a RoCEv2 ACK are dropped and counted; the good ones become events.
    The model's :func:`ack_frame_ok` gives the same verdicts."""
    dut = AckReceiver("scaleup")
    cases = _bad_acks()
    verdicts = [ack_frame_ok(f, "scaleup") for f in cases]
    assert verdicts == [True, False, False, False, False, False, False, True]
    events = []
    counts = {}

    async def bench(ctx):
        ctx.set(dut.o.ready, 1)
        for frame in cases:
            for bits in frame_to_beats(frame, 64):
                data, nbytes, first, last = unpack_beat(64, bits)
                ctx.set(dut.i.payload.data, data)
                ctx.set(dut.i.payload.nbytes, nbytes)
                ctx.set(dut.i.payload.first, first)
                ctx.set(dut.i.payload.last, last)
                ctx.set(dut.i.valid, 1)
                if ctx.get(dut.o.valid):
                    events.append((ctx.get(dut.o.payload.qpn), ctx.get(dut.o.payload.psn),
                                   ctx.get(dut.o.payload.msn)))
                await ctx.tick()
        ctx.set(dut.i.valid, 0)
        await ctx.tick()
        counts.update(acks=ctx.get(dut.acks), dropped=ctx.get(dut.dropped))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert counts == {"acks": sum(verdicts), "dropped": len(cases) - sum(verdicts)}
    assert events == [(0x77, 10, 3)] * 2


def test_frame_check_judges_scaleup_icrc():
    """FrameCheck (scale-up): good frames pass, a bad ICRC (FCS redone) and a bad FCS
    are told apart; frames below SCALEUP_CHECK_MIN_BYTES fail the ICRC check."""
    rng = random.Random(9)
    cases = [(damaged(write_frame(WRITES[k % 4], A, B, 1, 2, 3, False, rng.randbytes(n),
                                  header="scaleup"), k % 3), k % 3)
             for k, n in enumerate(SIZES)]
    short = bytes(SCALEUP_CHECK_MIN_BYTES - 9)
    short = short + scaleup_icrc(short)
    cases.append((_refcs(short + b"\0\0\0\0"), 3))
    for fcs_ok, icrc_ok, length, n, kind in frame_check_verdicts(FrameCheck(header="scaleup"),
                                                                 cases):
        assert length == n
        assert (fcs_ok, icrc_ok) == {0: (1, 1), 1: (1, 0), 2: (0, 1), 3: (1, 0)}[kind]


def test_model_header_check_reasons():
    """The responder model's header check (scale-up): a wrong ``type`` is malformed, a
    wrong ``length`` truncated, a bad ICRC icrc_bad, and a one-beat WRITE is accepted."""
    def entry(frame, icrc_ok=True):
        b = frame + bytes(128 - len(frame)) if len(frame) < 128 else frame[:128]
        n = -(-len(frame) // 64)
        return dict(b0=int.from_bytes(b[:64], "little"),
                    b1=int.from_bytes(b[64:128], "little") if n > 1 else 0,
                    fcs_ok=1, icrc_ok=int(icrc_ok), length=len(frame), single=int(n == 1),
                    too_long=0, rest=max(0, n - 2))

    f = write_frame(OpCode.RC_RDMA_WRITE_ONLY, A, B, 1, 5, 100, True, b"12345678",
                    va=0x40, rkey=2, dma_length=8, header="scaleup")
    assert len(f) == 10 + 12 + 16 + 8 + 8 <= 64
    reason, job = parse_header(entry(f), "scaleup")
    assert reason is None and job["plen"] == 8 and job["qpn"] == 5 and job["va"] == 0x40
    t = bytearray(f)
    t[4] = 0
    assert parse_header(entry(bytes(t)), "scaleup")[0] == "malformed"
    t = bytearray(f)
    t[7] -= 4
    assert parse_header(entry(bytes(t)), "scaleup")[0] == "truncated"
    assert parse_header(entry(f, icrc_ok=False), "scaleup")[0] == "icrc_bad"
