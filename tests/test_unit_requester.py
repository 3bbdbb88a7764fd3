"""The pipelined requester against its twin, cycle by cycle, in the Amaranth simulator.

A test-bench host answers the requester's reads from a dictionary memory after a fixed
latency (in order, one word a cycle) and takes every write; a test-bench responder
acknowledges each frame that asks for it after a fixed delay. Both the RTL and the
twin see the same inputs in every cycle, and every output is compared in every cycle:
the read requests, the write words, the MMIO handshakes and the frame beats.
"""

import dataclasses
import random
from collections import deque

import pytest

from pymodel.packet import frame_to_beats, unpack_beat
from pymodel.rdma.fields import pack, unpack
from pymodel.rdma.frames import Endpoint, ack_frame
from pymodel.rdma.req.requester import RequesterModel
from rtl.formats.roce import (
    CQE_LAYOUT,
    QPC_LAYOUT,
    WQE_INLINE,
    WQE_LAYOUT,
    WQE_SIGNALLED,
    Syndrome,
    WqeOpcode,
)
from rtl.rdma.req.doorbell_intake import BLUEFLAME_OFFSET, DOORBELL_OFFSET
from rtl.rdma.req.requester import Requester
from tb.amsim import run_sim

MAC_A, MAC_B, IP_A, IP_B = 0x02000000000A, 0x02000000000B, 0x0A000001, 0x0A000002
DEPTH = 1 << 12


@dataclasses.dataclass
class Cfg:
    cache_entries: int = 16
    depth: int = DEPTH
    qpc_base_a: int = 0
    cq_base: int = 64
    cq_log2: int = 6
    timeout: int = 4096
    retry_limit: int = 7
    ack_every: int = 1
    ack_frames: int = 0
    serial: int = 0


def scenario(seed, qps, messages, sizes, inline=False, bf=False, ring_every=1,
             signal_every=1, pmtu_log2=8, stride_log2=0):
    """Host memory image and MMIO writes of ``messages`` WRITEs round robin over QPs."""
    rng = random.Random(seed)
    mem = {}
    heap = 256
    sq = {}
    for q in range(qps):
        sq_log2 = 6
        base = heap
        heap += (1 << sq_log2) << stride_log2
        sq[q] = dict(base=base, tail=0, log2=sq_log2, pending=0)
        mem[q] = pack(QPC_LAYOUT, valid=1, pmtu_log2=pmtu_log2, dest_qp=q + 100,
                      next_psn=rng.randrange(1 << 24), sq_size_log2=sq_log2, sq_base=base,
                      sq_stride_log2=stride_log2, dmac=MAC_B, smac=MAC_A, dip=IP_B, sip=IP_A)
    mmio = []
    for k in range(messages):
        q = k % qps
        s = sq[q]
        size = rng.choice(sizes)
        words = -(-size // 64)
        laddr = heap
        heap += words
        payload = rng.randbytes(size)
        for w in range(words):
            mem[laddr + w] = int.from_bytes(payload[64 * w:64 * w + 64].ljust(64, b"\0"),
                                            "little")
        last = k >= messages - qps
        flags = WQE_SIGNALLED if (k % signal_every == signal_every - 1 or last) else 0
        if inline:
            flags |= WQE_INLINE
        hdr = pack(WQE_LAYOUT, wr_id=0x1000 + k, opcode=WqeOpcode.RDMA_WRITE, flags=flags,
                   sq_index=s["tail"], length=size, laddr=laddr * 64,
                   raddr=0x10000 + 4096 * k, rkey=0x77, qpn=q)
        slot = (s["tail"] & ((1 << s["log2"]) - 1)) << stride_log2
        mem[s["base"] + slot] = hdr
        inl = [mem[laddr + w] for w in range(words)] if inline else []
        for w, word in enumerate(inl):
            mem[s["base"] + slot + 1 + w] = word
        s["tail"] = (s["tail"] + 1) & 0xFFFF
        s["pending"] += 1
        if bf:
            wqe = [hdr] + inl
            for w, word in enumerate(wqe):
                mmio.append(dict(addr=BLUEFLAME_OFFSET, nbytes=64 * len(wqe), data=word,
                                 first=int(w == 0), last=int(w == len(wqe) - 1)))
            s["pending"] = 0
        elif s["pending"] >= ring_every or last:
            mmio.append(dict(addr=DOORBELL_OFFSET, nbytes=8, data=q | s["tail"] << 24,
                             first=1, last=1))
            s["pending"] = 0
    assert heap < DEPTH
    return mem, mmio


def _val(v):
    return v.as_value().value if hasattr(v, "as_value") else int(v)


def run_lockstep(cfg, mem, mmio, cycles, latency=24, ack_delay=12, drop_acks=(),
                 mmio_gap=0):
    dut = Requester(cfg.cache_entries, cfg.depth, timeout=cfg.timeout,
                    retry_limit=cfg.retry_limit, wqe_words=128, payload_words=128,
                    records=32)
    sent = []                       # (first beat cycle, frame) from the model

    def send(cycle, frame):
        sent.append((cycle, frame))

    model = RequesterModel(cfg, send)
    host = dict(mem)
    stats = dict(frames=0, cqes=[], acks=0, reads=0)

    async def bench(ctx):
        for name, value in (("qpc_base", cfg.qpc_base_a), ("cq_base", cfg.cq_base),
                            ("cq_log2", cfg.cq_log2), ("ack_every", cfg.ack_every),
                            ("ack_frames", cfg.ack_frames), ("serial", cfg.serial)):
            ctx.set(getattr(dut, name), value)
        ctx.set(dut.o.ready, 1)
        ctx.set(dut.rd_req.ready, 1)
        ctx.set(dut.wr.ready, 1)
        pending = deque()           # (cycle the word appears, word dict)
        data_free = 0               # first cycle the next read's words may start
        ack_beats = {}              # cycle -> flat beat on i
        ack_done = {}               # cycle -> ACK frame whose last beat arrives
        expected_beats = {}         # cycle -> flat beat the RTL must put on o
        frame_rx = []
        mmio_q = deque(mmio)
        next_mmio = 0
        for c in range(cycles):
            # ---- inputs of cycle c ----
            word = mmio_q[0] if mmio_q and c >= next_mmio else None
            ctx.set(dut.mmio.valid, word is not None)
            if word is not None:
                ctx.set(dut.mmio.payload, word)
            rd_word = pending.popleft()[1] if pending and pending[0][0] == c else None
            ctx.set(dut.rd_data.valid, rd_word is not None)
            if rd_word is not None:
                ctx.set(dut.rd_data.payload, rd_word)
            beat = ack_beats.pop(c, None)
            ctx.set(dut.i.valid, beat is not None)
            if beat is not None:
                ctx.set(dut.i.payload.as_value(), beat)
            # ---- the model ----
            rd_offer, wr_offer = model.offers()
            taken = model.step(c, mmio=word, rd_data=rd_word, rd_ready=True, wr_ready=True,
                               ack=ack_done.pop(c, None))
            # ---- compare ----
            assert bool(ctx.get(dut.mmio.ready)) == (taken and word is not None), \
                f"cycle {c}: mmio taken"
            got_rd = None
            if ctx.get(dut.rd_req.valid):
                p = ctx.get(dut.rd_req.payload)
                got_rd = dict(addr=int(p.addr), words=int(p.words), id=int(p.id))
            assert got_rd == rd_offer, f"cycle {c}: read request {got_rd} != {rd_offer}"
            got_wr = None
            if ctx.get(dut.wr.valid):
                p = ctx.get(dut.wr.payload)
                got_wr = dict(addr=int(p.addr), data=_val(p.data), be=int(p.be),
                              last=int(p.last), mark=int(p.mark), tag=int(p.tag))
            assert got_wr == wr_offer, f"cycle {c}: write {got_wr} != {wr_offer}"
            for first, frame in sent:
                for k, b in enumerate(frame_to_beats(frame, 64)):
                    expected_beats[first + k] = b
            sent.clear()
            got_beat = _val(ctx.get(dut.o.payload)) if ctx.get(dut.o.valid) else None
            assert got_beat == expected_beats.pop(c, None), f"cycle {c}: frame beat"
            # ---- the test-bench host and responder act on what left ----
            if word is not None and taken:
                mmio_q.popleft()
                if word["last"]:
                    next_mmio = c + 1 + mmio_gap
            if got_rd is not None:
                stats["reads"] += 1
                start = max(c + latency, data_free)
                for w in range(got_rd["words"]):
                    pending.append((start + w, dict(
                        data=host.get((got_rd["addr"] + w) % DEPTH, 0), id=got_rd["id"],
                        last=int(w == got_rd["words"] - 1))))
                data_free = start + got_rd["words"]
            if got_wr is not None:
                host[got_wr["addr"]] = got_wr["data"]
                if got_wr["mark"]:
                    stats["cqes"].append((c, got_wr["addr"]))
            if got_beat is not None:
                beat_d = unpack_beat(64, got_beat)
                frame_rx.append(beat_d)
                if beat_d[3]:
                    raw = b"".join(data.to_bytes(64, "little")[:nbytes]
                                   for data, nbytes, _, _ in frame_rx)
                    frame_rx.clear()
                    stats["frames"] += 1
                    ack_req = raw[50] >> 7
                    if ack_req and stats["frames"] not in drop_acks:
                        psn = int.from_bytes(raw[51:54], "big")
                        src_qp = (int.from_bytes(raw[34:36], "big") & 0x3FFF)
                        ack = ack_frame(Endpoint(MAC_B, IP_B), Endpoint(MAC_A, IP_A),
                                        src_qp + 100, src_qp, psn, Syndrome.ACK, 0)
                        t = c + ack_delay
                        while t in ack_beats or t + 1 in ack_beats:
                            t += 2
                        for k, b in enumerate(frame_to_beats(ack, 64)):
                            ack_beats[t + k] = b
                        ack_done[t + 1] = ack
                        stats["acks"] += 1
            model.commit()
            await ctx.tick()
        stats["counters"] = {n: int(ctx.get(getattr(dut, n))) for n in model.counters()}

    run_sim(dut, bench, deadline_cycles=cycles + 10)
    assert stats["counters"] == model.counters()
    return stats, host, model


@pytest.mark.parametrize("case", ["doorbells", "batched", "bf_inline", "multi_qp"])
def test_requester_matches_model(case):
    cfg = Cfg()
    if case == "doorbells":
        mem, mmio = scenario(1, 1, 12, [128])
    elif case == "batched":
        cfg.ack_every = 4
        mem, mmio = scenario(2, 1, 20, [1, 64, 65, 128, 300, 700], ring_every=8,
                             signal_every=4)
    elif case == "bf_inline":
        mem, mmio = scenario(3, 1, 16, [1, 63, 64, 128, 192], inline=True, bf=True,
                             stride_log2=2)
    else:
        cfg.cache_entries = 16
        mem, mmio = scenario(4, 40, 60, [128, 256], ring_every=1)
    stats, host, model = run_lockstep(cfg, mem, mmio, cycles=1600)
    n = sum(1 for w in mmio if w["first"]) if case == "bf_inline" else None
    assert stats["frames"] > 0 and stats["cqes"], stats
    cqes = [unpack(CQE_LAYOUT, host[a]) for _, a in stats["cqes"]]
    assert all(q["status"] == 0 for q in cqes)
    assert n is None or model.counters()["bf_writes"] == n
