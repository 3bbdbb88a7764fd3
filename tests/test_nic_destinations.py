"""The NIC at many destinations, model side (docs/nic.md, "4,096 destinations"): 16-bit
ids in the L2 MAC's bytes 4..5, the switch's route and source tables of 4,096 entries,
the sender's tracker as a memory with one read-modify-write port and a timer scan, and
a receiver's completion generator keyed by destination. Expectations are worked out
from the rules in the docstrings, not read off the model."""

import pytest

from pymodel.fabric.switch import SwitchModel
from pymodel.nic.completion_keyed import CompletionKeyedModel, keyed_entry_bits
from pymodel.nic.frames import build_completion, build_frame, parse_completion
from pymodel.nic.tracker_memory import TrackerMemoryModel, deadline_bits
from pymodel.packet import frame_to_beats, unpack_beat
from spec.fabric import check_source_write, check_table_entries
from spec.formats.nic import DESTINATIONS, check_id_bits, id_bytes, node_mac, wide_mac

W = 16


def test_wide_mac_is_the_node_mac_below_256_and_big_endian_above():
    assert wide_mac(0x0ABC) == bytes([0x02, 0, 0, 0, 0x0A, 0xBC])
    assert all(wide_mac(k) == node_mac(k) for k in range(256))
    # So an L2 frame between ids below 256 is the same bytes with either id width.
    for src, dst in ((0, 1), (3, 255)):
        assert (build_frame("l2", src, dst, 64, 8, bytes(8), id_bits=16)
                == build_frame("l2", src, dst, 64, 8, bytes(8)))
    assert id_bytes("l2", 16, "dst") == (4, 5) and id_bytes("l2", 16, "src") == (10, 11)
    assert id_bytes("compact", 8, "src") == (1,)


def test_wide_completion_round_trip():
    raw = build_completion("l2", 4095, 4096, 1, 7, 2, id_bits=16)
    got = parse_completion("l2", raw, id_bits=16)
    assert (got["src"], got["count"], got["dropped"], got["status"]) == (4095, 7, 2, 1)
    assert raw[:6] == bytes([2, 0, 0, 0, 0x10, 0x00])        # dst 4096 = 0x1000


@pytest.mark.parametrize("call,name", [
    (lambda: check_id_bits(12, "l2"), "id_bits must be 8 or 16"),
    (lambda: check_id_bits(16, "compact"), "id_bits 16 needs framing 'l2'"),
    (lambda: check_table_entries(1000, "l2"), "table_entries must be a power of two"),
    (lambda: check_table_entries(4096, "compact"), "needs framing 'l2'"),
    (lambda: wide_mac(1 << 16), "node must be an id"),
    (lambda: check_source_write(4, 4096, 0, entries=4096), "node must be a node id 0..4095"),
    (lambda: TrackerMemoryModel(0, 16), "destinations must be a positive integer"),
    (lambda: CompletionKeyedModel(W, "l2", 0, 4, 8, 0), "destinations must be"),
])
def test_bad_values_are_named(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def _route(sw, frame):
    """The egress port the switch sends ``frame`` to (idle switch, one frame)."""
    beats = [(d, n, f, la) for d, n, f, la in
             (unpack_beat(W, b) for b in frame_to_beats(frame, W))]
    out = {}
    for c in range(len(beats) + 8):
        arr = {0: beats[c]} if c < len(beats) else {}
        egress, _ = sw.cycle(c, arr)
        for o, b in egress.items():
            out.setdefault(o, []).append(b)
    assert len(out) == 1 and len(next(iter(out.values()))) == len(beats)
    return next(iter(out))


def test_switch_routes_by_the_16_bit_id():
    """4 ports, 4,096 entries written as designed: every destination ``d`` to port
    ``1 + d mod 3``; ids 0x0100 and 0x0000 are different entries (byte 4 counts)."""
    sw = SwitchModel(4, "l2", 64, width=W, table_entries=DESTINATIONS)
    for d in range(DESTINATIONS):
        sw.table[d] = 1 + d % 3
    for d in (0, 1, 0x100, 0x0FFF, 0x0ABC):
        frame = build_frame("l2", 4095, d, 0, 16, bytes(16), id_bits=16)
        assert _route(sw, frame) == 1 + d % 3
    # The 8-bit switch reads byte 5 only: 0x0100 goes where 0x0000 goes.
    narrow = SwitchModel(4, "l2", 64, width=W)
    narrow.table[0], narrow.table[1] = 2, 3
    assert _route(narrow, build_frame("l2", 0, 0x100, 0, 16, bytes(16), id_bits=16)) == 2


def test_switch_source_table_of_4096():
    """Source id 0x0203 owned by port 1: a frame from it on port 0 is dropped."""
    sw = SwitchModel(4, "l2", 64, width=W, table_entries=DESTINATIONS)
    sw.cycle(0, {}, src_write=(0x0203, 1))
    frame = build_frame("l2", 0x0203, 5, 0, 16, bytes(16), id_bits=16)
    beats = [unpack_beat(W, b) for b in frame_to_beats(frame, W)]
    for k in range(len(beats) + 6):
        sw.cycle(1 + k, {0: beats[k]} if k < len(beats) else {})
    assert sw.drop_spoofed == 1


def test_tracker_memory_counts_and_checks():
    t = TrackerMemoryModel(DESTINATIONS, 4096)
    for c in range(3):                       # 3 frames to the last destination
        t.step(c, {"sent": 4095})
    assert t.entry(4095)["outstanding"] == 3
    # count 2 of 3 outstanding: accepted; 6 is more than was sent; unknown and too high
    # sources are refused.
    assert t.step(10, {"cpl": (4095, True, 0, 2, 0)})["ok"]
    assert not t.step(11, {"cpl": (4095, True, 0, 6, 0)})["ok"]
    assert not t.step(12, {"cpl": (4095, False, 0, 3, 0)})["ok"]
    assert not t.step(13, {"cpl": (4096, True, 0, 1, 0)})["ok"]
    assert t.entry(4095) == {"outstanding": 1, "completed": 2, "dropped": 0, "timeouts": 0}
    assert (t.cpl_ok, t.cpl_bad) == (1, 3)


def test_tracker_memory_sent_waits_behind_a_completion():
    """A completion and a sent event in one cycle: the completion takes the port; the
    sent event is counted in the next cycle."""
    t = TrackerMemoryModel(8, 64)
    t.step(0, {"sent": 2})
    t.step(1, {"sent": 2, "cpl": (2, True, 0, 1, 0)})
    assert t.sent[2] == 1 and t.completed[2] == 1
    t.step(2, {})
    assert t.sent[2] == 2 and t.entry(2)["outstanding"] == 1


def test_tracker_memory_timeout_at_the_scan_visit():
    """8 destinations, timeout 16: a frame to 3 at cycle 0 (the port is taken, the scan
    waits), nothing after. The scan visits entry k at cycles ``1 + k + 8 j``; the
    deadline is 16, so the first visit at or after it, 20, counts the timeout, and the
    next deadline 36 is seen at 36."""
    t = TrackerMemoryModel(8, 16)
    t.step(0, {"sent": 3})
    for c in range(1, 40):
        t.step(c, {})
    assert t.timeout_cycles == [(20, 3), (36, 3)]
    assert deadline_bits(4096) == 14


def _beats_frame(beats):
    return b"".join(unpack_beat(W, b)[0].to_bytes(W, "little")[:unpack_beat(W, b)[1]]
                    for b in beats)


def test_keyed_generator_coalesce_and_idle_flush():
    """coalesce 4, flush_idle 10, sender 4096: 4 frames to 7 (cycles 0, 2, 4, 6) make it
    ready at 6, its completion is chosen at 7 (count 4); one frame to 4000 at 20 is
    flushed when 10 cycles old: ready at 30, chosen at 31; a frame from another source
    is not counted."""
    g = CompletionKeyedModel(W, "l2", DESTINATIONS, 4, 10, 0, sender=4096)
    events = {0: (4096, 0, 0, 7), 2: (4096, 1, 0, 7), 4: (4096, 0, 0, 7),
              6: (4096, 0, 0, 7), 20: (4096, 0, 0, 4000), 22: (5, 0, 0, 9)}
    frames = []
    for c in range(60):
        offer = g.offer(c)
        started = offer is not None
        if started:
            frames.append(_beats_frame(offer))
        g.step(c, {"ev": events.get(c), "started": started})
    assert [s[:2] for s in g.sent] == [(7, 7), (31, 4000)]
    got = [parse_completion("l2", f, id_bits=16) for f in frames]
    assert [(x["src"], x["count"], x["dropped"], x["status"]) for x in got] == [
        (7, 4, 1, 1), (4000, 1, 0, 0)]
    assert all(f[:6] == wide_mac(4096) for f in frames)
    assert g.count[9] == 0 and not g.busy()
    assert keyed_entry_bits(16) == 32 + 5 + 3


def test_keyed_generator_ack_request_is_at_once():
    g = CompletionKeyedModel(W, "l2", 16, 16, 100, 0, sender=0)
    g.step(0, {"ev": (0, 0, 1, 5)})
    g.step(1, {})
    assert g.sent == [(1, 5, 0, 1, 0)]


def test_system_model_at_512_destinations():
    """Node 0 (id 512) stores 600 x 128 B round robin to ids 0..511 over 3 receivers, the
    table written at setup as designed, the stores after it. Every store lands at the
    receiver ``1 + d mod 3`` and completes; consecutive stores to one id are 512 stores
    apart (thousands of cycles, far beyond the idle flush of 34), so every store gets a
    completion of its own: 600 completions, each destination's completed count its
    stores, nothing outstanding, no timeout; the frames carry the ids in MAC bytes
    4..5."""
    from analysis.scenarios.nic import destination_table_writes
    from pymodel.nic.store import Store
    from pymodel.nic.system import NicSystemModel

    d_max, nodes, n = 512, 4, 600
    m = NicSystemModel(64, "l2", nodes, 2, 512, 1024, None, completion="e2e",
                       destinations=d_max)
    tbl = destination_table_writes(d_max, nodes)
    assert len(tbl) == d_max + nodes and tbl[0] == (d_max, 0)
    stores = {0: [Store(k % d_max, (k * 128) % (512 * 64), bytes([k % 251]) * 128,
                        release=len(tbl)) for k in range(n)]}
    r = m.run(stores, [d_max + p for p in range(nodes)], table_writes=tbl)
    assert all(s["completion"] is not None and s["remote_write"] is not None
               for s in r["stores"])
    for p in range(1, nodes):
        assert r["counters"][p]["frames_ok"] == sum(1 + k % d_max % 3 == p for k in range(n))
    e2e = r["e2e"]
    assert sum(e2e[p]["cpl_sent"] for p in range(nodes)) == n
    ports = e2e[0]["ports"]
    assert ports["completed"] == [n // d_max + (d < n % d_max) for d in range(d_max)]
    assert not any(ports["outstanding"]) and not any(ports["timeouts"])
    frames = [m["frame"] for m in r["messages"]]
    assert [int.from_bytes(f[4:6], "big") for f in frames] == [k % d_max for k in range(n)]
    assert all(f[10:12] == d_max.to_bytes(2, "big") for f in frames)


@pytest.mark.parametrize("kw,name", [
    (dict(destinations=4097), "destinations must be None or a power of two"),
    (dict(destinations=256), "destinations must be None or a power of two"),
    (dict(destinations=4096, framing="compact"), "needs framing 'l2'"),
    (dict(destinations=4096, completion="credit"), "needs completion 'e2e'"),
])
def test_bad_destinations_named(kw, name):
    from pymodel.nic.system import NicSystemModel

    args = {"framing": "l2", "completion": "e2e", **kw}
    with pytest.raises(ValueError, match=name):
        NicSystemModel(64, args["framing"], 4, 2, 512, 1024, None,
                       completion=args["completion"], destinations=args["destinations"])


@pytest.mark.parametrize("destinations,timeout,cycles", [(64, 40, 1500), (4096, 4096, 300)])
def test_tracker_memory_rtl_matches_twin(destinations, timeout, cycles):
    """TrackerMemory (RTL) against its twin, cycle by cycle (Amaranth simulator): sent
    events and completions at most one every 2 cycles each (a frame is 2 beats or
    more), to tracked ids and to ids beyond the memory, completions right, stale,
    beyond what was sent, unknown; the polled entry, ``accepted``, ``timed_out`` and
    the counters equal the twin's every cycle; independently, accepted plus refused
    equal the completions offered, and (small case) timeouts happen; (small case) the
    records' read port gives the entry's counts of another id every cycle."""
    import random

    from rtl.nic.tracker_memory import TrackerMemory
    from tb.amsim import run_sim

    rng = random.Random(destinations)
    rec_port = destinations == 64           # the records' read port, on the small case
    dut = TrackerMemory(destinations, timeout, record_port=rec_port)
    twin = TrackerMemoryModel(destinations, timeout)
    ids = [0, 1, 2, 3, destinations - 1, destinations, destinations + 5]
    sent_total = {}
    offered = [0]

    async def bench(ctx):
        last_s = last_c = -2
        for c in range(cycles):
            dst = cpl = None
            if c - last_s >= 2 and rng.random() < 0.45:
                dst, last_s = rng.choice(ids), c
            if c - last_c >= 2 and rng.random() < 0.25:
                last_c = c
                src = rng.choice(ids)
                base = sent_total.get(src, 0)
                count = rng.choice([base, base + rng.randrange(1, 4),
                                    max(0, base - rng.randrange(0, 3))]) & 0xFFFF
                cpl = (src, rng.random() < 0.9, 0, count, rng.randrange(3))
            poll = rng.choice(ids[:5])
            ctx.set(dut.sent.valid, dst is not None)
            ctx.set(dut.sent.payload.dst, dst or 0)
            ctx.set(dut.cpl.valid, cpl is not None)
            if cpl is not None:
                offered[0] += 1
                p = dut.cpl.payload
                for sig, v in zip((p.src, p.known, p.status, p.count, p.dropped), cpl,
                                  strict=True):
                    ctx.set(sig, int(v))
            ctx.set(dut.poll, poll)
            want = twin.entry(poll)
            got = {k: ctx.get(getattr(dut, k)) for k in want}
            assert got == want, (c, poll)
            if rec_port:
                rid = rng.choice(ids[:5])
                ctx.set(dut.rec_id, rid)
                e = twin.entry(rid)
                assert (ctx.get(dut.rec_completed), ctx.get(dut.rec_dropped)) == (
                    e["completed"], e["dropped"]), (c, rid)
            n_tmo = len(twin.timeout_cycles)
            r = twin.step(c, {"sent": dst, "cpl": cpl})
            assert ctx.get(dut.accepted.valid) == bool(r.get("ok")), c
            tmo = twin.timeout_cycles[n_tmo:]
            assert ctx.get(dut.timed_out.valid) == bool(tmo), c
            if tmo:
                assert ctx.get(dut.timed_out.payload.dst) == tmo[0][1]
            await ctx.tick()
            assert (ctx.get(dut.cpl_ok), ctx.get(dut.cpl_bad)) == (twin.cpl_ok, twin.cpl_bad)
            if dst is not None:
                sent_total[dst] = sent_total.get(dst, 0) + 1

    run_sim(dut, bench)
    assert twin.cpl_ok > 0 and twin.cpl_bad > 0
    assert twin.cpl_ok + twin.cpl_bad == offered[0]
    if destinations == 64:
        assert twin.timeout_cycles


@pytest.mark.parametrize("width,coalesce,idle", [(16, 3, 9), (64, 2, 5)])
def test_keyed_generator_rtl_matches_twin(width, coalesce, idle):
    """CompletionKeyed (RTL) against its twin (Amaranth simulator): finished frames at
    most one every 2 cycles from the sender (id 0x1040) and from another source, to 6
    destinations of 64 and to ids beyond, some dropped, some with ``ack_req``; random
    backpressure on each completion's first beat. Each cycle the offer (valid) equals
    the twin's, each frame its bytes; independently, each destination's last
    completion counts all its frames and drops, and every frame is completed."""
    import random

    from rtl.nic.completion_keyed import CompletionKeyed
    from tb.amsim import run_sim

    rng = random.Random(width + coalesce)
    d_max, sender = 64, 0x1040
    dut = CompletionKeyed(width, d_max, coalesce, idle)
    twin = CompletionKeyedModel(width, "l2", d_max, coalesce, idle, 0, sender=sender)
    dsts = [0, 1, 7, 33, 63, 64, 300]
    events = []
    for k in range(500):
        if k % 2 == 0 and rng.random() < 0.7:
            src = sender if rng.random() < 0.9 else 5
            events.append((src, rng.random() < 0.2, rng.random() < 0.1, rng.choice(dsts)))
        else:
            events.append(None)
    events += [None] * (4 * idle + 200)
    nb = -(-60 // width)
    frames, got, want = [], [], []

    async def bench(ctx):
        ctx.set(dut.sender, sender)
        mid, frame = 0, b""
        for c, ev in enumerate(events):
            ctx.set(dut.ev.valid, ev is not None)
            if ev is not None:
                p = dut.ev.payload
                for sig, v in zip((p.src, p.dropped, p.ack_req, p.dst), ev, strict=True):
                    ctx.set(sig, int(v))
            ready = mid > 0 or rng.random() < 0.6
            ctx.set(dut.o.ready, ready)
            valid = ctx.get(dut.o.valid)
            offer = twin.offer(c)
            if mid == 0:
                got.append(bool(valid))
                want.append(offer is not None)
            started = False
            if valid and ready:
                data, n, last = (ctx.get(dut.o.payload.data), ctx.get(dut.o.payload.nbytes),
                                 ctx.get(dut.o.payload.last))
                frame += data.to_bytes(width, "little")[:n]
                started = mid == 0
                mid += 1
                if last:
                    assert mid == nb
                    frames.append(frame)
                    mid, frame = 0, b""
            twin.step(c, {"ev": ev, "started": started})
            await ctx.tick()
        assert ctx.get(dut.ack_req_seen) == twin.ack_req_seen
        assert ctx.get(dut.cpl_sent) == twin.cpl_sent

    run_sim(dut, bench)
    assert got == want
    assert twin.age_peak <= dut.age_depth
    assert len(frames) == len(twin.sent) > 0
    for f, (_c, d, status, count, dropped) in zip(frames, twin.sent, strict=True):
        assert f == build_completion("l2", d, sender, status, count, dropped, fcs=False,
                                     id_bits=16)
    for d in dsts[:5]:
        mine = [ev for ev in events if ev is not None and ev[0] == sender and ev[3] == d]
        last = [parse_completion("l2", f, id_bits=16) for f in frames
                if int.from_bytes(f[10:12], "big") == d][-1]
        assert (last["count"], last["dropped"]) == (len(mine), sum(e[1] for e in mine))
    assert not any(twin.pending) and not twin.busy()


@pytest.mark.parametrize("width,backpressure", [(8, False), (16, True)])
def test_switch_rtl_with_wide_tables_matches_twin(width, backpressure):
    """The switch with 8,192-entry tables (RTL) against its twin, cycle by cycle: route
    writes for 16-bit ids that differ only in byte 4, source writes that confine two ids
    to one port, then frames with those ids from every port (at W = 8 the source id is
    in beat 1). Every egress beat and credit equal the model's, and ``drop_spoofed``;
    independently, a frame reaches the port its id was written to."""
    import random

    from pymodel.packet import pack_beat
    from rtl.fabric.switch import Switch
    from tb.amsim import run_sim

    ports, entries, depth = 4, 8192, 64
    rng = random.Random(width)
    ids = [0x0005, 0x0105, 0x0FFF, 0x1000, 0x1ABC]
    routes = {d: rng.randrange(ports) for d in ids}
    owners = {0x0105: 2, 0x1000: 1}
    writes = [("t", d, p) for d, p in routes.items()] + [("s", d, p) for d, p in owners.items()]
    frames = {p: [] for p in range(ports)}
    for p in range(ports):
        for _ in range(4):
            dst, src = rng.choice(ids), rng.choice(ids)
            f = bytearray(rng.getrandbits(8) for _ in range(rng.randrange(24, 48)))
            f[0:6] = wide_mac(dst)
            f[6:12] = wide_mac(src)
            frames[p].append(bytes(f))
    dut = Switch(width, ports, "l2", depth, backpressure=backpressure, table_entries=entries)
    model = SwitchModel(ports, "l2", depth, backpressure=backpressure, width=width,
                        table_entries=entries)
    streams = {p: [b for f in frames[p] for b in frame_to_beats(f, width)]
               for p in range(ports)}
    cycles, start = 300, len(writes)
    ready = [[not backpressure or rng.random() >= 0.3 for _ in range(ports)]
             for _ in range(cycles)]
    arrivals, got, counter = [], [], []

    async def bench(ctx):
        for c in range(cycles):
            x = writes[c] if c < len(writes) else None
            for kind, port in (("t", dut.table_wr), ("s", dut.src_wr)):
                ctx.set(port.valid, x is not None and x[0] == kind)
                if x is not None and x[0] == kind:
                    ctx.set(port.payload.node, x[1])
                    ctx.set(port.payload.port, x[2])
            now = {}
            for p in range(ports):
                send = c >= start and bool(streams[p]) and (c + p) % 3 != 0
                ctx.set(dut.i[p].valid, send)
                if send:
                    beat = streams[p].pop(0)
                    ctx.set(dut.i[p].payload.as_value(), beat)
                    now[p] = unpack_beat(width, beat)
                ctx.set(dut.o[p].ready, ready[c][p])
            arrivals.append(now)
            out = [ctx.get(dut.o[p].payload.as_value())
                   if ctx.get(dut.o[p].valid) and ready[c][p] else None for p in range(ports)]
            got.append((out, [ctx.get(dut.credit[p]) for p in range(ports)]))
            await ctx.tick()
        counter.append(ctx.get(dut.counters.drop_spoofed))

    run_sim(dut, bench)
    assert not any(streams.values())
    want, pending = [], [None] * ports
    delivered = {p: [] for p in range(ports)}
    for c in range(cycles):
        x = writes[c] if c < len(writes) else None
        tw = x[1:] if x is not None and x[0] == "t" else None
        sw = x[1:] if x is not None and x[0] == "s" else None
        out, pops = model.cycle(c, arrivals[c], tw, ready=ready[c], src_write=sw)
        packed = [pack_beat(width, *out[p][:4]) if p in out else None for p in range(ports)]
        if backpressure:
            now = packed
        else:
            now, pending = pending, packed
        want.append((now, [int(p in pops) for p in range(ports)]))
        for p in range(ports):
            if p in out and out[p][2]:
                delivered[p].append(unpack_beat(width, pack_beat(width, *out[p][:4]))[0])
    assert got == want
    assert counter == [model.drop_spoofed] and model.drop_spoofed > 0
    for p, firsts in delivered.items():        # each frame at the port of its id
        for data in firsts:
            dst = int.from_bytes(data.to_bytes(width, "little")[4:6], "big")
            assert routes[dst] == p


def test_destination_state_bits_by_hand():
    """4,096 ids over 3 receivers, coalesce 16, flush_idle 34, timeout 4,096, 16 record
    slots. Sender: 4,096 x (4 x 16 + 14) = 319,488, the sent FIFO and scan pointer
    3 x 12 = 36, records 4,096 x (12 + 1) + 5 = 53,253. Receivers: 4,096 x (16 + 16 +
    5 + 3 + 12) = 212,992, and each an age FIFO of 64 x (12 + 16 + 16) = 2,816 and the
    held frame 64: 3 x 2,880 = 8,640."""
    from spec.nic import age_fifo_depth, destination_state_bits

    assert age_fifo_depth(34) == 64
    gen, trk = destination_state_bits(4096, 3, 16, 34, 4096, 16)
    assert trk == 319_488 + 36 + 53_253
    assert gen == 212_992 + 8_640


def test_destinations_scenario_round_robin_and_zipf():
    """Round robin visits every id in order; Zipf 0.99 over 4,096 ids gives id 0 about
    1 / H (H = sum of 1 / (i + 1) ** 0.99 over the ids, about 9.25) of 2,000 stores,
    more than any other id; a bad popularity is named."""
    from analysis.scenarios.nic import build_scenario

    kw = dict(nodes=4, width=64, window=512 * 64, max_payload=1024, seed=1,
              msg_bytes=128, messages=2000, destinations=4096)
    stores, ids, _ = build_scenario("destinations", **kw)
    assert ids == [4096, 4097, 4098, 4099]
    assert [s.dst for s in stores[0]] == [k % 4096 for k in range(2000)]
    stores, _, _ = build_scenario("destinations", popularity="zipf", **kw)
    dsts = [s.dst for s in stores[0]]
    h = sum(1 / (i + 1) ** 0.99 for i in range(4096))
    assert abs(dsts.count(0) - 2000 / h) < 4 * (2000 / h) ** 0.5
    assert dsts.count(0) == max(dsts.count(d) for d in set(dsts))
    with pytest.raises(ValueError, match="popularity must be one of"):
        build_scenario("destinations", popularity="hot", **kw)
    with pytest.raises(ValueError, match="scenario 'destinations' needs destinations"):
        build_scenario("destinations", **dict(kw, destinations=None))


@pytest.mark.parametrize("width", [8, 64])
def test_framer_with_16_bit_ids_builds_the_model_frames(width):
    """NicTxFramer with ``id_bits`` 16: stores from id 4096 to ids across the range (byte
    4 set and not), with stalls: each frame equals the model's wide frame byte for byte
    (header and payload; NicTx pads behind it)."""
    import random

    from pymodel.nic.store import Store
    from pymodel.packet import beats_to_frames
    from rtl.nic.tx_framer import NicTxFramer
    from spec.formats.nic import header_bytes, store_cmd_layout
    from tb.amsim import get_all, put_all, run_sim

    rng = random.Random(width)
    stores = [Store(d, width * rng.randrange(64), bytes(rng.getrandbits(8) for _ in range(n)),
                    ack_req=k % 2)
              for k, (d, n) in enumerate(((0, 1), (0x0ABC, 40), (4095, 128), (0x100, 7)))]
    dut = NicTxFramer(width, "l2", id_bits=16)
    want = [build_frame("l2", 4096, s.dst, s.addr, s.length, s.payload, fcs=False,
                        ack_req=s.ack_req, id_bits=16)[:header_bytes("l2") + s.length]
            for s in stores]
    layout = store_cmd_layout(width, 16)
    items = [layout.const({"dst": s.dst, "addr": s.addr, "length": s.length,
                           "ack_req": int(s.ack_req), "data": d, "nbytes": n, "first": f,
                           "last": la}).as_bits()
             for s in stores for d, n, f, la in s.beats(width)]
    nbeats = sum(-(-len(f) // width) for f in want)
    got = []

    async def source(ctx):
        ctx.set(dut.node_id, 4096)
        ctx.set(dut.start_ok, 1)
        await put_all(ctx, dut.cmd, items, (1, 1, 0, 1, 0))

    async def sink(ctx):
        got.extend(await get_all(ctx, dut.o, nbeats, (1, 0, 1)))

    run_sim(dut, source, sink)
    assert beats_to_frames([b for b, _ in got], width) == want
    with pytest.raises(ValueError, match="id_bits 16 needs framing 'l2'"):
        NicTxFramer(width, "compact", id_bits=16)


@pytest.mark.parametrize("width", [8, 64])
def test_rx_standing_for_destinations_matches_the_model(width):
    """NicRx as receiver 2 of 3 at 4,096 destinations (node id 4098) against NicRxModel,
    cycle by cycle: stores from the sender (4096) to ids it stands for (``d mod 3 ==
    1``), to ids it does not stand for and beyond the destinations, to its own id, one
    with a foreign MAC prefix, and a completion to it from id 0x0ABC. The writes, the
    counters, the ``ack`` events (with the destination id) and the ``cpl`` events equal
    the model's; independently, the frames taken are those to ids it stands for or to
    itself."""
    import random

    from pymodel.fcs import fcs_bytes
    from pymodel.nic.nic_rx import NicRxModel
    from pymodel.nic.window_table import WindowTableModel
    from rtl.nic.nic_rx import DropReason, NicRx
    from tb.amsim import run_sim

    w, depth, me, mp = width, 64, 4098, 4 * width
    dut = NicRx(w, "l2", mp, depth, completion="e2e", stands_for=(4096, 3, 2))
    model = NicRxModel(w, "l2", mp, depth, me, WindowTableModel(depth), None, 2, "e2e",
                       lambda d: d < 4096 and 1 + d % 3 == 2)
    rng = random.Random(width)

    def store(dst, addr, n, ack=0, prefix=None):
        f = bytearray(build_frame("l2", 4096, dst, addr, n, rng.randbytes(n), fcs=False,
                                  ack_req=ack, id_bits=16))
        if prefix is not None:
            f[6:10] = prefix
        return bytes(f) + fcs_bytes(bytes(f))

    frames = [store(1, 0, w), store(4093, w, 2 * w, 1), store(2, 0, w), store(4097, 0, 1),
              store(4098, 3 * w, w), store(4, 0, 5, prefix=bytes(4)), store(0x0400, 8 * w, 3),
              build_completion("l2", 0x0ABC, 4098, 0, 3, 1, id_bits=16)]
    beats, cyc = [], 4
    for f in frames:
        for b in frame_to_beats(f, w):
            beats.append((cyc, b))
            cyc += 1
        cyc += 2
    end = cyc + 4 * depth
    got = {"wr": [], "ack": {}, "cpl": {}}
    counters = {}

    async def bench(ctx):
        ctx.set(dut.node_id, me)
        k = 0
        for c in range(end):
            now = k < len(beats) and beats[k][0] == c
            ctx.set(dut.i.valid, now)
            if now:
                ctx.set(dut.i.payload.as_value(), beats[k][1])
                k += 1
            if ctx.get(dut.wr.valid):
                got["wr"].append((ctx.get(dut.wr.payload.addr), ctx.get(dut.wr.payload.be), c))
            if ctx.get(dut.ack.valid):
                a = dut.ack.payload
                got["ack"][c] = (ctx.get(a.src), bool(ctx.get(a.dropped)),
                                 ctx.get(a.ack_req), ctx.get(a.dst))
            if ctx.get(dut.cpl.valid):
                p = dut.cpl.payload
                got["cpl"][c] = (ctx.get(p.src), bool(ctx.get(p.known)), ctx.get(p.status),
                                 ctx.get(p.count), ctx.get(p.dropped))
            await ctx.tick()
        for name in ("frames_ok",) + tuple(f"drop_{r}" for r in DropReason.ORDER):
            counters[name] = ctx.get(getattr(dut, name))

    run_sim(dut, bench)
    for c, b in beats:
        model.step(c, {"i": unpack_beat(w, b) + (None,)})
    assert got["wr"] == [(a, be, c) for (a, be), c in zip(*model.wr, strict=True)]
    assert counters == model.counters
    assert got["ack"] == {c: (s, bool(d), r, t) for c, (s, d, r, t) in model.acks.items()}
    assert got["cpl"] == {c: (s, bool(k), st, n, d) for c, (s, k, st, n, d) in
                          model.cpls.items()}
    # Independently: ids 1, 4093 and 0x0400 (mod 3 == 1) and its own id are taken (the
    # foreign prefix is dropped at the window check), 2 and 4097 are not its.
    assert counters["frames_ok"] == 4 and counters["drop_dst"] == 2
    assert counters["drop_window"] == 1
    assert sorted(t for *_, t in got["ack"].values()) == [1, 0x0400, 4093, 4098]
    assert list(got["cpl"].values()) == [(0x0ABC, True, 0, 3, 1)]


def test_nic_tx_with_16_bit_ids_sends_the_model_frames():
    """NicTx (``e2e``, ``id_bits`` 16) from id 4096: a store to 4095 cut in two segments
    and one to 0x0123: the link carries the model's frames (wide MACs, padding, FCS)
    and a ``sent`` event per frame with its 16-bit destination, in order."""
    from pymodel.nic.nic_tx import NicTxModel
    from pymodel.nic.store import Store
    from pymodel.packet import beats_to_frames
    from rtl.nic.nic_tx import NicTx
    from spec.formats.nic import store_cmd_layout
    from tb.amsim import get_all, put_all, run_sim

    w, mp = 16, 64
    stores = [Store(4095, 0, bytes(range(100))), Store(0x0123, 64, bytes(20))]
    model = NicTxModel(w, "l2", mp, 64, 4096, "e2e", id_bits=16)
    want = [f for s in stores for _, _, f in model.frames(s)]
    dut = NicTx(w, "l2", 64, mp, completion="e2e", id_bits=16)
    layout = store_cmd_layout(w, 16)
    items = [layout.const({"dst": s.dst, "addr": s.addr, "length": s.length, "ack_req": 0,
                           "data": d, "nbytes": n, "first": f, "last": la}).as_bits()
             for s in stores for d, n, f, la in s.beats(w)]
    nbeats = sum(-(-len(f) // w) for f in want)
    got, sent = [], []

    async def source(ctx):
        ctx.set(dut.node_id, 4096)
        await put_all(ctx, dut.cmd, items, (1,))

    async def sink(ctx):
        got.extend(await get_all(ctx, dut.o, nbeats, (1,)))

    async def events(ctx):
        async for _clk, _rst, valid, dst in ctx.tick().sample(dut.sent.valid,
                                                              dut.sent.payload.dst):
            if valid:
                sent.append(dst)
            if len(sent) == 3:
                return

    run_sim(dut, source, sink, events)
    assert beats_to_frames([b for b, _ in got], w) == want
    assert sent == [4095, 4095, 0x0123]


@pytest.mark.parametrize("destinations,slots,cycles", [(64, 4, 800), (4096, 16, 300)])
def test_recorder_queue_rtl_matches_twin(destinations, slots, cycles):
    """CompletionRecorderQueue (RTL) against its twin (CompletionRecorderModel with
    ``id_bits`` 16) cycle by cycle in the Amaranth simulator: random accepted
    completions of a few ids (and ids beyond the table), the write port free and ready
    at random, the counts read through ``read_id``; the offered record (valid, address,
    data, tag) equals the twin's every cycle. Independently of both: the tag is the
    record's ring slot, the owner bit flips at each wrap, and every id accepted and not
    pending at the end is written after its last acceptance with that acceptance's
    count."""
    import random

    from pymodel.fields import unpack
    from pymodel.nic.completion_record import CompletionRecorderModel
    from rtl.nic.completion_record import CompletionRecorderQueue
    from spec.formats.nic import wide_record_layout
    from tb.amsim import run_sim

    rng = random.Random(destinations + slots)
    width, depth = 64, 512
    dut = CompletionRecorderQueue(destinations, width, depth, slots)
    twin = CompletionRecorderModel(destinations, width, depth, slots, id_bits=16)
    ids = [0, 1, 5, 9, destinations - 1, destinations, destinations + 3]
    completed, dropped = [0] * destinations, [0] * destinations
    last_acc, written = {}, []

    async def bench(ctx):
        for c in range(cycles):
            acc = rng.choice(ids) if rng.random() < 0.3 else None
            free, ready = rng.random() < 0.5, rng.random() < 0.8
            ctx.set(dut.accepted.valid, acc is not None)
            ctx.set(dut.accepted.payload.src, acc or 0)
            ctx.set(dut.free, free)
            ctx.set(dut.wr.ready, ready)
            rid = ctx.get(dut.read_id)
            ctx.set(dut.completed, completed[rid])
            ctx.set(dut.dropped, dropped[rid])
            want = twin.offer(free, completed, dropped)
            assert ctx.get(dut.wr.valid) == (want is not None), c
            if want is not None:
                got = (ctx.get(dut.wr.payload.addr), ctx.get(dut.wr.payload.data),
                       ctx.get(dut.wr.payload.tag))
                assert got == (want["addr"], want["data"], want["tag"]), c
                if ready:
                    written.append((c, unpack(wide_record_layout, want["data"]),
                                    want["addr"], want["tag"]))
            twin.step(acc, want is not None and ready)
            if acc is not None and acc < destinations:
                completed[acc] = (completed[acc] + rng.randrange(1, 4)) & 0xFFFF
                dropped[acc] = rng.randrange(3)
                last_acc[acc] = (c, completed[acc])
            await ctx.tick()

    run_sim(dut, bench)
    assert len(written) > 2 * slots
    for d, (c, count) in last_acc.items():
        if d not in twin.pending:
            assert any(cy > c and r["peer"] == d and r["count"] == count
                       for cy, r, _, _ in written), d
    for k, (_, r, addr, tag) in enumerate(written):
        assert addr == depth - slots + k % slots and tag == k % slots
        assert r["owner"] == 1 ^ (k // slots) % 2


def test_recorder_queue_writes_in_acceptance_order():
    """Ids 9, 3, 7 accepted in that order while the write port is busy are written 9, 3,
    7 (the order of acceptance, not the lowest first); an id accepted again while
    pending is written once."""
    from pymodel.fields import unpack
    from rtl.nic.completion_record import CompletionRecorderQueue
    from spec.formats.nic import wide_record_layout
    from tb.amsim import run_sim

    dut = CompletionRecorderQueue(4096, 64, 64, 4)
    peers = []

    async def bench(ctx):
        ctx.set(dut.wr.ready, 1)
        for src in (9, 3, 9, 7):
            ctx.set(dut.accepted.valid, 1)
            ctx.set(dut.accepted.payload.src, src)
            await ctx.tick()
        ctx.set(dut.accepted.valid, 0)
        ctx.set(dut.free, 1)
        for _ in range(6):
            if ctx.get(dut.wr.valid):
                peers.append(unpack(wide_record_layout, ctx.get(dut.wr.payload.data))["peer"])
            await ctx.tick()

    run_sim(dut, bench)
    assert peers == [9, 3, 7]


@pytest.mark.parametrize("slots,needle", [(3, "power of two"), (0, "slots must be"),
                                          (256, "slots must be")])
def test_record_writers_refuse_bad_slots_by_name(slots, needle):
    from rtl.nic.completion_record import CompletionRecorder, CompletionRecorderQueue

    for make in (lambda: CompletionRecorder(4, 64, 256, slots),
                 lambda: CompletionRecorderQueue(64, 64, 256, slots)):
        with pytest.raises(ValueError, match=needle):
            make()
