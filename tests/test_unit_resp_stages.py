"""Each stage of the pipelined responder against its twin (Amaranth simulator).

Every test pushes random items into the stage's input FIFOs, pops its output FIFOs with
random backpressure and compares every item written and taken, with its cycle
(:func:`tb.stage_harness.compare_stage`).
"""

import random

import pytest

from pymodel.cycle import Fifo
from pymodel.fcs import fcs_ok
from pymodel.fields import unpack
from pymodel.packet import beats_to_frames, frame_to_beats, unpack_beat
from pymodel.rdma.frames import Endpoint, ack_frame
from pymodel.rdma.resp.ack import AckSenderModel
from pymodel.rdma.resp.header import REASONS, HeaderCheckModel, parse_header
from pymodel.rdma.resp.rx import ReceiveModel
from pymodel.rdma.resp.verify import VERIFY_COUNTERS, VerifyModel
from pymodel.rdma.resp.wr_arbiter import WriteArbiterModel
from pymodel.rdma.resp.writer import PayloadWriterModel
from rtl.rdma.resp.ack import AckSender
from rtl.rdma.resp.header import HeaderCheck
from rtl.rdma.resp.rx import Receive
from rtl.rdma.resp.verify import Verify
from rtl.rdma.resp.wr_arbiter import WriteArbiter
from rtl.rdma.resp.writer import PayloadWriter
from spec.formats.roce import QpState, Syndrome
from spec.host import wr_layout
from spec.rdma_responder import MAX_FRAME_BEATS, RESP_GROUP, REST_MAX, MrTableShape
from spec.rdma_stages import header_entry_layout
from tb.resp_bench import beat_schedule
from tb.resp_frames import random_frames
from tb.stage_harness import compare_stage


@pytest.mark.slow_variants("1-0.0-1.0-512-64", reason=(
    "the second variant runs the same stage with gaps and backpressure; the responder's "
    "unit tests and RdmaTop's co-simulation run it back to back"))
@pytest.mark.parametrize("seed,gap_rate,pop_rate,rx_beats,rx_frames", [
    (1, 0.0, 1.0, 512, 64),       # back to back, no backpressure
    (2, 0.3, 0.5, 512, 64),       # gaps and backpressure
    (3, 0.0, 0.2, REST_MAX + 8, 3),   # small FIFOs: overflow drops
])
def test_receive_matches_twin(seed, gap_rate, pop_rate, rx_beats, rx_frames):
    rng = random.Random(seed)
    frames = random_frames(rng, 60, long_frames=True)
    sched, spans = beat_schedule(frames, rng, gap_rate)
    end = spans[-1][-1] + 1
    beat_at = sorted(sched)
    gap = max(b - a for a, b in zip([-1] + beat_at[:-1], beat_at, strict=True))
    dut = Receive(rx_beats, rx_frames)
    twin_box = {}

    def make(fifos):
        twin_box["t"] = ReceiveModel(fifos["hdr"], fifos["pay"])
        return twin_box["t"]

    out = compare_stage(
        dut, make, inputs={}, outputs={"hdr": rx_frames, "pay": rx_beats}, stimulus={},
        cycles=end + 300, seed=seed, pop_rate=pop_rate,
        levels={"hdr_level": "hdr", "pay_level": "pay"},
        side_in=lambda c, peek: {"i": sched.get(c)},
        side_out=("overflow", "rx_beats_max", "rx_frames_max"),
        # No wait of its own: beats in, entries and beats out; more than the longest gap
        # of the schedule (a beat is a move), plus 64 for the pipeline.
        quiet=gap + 64)
    twin = twin_box["t"]
    stored = len(out["hdr"])
    assert stored + twin.count["overflow"] == len(frames)
    assert stored > 10
    assert any(len(f) > 64 * MAX_FRAME_BEATS for f in frames)
    if rx_frames == 3:
        assert twin.count["overflow"] > 5 and twin.count["rx_frames_max"] == 3
        return
    assert twin.count["overflow"] == 0
    # Independent of the twin: beats 0 and 1 in the entries, the next ones (up to the
    # largest frame) in the payload FIFO, the FCS verdict as zlib sees it.
    layout = header_entry_layout()
    pay = [bits for _, bits in out["pay"]]
    for frame, (_, bits) in zip(frames, out["hdr"], strict=True):
        entry = unpack(layout, bits)
        beats = [unpack_beat(64, b)[0] for b in frame_to_beats(frame, 64)]
        kept = beats[2:MAX_FRAME_BEATS]
        assert entry["b0"] == beats[0] and entry["b1"] == (beats[1:2] or [0])[0]
        assert entry["rest"] == len(kept) and pay[:len(kept)] == kept
        del pay[:len(kept)]
        assert entry["fcs_ok"] == fcs_ok(frame)
        assert entry["too_long"] == (len(beats) > MAX_FRAME_BEATS)
    assert not pay


def header_entries(frames, beats=None):
    """The receive stage's header entries of ``frames`` (from its twin, no overflow);
    the payload beats go into the list ``beats`` if given."""
    hdr, pay = Fifo(len(frames) + 1), Fifo(1 << 16)
    rx = ReceiveModel(hdr, pay)
    c = 0
    for frame in frames:
        for bits in frame_to_beats(frame, 64):
            data, nbytes, first, last = unpack_beat(64, bits)
            rx.step(c, {"i": dict(data=data, nbytes=nbytes, first=first, last=last)})
            hdr.commit()
            pay.commit()
            c += 1
    if beats is not None:
        beats.extend(pay.q)
    return list(hdr.q)


@pytest.mark.parametrize("seed,rate", [(4, 1.0), (5, 0.5)])
def test_header_check_matches_twin(seed, rate):
    rng = random.Random(seed)
    frames = random_frames(rng, 150, long_frames=True, bad_rate=0.5)
    # Some QPs again and again, so that entries repeat.
    entries = header_entries(frames)
    jobs, n_entries = 6, 16
    dut = HeaderCheck(n_entries, jobs)
    side_rng = random.Random(seed + 100)
    box = {}

    def side_in(c, peek):
        # ``entry``: whatever entry the cache names for the lookup (it places the QPs).
        return {"lookup.ready": int(side_rng.random() < 0.6),
                "done_data": side_rng.randrange(3), "entry": side_rng.randrange(n_entries)}

    def make(fifos):
        box["t"] = HeaderCheckModel(
            fifos["i"], fifos["o"], n_entries, jobs,
            lookup=lambda qpn, busy, side: bool(side["lookup.ready"]),
            done=lambda e, side: side["done_data"],
            entry_of=lambda qpn, side: side["entry"])
        return box["t"]

    out = compare_stage(
        dut, make, inputs={"i": 4}, outputs={"o": jobs}, stimulus={"i": entries},
        cycles=6 * len(entries), seed=seed, push_rate=rate, pop_rate=rate,
        levels={"o_level": "o"}, side_in=side_in,
        side_out=("lookup.valid", "lookup.payload", "victim_busy", "done_addr",
                  "jobs_max") + REASONS,
        answers=("victim_busy", "done_addr"),    # of the random entry and done_data
        # The stage acts only on the heads of its input FIFOs (an item stays until done):
        # no wait of its own once they are empty; 64: the pipeline's latency, with margin.
        quiet=64)
    twin = box["t"]
    assert len(out["o"]) == len(entries)
    rejected = sum(twin.count[r] for r in REASONS)
    assert all(twin.count[r] > 0 for r in REASONS), twin.count
    assert 20 < rejected < len(entries) - 20
    assert twin.count["jobs_max"] == (jobs if rate < 1 else 1)


class _TableEnv:
    """The context cache and MR table of a verify unit test: the test's side inputs,
    and a group table that the twin's group writes update at the end of the cycle."""

    def __init__(self, groups):
        self.groups, self.staged = groups, []

    def ready(self, e, side):
        return bool(side["filled.ready"])

    def static(self, e, side):
        return side["ctx.data"]

    def group(self, e, side):
        return side["group.data"]

    def mr(self, rkey, side):
        return side["mr_data"]

    def write_group(self, e, values):
        self.staged.append((e, values))

    def commit(self):
        for e, values in self.staged:
            self.groups[e] = dict(values)
        self.staged = []


class _WithEnv:
    def __init__(self, twin, env):
        self.twin, self.env = twin, env

    def step(self, c, side):
        return self.twin.step(c, side)

    def commit(self):
        self.twin.commit()
        self.env.commit()


def _verify_jobs(rng, n, statics, groups, mrs, entries):
    """Random verify jobs around each entry's PSN sequence, every verdict likely."""
    nxt = [g["expected_psn"] for g in groups]
    jobs = []
    for _ in range(n):
        if rng.random() < 0.1:
            jobs.append(dict(check=0, rest=rng.randrange(65)))
            continue
        e = rng.randrange(entries)
        qpn = e + entries * rng.randrange(4)
        step = rng.choice([0, 0, 0, 1, 1, 2, -1, -3])
        psn = (nxt[e] + step) & 0xFFFFFF
        if step == 0:
            nxt[e] = (nxt[e] + 1) & 0xFFFFFF
        reth = rng.random() < 0.5
        k = rng.randrange(len(mrs))
        mr = mrs[k]
        rkey = mr["key"] if rng.random() < 0.8 else rng.randrange(1 << 32)
        plen = rng.choice([1, 64, 128, 200, 4096])
        va = mr["base"] + 64 * rng.randrange(8) + (0 if rng.random() < 0.9 else 4)
        dma_len = plen + rng.choice([0, 0, 64, -1])
        jobs.append(dict(check=1, rest=rng.randrange(65), qpn=qpn, entry=e, psn=psn,
                         ack_req=int(rng.random() < 0.6), reth=int(reth),
                         last=int(rng.random() < 0.5), va=va if reth else 0,
                         rkey=rkey if reth else 0, dma_len=dma_len if reth else 0,
                         plen=plen, data=rng.getrandbits(8 * 74)))
    return jobs


@pytest.mark.parametrize("seed,rate,selective", [(6, 1.0, 0), (7, 0.5, 0), (10, 1.0, 1),
                                                 (11, 0.5, 1)])
def test_verify_matches_twin(seed, rate, selective):
    rng = random.Random(seed)
    entries, jobs_depth, depth, mr_entries = 16, 8, 1 << 14, 16
    statics = [dict(valid=int(rng.random() < 0.9), dest_qp=rng.randrange(1 << 24),
                    dmac=rng.getrandbits(48), smac=rng.getrandbits(48),
                    dip=rng.getrandbits(32), sip=rng.getrandbits(32))
               for _ in range(entries)]
    statics[3]["valid"] = 0
    statics[5].update(valid=1, state=QpState.ERR.value)   # frames of entry 5: qp_err
    groups = [dict(expected_psn=rng.choice([0, 5, (1 << 24) - 2, rng.randrange(1 << 24)]),
                   nak_sent=0, msn=rng.randrange(1 << 24),
                   resp_va=rng.getrandbits(64) & ~63, resp_left=rng.choice([0, 100, 5000]))
              for _ in range(entries)]
    mrs = [dict(valid=int(rng.random() < 0.8), remote_write=int(rng.random() < 0.9),
                key=k + mr_entries * rng.randrange(1000), base=rng.getrandbits(40) << 6,
                length=rng.choice([4096, 1 << 20])) for k in range(mr_entries)]
    stimulus = _verify_jobs(rng, 400, statics, groups, mrs, entries)
    env = _TableEnv(groups)
    side_rng = random.Random(seed + 50)
    box = {}

    def side_in(c, peek):
        return {"filled.ready": int(side_rng.random() < 0.7),
                "ctx.data": statics[peek("ctx.addr")],
                "group.data": env.groups[peek("group.addr")], "mr_data": mrs[peek("mr_addr")],
                "done_addr": side_rng.randrange(entries),
                "held_addr": side_rng.randrange(entries), "selective": selective}

    def make(fifos):
        box["t"] = VerifyModel(fifos["i"], fifos["w"], fifos["ack"], entries, jobs_depth,
                               depth, env, selective=selective)
        return _WithEnv(box["t"], env)

    out = compare_stage(
        Verify(entries, jobs_depth, depth, MrTableShape(mr_entries)), make,
        inputs={"i": jobs_depth}, outputs={"w": 4, "ack": 4}, stimulus={"i": stimulus},
        cycles=5 * len(stimulus), seed=seed, push_rate=rate, pop_rate=rate,
        side_in=side_in,
        side_out=("group.we", "group.wdata", "done_data", "held") + VERIFY_COUNTERS,
        answers=("done_data", "held"),      # of the random done_addr, held_addr
        # The stage acts only on the heads of its input FIFOs (an item stays until done):
        # no wait of its own once they are empty; 64: the pipeline's latency, with margin.
        quiet=64)
    cnt = box["t"].count
    assert len(out["w"]) == len(stimulus)
    # Without selective repeat no frame is placed out of order; with it some are.
    assert all(cnt[k] > 3 for k in VERIFY_COUNTERS if k != "sr_placed"), cnt
    assert (cnt["sr_placed"] > 3) if selective else (cnt["sr_placed"] == 0), cnt
    assert len(out["ack"]) > 50
    assert set(RESP_GROUP) == set(groups[0])


@pytest.mark.parametrize("rate", [1.0, 0.5])
def test_verify_selective_repeat_bitmap(rate):
    """Selective repeat, one QP: frames placed ahead, duplicates of placed PSNs, the
    bitmap consumed when the gap is filled, a PSN beyond the window (SR_WINDOW), frames
    ahead discarded (a LAST, beyond the window) and the NAK after consuming that they
    cause, and a discard while such a NAK is pending; RTL against the twin, and the
    ACK/NAKs and writes against the protocol (docs/recovery.md, "Selective repeat")."""
    from pymodel.rdma.resp.verify import SR_WINDOW
    entries, jobs_depth, depth, mr_entries = 16, 8, 1 << 14, 16
    static = dict(valid=1, dest_qp=7, dmac=1, smac=2, dip=3, sip=4)
    groups = [dict(expected_psn=10, nak_sent=0, msn=5, resp_va=0, resp_left=0)
              for _ in range(entries)]
    mr = dict(valid=1, remote_write=1, key=0x21, base=1 << 12, length=1 << 16)

    def only(psn, ack_req=0, k=0):
        return dict(check=1, rest=2, qpn=3, entry=3, psn=psn, ack_req=ack_req, reth=1,
                    last=1, va=mr["base"] + 64 * k, rkey=mr["key"], dma_len=64, plen=64,
                    data=k + 1)
    middle = dict(only(14), reth=0, last=0, va=0, rkey=0, dma_len=0)
    beyond = 15 + SR_WINDOW + 1               # expected is 15 by then
    def last(psn):
        return dict(only(psn), reth=0, va=0, rkey=0, dma_len=0)
    stimulus = [only(12, k=2), only(13, k=3), only(12, k=2), middle, only(10, k=0),
                only(11, k=1), only(14, ack_req=1, k=4), only(beyond, k=5),
                only(15, k=6), only(16, k=7), only(18, k=8), last(20), only(17, k=9),
                last(21), only(19, ack_req=1, k=10)]
    env = _TableEnv(groups)
    box = {}

    def side_in(c, peek):
        return {"filled.ready": 1, "ctx.data": static,
                "group.data": env.groups[peek("group.addr")], "mr_data": mr,
                "done_addr": 3, "held_addr": 3, "selective": 1}

    def make(fifos):
        box["t"] = VerifyModel(fifos["i"], fifos["w"], fifos["ack"], entries, jobs_depth,
                               depth, env, selective=1)
        return _WithEnv(box["t"], env)

    out = compare_stage(
        Verify(entries, jobs_depth, depth, MrTableShape(mr_entries)), make,
        inputs={"i": jobs_depth}, outputs={"w": 4, "ack": 4}, stimulus={"i": stimulus},
        cycles=100, seed=3, push_rate=rate, pop_rate=rate, side_in=side_in,
        side_out=("group.we", "group.wdata", "held") + VERIFY_COUNTERS)
    ver = box["t"]
    assert ver.count == dict(frames_ok=7, unknown_qp=0, duplicates=1, psn_nak=1,
                             out_of_order=3, access_nak=0, qp_err=0, sr_placed=3)
    # Expected 10: 12 and 13 placed (one NAK of 10), 12 again a duplicate, the MIDDLE
    # 14 silent; 10 accepted leaves 11 missing before placed PSNs: NAK 11 (MSN 6); 11
    # consumes 12 and 13 (ACK 13, MSN 5 + 4); 14 its own ACK (MSN 10); expected 15, a
    # frame SR_WINDOW + 1 ahead of it is outside the window: NAK 15 (the MIDDLE's discard
    # was answered by the NAK of 11, after which the requester goes back N).
    # Discarded ahead: the frame beyond the window was discarded, so 15 accepted (an
    # ONLY, MSN 11) finds no bit set but NAKs 16, the next PSN (without the rule: no
    # ACK/NAK, and only the requester's timer would find 16 missing). 16 accepted (MSN
    # 12, no AckReq): silent. 18 placed: NAK 17 (MSN 12); the LAST 20 discarded
    # silently; 17 consumes 18 (MSN 14) and, the LAST having been discarded, NAKs 19
    # instead of ACKing 18. The LAST 21 arrives while that NAK after consuming is
    # pending (the requester goes back N on it, resending 21 too): discarded without
    # marking, so 19 with AckReq is ACKed (MSN 15), not NAKed.
    seq, ack_s = Syndrome.NAK_PSN_SEQUENCE.value, Syndrome.ACK.value
    ack_layout_ = Verify(entries, jobs_depth, depth, MrTableShape(mr_entries)).ack.payload.shape()
    got = [ack_layout_.from_bits(v) for _, v in out["ack"]]
    assert [(int(a.syndrome), int(a.psn), int(a.msn)) for a in got] == [
        (seq, 10, 5), (seq, 11, 6), (ack_s, 13, 9), (ack_s, 14, 10), (seq, 15, 10),
        (seq, 16, 11), (seq, 17, 12), (seq, 19, 14), (ack_s, 19, 15)]
    w_layout = Verify(entries, jobs_depth, depth, MrTableShape(mr_entries)).w.payload.shape()
    writes = [w_layout.from_bits(v) for _, v in out["w"]]
    assert [int(x.write) for x in writes] == [1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 0, 1]
    assert [int(x.addr) for x in writes if x.write] == [
        (mr["base"] >> 6) + k for k in (2, 3, 0, 1, 4, 6, 7, 8, 9, 10)]
    assert env.groups[3]["expected_psn"] == 20 and env.groups[3]["msn"] == 15
    assert not ver.held(3)


def test_verify_twin_refuses_bad_selective():
    fifos = [Fifo(4, n) for n in ("i", "w", "ack")]
    with pytest.raises(ValueError, match="^selective must be 0 or 1"):
        VerifyModel(*fifos, 16, 8, 1 << 14, _TableEnv([]), selective=2)


@pytest.mark.parametrize("seed,rate", [(8, 1.0), (9, 0.5)])
def test_payload_writer_matches_twin(seed, rate):
    rng = random.Random(seed)
    depth = 1 << 14
    frames = random_frames(rng, 120, bad_rate=0.3)
    beats = []
    jobs, payloads = [], []
    for frame, entry in zip(frames, header_entries(frames, beats), strict=True):
        reason, v = parse_header(entry)
        if reason is None:
            start = 70 if v["reth"] else 54
            payloads.append(frame[start:start + v["plen"]])
            jobs.append(dict(write=1, rest=v["rest"], reth=v["reth"],
                             addr=rng.randrange(depth), plen=v["plen"], mark=v["last"],
                             qpn=v["qpn"], data=v["data"]))
        else:
            jobs.append(dict(write=0, rest=v["rest"]))
    box = {}

    def make(fifos):
        box["t"] = PayloadWriterModel(fifos["i"], fifos["beats"], fifos["o"], depth)
        return box["t"]

    out = compare_stage(
        PayloadWriter(depth), make, inputs={"i": 4, "beats": 8}, outputs={"o": 4},
        stimulus={"i": jobs, "beats": beats}, cycles=3 * len(beats) + 4 * len(jobs),
        seed=seed, push_rate=rate, pop_rate=rate, side_out=("words",),
        # The stage acts only on the heads of its input FIFOs (an item stays until done):
        # no wait of its own once they are empty; 64: the pipeline's latency, with margin.
        quiet=64)
    assert len(out["taken"]["i"]) == len(jobs)
    assert len(out["taken"]["beats"]) == len(beats)
    words = sum(-(-j["plen"] // 64) for j in jobs if j["write"])
    assert len(out["o"]) == words == box["t"].count["words"] > 100
    # Independent of the twin: the words hold each frame's payload, in order.
    got, cur = [], b""
    for _, bits in out["o"]:
        w = unpack(wr_layout(depth), bits)
        n = bin(w["be"]).count("1")
        assert w["be"] == (1 << n) - 1 and w["data"] >> (8 * n) == 0
        cur += w["data"].to_bytes(64, "little")[:n]
        if w["last"]:
            got.append(cur)
            cur = b""
    assert got == payloads


@pytest.mark.parametrize("seed,rate", [(10, 1.0), (11, 0.4)])
def test_write_arbiter_matches_twin(seed, rate):
    rng = random.Random(seed)
    depth = 1 << 10
    pay, tlps = [], []
    for t in range(60):
        n = rng.randrange(1, 6)
        words = [dict(addr=rng.randrange(depth), data=rng.getrandbits(512),
                      be=rng.getrandbits(64), last=int(k == n - 1), mark=0, tag=t)
                 for k in range(n)]
        pay += words
        tlps.append(words)
    wbs = [dict(addr=rng.randrange(depth), data=rng.getrandbits(512)) for _ in range(40)]

    def make(fifos):
        return WriteArbiterModel(fifos["pay"], fifos["wb"], fifos["o"])

    out = compare_stage(
        WriteArbiter(depth), make, inputs={"pay": 4, "wb": 4}, outputs={"o": 4},
        stimulus={"pay": pay, "wb": wbs}, cycles=3 * (len(pay) + len(wbs)), seed=seed,
        push_rate=rate, pop_rate=rate,
        # The stage acts only on the heads of its input FIFOs (an item stays until done):
        # no wait of its own once they are empty; 64: the pipeline's latency, with margin.
        quiet=64)
    got = [unpack(wr_layout(depth), bits) for _, bits in out["o"]]
    assert len(got) == len(pay) + len(wbs)
    # Independent of the twin: each payload TLP's words leave together and in order.
    pos = 0
    runs = []
    while pos < len(got):
        if got[pos]["be"] == (1 << 64) - 1 and got[pos]["tag"] == 0 and got[pos]["last"] \
                and {"addr": got[pos]["addr"], "data": got[pos]["data"]} in wbs:
            pos += 1
            continue
        n = len(tlps[len(runs)])
        runs.append(got[pos:pos + n])
        pos += n
    assert runs == tlps


@pytest.mark.parametrize("seed,rate", [(12, 1.0), (13, 0.5)])
def test_ack_sender_matches_twin(seed, rate):
    rng = random.Random(seed)
    jobs = [dict(dmac=rng.getrandbits(48), smac=rng.getrandbits(48),
                 sip=rng.getrandbits(32), dip=rng.getrandbits(32),
                 src_qp=rng.getrandbits(24), dest_qp=rng.getrandbits(24),
                 psn=rng.getrandbits(24), msn=rng.getrandbits(24),
                 syndrome=rng.choice(list(Syndrome)).value) for _ in range(40)]
    box = {}

    def make(fifos):
        box["t"] = AckSenderModel(fifos["i"], fifos["o"])
        return box["t"]

    out = compare_stage(
        AckSender(), make, inputs={"i": 4}, outputs={"o": 4}, stimulus={"i": jobs},
        cycles=5 * len(jobs) + 20, seed=seed, push_rate=rate, pop_rate=rate,
        side_out=("acks",),
        # The stage acts only on the heads of its input FIFOs (an item stays until done):
        # no wait of its own once they are empty; 64: the pipeline's latency, with margin.
        quiet=64)
    frames = beats_to_frames([bits for _, bits in out["o"]], 64)
    assert frames == [
        ack_frame(Endpoint(j["smac"], j["sip"]), Endpoint(j["dmac"], j["dip"]),
                  j["src_qp"], j["dest_qp"], j["psn"], j["syndrome"], j["msn"])
        for j in jobs]
    assert box["t"].count["acks"] == len(jobs)
    if rate == 1.0:
        assert [c for c, _ in out["o"]][:6] == [1, 2, 3, 4, 5, 6]
