"""Soak of the NIC with link-level retry: many stores over faulty wires, in chunks.

Each chunk resets the design (the memories keep their contents), loads every node's
command player (through :class:`tb.nic.testbench.NicTestbench`) with ``per_chunk``
stores (all-to-all, 64 to 256 bytes, each sender in its own slice of every memory; the
wires damage frames, sequence tags and ACK/NAKs at the parameters' rates) and
lets the simulator run until the receivers have
counted every frame or the chunk's cycle budget runs out (a hang). Python wakes up once
every ``POLL`` cycles, never per cycle. At the end of each chunk the memories are read
and compared byte for byte with what the stores sent (independently of the model).

Every chunk (the first of ``model_stores`` stores per node, then ``chunks`` of
``per_chunk``) is also run through the golden model, chunked with carried state: the
model's run of a chunk starts, like the design after its reset, with every memory as the
model's own run of the previous chunk left it (never the RTL's), so each chunk compares
the receivers' counters, the retry links' counters, the cycle of every memory write and
the whole memories with the model's. A mismatch in any chunk counts (``mismatches``)
and fails the test. ``break_model_chunk`` (a test hook) gives the model of that chunk
node 0's command stalls with the wrong seed: a broken model that must be caught there.

The cost of recovery, by the soak's one definition for both designs
(:mod:`tb.soak.recovery`): ``recovery_cycles`` sums over chunks how many cycles later the
chunk's last memory write at the receivers lands in the model's run than in the model's
run of the same chunk (same stores, stalls and starting memories) with every fault rate
0; that run is the model only, no simulation, and its time is counted in
``model_seconds`` (``baseline_seconds`` alone). ``replay_cycles`` sums the links'
``tx_replay_cycles`` (cycles spent resending), the figure ``recovery_cycles`` used to be.

With ``switch_drops`` = K (a top with the per-peer retry and ``switch_faults``) each
chunk also drops K frames inside the switch at each egress (frame numbers drawn below
the chunk's store frames to that egress, so every one is reached), the chunk runs until
every frame is received and every sender has nothing outstanding, and the comparison
adds the switch's ``drop_fault`` and every sender's and receiver's per-peer registers;
``switch_dropped`` sums the drops, which ``recovered`` includes, ``peer_resent`` the
frames the senders sent again end to end.

Writes ``soak_nic.json`` in the run folder (read by ``scripts/soak.py``): the totals,
``chunks`` (planned), ``chunks_compared``, ``mismatches`` and ``per_chunk`` (``[{chunk,
messages, compared, mismatches, recovered, recovery_cycles}]``).
"""

import json
import random
import time
from pathlib import Path

import cocotb
from cocotb.triggers import ClockCycles

from pymodel.fabric.faulty_link import FaultSettings
from pymodel.nic.system import NicSystemModel, Store
from spec.nic import COUNTERS
from spec.ports import PEER_RETRY_PORTS
from tb.cosim import cosim_params
from tb.nic.testbench import NicTestbench
from tb.soak.recovery import nic_chunk_recovery

#: Cycles between two looks at the counters.
POLL = 512
SIZES = (64, 128, 128, 128, 192, 256)


def chunk_stores(rng, nodes, width, mem_bytes, count):
    """``count`` stores per node to the other nodes, each sender in its own slice."""
    share = mem_bytes // nodes
    stores = {}
    for p in range(nodes):
        stores[p] = []
        for _ in range(count):
            n = rng.choice(SIZES)
            dst = rng.choice([q for q in range(nodes) if q != p])
            addr = p * share + rng.randrange(0, (share - n) // width + 1) * width
            stores[p].append(Store(dst, addr, rng.randbytes(n)))
    return stores


def _words(buf, width):
    return [int.from_bytes(buf[k:k + width], "little") for k in range(0, len(buf), width)]


@cocotb.test()
async def nic_soak(dut):
    p = cosim_params()
    w, nodes, mw = p["width"], p["nodes"], p["mem_words"]
    rng = random.Random(p["seed"])
    k_drops = p.get("switch_drops") or 0
    tb = NicTestbench(dut, nodes, w, mw, switch_faults=bool(k_drops))
    ideal = {q: bytearray(mw * w) for q in range(nodes)}
    totals = dict(messages=0, frames=0, recovered=0, lost=0, corrupted_bytes=0, hangs=0,
                  retransmissions=0, recovery_cycles=0, replay_cycles=0, cycles=0,
                  duplicates_discarded=0,
                  wire_dropped=0, wire_corrupted=0, wire_duplicated=0, wire_beats_lost=0,
                  wire_tags_corrupted=0, wire_acks_dropped=0, wire_acks_corrupted=0,
                  switch_dropped=0, peer_resent=0, chunks=0, chunks_compared=0, mismatches=0,
                  model_seconds=0.0,
                  baseline_seconds=0.0)
    plan = [p["model_stores"]] + [p["per_chunk"]] * p["chunks"]
    totals["chunks"] = len(plan)
    per_chunk = []
    pr = dict(completion="e2e", peer_retry=True, peer_window=p["peer_window"],
              coalesce=p["coalesce"], flush_idle=p["flush_idle"], timeout=p["timeout"],
              switch_faults=True) if k_drops else {}
    model = NicSystemModel(w, p["framing"], nodes, p["link_latency"], mw, p["max_payload"],
                           p["credits"], retry=True, **pr)
    model_mem = {q: [0] * mw for q in range(nodes)}   # the model's own carried state
    t_start = time.perf_counter()
    for index, count in enumerate(plan):
        settings = FaultSettings(seed=(p["seed"] * 977 + 16 * index) & 0xFFFF or 1,
                                 drop_rate=p["drop_rate"], corrupt_rate=p["corrupt_rate"],
                                 dup_rate=p["dup_rate"], tag_rate=p.get("tag_rate", 0),
                                 ack_drop_rate=p.get("ack_drop_rate", 0),
                                 ack_corrupt_rate=p.get("ack_corrupt_rate", 0))
        stores = chunk_stores(rng, nodes, w, mw * w, count)
        stalls = {q: (101 + 7 * q + index, p["stall_rate"]) for q in range(nodes)}
        drops = _switch_drops(rng, stores, w, p["max_payload"], k_drops) if k_drops else None
        tb.load(stores, list(range(nodes)), stalls=stalls, link_settings=settings,
                switch_drops=drops)
        tb.arm()
        frames = sum(len(s.segments(w, p["max_payload"])) for q in stores
                     for s in stores[q])
        beats = sum(len(s.beats(w)) for q in stores for s in stores[q])
        budget = 40 * beats + 20_000 + (8 * p["timeout"] * (1 + k_drops) if k_drops else 0)
        await tb.harness.reset()
        got, hang, cycles = 0, 0, 0
        while True:
            await ClockCycles(dut.clk, POLL)
            cycles += POLL
            got = sum(sum(tb.counters(q).values()) for q in range(nodes))
            if got >= frames and (not k_drops or _acknowledged(tb, nodes)):
                break
            if cycles >= budget:
                hang = 1
                dut._log.error("chunk %d: hang: %d of %d frames after %d cycles", index,
                               got, frames, cycles)
                break
        # Let the last ACKs (and with the per-peer retry, late completions) settle.
        await ClockCycles(dut.clk, 512 if k_drops else 64)
        end = int(dut.now.value)
        for q in range(nodes):
            for s in stores[q]:
                ideal[s.dst][s.addr:s.addr + len(s.payload)] = s.payload
        mems = {q: tb.memory(q) for q in range(nodes)}
        bad = 0
        for q in range(nodes):
            have = b"".join(v.to_bytes(w, "little") for v in mems[q])
            bad += sum(a != b for a, b in zip(have, ideal[q], strict=True))
        ok = sum(tb.counters(q)["frames_ok"] for q in range(nodes))
        links = {k: v for q in range(nodes) for k, v in tb.link_counters(q).items()}
        damage = {k: sum(v[f"link_{k}"] for v in links.values())
                  for k in ("dropped", "corrupted", "duplicated", "lost", "tag_corrupted",
                            "acks_dropped", "acks_corrupted")}
        totals["messages"] += sum(len(v) for v in stores.values())
        totals["frames"] += frames
        totals["lost"] += frames - ok
        totals["corrupted_bytes"] += bad
        totals["hangs"] += hang
        totals["retransmissions"] += sum(v["tx_resent_frames"] for v in links.values())
        totals["replay_cycles"] += sum(v["tx_replay_cycles"] for v in links.values())
        totals["duplicates_discarded"] += sum(v["rx_duplicates"] for v in links.values())
        damaged = (damage["dropped"] + damage["corrupted"] + damage["duplicated"]
                   + damage["tag_corrupted"])
        totals["recovered"] += damaged
        for k in ("dropped", "corrupted", "duplicated"):
            totals[f"wire_{k}"] += damage[k]
        totals["wire_tags_corrupted"] += damage["tag_corrupted"]
        totals["wire_acks_dropped"] += damage["acks_dropped"]
        totals["wire_acks_corrupted"] += damage["acks_corrupted"]
        totals["wire_beats_lost"] += damage["lost"]
        totals["cycles"] += end
        if k_drops:                 # frames lost inside the switch, recovered end to end
            lost_inside = tb.switch_counters()["drop_fault"]
            totals["switch_dropped"] += lost_inside
            totals["peer_resent"] += sum(sum(_peer_words(tb, q, "resent", nodes))
                                         for q in range(nodes))
            totals["recovered"] += lost_inside
            damaged += lost_inside
        t_model = time.perf_counter()
        model_stalls = dict(stalls)
        if index == p.get("break_model_chunk"):
            model_stalls[0] = (stalls[0][0] + 1, stalls[0][1])
        bad_items, want = _compare_with_model(tb, model, stores, model_stalls, settings,
                                              mems, links, model_mem, index, drops)
        # The same chunk without faults, from the same memories (model only).
        t_base = time.perf_counter()
        recovery = nic_chunk_recovery(model, stores, model_stalls, settings, model_mem,
                                      want)
        totals["recovery_cycles"] += recovery
        totals["baseline_seconds"] += time.perf_counter() - t_base
        model_mem = want["mem"]          # the faulty run's memories carry on
        totals["model_seconds"] += time.perf_counter() - t_model
        totals["chunks_compared"] += 1
        totals["mismatches"] += len(bad_items)
        per_chunk.append(dict(chunk=index, messages=sum(len(v) for v in stores.values()),
                              compared=True, mismatches=len(bad_items), recovered=damaged,
                              recovery_cycles=recovery))
        elapsed = time.perf_counter() - t_start
        dut._log.info("chunk %d/%d: %d messages so far, %d cycles, %d sent again, "
                      "%d lost, %d bad bytes, %d model mismatches, %.0f messages/s",
                      index + 1, len(plan), totals["messages"], end,
                      totals["retransmissions"], totals["lost"], totals["corrupted_bytes"],
                      totals["mismatches"], totals["messages"] / elapsed)
        if hang:
            break
    totals["seconds"] = round(time.perf_counter() - t_start, 1)
    totals["model_seconds"] = round(totals["model_seconds"], 1)
    totals["baseline_seconds"] = round(totals["baseline_seconds"], 1)
    Path("soak_nic.json").write_text(json.dumps(dict(totals, per_chunk=per_chunk,
                                                     token=p.get("token"))))
    assert totals["lost"] == 0 and totals["corrupted_bytes"] == 0 and not totals["hangs"]
    assert totals["mismatches"] == 0
    assert totals["chunks_compared"] == totals["chunks"]


def _switch_drops(rng, stores, width, max_payload, k):
    """``k`` frame numbers per egress (fewer when fewer store frames go there), drawn
    below the count of the chunk's store frames to that egress."""
    to = {}
    for ss in stores.values():
        for s in ss:
            to[s.dst] = to.get(s.dst, 0) + len(s.segments(width, max_payload))
    return {o: sorted(rng.sample(range(n), min(k, n))) for o, n in to.items()}


def _peer_words(tb, q, name, nodes):
    """Node ``q``'s per-peer port ``name``, one 16-bit value per peer."""
    word = int(tb.harness.port(f"peer__{q}__{name}").value)
    return [word >> (16 * d) & 0xFFFF for d in range(nodes)]


def _acknowledged(tb, nodes):
    """Every sender of the per-peer retry has nothing outstanding (``una`` = ``next_psn``
    towards every destination)."""
    h = tb.harness
    return all(int(h.port(f"peer__{q}__una").value)
               == int(h.port(f"peer__{q}__next_psn").value) for q in range(nodes))


def _compare_with_model(tb, model, stores, stalls, settings, mems, links, model_mem, index,
                        drops=None):
    """Chunk ``index`` against the golden model ``model``, whose run starts from its own
    memories ``model_mem`` (the previous chunk's): receiver counters, link counters,
    whole memories and the cycle of every memory write (with ``drops``, the switch's
    frames to drop: its counters and every per-peer register too). Returns
    ``(mismatched items, the model's run)`` (its ``mem``: the memories after the chunk);
    the mismatches are logged."""
    nodes = len(mems)
    want = model.run(stores, list(range(nodes)), stalls, link_settings=settings,
                     mem=model_mem, switch_drops=drops)
    bad = []
    if drops is not None:
        if tb.switch_counters() != want["switch"]:
            bad.append("switch counters")
        for q in range(nodes):
            for n in PEER_RETRY_PORTS:
                if _peer_words(tb, q, n, nodes) != want["peer"][q][n]:
                    bad.append(f"peer{q} {n}")
    for q in range(nodes):
        counters = tb.counters(q)
        for c in COUNTERS:
            if counters[c] != want["counters"][q][c]:
                bad.append(f"{c}{q}")
        if mems[q] != want["mem"][q]:
            bad.append(f"mem{q}")
        for side in ("up", "down"):
            if links[f"{side}{q}"] != want["links"][f"{side}{q}"]:
                bad.append(f"{side}{q} link counters")
        items, cycles = tb.write_events(q)
        if int(tb.harness.port(f"wr{q}__overflow").value):
            bad.append(f"wr{q} recorder overflow (writes not all recorded)")
        if items != [tb.write_event(a, be) for a, be in want["wr"][q][0]]:
            bad.append(f"wr{q} write addresses and byte enables")
        if cycles != want["wr"][q][1]:
            bad.append(f"wr{q} write cycles")
    log = tb.dut._log.error if bad else tb.dut._log.info
    log("chunk %d against the model (%d cycles): %s", index, want["cycles"],
        ", ".join(bad) if bad else "equal")
    return bad, want
