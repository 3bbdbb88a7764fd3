"""cocotb test of NicTop: every frame, write, credit and stamp against the golden model.

The test only loads stimulus (command beats, fault list, node ids, stall seeds) before
reset, lets the simulator run until the recorders hold what the model predicts, and then
drains the recorders and the local memories in bulk (:class:`tb.nic.testbench.NicTestbench`).
Besides RTL = model, every L2 frame the RTL sent is decoded by scapy with its FCS
recomputed by zlib (:func:`tb.nic.wirecheck.l2_frame_problems`). It writes its
measurements to ``nic_results.json`` in its run folder (read back by
:mod:`tb.nic.headline`): the RTL figures from the RTL's own stamps and recorded frames,
the model figures from the model.

With ``completion="e2e"`` (and the top built with it) each node's last store asks for its
completion at once (:func:`analysis.scenarios.nic.mark_last_queued`; with ``pcie`` the
flag rides on the last host write's register offset), and the completions at every tracker
and the trackers' ports are compared too (:mod:`tb.nic.e2e_check`), and the figures
count end to end: ``completion_cycles`` to the completion that covers the store's last
frame at its sender, ``wire_bytes`` plus the completion frames' bytes per store,
``acks_sent``/``acks_received`` the completions per store, ``inflight_bits`` plus the
sender's tracker and the receiver's generator (:func:`spec.nic.completion_state_bits`).
With ``records`` (the top built with them) a store completes when the record that covers
it reaches its sender's memory (recorder ``cq<p>``, compared record by record and cycle
by cycle with the model), and ``inflight_bits`` adds the record writers'
(:func:`spec.nic.record_state_bits`).

With ``warmup`` (cycles; a back-to-back run) each sender's first store is a warm-up
store, released at once, and the others follow from cycle ``warmup`` on, back to back,
as the RDMA engine's back-to-back run (:func:`analysis.rdma.point.build`). ``ii_cycles``
is taken at each store's first wire beat (:func:`pymodel.nic.frames.wire_starts`), as the
engine's.

With ``one_at_a_time`` (a latency run) the scenario's stores go one at a time
(:func:`analysis.scenarios.nic.one_at_a_time`), each released twice the cycles after the
previous one that the model takes to play the first store alone and go idle (the second
half a margin): every store enters an idle NIC and is its issuer's last queued one (with
``e2e`` it asks for its completion at once). ``nic_results.json`` also holds each store's
latency and completion (``per_store``), from which :mod:`tb.nic.headline` takes the
median without the warm-up store, as for the RDMA engine.
"""

import json
import statistics
import time
from pathlib import Path

import cocotb

from analysis.scenarios.nic import (
    build_scenario,
    delayed,
    destination_table_writes,
    mark_last_queued,
    one_at_a_time,
    source_writes,
    spoof_intent,
    table_writes,
    window_intent,
    window_writes,
)
from pymodel.fabric.faulty_link import FaultSettings
from pymodel.fcs import phy_bytes
from pymodel.host.metrics import host_bytes, host_tlps, host_util
from pymodel.inflight import peak_in_flight
from pymodel.nic.frames import wire_starts
from pymodel.nic.store import Store
from pymodel.nic.system import NicSystemModel
from pymodel.throughput import steady_ii
from spec.formats.nic import Framing
from spec.metrics import CTRL_KINDS
from tb.cosim import cosim_params
from tb.nic.e2e_check import (
    arm_completions,
    arm_records,
    compare_completions,
    compare_records,
    e2e_figures,
    e2e_model,
    read_completions,
    read_records,
)
from tb.nic.testbench import NicTestbench
from tb.nic.wirecheck import check_sent_frames
from tb.scoreboard import Scoreboard


def _host_metrics(hosts, n, ii):
    """``host_bytes``, ``host_tlps``, ``host_util`` per message from the host-interface
    counters of every node (``hosts``), ``n`` messages, ``ii`` cycles per message;
    ``ctrl_bytes`` 0 (the NIC has no control payload on the host interface)."""
    return {"ctrl_bytes": 0, "host_bytes": host_bytes(*hosts) / n,
            "host_tlps": {k: v / n for k, v in host_tlps(*hosts).items()},
            "host_util": host_util(hosts, n, ii)}


def _spans(n, accept, remote, completion):
    """Each of the ``n`` stores' latency (accept to its last remote write) and completion
    (accept to its completion), in cycles."""
    return ([remote[k] - accept[k] for k in range(n)],
            [completion[k] - accept[k] for k in range(n)])


def _metrics(msgs, accept, remote, completion, wire, credits, beats, width, *, starts,
             acks=None, state_bits=0, held=None):
    """Medians over the messages (integers where the median is whole), ``ii_cycles`` by
    :func:`pymodel.throughput.steady_ii` over ``starts``, each store's first wire beat
    (:func:`pymodel.nic.frames.wire_starts`), and the peak of
    the stores' ``beats`` in flight (:func:`pymodel.inflight.peak_in_flight`, each held
    to its credit: ``held``, default ``completion``) in bits plus ``state_bits``;
    ``acks`` adds control actions per message."""
    def med(values):
        v = statistics.median(values)
        return int(v) if float(v).is_integer() else v
    lat, comp = _spans(len(msgs), accept, remote, completion)
    ctrl = dict.fromkeys(CTRL_KINDS, 0)
    ctrl["credit_updates"] = med(credits)
    ctrl.update(acks or {})
    ii = steady_ii(starts) or 0
    return {"latency_cycles": med(lat), "completion_cycles": med(comp),
            "ii_cycles": int(ii) if float(ii).is_integer() else ii,
            "wire_bytes": med(wire), "ctrl_ops": ctrl,
            "inflight_bits": 8 * width * peak_in_flight(
                accept, completion if held is None else held, beats) + state_bits}


def _check_windows(sb, tb, p, stores, node_ids, wins, got):
    """The second oracle of a scenario with window writes, independent of the model:
    the scenario's own intent (:func:`window_intent`) against the RTL's memories and
    counters. Every byte equals what the authorised frames wrote (each source's frames
    in order; the scenario keeps the sources' regions apart) and nothing else; a frame
    that races a window write is written whole or not at all."""
    w, words = p["width"], p["mem_words"]
    intent = window_intent(stores, node_ids, wins, width=w, mem_words=words,
                           max_payload=p["max_payload"], link_latency=p["link_latency"])
    for q in range(p["nodes"]):
        frames = intent.get(q, [])
        mem = got[q]["mem"]
        data = b"".join(v.to_bytes(w, "little") for v in mem)
        want = bytearray(words * w)
        for addr, payload, verdict in frames:
            if verdict == "ok":
                want[addr:addr + len(payload)] = payload
        raced = ([], [])
        for addr, payload, verdict in frames:
            if verdict == "race":
                span = data[addr:addr + len(payload)]
                raced[span == payload].append(addr)
                sb.equal(f"win mem{q} @{addr} raced frame whole or nothing",
                         span in (payload, bytes(len(payload))), True)
                want[addr:addr + len(payload)] = span
        sb.equal(f"win mem{q} holds only the authorised stores", bytes(want) == data, True)
        n = {v: sum(f[2] == v for f in frames) for v in ("ok", "drop_addr", "drop_window",
                                                         "race")}
        counters = tb.counters(q)
        ok, dw = counters["frames_ok"], counters["drop_window"]
        sb.equal(f"win drop_addr{q}", counters["drop_addr"], n["drop_addr"])
        sb.equal(f"win frames_ok{q} (raced ones counted)", ok, n["ok"] + len(raced[1]))
        sb.equal(f"win drop_window{q} (raced ones counted)", dw,
                 n["drop_window"] + len(raced[0]))
        if n["race"]:
            tb.dut._log.info("window race at node %d: %d frames written, %d dropped", q,
                          len(raced[1]), len(raced[0]))
            sb.equal(f"win race{q} split (frames on both sides of the write)",
                     bool(raced[0]) and bool(raced[1]), True)


def _check_spoof(sb, tb, p, stores, node_ids, got):
    """The second oracle of the ``spoof`` scenario, independent of the model
    (:func:`spoof_intent`): every memory holds exactly the legitimate stores sent to it
    (nothing of the forged ones, which target bytes nobody else writes), every
    legitimate frame was written (``frames_ok``, no receiver drop), and the switch's
    ``drop_spoofed`` counts exactly the forged frames."""
    w, words = p["width"], p["mem_words"]
    mem, spoofed = spoof_intent(stores, node_ids, width=w, max_payload=p["max_payload"])
    for q in range(p["nodes"]):
        want = bytearray(words * w)
        for addr, payload in mem.get(q, []):
            want[addr:addr + len(payload)] = payload
        data = b"".join(v.to_bytes(w, "little") for v in got[q]["mem"])
        sb.equal(f"spoof mem{q} holds exactly the legitimate stores", data == bytes(want),
                 True)
        counters = tb.counters(q)
        sb.equal(f"spoof frames_ok{q}", counters["frames_ok"], len(mem.get(q, [])))
        sb.equal(f"spoof drops{q}", sum(counters.values()) - counters["frames_ok"], 0)
    sb.equal("spoof drop_spoofed = forged frames", tb.switch_counters()["drop_spoofed"],
             spoofed)
    sb.equal("spoof scenario forges frames", spoofed > 0, True)


def model_run(p):
    """The golden model's run of the test's parameters ``p`` (those of
    :func:`tb.cosim.cosim_params`): a dict with the scenario as the RTL is loaded with it
    (``stores`` as issued, ``node_ids``, ``faults``, ``stalls``, ``tbl``, ``wins``,
    ``srcs``, ``clean``: the retry top's fault settings), the model's results ``want``
    and its wall time ``t_model``. No simulator: also the model side of a point alone."""
    w, nodes = p["width"], p["nodes"]
    attachment = p.get("attachment", "integrated")
    e2e = p.get("completion", "credit") == "e2e"
    e2e_kw = dict(completion="e2e", coalesce=p["coalesce"], flush_idle=p["flush_idle"],
                  timeout=p["timeout"], records=p.get("records", 0)) if e2e else {}
    retry = p.get("retry", False)
    dests = p.get("destinations")
    if dests:
        e2e_kw["destinations"] = dests
    if p.get("peer_retry"):
        e2e_kw.update(peer_retry=True, peer_window=p["peer_window"])
    model = NicSystemModel(w, p["framing"], nodes, p["link_latency"], p["mem_words"],
                           p["max_payload"], p["credits"], retry=retry,
                           attachment=attachment, fabric=p.get("fabric", "board"), **e2e_kw)
    # A retry top's wires have fault settings ports (flt_*): clean wires, every port 0.
    clean = (FaultSettings(**dict.fromkeys(vars(FaultSettings()), 0)) if retry
             else None)
    stores, node_ids, faults = build_scenario(
        p["scenario"], nodes=nodes, width=w, window=p["mem_words"] * w,
        max_payload=p["max_payload"], seed=p["seed"], count=p.get("count", 8),
        msg_bytes=p.get("msg_bytes", 128), messages=p.get("messages", 16),
        peers=p.get("peers"), destinations=dests,
        popularity=p.get("popularity", "round_robin"))

    def issue(stores):
        if e2e:                              # the issuer asks on its last queued store
            stores = mark_last_queued(stores)
        if attachment == "pcie":             # the host writes each store as posted writes
            stores = {q: [t for s in ss for t in s.host_writes()] for q, ss in stores.items()}
        return stores

    stall_rate = p.get("stall_rate", 0)
    stalls = {q: (101 + 7 * q, stall_rate) for q in range(nodes)}
    tbl = (destination_table_writes(dests, nodes) if dests
           else table_writes(node_ids, nodes))
    wins = window_writes(p["scenario"], nodes=nodes, mem_words=p["mem_words"], width=w)
    srcs = source_writes(p["scenario"], node_ids)
    run_kw = dict(table_writes=tbl, window_writes=wins, source_writes=srcs,
                  link_settings=clean)
    if p.get("warmup") and not p.get("one_at_a_time"):   # a warm-up store, then the rest
        stores = {q: ss[:1] + [Store(s.dst, s.addr, s.payload, s.length, p["warmup"],
                                     s.ack_req) for s in ss[1:]]
                  for q, ss in stores.items()}
    if p.get("one_at_a_time"):               # spaced by a lone store's run, twice over
        first = {q: ss[:1] for q, ss in stores.items() if ss}
        alone = model.run(issue(delayed(first, len(tbl) if dests else 0)), node_ids,
                          stalls, faults, **run_kw)["cycles"]
        stores = one_at_a_time(stores, 2 * alone)
    # With destinations the stores start after the switch's table is written.
    stores = issue(delayed(stores, len(tbl) if dests else 0))
    t0 = time.perf_counter()
    want = model.run(stores, node_ids, stalls, faults, **run_kw)
    return dict(stores=stores, node_ids=node_ids, faults=faults, stalls=stalls, tbl=tbl,
                wins=wins, srcs=srcs, clean=clean, want=want,
                t_model=time.perf_counter() - t0)


def _locate(p, want, tbl):
    """One sender, every store delivered: ``(src, last_idx, ends)``, each store's last
    write as ``(port, index)`` in the recorder of its destination's port and its last
    wire beat's index at the sender; None otherwise."""
    msgs, per_store = want["messages"], want["stores"]
    good = [m for m in per_store if m["remote_write"] is not None]
    if not (good and len(good) == len(per_store)
            and all(m["src"] == good[0]["src"] for m in per_store)):
        return None
    nodes, w = p["nodes"], p["width"]
    route = {n: o for n, o in tbl}
    last_idx, ends, k, e = [], [], dict.fromkeys(range(nodes), 0), 0
    for m in msgs:
        port = route.get(m["store"].dst, m["store"].dst % nodes)
        k[port] += -(-m["store"].length // w)
        e += m["beats"]
        if m is msgs[-1] or msgs[m["id"] + 1]["cmd"] != m["cmd"]:
            last_idx.append((port, k[port] - 1))
            ends.append(e - 1)
    return good[0]["src"], last_idx, ends


def model_figures(p, run):
    """The model's per-message figures of :func:`model_run`'s ``run`` as the test writes
    them (``nic_results.json``'s ``model``, with the host metrics on ``pcie``) and its
    ``per_store`` latency and completion: ``(metrics, {"latency", "completion"})``; None
    unless one sender's every store was delivered."""
    want, stores = run["want"], run["stores"]
    located = _locate(p, want, run["tbl"])
    if located is None:
        return None
    src, last_idx, ends = located
    per_store, w = want["stores"], p["width"]
    credits = [st["wire_beats"] for st in per_store]
    model_wire = [sum(phy_bytes(f) for f in st["frames"]) for st in per_store]
    modelled = {}
    if p.get("completion", "credit") == "e2e":
        extra, modelled = e2e_model(p, want, stores, src)
        model_wire = [x + extra for x in model_wire]
        modelled["held"] = [want["cr"][src][i] for i in ends]
    accept = [m["accept"] for m in per_store]
    remote = [want["wr"][o][1][i] for o, i in last_idx]
    completion = [m["completion"] for m in per_store]
    starts = wire_starts(want["tx"][src], stores[src], w, p["framing"], p["max_payload"])
    metrics = _metrics(per_store, accept, remote, completion, model_wire, credits,
                       credits, w, starts=starts, **modelled)
    if p.get("attachment", "integrated") == "pcie":
        metrics.update(_host_metrics(list(want["host"].values()), len(per_store),
                                     metrics["ii_cycles"]))
    lat, comp = _spans(len(per_store), accept, remote, completion)
    return metrics, {"latency": lat, "completion": comp}


@cocotb.test()
async def nic_matches_model(dut):
    p = cosim_params()
    w, nodes = p["width"], p["nodes"]
    attachment = p.get("attachment", "integrated")
    e2e = p.get("completion", "credit") == "e2e"
    run = model_run(p)
    stores, node_ids, faults, stalls = (run[k] for k in ("stores", "node_ids", "faults",
                                                         "stalls"))
    tbl, wins, srcs, clean, want = (run[k] for k in ("tbl", "wins", "srcs", "clean",
                                                     "want"))
    t_model = run["t_model"]

    tb = NicTestbench(dut, nodes, w, p["mem_words"], p.get("destinations"))
    tb.load(stores, node_ids, stalls=stalls, faults=faults, table=tbl, windows=wins,
            sources=srcs, link_settings=clean)
    tb.arm(want)
    records = e2e and p.get("records", 0)
    if e2e:
        arm_completions(tb, want)
    if records:
        arm_records(tb, want)
    t0 = time.perf_counter()
    end = await tb.run(timeout_cycles=4 * want["cycles"] + 2000, until=want["cycles"] + 8)
    t_sim = time.perf_counter() - t0
    cp = await read_completions(tb, records) if e2e else None
    cq = read_records(tb) if records else None
    dut._log.info("model %d cycles in %.2f s; simulator in %.2f s",
                  want["cycles"], t_model, t_sim)

    sb = Scoreboard(dut._log)
    got = tb.compare(sb, want)
    if e2e:
        await compare_completions(sb, tb, want, cp)
    if records:
        compare_records(sb, want, cq, records)
    if wins:
        _check_windows(sb, tb, p, stores, node_ids, wins, got)
    if p["scenario"] == "spoof":
        _check_spoof(sb, tb, p, stores, node_ids, got)
    sent = {q: tb.links[q].frames() for q in range(nodes)}
    if Framing(p["framing"]) is Framing.L2:
        # Independent of the model: scapy decodes every frame the RTL sent.
        check_sent_frames(sb, sent, node_ids, p.get("destinations"))

    # Per-message (per store command) figures, located with the model's structure (a
    # store of several segments is one message): the RTL's from its own stamps and
    # frames, the model's from the model.
    msgs, per_store = want["messages"], want["stores"]
    out = {"mismatches": len(sb.mismatches), "cycles": end, "messages": len(per_store),
           "frames_sent": len(msgs), "counters": want["counters"]}
    located = _locate(p, want, tbl)
    if located is not None:
        src, last_idx, ends = located
        # Wire bytes of each store: its frames as the RTL sent them (the scenario says
        # how many segments each store is cut into).
        rtl_frames, rtl_wire, rtl_beats = iter(sent[src]), [], []
        for s in stores[src]:
            frames = [next(rtl_frames, None) for _ in s.segments(w, p["max_payload"])]
            rtl_wire.append(sum(phy_bytes(f.data) for f in frames if f is not None))
            rtl_beats.append(sum(-(-len(f.data) // w) for f in frames if f is not None))
        rtl_accept = got[src]["starts"]
        rtl_remote = [got[o]["wr"][i] if i < len(got[o]["wr"]) else -1
                      for o, i in last_idx]
        rtl_comp = [got[src]["cr"][i] if i < len(got[src]["cr"]) else -1 for i in ends]
        rtl_cr = [len(got[src]["cr"]) / len(per_store)]
        e2e_rtl = {}
        if e2e:                      # beats are held to their credit, as without e2e
            held = rtl_comp
            rtl_comp, rtl_wire, rtl_cr, e2e_rtl = e2e_figures(
                p, tb, want, cq if records else cp, stores, src, sent, rtl_wire)
            rtl_comp = [-1 if c is None else c for c in rtl_comp]
            e2e_rtl["held"] = held
        out["rtl"] = _metrics(per_store, rtl_accept, rtl_remote, rtl_comp, rtl_wire,
                              rtl_cr, rtl_beats, w, starts=wire_starts(
                                  tb.uplink_beats(src), stores[src], w, p["framing"],
                                  p["max_payload"]), **e2e_rtl)
        out["model"], per_model = model_figures(p, run)
        lat_rtl, comp_rtl = _spans(len(per_store), rtl_accept, rtl_remote, rtl_comp)
        out["per_store"] = {"rtl": {"latency": lat_rtl, "completion": comp_rtl},
                            "model": per_model}
        out["frames"] = [(f.start, f.data.hex()) for f in sent[src]]
        if attachment == "pcie":
            n = len(per_store)
            out["rtl"].update(_host_metrics([tb.host_counters(q) for q in range(nodes)], n,
                                            out["rtl"]["ii_cycles"]))

    Path("nic_results.json").write_text(json.dumps(out))
    kinds = sorted({m.split("[")[0].split(":")[0] for m in sb.mismatches})
    if kinds:
        dut._log.error("mismatching: %s", ", ".join(kinds))
    sb.check()
    assert sum(len(v[0]) for v in want["wr"].values()) > 0, "no store reached memory"

