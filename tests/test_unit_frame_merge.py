"""Unit tests of the RDMA fabric's uplink merge and downlink demux (Amaranth simulator)
against their twins, and the fabric top's parameter checks (no simulator)."""

import random

import pytest

from pymodel.packet import frame_to_beats, unpack_beat
from pymodel.rdma.frame_merge import FrameMergeModel, MergeOverflow, is_ack_frame
from rtl.rdma.frame_demux import FrameDemux
from rtl.rdma.frame_merge import FrameMerge
from spec.formats.roce import OpCode
from spec.rdma import MAX_FRAME_BEATS
from spec.rdma_fabric import FRAME_OVERHEAD, IP_LENGTH_BYTE, MERGE_ROOM, OPCODE_BYTE
from tb.amsim import run_sim


def _frame(rng, nbytes, opcode=OpCode.RC_RDMA_WRITE_ONLY.value):
    """Random bytes shaped as far as the merge and demux look: the IPv4 total length
    says ``nbytes``, the BTH opcode byte ``opcode``."""
    frame = bytearray(rng.getrandbits(8) for _ in range(nbytes))
    frame[IP_LENGTH_BYTE:IP_LENGTH_BYTE + 2] = (nbytes - FRAME_OVERHEAD).to_bytes(2, "big")
    frame[OPCODE_BYTE] = opcode
    return bytes(frame)


def _beats(frame):
    out = []
    for bits in frame_to_beats(frame, 64):
        data, nbytes, first, last = unpack_beat(64, bits)
        out.append(dict(data=data, nbytes=nbytes, first=int(first), last=int(last),
                        bits=bits))
    return out


def _scenario(seed, frames_a, frames_b, credits):
    """Input streams: ``a`` frames back to back after random gaps (as the requester
    sends them), ``b`` two-beat frames offered after random gaps (as the ACK sender);
    the far end drains its buffer of ``credits`` beats in random cycles and returns a
    credit per beat 2 cycles later."""
    rng = random.Random(seed)
    a = []
    for _ in range(frames_a):
        a += [None] * rng.choice([0, 0, 1, 3, 7])
        a += _beats(_frame(rng, rng.choice([66, 206, 222, 1100, 4174])))
    b = [(rng.choice([0, 0, 2, 9]), _beats(_frame(rng, 66, OpCode.RC_ACKNOWLEDGE.value)))
         for _ in range(frames_b)]
    drain = [rng.random() < 0.6 for _ in range(20000)]
    return a, b, drain


class _ListSource:
    """``a`` beats from a list, one a cycle, whatever ``room`` says (as a sender with
    no flow control: the test of the merge alone, with a buffer deep enough)."""

    def __init__(self, beats):
        self.beats = list(beats)

    def step(self, c, room):
        return self.beats.pop(0) if self.beats else None

    def done(self):
        return not self.beats


class _HeldSender:
    """``a`` beats as :class:`rtl.rdma.req.frame_sender.FrameSender` sends them when its
    ``go`` is the merge's ``room`` (its docstring's timing): a frame (``B`` beats, of
    which the framer's own are ``Bw``: the ICRC/FCS bytes, 8, add a beat when the
    framer's last beat holds more than 56 bytes) is taken in a cycle ``t`` with ``room``
    high, the framer free and the frame due; its beats follow from ``max(t + 1, end +
    1)``; the framer is free again ``Bw - 1`` cycles after its first beat."""

    def __init__(self, frames):
        self.frames = list(frames)          # (due cycle, beats)
        self.free_at, self.end, self.out = 0, -1, {}

    def step(self, c, room):
        if self.frames and room and c >= self.free_at and c >= self.frames[0][0]:
            _, beats = self.frames.pop(0)
            nbytes = sum(b["nbytes"] for b in beats)
            own = -(-(nbytes - 8) // 64)
            f = max(c + 1, self.end + 1)
            for j, b in enumerate(beats):
                self.out[f + j] = b
            self.free_at, self.end = f + own - 1, f + len(beats) - 1
        return self.out.pop(c, None)

    def done(self):
        return not self.frames and not self.out


def _run_merge(credits, depth, source, b_in, drain, limit):
    """Run the merge and its twin side by side on ``source`` (``a``), the ACK frames
    ``b_in`` and a far end that takes a beat of its buffer in the cycles ``drain`` says
    and returns its credit 2 cycles later. Returns the output beats and a trace: the
    cycles where ``o``, ``b.ready`` or ``room`` differ, the far end's high-water mark,
    ``level_max``, the error flags, the cycles with ``room`` low."""
    dut = FrameMerge(credits, depth)
    model = FrameMergeModel(credits, depth)
    out_rtl = []
    trace = {"far": 0, "far_max": 0, "mismatch": [], "held": 0, "in_use": 0, "use_max": 0}

    async def bench(ctx):
        b_q = [(gap, list(beats)) for gap, beats in b_in]
        gives = {}
        c = 0
        while (not source.done() or b_q or out_rtl == [] or not model.idle()) and c < limit:
            # Credits in use at the start of the cycle: beats sent less credits counted.
            trace["use_max"] = max(trace["use_max"], trace["in_use"])
            room = model.room()
            if ctx.get(dut.room) != room:
                trace["mismatch"].append(c)
            trace["held"] += not room
            a_beat = source.step(c, room)
            b_beat = None
            if b_q:
                gap, beats = b_q[0]
                if gap > 0:
                    b_q[0] = (gap - 1, beats)
                else:
                    b_beat = beats[0]
            give = gives.pop(c, 0)
            ctx.set(dut.a.valid, a_beat is not None)
            if a_beat is not None:
                ctx.set(dut.a.payload.as_value(), a_beat["bits"])
            ctx.set(dut.b.valid, b_beat is not None)
            if b_beat is not None:
                ctx.set(dut.b.payload.as_value(), b_beat["bits"])
            ctx.set(dut.give, give)
            ready = model.b_ready(b_beat)
            want = model.step(c, a_beat, b_beat, give)
            rtl_ready = ctx.get(dut.b.ready)
            rtl_o = ctx.get(dut.o.payload.as_value()) if ctx.get(dut.o.valid) else None
            if rtl_ready != ready or rtl_o != (want["bits"] if want else None):
                trace["mismatch"].append(c)
            if b_beat is not None and rtl_ready:
                b_q[0][1].pop(0)
                if not b_q[0][1]:
                    b_q.pop(0)
            trace["in_use"] += (rtl_o is not None) - give
            if rtl_o is not None:
                out_rtl.append(rtl_o)
                trace["far"] += 1
                trace["far_max"] = max(trace["far_max"], trace["far"])
            if trace["far"] and drain[c % len(drain)]:
                trace["far"] -= 1
                gives[c + 2] = 1
            c += 1
            await ctx.tick()
        for _ in range(4):
            await ctx.tick()
        trace["level_max"] = ctx.get(dut.level_max)
        trace["credits_max"] = ctx.get(dut.credits_max)
        trace["errors"] = (ctx.get(dut.overflow), ctx.get(dut.credit_errors))
        trace["left"] = not source.done() or bool(b_q) or not model.idle()

    run_sim(dut, bench)
    return out_rtl, trace, model


def _check_whole_frames(out_rtl, sent_a, sent_b):
    """The output is an interleaving of whole input frames, each once."""
    frames, cur = [], []
    for bits in out_rtl:
        cur.append(bits)
        if unpack_beat(64, bits)[3]:
            frames.append(cur)
            cur = []
    assert cur == []

    def ack(f):
        return is_ack_frame(unpack_beat(64, f[0])[0].to_bytes(64, "little"))

    assert [b for f in frames if not ack(f) for b in f] == sent_a
    assert [b for f in frames if ack(f) for b in f] == sent_b


@pytest.mark.parametrize("seed,credits", [(1, MAX_FRAME_BEATS), (2, 2 * MAX_FRAME_BEATS),
                                          (3, 80)])
def test_merge_matches_model(seed, credits):
    """Requester frames, ACK frames and a slow far end: the merge's output beats, its
    ``b.ready``, its ``room`` and its level high-water mark equal the twin's in every
    cycle; every frame leaves whole and once; the far end's buffer never overflows; the
    credit counter never errs; the high-water mark of its credits in use is the most
    beats sent and not yet credited back, counted by the bench."""
    depth = 512
    a_in, b_in, drain = _scenario(seed, 40, 60, credits)
    out_rtl, trace, model = _run_merge(credits, depth, _ListSource(a_in), b_in, drain,
                                       19000)
    assert trace["mismatch"] == [], trace["mismatch"][:10]
    assert trace["errors"] == (0, 0) and not trace["left"]
    assert trace["far_max"] <= credits
    assert trace["level_max"] == model.level_max > 0
    assert trace["credits_max"] == model.credits_max == trace["use_max"] > 0
    _check_whole_frames(out_rtl, [b["bits"] for b in a_in if b is not None],
                        [b["bits"] for _, beats in b_in for b in beats])


#: Frame sizes for the held sender: an ACK-sized frame, small and 1 KiB WRITEs, the
#: largest frame (4,174 bytes, MAX_FRAME_BEATS), and sizes whose ICRC/FCS add a beat
#: (64 k + 4 bytes: the framer's own beats are ``k``, the frame's ``k + 1``), the
#: largest such one 64 beats.
_HELD_SIZES = (66, 206, 1102, 64 * 18 + 4, 64 * 63 + 4, 4174)


@pytest.mark.parametrize("seed,depth,drain_p", [(4, MERGE_ROOM, 0.3), (5, MERGE_ROOM, 0.05),
                                                (6, 100, 0.1)])
def test_merge_room_holds_the_sender_without_loss(seed, depth, drain_p):
    """A requester held by ``room`` (the frame sender's timing, its next frame taken as
    early as its contract allows, the tail beat of ICRC/FCS included) against a far end
    that drains slowly and the largest frames: the buffer never overflows, even at the
    least depth, ``MERGE_ROOM``; ``room`` engages (is low in some cycles and the level
    passes ``depth - MERGE_ROOM``); RTL = twin in every cycle; every frame leaves
    whole."""
    rng = random.Random(seed)
    frames, due = [], 0
    for _ in range(30):
        due += rng.choice([0, 0, 0, 5, 40])
        frames.append((due, _beats(_frame(rng, rng.choice(_HELD_SIZES)))))
    b_in = [(rng.choice([0, 3, 30]), _beats(_frame(rng, 66, OpCode.RC_ACKNOWLEDGE.value)))
            for _ in range(20)]
    drain = [rng.random() < drain_p for _ in range(5000)]
    sent_a = [b["bits"] for _, beats in frames for b in beats]
    out_rtl, trace, model = _run_merge(MAX_FRAME_BEATS, depth, _HeldSender(frames), b_in,
                                       drain, 100_000)
    assert trace["mismatch"] == [], trace["mismatch"][:10]
    assert trace["errors"] == (0, 0) and not trace["left"]
    assert trace["held"] > 0
    assert depth - MERGE_ROOM < trace["level_max"] == model.level_max <= depth
    _check_whole_frames(out_rtl, sent_a, [b["bits"] for _, beats in b_in for b in beats])


class _LooseMerge(FrameMergeModel):
    """The twin with a room rule one beat short of ``MERGE_ROOM``."""

    def room(self):
        return len(self.q) <= self.depth - MERGE_ROOM + 1


@pytest.mark.parametrize("merge,raises", [(FrameMergeModel, False), (_LooseMerge, True)])
def test_merge_room_rule_is_tight(merge, raises):
    """With one beat less of room than ``MERGE_ROOM`` the held sender (its next frame
    taken while the tail beats of the last one are still coming) overflows a buffer
    that the rule keeps: the 2 tail beats of :data:`spec.rdma_fabric.MERGE_TAIL_BEATS`
    are needed (twin only; a slow far end)."""
    rng = random.Random(6)
    frames, due = [], 0
    for _ in range(300):
        due += rng.choice([0, 0, 0, 5, 40])
        frames.append((due, _beats(_frame(rng, rng.choice(_HELD_SIZES)))))
    drain = [rng.random() < 0.02 for _ in range(5000)]
    m, src = merge(MAX_FRAME_BEATS, 100), _HeldSender(frames)
    far, gives, overflowed = 0, {}, False
    try:
        for c in range(400_000):
            a = src.step(c, m.room())
            m.b_ready(None)
            far += m.step(c, a, None, gives.pop(c, 0)) is not None
            if far and drain[c % len(drain)]:
                far -= 1
                gives[c + 2] = 1
            if src.done() and m.idle():
                break
    except MergeOverflow:
        overflowed = True
    assert overflowed == raises
    assert raises or (src.done() and m.idle() and m.level_max <= 100)


def test_merge_model_raises_on_overflow():
    """A requester that ignores ``room`` and sends into a full buffer is outside the
    contract: the twin says so."""
    rng = random.Random(5)
    m = FrameMergeModel(MAX_FRAME_BEATS, MERGE_ROOM)
    beats = _beats(_frame(rng, 4174)) * 2       # never credited: nothing leaves
    m.counter.credits = 0
    with pytest.raises(MergeOverflow, match="full"):
        for c, b in enumerate(beats):
            m.b_ready(None)
            m.step(c, b, None)


def test_merge_rejects_a_depth_below_the_room_rule():
    """The buffer must hold a largest frame and the tail of the one before it: a depth
    below ``MERGE_ROOM`` is named, in the RTL and in the twin."""
    with pytest.raises(ValueError, match="depth"):
        FrameMerge(MAX_FRAME_BEATS, MERGE_ROOM - 1)
    with pytest.raises(ValueError, match="depth"):
        FrameMergeModel(MAX_FRAME_BEATS, MERGE_ROOM - 1)
    FrameMerge(MAX_FRAME_BEATS, MERGE_ROOM)


#: Frames of both engines' directions: (bytes, BTH opcode). The READ requests, WRITEs
#: and atomics go to a responder; the READ responses, ACKs and ATOMIC ACKNOWLEDGEs
#: (IBTA Vol 1 table 38: 0x0D to 0x12) to a requester that posts READs.
_DEMUX_FRAMES = [
    (66, OpCode.RC_ACKNOWLEDGE.value), (206, OpCode.RC_RDMA_WRITE_ONLY.value),
    (1100, OpCode.RC_RDMA_WRITE_FIRST.value), (66, OpCode.RC_ACKNOWLEDGE.value),
    (150, OpCode.RC_RDMA_WRITE_LAST.value), (82, OpCode.RC_RDMA_READ_REQUEST.value),
    (210, OpCode.RC_RDMA_READ_RESPONSE_ONLY.value),
    (1100, OpCode.RC_RDMA_READ_RESPONSE_FIRST.value),
    (1090, OpCode.RC_RDMA_READ_RESPONSE_MIDDLE.value),
    (300, OpCode.RC_RDMA_READ_RESPONSE_LAST.value),
    (74, OpCode.RC_ATOMIC_ACKNOWLEDGE.value), (90, OpCode.RC_FETCH_ADD.value),
    (98, OpCode.RC_CMP_SWAP.value)]
#: The opcodes a requester that posts READs takes (IBTA Vol 1 table 38).
_TO_READ_REQUESTER = {0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x12}


def test_demux_names_a_bad_reads():
    with pytest.raises(ValueError, match="reads must be True or False"):
        FrameDemux(reads=1)


@pytest.mark.parametrize("reads", [False, True])
def test_demux_splits_by_opcode(reads):
    """ACK frames (with ``reads`` every response: READ RESPONSEs, ACKs, ATOMIC
    ACKNOWLEDGEs) to ``ack``, the rest to ``data``, in the same cycle, whole; the twin's
    rule agrees with the opcodes IBTA gives (not with the RTL)."""
    rng = random.Random(7)
    frames = [_frame(rng, n, op) for n, op in _DEMUX_FRAMES]
    want = [(op in _TO_READ_REQUESTER) if reads else op == 0x11 for _, op in _DEMUX_FRAMES]
    assert [is_ack_frame(f, reads=reads) for f in frames] == want
    beats = [(b, is_ack_frame(f, reads=reads)) for f in frames for b in frame_to_beats(f, 64)]
    dut = FrameDemux(reads=reads)
    seen = []

    async def bench(ctx):
        for bits, ack in beats:
            ctx.set(dut.i.valid, 1)
            ctx.set(dut.i.payload.as_value(), bits)
            seen.append((ctx.get(dut.ack.valid), ctx.get(dut.data.valid), ack,
                         ctx.get(dut.ack.payload.as_value()) == bits))
            await ctx.tick()

    run_sim(dut, bench)
    assert [(a, d) for a, d, _, _ in seen] == [(int(ack), int(not ack)) for _, _, ack, _ in seen]
    assert all(same for *_, same in seen)


@pytest.mark.parametrize("params,match", [
    (dict(nodes=1), "nodes must be an integer from 2 to 8, not 1"),
    (dict(nodes=9), "nodes must be an integer from 2 to 8, not 9"),
    (dict(nodes="4"), "nodes must be an integer"),
    (dict(credits=10), "credits"),
    (dict(merge_depth=8), "merge_depth"),
    (dict(merge_depth=MERGE_ROOM - 1), "merge_depth"),
    (dict(depth=3000), "power of two"),
    (dict(host="usb"), "host profile"),
    (dict(link_latency=0), "link latency"),
    (dict(bogus=1), "unknown RdmaFabricTop parameter"),
    (dict(cache_entries=24), r"cache_entries must be a power of two from 16 to 256 "
     r"\(QP-context cache entries\)"),
    (dict(mr_entries=1), "MR table entries"),
    (dict(prefetch=0), "WQE prefetch depth"),
    (dict(reads=65), "reads"),
    (dict(read_words=100), "read_words"),
    (dict(reads=16, read_words=128, link_retry=1), "reads/read_words with pause or link_retry"),
    (dict(reads=16, pause=1), "reads/read_words with pause or link_retry"),
])
def test_fabric_top_rejects_bad_parameters(params, match):
    from rtl.tops.rdma_fabric_top import RdmaFabricTop
    with pytest.raises(ValueError, match=match):
        RdmaFabricTop(**params)


def test_fabric_model_and_scenario_reject_bad_parameters():
    from analysis.scenarios.rdma_fabric import fabric_scenario
    from pymodel.rdma.fabric_system import FabricConfig
    with pytest.raises(ValueError, match="nodes must be an integer from 2 to 8"):
        FabricConfig(nodes=9)
    with pytest.raises(ValueError, match="pattern must be one of"):
        fabric_scenario("ring", 4, 4, 128, 0.5)
    with pytest.raises(ValueError, match="nodes must be an integer from 2 to 8"):
        fabric_scenario("incast", 1, 4, 128, 0.5)
    with pytest.raises(ValueError, match="load"):
        fabric_scenario("incast", 4, 4, 128, 1.5)
    with pytest.raises(ValueError, match="credits"):
        FrameMergeModel(10, 256)


@pytest.mark.parametrize("fields, match", [
    ({"link_latency": 0}, r"FabricConfig\.link_latency must be an integer from 1 to 1024"),
    ({"cache_entries": 24, "cache_capacity": 64},
     r"FabricConfig\.cache_entries must be a power of two"),
    ({"cache_entries": 32}, r"FabricConfig\.cache_entries must be an integer from 16 to 16"),
    ({"depth": 3000}, r"FabricConfig\.depth must be a power of two"),
    ({"host": "usb"}, r"FabricConfig\.host must be one of"),
    ({"serial": True}, r"FabricConfig\.serial must be an integer"),
    ({"responder_sizes": {"nope": 1}}, r"FabricConfig\.responder_sizes must be a dict"),
    ({"cq_base": 1 << 12}, r"FabricConfig\.cq_base must be an integer from 0 to 4095"),
    ({"reads": 65}, r"FabricConfig\.reads must be an integer from 0 to 64"),
    ({"read_words": 100}, r"FabricConfig\.read_words must be 0"),
    ({"read_words": 128, "mr_cache": 16},
     r"FabricConfig\.read_words .*needs the on-chip MR table \(mr_cache 0\)"),
    ({"reads": 16, "link_retry": 1}, r"FabricConfig\.reads must be 0 with pause or link_retry"),
])
def test_fabric_config_names_a_bad_field(fields, match):
    """The model's configuration is typed and frozen: a bad field is named, and a
    built one can not be changed afterwards."""
    import dataclasses

    from pymodel.rdma.fabric_system import FabricConfig
    with pytest.raises(ValueError, match=match):
        FabricConfig(**fields)
    with pytest.raises(dataclasses.FrozenInstanceError):
        FabricConfig().nodes = 3
