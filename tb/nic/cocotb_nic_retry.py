"""cocotb test of NicTop with link-level retry on faulty wires, against the golden model.

Stimulus is loaded before reset (command beats, node ids, the switch table, the fault
settings of the wires); the recorders, counters and memories are read in bulk at the
end. Besides RTL = model on every frame, write, credit, counter and memory word, the
test checks, independently of the model, that nothing was lost or corrupted: every
store's bytes are in its destination's memory and no frame was dropped by a receiver.

With ``completion="e2e"`` (``coalesce``, ``flush_idle``, ``timeout``: the top's) the
completion frames share the reliable links with the stores: every completion at each
tracker and the trackers' ports are compared too (:mod:`tb.nic.e2e_check`), and,
independently of the model, the retry hides every wire fault from the end-to-end layer:
each sender's tracker counts every frame it sent as completed, nothing outstanding, no
timeout, no completion dropped.
"""

import random
import time

import cocotb

from analysis.scenarios.nic import table_writes
from pymodel.fabric.faulty_link import FaultSettings
from pymodel.nic.system import NicSystemModel, Store
from spec.nic import COUNTERS
from tb.cosim import cosim_params
from tb.nic.e2e_check import arm_completions, compare_completions, read_completions
from tb.nic.testbench import NicTestbench
from tb.scoreboard import Scoreboard


def retry_stores(*, nodes, width, window, max_payload, seed, count, dst=None):
    """``count`` stores per node to random nodes (itself included; every store to node
    ``dst`` if given: an incast), 1 to ``2 * max_payload`` bytes (so some are cut in
    segments), each sender in its own ``window / nodes`` slice of every memory: the
    final memories do not depend on how the senders' frames interleave."""
    rng = random.Random(seed)
    share = window // nodes
    stores = {}
    for p in range(nodes):
        stores[p] = []
        for _ in range(count):
            n = rng.randint(1, min(2 * max_payload, share))
            addr = p * share + rng.randrange(0, share - n + 1) // width * width
            to = rng.randrange(nodes)
            stores[p].append(Store(to if dst is None else dst, addr, rng.randbytes(n)))
    return stores


def expected_memory(stores, node_ids, mem_words, width):
    """Each node's memory after all stores, in the order each sender sent them (the
    senders of :func:`retry_stores` never write the same bytes)."""
    port_of = {n: p for p, n in enumerate(node_ids)}
    mems = {p: bytearray(mem_words * width) for p in range(len(node_ids))}
    for p in sorted(stores):
        for s in stores[p]:
            q = port_of[s.dst]
            mems[q][s.addr:s.addr + len(s.payload)] = s.payload
    return {q: [int.from_bytes(m[k:k + width], "little") for k in range(0, len(m), width)]
            for q, m in mems.items()}


async def _check_completions(sb, tb, want, cp, stores, p):
    """``e2e``: the completions and tracker ports against the model, and against the
    stores alone: every frame sent completed, none outstanding, timed out or dropped,
    no completion refused (the links deliver each frame once, in order, undamaged)."""
    nodes = p["nodes"]
    ports, counters = await compare_completions(sb, tb, want, cp)
    sent = {q: dict.fromkeys(range(nodes), 0) for q in range(nodes)}
    for q, ss in stores.items():
        for s in ss:
            sent[q][s.dst] += len(s.segments(p["width"], p["max_payload"]))
    for q in range(nodes):
        for d in range(nodes):
            sb.equal(f"intent completed{q}_{d}", ports[q]["completed"][d], sent[q][d])
            for name in ("outstanding", "timeouts", "dropped"):
                sb.equal(f"intent {name}{q}_{d}", ports[q][name][d], 0)
        sb.equal(f"intent cpl_bad{q}", counters[q]["cpl_bad"], 0)
    sb.equal("intent completions sent = accepted", sum(c["cpl_sent"] for c in
                                                       counters.values()),
             sum(c["cpl_ok"] for c in counters.values()))


@cocotb.test()
async def nic_retry_matches_model(dut):
    p = cosim_params()
    w, nodes = p["width"], p["nodes"]
    settings = FaultSettings(**p["faults"])
    e2e = p.get("completion", "credit") == "e2e"
    e2e_kw = dict(completion="e2e", coalesce=p["coalesce"], flush_idle=p["flush_idle"],
                  timeout=p["timeout"]) if e2e else {}
    model = NicSystemModel(w, p["framing"], nodes, p["link_latency"], p["mem_words"],
                           p["max_payload"], p["credits"], retry=True,
                           fabric=p.get("fabric", "board"), **e2e_kw)
    stores = retry_stores(nodes=nodes, width=w, window=p["mem_words"] * w,
                          max_payload=p["max_payload"], seed=p["seed"], count=p["count"],
                          dst=p.get("incast"))
    node_ids = list(range(nodes))
    stalls = {q: (101 + 7 * q, p.get("stall_rate", 0)) for q in range(nodes)}
    tbl = table_writes(node_ids, nodes)
    t0 = time.perf_counter()
    want = model.run(stores, node_ids, stalls, table_writes=tbl, link_settings=settings)
    t_model = time.perf_counter() - t0

    tb = NicTestbench(dut, nodes, w, p["mem_words"])
    tb.load(stores, node_ids, stalls=stalls, table=tbl, link_settings=settings)
    tb.arm(want)
    if e2e:
        arm_completions(tb, want)
    t0 = time.perf_counter()
    await tb.run(timeout_cycles=4 * want["cycles"] + 2000, until=want["cycles"] + 8)
    cp = await read_completions(tb) if e2e else None
    dut._log.info("model %d cycles in %.2f s; simulator in %.2f s", want["cycles"],
                  t_model, time.perf_counter() - t0)

    sb = Scoreboard(dut._log)
    got = tb.compare(sb, want, links=True)
    if e2e:
        await _check_completions(sb, tb, want, cp, stores, p)
    ideal = expected_memory(stores, node_ids, p["mem_words"], w)
    for q in range(nodes):
        # Independent of the model: nothing lost, nothing corrupted, nothing dropped.
        sb.compare(f"mem{q} = every store's bytes", got[q]["mem"], ideal[q])
        counters = tb.counters(q)
        sb.equal(f"drops at node {q}", sum(counters[c] for c in COUNTERS
                                           if c != "frames_ok"), 0)
    damage = sum(want["links"][k][f"link_{n}"] for k in want["links"]
                 for n in ("dropped", "corrupted", "duplicated", "tag_corrupted",
                           "acks_dropped", "acks_corrupted"))
    resent = sum(want["links"][k]["tx_resent_frames"] for k in want["links"])
    dups = sum(want["links"][k]["rx_duplicates"] for k in want["links"])
    dut._log.info("wire damage %d frames; %d frames sent again; %d duplicates discarded",
                  damage, resent, dups)
    kinds = sorted({m.split("[")[0].split(":")[0] for m in sb.mismatches})
    if kinds:
        dut._log.error("mismatching: %s", ", ".join(kinds))
        for m in sb.mismatches[:12]:
            dut._log.error("  %s", m)
    sb.check()
    frames = sum(len(s.segments(w, p["max_payload"])) for q in stores for s in stores[q])
    assert sum(want["counters"][q]["frames_ok"] for q in range(nodes)) == frames
    if p["expect_damage"]:
        assert damage > 0 and resent + dups > 0, "no damage: the case tests nothing"
    if p.get("expect_signalling"):
        # Every damaged tag and ACK/NAK was caught by its check (counted by the RTL).
        links = [tb.link_counters(q) for q in range(nodes)]
        got_links = {k: v for d in links for k, v in d.items()}
        tags = sum(v["rx_tag_bad"] for v in got_links.values())
        bad_acks = sum(v["tx_acks_bad"] for v in got_links.values())
        flipped = sum(v["link_acks_corrupted"] for v in got_links.values())
        lost_acks = sum(v["link_acks_dropped"] for v in got_links.values())
        dut._log.info("tags caught %d, ACK/NAKs lost %d, damaged %d (caught %d)", tags,
                      lost_acks, flipped, bad_acks)
        assert tags > 0 and lost_acks > 0 and flipped > 0, "signalling not damaged"
        assert bad_acks == flipped
