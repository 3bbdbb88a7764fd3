"""The requester's lockstep bench, shared by tests/test_unit_requester.py and
tests/test_unit_requester_read.py: a test-bench host answers the requester's reads from
a dictionary memory after a fixed latency (in order, one word a cycle) and takes every
write; a test-bench responder (the ``peer``) answers the frames that leave. The RTL and
its twin see the same inputs in every cycle, and every output is compared in every
cycle: the read requests, the write words, the MMIO handshakes and the frame beats.
"""

from collections import deque

from pymodel.packet import frame_to_beats, unpack_beat
from pymodel.rdma.req.requester import RequesterModel
from rtl.rdma.req.requester import Requester
from tb.amsim import as_int, run_sim

__all__ = ["DEPTH", "run_lockstep"]

#: Words of the test-bench host memory.
DEPTH = 1 << 12


def run_lockstep(cfg, mem, mmio, cycles, peer, latency=24, reply_delay=12, reads=0,
                 mmio_gap=0, records=32, windows=0, selective=0):
    """Run the RTL and its twin in lockstep for at most ``cycles`` cycles, comparing every
    port in every cycle. The run ends early once the bench has nothing left to deliver
    and nothing has moved on any port for longer than

    - the retransmission timer plus two scans of every window slot (a message still
      unacknowledged would have been resent by then), or
    - two scans of every window slot, with no record in any window on either side (the
      RTL completion unit's ``win_total`` 0, and the twin not ``busy()``: no timer runs,
      no rewind, walk, ACK or FIFO item waits, so nothing is left to happen).

    ``peer.frame(raw, number)`` answers the ``number``-th frame (from 1) with a list of
    reply frames, sent back to back ``reply_delay`` cycles after its last beat (or once
    the link is free). With ``reads`` (READ/atomic slots), the twin also sees every beat
    arriving on ``i``. Returns ``(stats, host, model)``: ``stats`` counts the ``frames``
    sent, the ``acks`` (replies) and host ``reads``, and lists the ``writes``, the
    ``cqes`` (cycle, address), the ``wire`` frames (cycle of their last beat, bytes) and
    the ``counters``; ``host`` is the host memory after the run (every write applied
    with its byte enables)."""
    dut = Requester(cfg.cache_shape, cfg.depth, timeout=cfg.timeout,
                    retry_limit=cfg.retry_limit, wqe_words=128, payload_words=128,
                    records=records, windows=windows, reads=reads)
    sent = []                       # (first beat cycle, frame) from the model

    def send(cycle, frame):
        sent.append((cycle, frame))

    model = RequesterModel(cfg, send, reads=reads, records=records, wqe_words=128,
                           payload_words=128, windows=windows)
    model.selective = selective     # the port (FabricConfig has no field for it)
    host = dict(mem)
    stats = dict(frames=0, cqes=[], acks=0, reads=0, writes=[], wire=[])

    async def bench(ctx):
        ctx.set(dut.cache_log2, cfg.cache_entries.bit_length() - 1)
        for name, value in (("qpc_base", cfg.qpc_base_a), ("qpc_log2", cfg.qpc_log2),
                            ("cq_base", cfg.cq_base),
                            ("cq_log2", cfg.cq_log2), ("ack_every", cfg.ack_every),
                            ("ack_frames", cfg.ack_frames), ("serial", cfg.serial),
                            ("selective", selective)):
            ctx.set(getattr(dut, name), value)
        ctx.set(dut.o.ready, 1)
        ctx.set(dut.host.rd_req.ready, 1)
        ctx.set(dut.host.wr.ready, 1)
        pending = deque()           # (cycle the word appears, word dict)
        data_free = 0               # first cycle the next read's words may start
        in_beats = {}               # cycle -> flat beat on i
        in_done = {}                # cycle -> reply frame whose last beat arrives
        reply_free = 0              # the first cycle the link back is free
        expected_beats = {}         # cycle -> flat beat the RTL must put on o
        frame_rx = []
        mmio_q = deque(mmio)
        next_mmio = 0
        settle = 2 * max(records, windows, cfg.cache_capacity) + 64
        quiet = cfg.timeout + settle
        last_move = 0
        for c in range(cycles):
            if not (mmio_q or pending or in_beats or in_done or expected_beats):
                still = c - last_move
                if still > quiet or (still > settle and not model.busy()
                                     and ctx.get(dut.completion.win_total) == 0):
                    break
            # ---- inputs of cycle c ---- (a word with "at" waits for that cycle)
            word = None
            if mmio_q and c >= max(next_mmio, mmio_q[0].get("at", 0)):
                word = {k: v for k, v in mmio_q[0].items() if k != "at"}
            ctx.set(dut.mmio.valid, word is not None)
            if word is not None:
                ctx.set(dut.mmio.payload, word)
            rd_word = pending.popleft()[1] if pending and pending[0][0] == c else None
            ctx.set(dut.host.rd_data.valid, rd_word is not None)
            if rd_word is not None:
                ctx.set(dut.host.rd_data.payload, rd_word)
            beat = in_beats.pop(c, None)
            ctx.set(dut.i.valid, beat is not None)
            if beat is not None:
                ctx.set(dut.i.payload.as_value(), beat)
            # ---- the model ----
            rd_offer, wr_offer = model.offers()
            beat_in = None
            if reads and beat is not None:
                data, nbytes, first, last = unpack_beat(64, beat)
                beat_in = dict(data=data, nbytes=nbytes, first=first, last=last)
            taken = model.step(c, mmio=word, rd_data=rd_word, rd_ready=True, wr_ready=True,
                               ack=in_done.pop(c, None), beat=beat_in)
            # ---- compare ----
            assert bool(ctx.get(dut.mmio.ready)) == (taken and word is not None), \
                f"cycle {c}: mmio taken"
            got_rd = None
            if ctx.get(dut.host.rd_req.valid):
                p = ctx.get(dut.host.rd_req.payload)
                got_rd = dict(addr=int(p.addr), words=int(p.words), id=int(p.id))
            assert got_rd == rd_offer, f"cycle {c}: read request {got_rd} != {rd_offer}"
            got_wr = None
            if ctx.get(dut.host.wr.valid):
                p = ctx.get(dut.host.wr.payload)
                got_wr = dict(addr=int(p.addr), data=as_int(p.data), be=int(p.be),
                              last=int(p.last), mark=int(p.mark), tag=int(p.tag))
            assert got_wr == wr_offer, f"cycle {c}: write {got_wr} != {wr_offer}"
            for first, frame in sent:
                for k, b in enumerate(frame_to_beats(frame, 64)):
                    expected_beats[first + k] = b
            sent.clear()
            got_beat = as_int(ctx.get(dut.o.payload)) if ctx.get(dut.o.valid) else None
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
                old = host.get(got_wr["addr"], 0)
                keep = sum(0xFF << 8 * k for k in range(64) if not got_wr["be"] >> k & 1)
                host[got_wr["addr"]] = (old & keep) | (got_wr["data"] & ~keep)
                stats["writes"].append((c, got_wr))
                if got_wr["mark"]:         # (the requester marks its CQEs only)
                    assert cfg.cq_base <= got_wr["addr"] < cfg.cq_base + (1 << cfg.cq_log2)
                    stats["cqes"].append((c, got_wr["addr"]))
            if got_beat is not None:
                beat_d = unpack_beat(64, got_beat)
                frame_rx.append(beat_d)
                if beat_d[3]:
                    raw = b"".join(data.to_bytes(64, "little")[:nbytes]
                                   for data, nbytes, _, _ in frame_rx)
                    frame_rx.clear()
                    stats["frames"] += 1
                    stats["wire"].append((c, raw))
                    t = max(c + reply_delay, reply_free)
                    for reply in peer.frame(raw, stats["frames"]):
                        beats = frame_to_beats(reply, 64)
                        for k, b in enumerate(beats):
                            in_beats[t + k] = b
                        in_done[t + len(beats) - 1] = reply
                        t += len(beats)
                        stats["acks"] += 1
                    reply_free = t
            if word is not None or rd_word is not None or beat is not None or any(
                    x is not None for x in (got_rd, got_wr, got_beat)):
                last_move = c
            model.commit()
            await ctx.tick()
        stats["counters"] = {
            n: int(ctx.get(getattr(dut.read, n[5:]) if n.startswith("read_") else getattr(dut, n)))
            for n in model.counters()}

    run_sim(dut, bench, deadline_cycles=cycles + 10)
    assert stats["counters"] == model.counters()
    return stats, host, model
