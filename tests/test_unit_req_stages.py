"""Each stage of the requester against its twin (Amaranth simulator).

Every test pushes random items into the stage's input FIFOs, pops its output FIFOs with
random backpressure (and, where a stage has them, drives random side inputs) and
compares every item written and taken, with its cycle, and the side outputs
(:func:`tb.stage_harness.compare_stage`). A stage whose input comes from outside a FIFO
in the requester (the host interface's ``mmio``) gets it from a FIFO here, through an
adapter that offers the FIFO's head to the twin and pops it when the twin takes it.
Expected values beyond the twin's are derived from the stage's contract, by hand.
"""

import random

import pytest

from pymodel.cycle import Fifo
from pymodel.fcs import fcs_ok
from pymodel.fields import pack, unpack
from pymodel.packet import beats_to_frames, frame_to_beats
from pymodel.rdma.req.cqe_writer import CqeWriterModel
from pymodel.rdma.req.doorbell_intake import DoorbellIntakeModel
from rtl.rdma.req.cqe_writer import CqeWriter
from rtl.rdma.req.doorbell_intake import DoorbellIntake
from spec.formats.roce import (
    CQE_LAYOUT,
    QPC_LAYOUT,
    WQE_LAYOUT,
    CqeStatus,
    OpCode,
    QpState,
    Syndrome,
    WqeOpcode,
)
from spec.rdma_engine import (
    BLUEFLAME_OFFSET,
    DOORBELL_OFFSET,
    MODIFY_QP_OFFSET,
    SEQ_GROUP,
    ContextCacheShape,
)
from spec.rdma_stages import fetch_layout, write_layout_req
from tb.stage_harness import compare_stage

#: The twins' side names of members of the RTL's port Signatures (spec/ports.py).
_QUERY_PORTS = {"q_entry": "completion.entry", "q_qpn": "completion.qpn",
                "q_victim_valid": "completion.victim_valid",
                "q_victim_qpn": "completion.victim_qpn", "q_done": "completion.done",
                "q_keep": "completion.keep", "q_victim_open": "completion.victim_open",
                "q_err": "completion.err"}
_CTX_PORTS = {"s_addr": "ctx.addr", "s_data": "ctx.data"}
_GROUP_PORTS = {"g_addr": "group.addr", "g_data": "group.data", "g_we": "group.we",
                "g_wdata": "group.wdata"}


class _FromFifo:
    """A twin whose input ``port`` is a stream offered by its source (not a FIFO) in the
    requester, fed here from the harness's FIFO: the head is offered in each cycle and
    popped when the twin reports ``<port>.ready``."""

    def __init__(self, twin, fifo, port):
        self.twin, self.fifo, self.port = twin, fifo, port

    def step(self, c, side):
        word = self.fifo.head() if self.fifo.can_read() else None
        out = self.twin.step(c, dict(side, **{self.port: word})) or {}
        if out.get(f"{self.port}.ready"):
            self.fifo.read()
        return {k: v for k, v in out.items() if k != f"{self.port}.ready"}

    def commit(self):
        pass


class _Counted:
    """A twin whose counters (``counts``, a dict the twin updates) are compared too: the
    RTL's counter ports show in cycle ``c`` the counts of cycles before ``c``, so the
    counts are returned as they are before the twin's step."""

    def __init__(self, twin, counts, names):
        self.twin, self.counts, self.names = twin, counts, names

    def step(self, c, side):
        before = {name: self.counts[name] for name in self.names}
        return {**(self.twin.step(c, side) or {}), **before}

    def commit(self):
        self.twin.commit()

    def busy(self):
        """The twin's ``busy()``, or not its ``idle()`` (False if it has neither)."""
        twin = self.twin
        if hasattr(twin, "busy"):
            return twin.busy()
        return hasattr(twin, "idle") and not twin.idle()


def _mmio_words(rng, n):
    """``n`` host writes: doorbells, QP modifies, WQEs by MMIO (first word the WQE, then
    0 to 3 inline words) and writes to other offsets (dropped)."""
    words = []
    for _ in range(n):
        kind = rng.choice(["db", "db", "modify", "bf", "bf", "other"])
        data = rng.getrandbits(512)
        if kind == "bf":
            extra = rng.randrange(4)
            wqe = pack(WQE_LAYOUT, {"qpn": rng.randrange(1 << 24),
                                    "sq_index": rng.randrange(1 << 16)})
            for k in range(1 + extra):
                words.append(dict(addr=BLUEFLAME_OFFSET, nbytes=64 * (1 + extra),
                                  data=wqe if k == 0 else rng.getrandbits(512),
                                  first=int(k == 0), last=int(k == extra)))
            continue
        addr = {"db": DOORBELL_OFFSET, "modify": MODIFY_QP_OFFSET,
                "other": rng.choice([0x40, 0x200, 0xFFC])}[kind]
        words.append(dict(addr=addr, nbytes=8, data=data, first=1, last=1))
    return words


@pytest.mark.parametrize("seed,rate", [(1, 1.0), (2, 0.5), (3, 0.2)])
def test_doorbell_intake_matches_twin(seed, rate):
    rng = random.Random(seed)
    words = _mmio_words(rng, 120)
    box = {}
    COUNTERS = ("doorbells", "bf_writes", "mmio_dropped", "qp_modifies")

    def make(fifos):
        box["t"] = t = DoorbellIntakeModel(fifos["item"], fifos["bf"])
        return _Counted(_FromFifo(t, fifos["mmio"], "mmio"), t.count, COUNTERS)

    out = compare_stage(
        DoorbellIntake(), make, inputs={"mmio": 4}, outputs={"item": 4, "bf": 4},
        stimulus={"mmio": words}, cycles=int(4 * len(words) / rate) + 40, seed=seed, push_rate=rate,
        pop_rate=rate, side_out=COUNTERS,
        # The stage acts only on the heads of its input FIFOs (an item stays until done):
        # no wait of its own once they are empty; 64: the pipeline's latency, with margin.
        quiet=64)
    # By the contract: every word is taken; an item per doorbell, modify and first BF
    # word; every BF word into bf; the other offsets dropped.
    by = {a: [w for w in words if w["addr"] == a]
          for a in (DOORBELL_OFFSET, MODIFY_QP_OFFSET, BLUEFLAME_OFFSET)}
    firsts = [w for w in by[BLUEFLAME_OFFSET] if w["first"]]
    assert len(out["taken"]["mmio"]) == len(words)
    assert len(out["item"]) == len(by[DOORBELL_OFFSET]) + len(by[MODIFY_QP_OFFSET]) + len(
        firsts)
    assert [bits for _, bits in out["bf"]] == [w["data"] for w in by[BLUEFLAME_OFFSET]]
    cnt = box["t"].count
    assert cnt["mmio_dropped"] == len(words) - sum(len(v) for v in by.values()) > 5
    assert cnt["doorbells"] == len(by[DOORBELL_OFFSET]) and cnt["bf_writes"] == len(firsts)


@pytest.mark.parametrize("seed,rate,cq_log2", [(4, 1.0, 2), (5, 0.5, 3), (6, 0.3, 0)])
def test_cqe_writer_matches_twin(seed, rate, cq_log2):
    rng = random.Random(seed)
    depth, cq_base = 1 << 10, 1000
    cqes = [dict(wr_id=rng.getrandbits(64), status=rng.choice(list(CqeStatus)).value,
                 qpn=rng.randrange(1 << 24), byte_len=rng.getrandbits(32),
                 sq_index=rng.randrange(1 << 16)) for _ in range(40)]
    box = {}

    def make(fifos):
        box["t"] = t = CqeWriterModel(fifos["cqe"], fifos["wr"], cq_base, cq_log2, depth)
        return _Counted(t, t.count, ("cqe_writes",))

    out = compare_stage(
        CqeWriter(depth), make, inputs={"cqe": 4}, outputs={"wr": 4},
        stimulus={"cqe": cqes}, cycles=int(4 * len(cqes) / rate) + 20, seed=seed, push_rate=rate,
        pop_rate=rate, side_in=lambda c, peek: {"cq_base": cq_base, "cq_log2": cq_log2},
        side_out=("cqe_writes",))
    # By the contract: CQE k at slot k mod 2**cq_log2 from cq_base (wrapping the memory),
    # owner bit 1 ^ (k >> cq_log2) & 1, marked, tagged with its QPN.
    got = [unpack(write_layout_req(depth), bits) for _, bits in out["wr"]]
    assert len(got) == len(cqes) == box["t"].count["cqe_writes"]
    for k, (w, q) in enumerate(zip(got, cqes, strict=True)):
        assert w["addr"] == (cq_base + k % (1 << cq_log2)) % depth
        assert w["mark"] == 1 and w["tag"] == q["qpn"]
        cqe = unpack(CQE_LAYOUT, w["data"])
        assert cqe["owner"] == 1 ^ ((k >> cq_log2) & 1)
        assert cqe["opcode"] == WqeOpcode.RDMA_WRITE.value
        assert {f: cqe[f] for f in q} == q


def test_fifo_adapter_offers_the_head_once_taken():
    """The adapter of the tests above: the FIFO's head is offered, popped when taken."""
    fifo = Fifo(4)
    fifo.write({"x": 1})
    fifo.commit()
    seen = []

    class Twin:
        def step(self, c, side):
            seen.append(side["p"])
            return {"p.ready": c == 1}

    a = _FromFifo(Twin(), fifo, "p")
    a.step(0, {})
    fifo.commit()
    a.step(1, {})
    fifo.commit()
    a.step(2, {})
    assert seen == [{"x": 1}, {"x": 1}, None] and not fifo.can_read()


def _jobs(rng, n, depth):
    """Random payload-fetch jobs: null ones, inline ones (1 to 3 words, with their inline
    words) and ones read from host memory (0 to 2000 bytes at an MTU of 256 to 1024)."""
    jobs, inline = [], []
    for _ in range(n):
        kind = rng.choice(["null", "inline", "read", "read", "read"])
        length = {"null": 0, "inline": rng.randint(1, 192),
                  "read": rng.choice([0, 1, 64, 65, 256, 257, 1000, 2000])}[kind]
        jobs.append(dict(entry=rng.randrange(16), qpn=rng.randrange(1 << 24),
                         psn=rng.randrange(1 << 24), laddr=rng.randrange(depth),
                         raddr=rng.getrandbits(64), rkey=rng.getrandbits(32),
                         inline=int(kind == "inline"), ack_req=rng.randrange(2),
                         pmtu_log2=rng.choice([8, 9, 10]), wr_id=rng.getrandbits(64),
                         sq_index=rng.randrange(1 << 16), first_psn=rng.randrange(1 << 24),
                         msg_length=length, signalled=rng.randrange(2),
                         resend=rng.randrange(2), last_of_item=rng.randrange(2),
                         null=int(kind == "null"), flush=0, modify=0))
        if kind == "inline":
            inline += [rng.getrandbits(512) for _ in range(-(-length // 64))]
    return jobs, inline


@pytest.mark.parametrize("seed,rate", [(7, 1.0), (8, 0.5)])
def test_payload_fetch_matches_twin(seed, rate):
    from pymodel.rdma.req.payload_fetch import PayloadFetchModel
    from rtl.rdma.req.payload_fetch import PayloadFetch
    from spec.rdma_stages import seg_layout

    rng = random.Random(seed)
    depth, fifo_words = 1 << 12, 64
    jobs, inline = _jobs(rng, 80, depth)
    box = {"arrived": 0}
    side_rng = random.Random(seed + 1)

    def side_in(c, peek):
        # Read words arrive some cycles after they were issued: never more than issued
        # (the twin's register of the start of the cycle, equal to the RTL's).
        owed = (box["t"].issued.value - box["arrived"]) & 0xFFFF
        if owed and side_rng.random() < 0.5:
            box["arrived"] = (box["arrived"] + side_rng.randint(1, min(owed, 4))) & 0xFFFF
        return {"pay_arrived": box["arrived"]}

    def make(fifos):
        box["t"] = t = PayloadFetchModel(depth, fifos["job"], fifos["inline"], fifos["rd"],
                                         fifos["seg"], fifos["pay_w"], fifo_words)
        return _Counted(t, t.count, ("payload_reads", "payload_words_max"))

    out = compare_stage(
        PayloadFetch(depth, fifo_words), make, inputs={"job": 4, "inline": 4},
        outputs={"rd": 4, "seg": 4, "pay_w": fifo_words},
        stimulus={"job": jobs, "inline": inline}, cycles=int(40 * len(jobs) / rate),
        seed=seed, push_rate=rate, pop_rate=rate, levels={"pay_level": "pay_w"},
        side_in=side_in, side_out=("payload_reads", "payload_words_max"),
        # The stage acts only on the heads of its input FIFOs (an item stays until done):
        # no wait of its own once they are empty; 64: the pipeline's latency, with margin.
        quiet=64)
    # By the contract: a job of L bytes at MTU m is max(1, ceil(L / m)) frames (a null
    # job one descriptor), each a read unless inline or empty; every inline word copied.
    segs = [unpack(seg_layout(), bits) for _, bits in out["seg"]]
    frames = [1 if j["null"] else max(1, -(-j["msg_length"] // (1 << j["pmtu_log2"])))
              for j in jobs]
    assert len(segs) == sum(frames) and len(out["taken"]["job"]) == len(jobs)
    reads = sum(f for j, f in zip(jobs, frames, strict=True)
                if not j["null"] and not j["inline"] and j["msg_length"])
    assert len(out["rd"]) == reads == box["t"].count["payload_reads"] > 20
    assert [bits for _, bits in out["pay_w"]] == inline


@pytest.mark.parametrize("seed,rate,serial", [(9, 1.0, 0), (10, 0.5, 0), (11, 0.7, 1)])
def test_qp_front_matches_twin(seed, rate, serial):
    from pymodel.rdma.req.qp_front import QpFrontModel
    from rtl.rdma.req.qp_front import QpFront

    rng = random.Random(seed)
    entries, log2 = 32, 4                     # 16 of the 32 entries in use
    items = [dict(qpn=rng.choice([rng.randrange(1 << 24), rng.randrange(40)]),
                 sq_tail=rng.randrange(1 << 16), bf=rng.randrange(2),
                 modify=int(rng.random() < 0.1)) for _ in range(150)]
    side_rng = random.Random(seed + 2)
    box = {}
    COUNTERS = ("adm_total", "items", "ctx_stalls", "evict_inflight")
    needs = []                                   # the completion unit's lookups taken

    def side_in(c, peek):
        # The completion unit's answers for the entry the front asks about: mostly the
        # front's own admitted count (not busy), sometimes not, keep or ERR; now and
        # then a lookup of its own (need: while items remain), and victims with
        # messages in flight.
        need = side_rng.random() < 0.05 and box["t"].count["items"] < len(items)
        side = {"hold": int(side_rng.random() < 0.1), "serial": serial,
                "idle": int(side_rng.random() < 0.5), "cache_log2": log2,
                "need.valid": int(need), "need.payload": side_rng.randrange(1 << 24),
                "lookup.ready": int(side_rng.random() < 0.7),
                "hit": int(side_rng.random() < 0.5),
                "victim.valid": int(side_rng.random() < 0.8),
                "victim.qpn": side_rng.randrange(1 << 24),
                # The cache's entry for the presented lookup: here direct mapped.
                "entry": lambda pk: int(pk("lookup.payload").qpn) % (1 << log2)}
        own, other = side_rng.random() < 0.7, side_rng.randrange(1 << 16)
        side.update({
            "q_done": lambda pk: box["t"].adm[pk("q_entry")] if own else other,
            "q_keep": int(side_rng.random() < 0.2),
            "q_victim_open": int(side_rng.random() < 0.5),
            "q_err": int(side_rng.random() < 0.05)})
        return side

    def make(fifos):
        box["t"] = t = QpFrontModel(
            entries, fifos["item"], fifos["fetch"], lambda qpn: qpn % (1 << log2),
            lookup=lambda qpn, busy, side: bool(side["lookup.ready"]),
            query=lambda e, qpn, side: (side["q_done"], side["q_keep"],
                                        side["q_victim_open"], side["q_err"]),
            need=lambda side: side["need.payload"] if side["need.valid"] else None,
            need_taken=lambda: needs.append(1), hit=lambda qpn, side: side["hit"])
        return _AdmCounted(t, COUNTERS)

    out = compare_stage(
        QpFront(entries), make, inputs={"item": 4}, outputs={"fetch": 4},
        stimulus={"item": items}, cycles=int(12 * len(items) / rate), seed=seed,
        push_rate=rate, pop_rate=rate, side_in=side_in,
        side_out=("lookup.valid", "lookup.payload", "need.ready", "victim_busy", "q_entry",
                  "q_qpn", "q_victim_valid", "q_victim_qpn") + COUNTERS,
        ports=_QUERY_PORTS, answers=("victim_busy", "q_victim_valid", "q_victim_qpn"),
        # The stage acts only on the heads of its input FIFOs (an item stays until done):
        # no wait of its own once they are empty; 64: the pipeline's latency, with margin.
        quiet=64)
    # By the contract: every item passes in order with its entry, qpn mod 2**cache_log2.
    got = [unpack(fetch_layout(), bits) for _, bits in out["fetch"]]
    assert [{k: g[k] for k in items[0]} for g in got] == items
    assert [g["entry"] for g in got] == [it["qpn"] % 16 for it in items]
    assert box["t"].count["ctx_stalls"] > 10
    # The completion unit's lookups go first and are taken; evictions of open windows
    # are counted.
    assert len(needs) > 5 and box["t"].count["evict_inflight"] > 5


class _AdmCounted(_Counted):
    """The QP front's counters and its ``adm_total`` register."""

    def __init__(self, twin, names):
        super().__init__(twin, dict(twin.count), names)

    def step(self, c, side):
        self.counts = dict(self.twin.count, adm_total=self.twin.adm_total.value)
        return super().step(c, side)


class _Framed:
    """The frame sender's twin with its ``o`` as the harness's FIFO: each frame the twin
    sends from cycle ``f`` is written there one beat a cycle from ``f`` (``o`` is always
    ready in the requester, and the FIFO here never fills)."""

    def __init__(self, twin, o):
        self.twin, self.o, self.beats = twin, o, {}
        self.model = None                 # the FrameSenderModel, for busy

    def busy(self):
        """Beats of a frame still to write, or payload words still to take."""
        return bool(self.beats) or self.model.busy()

    def send(self, f, frame):
        for k, bits in enumerate(frame_to_beats(frame, 64)):
            self.beats[f + k] = bits

    def step(self, c, side):
        out = self.twin.step(c, side)
        beat = self.beats.pop(c, None)
        if beat is not None:
            self.o.write(beat)
        return out

    def commit(self):
        self.twin.commit()


def _descriptors(rng, n, entries):
    """Random frame descriptors (WRITE FIRST/MIDDLE/LAST/ONLY of 0 to 4096 bytes, resends,
    null ones) and the payload words of each, in order."""
    segs, words = [], []
    ops = [OpCode.RC_RDMA_WRITE_ONLY, OpCode.RC_RDMA_WRITE_FIRST,
           OpCode.RC_RDMA_WRITE_MIDDLE, OpCode.RC_RDMA_WRITE_LAST]
    for _ in range(n):
        null = rng.random() < 0.1
        length = 0 if null else rng.choice([0, 1, 56, 57, 64, 100, 128, 1000, 4096])
        k = -(-length // 64)
        segs.append(dict(entry=rng.randrange(entries), qpn=rng.randrange(1 << 24),
                         opcode=rng.choice(ops).value, psn=rng.randrange(1 << 24),
                         length=length, va=rng.getrandbits(64), rkey=rng.getrandbits(32),
                         ack_req=rng.randrange(2), words=k, last_seg=rng.randrange(2),
                         wr_id=rng.getrandbits(64), sq_index=rng.randrange(1 << 16),
                         first_psn=rng.randrange(1 << 24), msg_length=rng.getrandbits(32),
                         signalled=rng.randrange(2), resend=int(rng.random() < 0.2),
                         last_of_item=rng.randrange(2), null=int(null), flush=0,
                         modify=0))
        words += [rng.getrandbits(512) for _ in range(k)]
    return segs, words


@pytest.mark.slow_variants("12-1.0", reason=(
    "the 0.5 variant runs the same stage with backpressure; test_unit_requester.py runs it "
    "at full rate inside the requester"))
@pytest.mark.parametrize("seed,rate", [(12, 1.0), (13, 0.5)])
def test_frame_sender_matches_twin(seed, rate):
    from pymodel.rdma.req.frame_sender import FrameSenderModel
    from rtl.rdma.req.frame_sender import FrameSender

    rng = random.Random(seed)
    entries, fifo_words = 16, 128
    statics = [dict(dest_qp=rng.randrange(1 << 24), dmac=rng.getrandbits(48),
                    smac=rng.getrandbits(48), dip=rng.getrandbits(32),
                    sip=rng.getrandbits(32)) for _ in range(entries)]
    segs, words = _descriptors(rng, 60, entries)
    box = {}

    class Cache:                      # the static read port: each entry's addresses
        @staticmethod
        def static_of(e):
            return statics[e]

    class Resent(_Counted):
        def step(self, c, side):
            self.twin.clear()
            out = super().step(c, side)
            r = self.twin.resent
            box["resent"] += r is not None
            return dict(out, **{"resent.valid": int(r is not None)},
                        **({"resent.payload": r} if r is not None else {}))

    box["resent"] = 0

    def make(fifos):
        framed = _Framed(None, fifos["o"])
        box["t"] = t = FrameSenderModel(Cache, fifos["seg"], fifos["pay"], fifos["rec"],
                                        framed.send)
        framed.twin = Resent(t, t.count, ("frames", "retransmissions"))
        framed.model = t
        return framed

    out = compare_stage(
        FrameSender(entries, fifo_words), make, inputs={"seg": 4, "pay": fifo_words},
        outputs={"rec": 4, "o": 1 << 12}, stimulus={"seg": segs, "pay": words},
        cycles=int(3 * len(words) / rate) + 40 * len(segs), seed=seed, push_rate=rate,
        pop_rate=rate, levels={"pay_level": "pay"},
        side_in=lambda c, peek: {"s_data": pack(QPC_LAYOUT, statics[peek("s_addr")])},
        side_out=("frames", "retransmissions", "resent.valid", "resent.payload"),
        ports=_CTX_PORTS,
        # No timer here (no READs, no timeout); frames in flight keep the twin busy: 64
        # covers the framer chain's latency from a take to a first beat, with margin.
        quiet=64)
    # By the contract: a frame per descriptor but the null ones, every payload word
    # taken; a record per null descriptor and per last segment sent for the first time.
    sent = [s for s in segs if not s["null"]]
    frames = beats_to_frames([bits for _, bits in out["o"]], 64)
    assert len(frames) == len(sent) == box["t"].count["frames"] > 40
    assert len(out["taken"]["pay"]) == len(words)
    assert len(out["rec"]) == sum(1 for s in segs if s["null"] or (s["last_seg"]
                                                                    and not s["resend"]))
    # A ``resent`` notice per resent frame.
    assert box["resent"] == sum(1 for s in sent if s["resend"]) > 0
    for frame, s in zip(frames, sent, strict=True):
        assert fcs_ok(frame)
        # The BTH's destination QP (bytes 5..7 of the BTH at byte 42) is the context's.
        assert int.from_bytes(frame[47:50], "big") == statics[s["entry"]]["dest_qp"]


class _GroupEnv:
    """The context cache as a stage that owns a group sees it: the statics (a static
    read port) and the group table, written at the end of the cycle; the twin's
    ``g_we``/``g_wdata`` of the cycle are returned for comparison."""

    def __init__(self, statics, groups, depth):
        self.statics, self.groups, self.depth = statics, groups, depth
        self.staged = []

    def static_of(self, e):
        return self.statics[e]

    def group_view(self, name, e):
        return self.groups[e]

    def write_group(self, name, e, values):
        self.staged.append((e, dict(values)))


class _WithGroup(_Counted):
    def __init__(self, twin, env, counts, names):
        super().__init__(twin, counts, names)
        self.env = env

    def step(self, c, side):
        out = super().step(c, side)
        staged = self.env.staged
        assert len(staged) <= 1, f"cycle {c}: {len(staged)} group writes"
        out["g_we"] = int(bool(staged))
        if staged:
            out["g_wdata"] = staged[0][1]
        return out

    def commit(self):
        super().commit()
        for e, values in self.env.staged:
            self.env.groups[e] = values
        self.env.staged = []


def _wqe_batches(rng, n, entries):
    """Random batches for the sequencer and the words of their WQEs: fetched ones
    (``count`` slots of ``2**stride_log2`` words, into ``wqe``), by MMIO (a header and its
    inline words, into ``bfq``), resends, null ones (some with ``modify``)."""
    batches, wqe, bfq = [], [], []
    for _ in range(n):
        e = rng.randrange(entries)
        qpn = e + entries * rng.randrange(100)
        kind = rng.choice(["fetch", "fetch", "bf", "null", "resend"])
        bf = kind == "bf"
        count = 0 if kind == "null" else (1 if bf or kind == "resend" else rng.randint(1, 4))
        stride = rng.randrange(1, 3)
        batches.append(dict(entry=e, qpn=qpn, first=rng.randrange(1 << 16), count=count,
                            stride_log2=stride, bf=int(bf), resend=int(kind == "resend"),
                            first_psn=rng.randrange(1 << 24),
                            last_of_item=rng.randrange(2), null=int(kind == "null"),
                            modify=int(kind == "null" and rng.random() < 0.3)))
        for _ in range(count):
            length = rng.choice([0, 1, 64, 100, 192, 300, 5000])
            flags = rng.randrange(8)
            header = pack(WQE_LAYOUT, dict(
                wr_id=rng.getrandbits(64), opcode=WqeOpcode.RDMA_WRITE.value, flags=flags,
                sq_index=rng.randrange(1 << 16), length=length, laddr=rng.getrandbits(40),
                raddr=rng.getrandbits(64), rkey=rng.getrandbits(32), qpn=qpn))
            slot = 1 << stride
            inline = min(-(-length // 64), 3 if bf else min(slot - 1, 3)) if flags & 2 else 0
            words = [header] + [rng.getrandbits(512) for _ in range(inline if bf
                                                                     else slot - 1)]
            (bfq if bf else wqe).extend(words)
    return batches, wqe, bfq


#: The fields a null job defines (the rest are whatever the datapath holds): its entry,
#: QP and kind. A flush job (null, with ``flush``) also carries its WQE for the FLUSH_ERR
#: CQE and every other field but ``ack_req`` (it sends no frame). Downstream, the
#: payload fetch passes a null job on as one descriptor and the completion unit counts a
#: null job that is not a flush as its item's end whatever its ``last_of_item``.
_NULL_JOB_FIELDS = ("entry", "qpn", "null", "flush", "modify")


def _job_defined(depth):
    from spec.rdma_stages import job_layout

    layout = job_layout(depth)

    def defined(bits):
        job = unpack(layout, bits)
        if not job["null"]:
            return bits
        if job["flush"]:
            return pack(layout, dict(job, ack_req=0))
        return pack(layout, {k: job[k] for k in _NULL_JOB_FIELDS})
    return defined


@pytest.mark.parametrize("seed,rate,ack_every,ack_frames", [
    (14, 1.0, 1, 0), (15, 0.5, 4, 8), (16, 0.7, 16, 64)])
def test_sequencer_matches_twin(seed, rate, ack_every, ack_frames):
    from pymodel.rdma.req.sequencer import SequencerModel
    from rtl.rdma.context_cache import group_layout
    from rtl.rdma.req.sequencer import Sequencer

    rng = random.Random(seed)
    entries, depth = 16, 1 << 14
    statics = [dict(pmtu_log2=rng.choice([8, 10, 12])) for _ in range(entries)]
    groups = [dict(next_psn=rng.randrange(1 << 24), ack_msgs=rng.randrange(4),
                   ack_frames=rng.randrange(8),
                   state=(QpState.ERR if e in (3, 7) else QpState.RTS).value)
              for e in range(entries)]
    batches, wqe, bfq = _wqe_batches(rng, 80, entries)
    env = _GroupEnv(statics, groups, depth)
    side_rng = random.Random(seed + 3)
    box = {}
    COUNTERS = ("sequenced", "doorbell_err_qp", "released")

    def side_in(c, peek):
        err = side_rng.random() < 0.03
        return {"ack_every": ack_every, "ack_frames": ack_frames, "err_valid": int(err),
                "err_entry": side_rng.randrange(entries),
                "s_data": lambda peek: pack(QPC_LAYOUT, statics[peek("s_addr")]),
                "g_data": lambda peek: pack(group_layout(SEQ_GROUP),
                                            env.groups[peek("g_addr")])}

    class Counted(_WithGroup):
        def step(self, c, side):
            self.counts = dict(self.twin.count, released=self.twin.released.value)
            return super().step(c, side)

    def make(fifos):
        box["t"] = t = SequencerModel(env, fifos["batch"], fifos["wqe"], fifos["bfq"],
                                      fifos["job"], fifos["inline"])
        return Counted(t, env, {}, COUNTERS)

    out = compare_stage(
        Sequencer(entries, depth), make, inputs={"batch": 4, "wqe": 8, "bfq": 8},
        outputs={"job": 4, "inline": 4}, stimulus={"batch": batches, "wqe": wqe,
                                                   "bfq": bfq},
        cycles=int(4 * (len(wqe) + len(bfq) + len(batches)) / rate), seed=seed,
        push_rate=rate, pop_rate=rate, side_in=side_in,
        side_out=("g_we", "g_wdata") + COUNTERS, defined={"job": _job_defined(depth)},
        ports={**_CTX_PORTS, **_GROUP_PORTS},
        # The stage acts only on the heads of its input FIFOs (an item stays until done):
        # no wait of its own once they are empty; 64: the pipeline's latency, with margin.
        quiet=64)
    # By the contract: every batch and word is taken; a job per WQE and null batch,
    # but none for a resend of a QP in ERR.
    assert len(out["taken"]["batch"]) == len(batches)
    assert len(out["taken"]["wqe"]) == len(wqe) and len(out["taken"]["bfq"]) == len(bfq)
    assert len(out["job"]) <= sum(max(b["count"], b["null"]) for b in batches)
    assert box["t"].count["sequenced"] > 30 and box["t"].count["doorbell_err_qp"] > 0
    assert box["t"].released.value == len(wqe) & 0xFFFF


def _completion_stimulus(rng, n, used):
    """Records of messages of a few QPs (PSNs advancing per QP, some null, flush and
    modify records) and ACK events about them, roughly in the records' order: cumulative
    ACKs, PSN-sequence NAKs, remote-access NAKs, lost ones, events for nothing, and none
    for the second half of one QP's messages (its timer expires until it gives up)."""
    qps = [rng.randrange(1 << 24) for _ in range(5)]
    psn = {q: rng.randrange(1 << 24) for q in qps}
    recs, sent = [], {q: [] for q in qps}
    for _ in range(n):
        q = rng.choice(qps)
        kind = rng.choices(["msg", "null", "flush", "modify"], [20, 2, 1, 1])[0]
        frames = rng.randint(1, 3)
        first, last = psn[q], (psn[q] + frames - 1) & 0xFFFFFF
        if kind == "msg":
            psn[q] = (last + 1) & 0xFFFFFF
            sent[q].append((first, last))
        recs.append(dict(entry=q % used, qpn=q, last_psn=last, wr_id=rng.getrandbits(64),
                         sq_index=rng.randrange(1 << 16), first_psn=first,
                         msg_length=rng.randrange(1 << 13), signalled=rng.randrange(2),
                         resend=0, last_of_item=int(rng.random() < 0.7),
                         null=int(kind != "msg"), flush=int(kind == "flush"),
                         modify=int(kind == "modify")))
    evs = []
    order = [(q, m) for q in qps for m in sent[q]]
    order.sort(key=lambda x: recs.index(next(r for r in recs if r["qpn"] == x[0]
                                            and r["first_psn"] == x[1][0])))
    silent = sent[qps[0]][len(sent[qps[0]]) // 2:]   # ACKs that never come: timers
    for q, (first, last) in order:
        if q == qps[0] and (first, last) in silent:
            continue
        syn = rng.choices([Syndrome.ACK, Syndrome.NAK_PSN_SEQUENCE,
                           Syndrome.NAK_REMOTE_ACCESS, None], [12, 2, 1, 2])[0]
        if syn is None:
            continue                      # lost: a timer or a later ACK retires it
        evs.append(dict(qpn=q, psn=first if syn != Syndrome.ACK else last,
                        syndrome=syn.value, msn=rng.randrange(1 << 24)))
    for k in range(0, len(evs) - 1, 3):           # neighbours now and then swapped
        if rng.random() < 0.3:
            evs[k], evs[k + 1] = evs[k + 1], evs[k]
    evs += [dict(qpn=rng.randrange(1 << 24), psn=rng.randrange(1 << 24),
                 syndrome=Syndrome.ACK.value, msn=0) for _ in range(5)]
    return recs, evs


@pytest.mark.slow_variants("18-0.5-0", "17-1.0-0", reason=(
    "seed 21 runs the same unit against its twin with window slots; without them (windows 0) "
    "the unit runs inside the requester in test_unit_requester.py's lockstep runs"))
@pytest.mark.parametrize("seed,rate,windows", [(17, 1.0, 0), (18, 0.5, 0), (21, 1.0, 64)])
def test_completion_matches_twin(seed, rate, windows):
    from pymodel.rdma.req.completion import CompletionUnitModel
    from rtl.rdma.req.completion import CompletionUnit
    from spec.rdma_engine import COMPLETION_COUNTERS

    rng = random.Random(seed)
    entries, log2, records, retry_limit, timeout = 32, 4, 64, 2, 300
    recs, evs = _completion_stimulus(rng, 150, 1 << log2)
    qps = sorted({r["qpn"] for r in recs})
    side_rng = random.Random(seed + 4)
    box = {}
    REGS = ("appended", "done_total", "win_total")

    def present(qpn):
        # The cache's probes: a context now and then away for a while.
        return (qpn * 7 + box["c"] // 64) % 5 != 0

    def side_in(c, peek):
        # The fetch stage's promises: the records appended, now and then a few more
        # (never fewer than before, never more than the stimulus holds).
        # The front's lookups: a QP of the stimulus and a victim, at their entry.
        t = box["t"]
        box["c"] = c
        issued = max(box.get("issued", 0), t.appended.value)
        if side_rng.random() < 0.1:
            issued = min(issued + side_rng.randint(1, 3), len(recs))
        box["issued"] = issued
        qpn, victim = side_rng.choice(qps), side_rng.choice(qps)
        # Now and then, in the first half of the run, a resent frame of a QP of the
        # stimulus leaves; later only those of the QP whose timer a walk holds (the
        # frame sender sends every resend in the end), so the timers run out.
        resent = None
        if c < 3000 / rate:
            if side_rng.random() < 0.02:
                resent = {"qpn": side_rng.choice(qps)}
        elif t.held.value and t.win[t.held_slot.value] and side_rng.random() < 0.05:
            resent = {"qpn": t.recs[t.head[t.held_slot.value]]["qpn"]}
        return {"issued": issued, "timeout": timeout, "cache_log2": log2, "resent": resent,
                "hold_qpn": side_rng.choice(qps),
                "q_entry": qpn % (1 << log2), "q_qpn": qpn,
                "q_victim_valid": int(side_rng.random() < 0.8), "q_victim_qpn": victim,
                "need.ready": int(side_rng.random() < 0.3),
                **{f"probe[{k}].present": probed(k) for k in range(3)},
                **{f"probe[{k}].entry": probe_entry(k) for k in range(5)}}

    def probed(k):
        """Probe ``k``'s answer, read after the side inputs that set its QPN."""
        return lambda peek: int(present(peek(f"probe[{k}].qpn")))

    def probe_entry(k):
        """Probe ``k``'s entry: here the direct-mapped one (the twin's default)."""
        return lambda peek: int(peek(f"probe[{k}].qpn")) % (1 << log2)

    class Observed(_Counted):
        def step(self, c, side):
            t = self.twin
            e = side["q_entry"]
            self.counts = dict(t.count, **{r: getattr(t, r).value for r in REGS})
            keep, vopen = t.query(side["q_qpn"], side["q_victim_qpn"]
                                  if side["q_victim_valid"] else None, c)
            need = t.need()
            if need is not None and side["need.ready"]:
                t.need_taken()
            out = super().step(c, side)
            return dict(out, hold=int(t.hold(side["hold_qpn"])), q_done=t.done[e],
                        q_keep=int(keep),
                        q_victim_open=int(vopen), **{"need.valid": int(need is not None)},
                        **({"need.payload": {"qpn": need}} if need is not None else {}),
                        **self.notice)

    class Notice(Observed):
        def busy(self):
            """Also while a window is open (its timer runs: every message leaves it)."""
            return super().busy() or self.twin.win_total.value != 0

        def step(self, c, side):
            t = self.twin
            self.notice = {"err_valid": int(t.err_out is not None),
                           "q_err": int(t.err_out is not None and t.err_out
                                        == side["q_entry"])}
            if t.err_out is not None:
                self.notice["err_entry"] = t.err_out
            return super().step(c, side)

    def make(fifos):
        box["t"] = t = CompletionUnitModel(ContextCacheShape(entries), records, retry_limit,
                                           fifos["rec"],
                                           fifos["ev"], fifos["cqe"], fifos["resend"],
                                           1 << log2, windows, present)
        return Notice(t, {}, COMPLETION_COUNTERS + REGS)

    out = compare_stage(
        CompletionUnit(ContextCacheShape(entries), records, retry_limit, windows), make,
        inputs={"rec": 4, "ev": 4},
        outputs={"cqe": 4, "resend": 4}, stimulus={"rec": recs, "ev": evs},
        cycles=int(6000 / rate), seed=seed, push_rate={"rec": rate, "ev": rate / 3},
        pop_rate=rate,
        side_in=side_in,
        side_out=("hold", "err_valid", "err_entry", "q_done", "q_keep", "q_victim_open",
                  "q_err", "need.valid", "need.payload")
        + COMPLETION_COUNTERS + REGS,
        ports={k: v.replace("completion.", "query.") for k, v in _QUERY_PORTS.items()},
        # The longest wait: a timer (timeout) found by the scan of every slot, after a
        # context away for 64 cycles (present), plus 64; the queries' answers change
        # with the random queries (their state shows in the counters and registers).
        quiet=timeout + (windows or entries) + 64 + 64,
        answers=("hold", "q_done", "q_keep", "q_victim_open", "q_err"))
    cnt = box["t"].count
    # By the contract: every record and event is taken; every message leaves its window
    # (retired by an ACK, a NAK or its retries' end, or flushed).
    assert len(out["taken"]["rec"]) == len(recs) and len(out["taken"]["ev"]) == len(evs)
    assert box["t"].win_total.value == 0
    for k in ("retired", "seq_naks", "timeouts", "rewinds", "qp_errors", "flushed",
              "ack_unexpected", "recovery_fills"):
        assert cnt[k] > 0, (k, cnt)
    assert len(out["resend"]) > 0 and len(out["cqe"]) > 20


class _FetchEnv(_GroupEnv):
    """The cache as the WQE fetch stage sees it: the group ``FETCH_GROUP`` and whether
    the item's entry is ready (``q_ready``, a side input of the cycle)."""

    side = {}

    def ready(self, e):
        return bool(self.side["q_ready"])

    def group_field(self, name, e, field):
        return self.groups[e][field]


@pytest.mark.parametrize("seed,rate", [(19, 1.0), (20, 0.5)])
def test_wqe_fetch_matches_twin(seed, rate):
    from pymodel.rdma.req.wqe_fetch import WqeFetchModel
    from rtl.rdma.context_cache import group_layout
    from rtl.rdma.req.wqe_fetch import WqeFetch
    from spec.rdma_engine import FETCH_GROUP

    rng = random.Random(seed)
    entries, depth, prefetch, ring_words, records = 16, 1 << 14, 16, 64, 48
    statics = [dict(sq_base=rng.randrange(depth), sq_size_log2=rng.choice([4, 6, 8]),
                    sq_stride_log2=rng.randrange(3)) for _ in range(entries)]
    groups = [dict(sq_head=rng.randrange(1 << 16)) for _ in range(entries)]
    tails = [g["sq_head"] for g in groups]
    fetch, resends = [], []
    for _ in range(120):
        e = rng.randrange(entries)
        kind = rng.choices(["db", "bf", "modify", "same"], [8, 2, 1, 1])[0]
        if kind in ("db", "bf"):
            tails[e] = (tails[e] + (1 if kind == "bf" else rng.randint(1, 40))) & 0xFFFF
        fetch.append(dict(qpn=e + entries * rng.randrange(50), sq_tail=tails[e],
                          bf=int(kind == "bf"), modify=int(kind == "modify"), entry=e))
    for _ in range(20):
        resends.append(dict(entry=rng.randrange(entries), qpn=rng.randrange(1 << 24),
                            sq_index=rng.randrange(1 << 16),
                            first_psn=rng.randrange(1 << 24)))
    env = _FetchEnv(statics, groups, depth)
    side_rng = random.Random(seed + 5)
    box = {}
    REGS = ("issued",)
    COUNTERS = ("wqe_reads", "wqes", "wqe_words_max")

    def side_in(c, peek):
        # The sequencer releases ring words some cycles after the reads reserved them,
        # the completion unit appends the promised records and retires some.
        t = box["t"]
        lag = side_rng.randrange(0, 40)
        return {"released": (t.reserved.value - min(lag, 8)) & 0xFFFF if lag else
                t.reserved.value,
                "hold": int(side_rng.random() < 0.05),
                "appended": (t.issued.value - side_rng.randrange(3)) & 0xFFFF,
                "win_total": side_rng.randrange(0, 24),
                "q_ready": int(side_rng.random() < 0.8),
                "s_data": lambda peek: pack(QPC_LAYOUT, statics[peek("s_addr")]),
                "g_data": lambda peek: pack(group_layout(FETCH_GROUP),
                                            env.groups[peek("g_addr")])}

    class Counted(_WithGroup):
        def step(self, c, side):
            env.side = side
            self.counts = dict(self.twin.count, issued=self.twin.issued.value)
            return super().step(c, side)

    def make(fifos):
        box["t"] = t = WqeFetchModel(env, fifos["fetch"], fifos["resend"], fifos["rd"],
                                     fifos["batch"], prefetch, ring_words, records)
        return Counted(t, env, {}, COUNTERS + REGS)

    out = compare_stage(
        WqeFetch(entries, depth, prefetch, ring_words, records), make,
        inputs={"fetch": 4, "resend": 4}, outputs={"rd": 4, "batch": 4},
        stimulus={"fetch": fetch, "resend": resends}, cycles=int(40 * len(fetch) / rate),
        seed=seed, push_rate={"fetch": rate, "resend": rate / 4}, pop_rate=rate,
        side_in=side_in, side_out=("g_we", "g_wdata") + COUNTERS + REGS,
        ports={**_CTX_PORTS, **_GROUP_PORTS, "q_entry": "filled.entry",
               "q_ready": "filled.ready"},
        # The stage acts only on the heads of its input FIFOs (an item stays until done):
        # no wait of its own once they are empty; 64: the pipeline's latency, with margin.
        quiet=64)
    # By the contract: every item and resend is taken; a resend reads one slot.
    assert len(out["taken"]["fetch"]) == len(fetch)
    assert len(out["taken"]["resend"]) == len(resends)
    cnt = box["t"].count
    assert cnt["wqe_reads"] == len(out["rd"]) > 50 and cnt["wqes"] > cnt["wqe_reads"]


def test_completion_concurrent_rewinds():
    """Two QPs NAKed at once, a third sending: both rewinds are pending together (the
    completion unit holds the new work of those two QPs only, ``hold`` for the third
    stays low), records of the third are appended meanwhile, and each rewind resends
    its QP's whole window (go-back-N) once its own promised records are appended. RTL
    against the twin on every port, cycle by cycle."""
    from pymodel.rdma.req.completion import CompletionUnitModel
    from rtl.rdma.req.completion import CompletionUnit
    from spec.rdma_engine import COMPLETION_COUNTERS

    entries, log2, windows, records = 32, 4, 64, 64
    a, b, c3 = 1, 2, 3
    psn0 = {a: 100, b: 5000, c3: 1 << 20}

    def rec(q, k):
        p = (psn0[q] + k) & 0xFFFFFF
        return dict(entry=q % (1 << log2), qpn=q, first_psn=p, last_psn=p, wr_id=q << 8 | k,
                    sq_index=k, msg_length=64, signalled=1, resend=0, last_of_item=1,
                    null=0, flush=0, modify=0)
    recs = ([rec(q, k) for k in range(4) for q in (a, b)]
            + [rec(c3, k) for k in range(16)])
    # Events of a QP without a window (dropped, one a cycle without an append) first:
    # the NAKs come once the first QPs' records are appended.
    evs = [dict(qpn=40, psn=k, syndrome=Syndrome.ACK.value, msn=0) for k in range(15)]
    evs += [dict(qpn=q, psn=psn0[q], syndrome=Syndrome.NAK_PSN_SEQUENCE.value, msn=0)
            for q in (a, b)]
    evs.append(dict(qpn=c3, psn=psn0[c3] + 15, syndrome=Syndrome.ACK.value, msn=16))
    box, seen = {}, []
    REGS = ("appended", "done_total", "win_total")

    def side_in(c, peek):
        # The fetch stage's promises run two records ahead of the appends until all
        # are promised (so each walk waits for the records promised before its NAK).
        t = box["t"]
        issued = min(len(recs), max(box.get("issued", 0), t.appended.value + 2))
        box["issued"] = issued
        return {"issued": issued, "timeout": 1 << 20, "cache_log2": log2, "resent": None,
                "hold_qpn": (a, b, c3)[c % 3],
                "q_entry": 0, "q_qpn": c3, "q_victim_valid": 0, "q_victim_qpn": 0,
                "need.ready": 0,
                **{f"probe[{k}].present": 1 for k in range(3)},
                **{f"probe[{k}].entry": entry_of(k) for k in range(5)}}

    def entry_of(k):
        return lambda peek: int(peek(f"probe[{k}].qpn")) % (1 << log2)

    class Observed(_Counted):
        def step(self, c, side):
            t = self.twin
            self.counts = dict(t.count, **{r: getattr(t, r).value for r in REGS})
            keep, vopen = t.query(side["q_qpn"], None, c)
            seen.append((t.hold(a), t.hold(b), t.hold(c3), t.win[t.slot(c3)]))
            out = super().step(c, side)
            return dict(out, hold=int(t.hold(side["hold_qpn"])), q_keep=int(keep),
                        q_victim_open=int(vopen), err_valid=int(t.err_out is not None))

    def make(fifos):
        box["t"] = t = CompletionUnitModel(ContextCacheShape(entries), records, 7,
                                           fifos["rec"], fifos["ev"],
                                           fifos["cqe"], fifos["resend"], 1 << log2,
                                           windows)
        return Observed(t, {}, COMPLETION_COUNTERS + REGS)

    out = compare_stage(
        CompletionUnit(ContextCacheShape(entries), records, 7, windows), make,
        inputs={"rec": 4, "ev": 4}, outputs={"cqe": 4, "resend": 4},
        stimulus={"rec": recs, "ev": evs}, cycles=300, seed=5,
        push_rate={"rec": 0.4, "ev": 1.0}, pop_rate=1.0, side_in=side_in,
        side_out=("hold", "q_keep", "q_victim_open", "err_valid")
        + COMPLETION_COUNTERS + REGS,
        ports={k: v.replace("completion.", "query.") for k, v in _QUERY_PORTS.items()})
    cnt = box["t"].count
    assert cnt["seq_naks"] == 2 and cnt["rewinds"] == 2 and cnt["ack_unexpected"] == 15
    both = [s for s in seen if s[0] and s[1]]
    assert both, "the two rewinds were never pending at once"
    assert not any(s[2] for s in seen)                 # the third QP is never held
    assert max(s[3] for s in both) > min(s[3] for s in both)   # and it kept appending
    from spec.rdma_stages import resend_layout
    resent = [unpack(resend_layout(), item)["qpn"] for _, item in out["resend"]]
    assert sorted(resent) == [a] * 4 + [b] * 4         # each window resent whole
    assert len(out["cqe"]) == 16                        # the third QP's 16, by its ACK


def test_ack_queue_coalescing_rule():
    """The rule of :class:`rtl.rdma.req.ack_queue.AckQueue`, case by case (IBTA Vol 1
    9.7.5.1.2: a PSN sequence NAK of PSN p acknowledges up to p - 1)."""
    from pymodel.rdma.req.ack_queue import coalesce

    ack, seq, acc = (Syndrome.ACK.value, Syndrome.NAK_PSN_SEQUENCE.value,
                     Syndrome.NAK_REMOTE_ACCESS.value)

    def ev(syn, psn, qpn=7):
        return dict(qpn=qpn, psn=psn & 0xFFFFFF, syndrome=syn, msn=psn)
    cases = [
        (ev(ack, 10), ev(ack, 12), "n"),     # a later cumulative ACK supersedes
        (ev(ack, 12), ev(ack, 10), "p"),     # an older one adds nothing
        (ev(ack, 9), ev(seq, 10), "n"),      # NAK 10 covers 9 too, and says 10 is missing
        (ev(seq, 10), ev(ack, 9), "p"),      # ACK 9 after NAK 10: nothing new
        (ev(seq, 10), ev(ack, 10), "n"),     # the resend of 10 arrived
        (ev(seq, 10), ev(seq, 14), "n"),     # a later loss
        (ev(acc, 10), ev(ack, 30), "p"),     # an error NAK stays (the QP enters ERR)
        (ev(ack, 30), ev(acc, 31), "n"),     # an error NAK replaces an ACK
        (ev(ack, 5), ev(ack, 3, qpn=8), "n"),   # another QP: the newer event
        (ev(ack, -2), ev(ack, 1), "n"),      # across the PSN wrap
    ]
    for p, n, want in cases:
        assert coalesce(p, n) is (n if want == "n" else p), (p, n)


@pytest.mark.parametrize("windows,rate", [(0, 0.2), (64, 0.5)])
def test_ack_queue_matches_twin(windows, rate):
    """A stream of ACKs and NAKs of a few QPs into the ACK queue, its output taken now
    and then: RTL against the twin cycle by cycle; nothing refused (``i`` always ready),
    and by the contract every slot is offered once per burst of its events."""
    from pymodel.rdma.req.ack_queue import AckQueueModel
    from rtl.rdma.req.ack_queue import AckQueue

    entries, log2 = 32, 4
    rng = random.Random(windows + 3)
    qps = [rng.randrange(1 << 24) for _ in range(6)] + [5, 5 + 64, 5 + 16]
    syns = [Syndrome.ACK.value] * 6 + [Syndrome.NAK_PSN_SEQUENCE.value,
                                       Syndrome.NAK_REMOTE_ACCESS.value]
    evs = [dict(qpn=rng.choice(qps), psn=rng.randrange(1 << 24), syndrome=rng.choice(syns),
                msn=rng.randrange(1 << 24)) for _ in range(400)]

    def slot(qpn):
        return qpn % (1 << log2) if windows == 0 else qpn % windows

    class Stage(_Counted):
        def __init__(self, q, fifos):
            super().__init__(q, {}, ("coalesced",))
            self.fifos = fifos

        def step(self, c, side):
            q = self.twin
            self.counts = {"coalesced": q.coalesced}
            before = {"coalesced": q.coalesced}
            if self.fifos["i"].can_read():
                q.write(self.fifos["i"].read())
            if q.can_read() and self.fifos["o"].can_write():
                self.fifos["o"].write(q.read())
            return before

    box = {}

    def make(fifos):
        box["q"] = q = AckQueueModel(slot)
        return Stage(q, fifos)

    out = compare_stage(AckQueue(entries, windows), make, inputs={"i": 4},
                        outputs={"o": 4}, stimulus={"i": evs}, cycles=1200, seed=9,
                        push_rate=1.0, pop_rate=rate,
                        side_in=lambda c, peek: {"cache_log2": log2},
                        side_out=("coalesced",),
                        # No timer: pending events keep the queue not idle (busy); 64:
                        # the pipeline's latency, with margin.
                        quiet=64)
    assert len(out["taken"]["i"]) == len(evs)
    # Each event is offered once or merged into one offered later: none is lost.
    assert box["q"].idle() and 0 < box["q"].coalesced
    assert len(out["o"]) + box["q"].coalesced == len(evs)


@pytest.mark.parametrize("windows", [3, 8, 8192])
def test_ack_queue_rejects_bad_windows(windows):
    """The ACK queue is sized by the window slots: the requester's rule for
    ``windows`` (0, or a power of two from the cache entries to 4096) applies."""
    from rtl.rdma.req.ack_queue import AckQueue

    with pytest.raises(ValueError, match=r"window slots \(windows\)"):
        AckQueue(16, windows)
