"""cocotb test of NicTop with the per-peer retry (``peer_retry``): RTL = model, and each
scenario's own oracle (independent of the model).

Scenarios (``scenario``; 4 nodes):

* ``loss``: every node stores 12 stores of 8 to 64 bytes to random other nodes, each at
  an address of its own; frames are lost after the last reliable link (the downlinks'
  fault injectors damage one beat of 7 frames, store frames or completions). Oracle:
  every memory holds exactly the stores sent to it, each word written once (the RTL's
  ``wr`` recorders), nothing outstanding, every frame completed, the lost frames counted
  (``drop_fcs``), resent and seen as gaps.
* ``switch_loss`` (a top with ``retry`` and ``switch_faults``): the stores of ``loss``;
  every link is a reliable link over a faulty wire (:data:`LINK_FAULTS`: frames dropped
  and damaged on the wires, replayed by link retry), and the switch drops 7 frames at its
  egresses (:data:`SWITCH_LOSS`, store frames and completions), which no link sees.
  Oracle: as ``loss``, with the drops counted by the switch (``drop_fault``), the frames
  resent end to end, and the links' replays seen (their counters).
* ``forge``: node 3 is configured with node 1's id and stores 6 frames to node 0; node
  0's ACKs to id 1 reach node 1, which sent nothing to node 0 (counted bad, changing
  nothing); node 3, never acknowledged, times out and resends (node 0 drops them as
  duplicates, counted); nodes 0 and 1 store 20 frames each to node 2. The run stops at
  a quiet cycle (node 3 resends for ever): RTL and model both stop there. Oracle: node
  2's memory holds exactly nodes 0's and 1's stores, each word written once, both
  senders have nothing outstanding to node 2, node 1 counted bad ACKs, node 0 counted
  duplicates and took the forger's first 6 frames only.

Compared cycle for cycle with :class:`pymodel.nic.system.NicSystemModel` (``peer_retry``):
every uplink beat (resends and completions included), command accept, memory write,
credit, receive counter, memory word and switch counter (and with ``retry`` every link
counter; :meth:`tb.nic.testbench.NicTestbench.compare`),
every completion at each node (recorder ``cp<p>``), the CPL counters and the tracker
ports (the sender's registers) and the per-peer ports ``peer[p]``.
"""

import cocotb

from pymodel.fabric.faulty_link import FaultSettings
from pymodel.nic.system import NicSystemModel, Store
from spec.ports import PEER_RETRY_COUNTERS, PEER_RETRY_PORTS
from tb.cosim import cosim_params
from tb.nic.e2e_check import arm_completions, compare_completions, read_completions
from tb.nic.store_oracle import mixed_stores, oracle, payload
from tb.nic.testbench import NicTestbench
from tb.scoreboard import Scoreboard

#: Downlink beats damaged in ``loss`` (at least a frame apart: 7 frames lost).
LOSS_FAULTS = {0: [7], 1: [5, 40, 90], 2: [3, 60], 3: [20]}
FORGE_IDS = [0, 1, 2, 1]
#: Egress frame numbers the switch drops in ``switch_loss`` (two of them completions).
SWITCH_LOSS = {0: [2, 10], 1: [4, 9], 2: [1, 6], 3: [5]}
#: The wires' faults in ``switch_loss`` (rates per 65,536 beats).
LINK_FAULTS = FaultSettings(seed=5, corrupt_rate=1500, drop_rate=800)


def scenario(p):
    """``(stores, node ids, faults, switch drops)`` of the scenario."""
    nodes = p["nodes"]
    if p["scenario"] in ("loss", "switch_loss"):
        stores = mixed_stores(nodes, p["seed"])
        if p["scenario"] == "switch_loss":
            return stores, list(range(nodes)), {}, SWITCH_LOSS
        return stores, list(range(nodes)), LOSS_FAULTS, None
    if p["scenario"] == "forge":
        stores = {0: [Store(2, 32 * k, payload(k, 32)) for k in range(20)],
                  1: [Store(2, 1024 + 32 * k, payload(k + 50, 32)) for k in range(20)],
                  3: [Store(0, 32 * k, payload(k + 90, 32)) for k in range(6)]}
        return stores, FORGE_IDS, {}, None
    raise ValueError(f"scenario {p['scenario']!r}")


def quiet_stop(want, nodes, after, gap=24):
    """The first cycle from ``after`` with no uplink beat, write, credit or completion
    of the run ``want`` within ``gap`` cycles either side."""
    busy = set()
    for q in range(nodes):
        busy.update(want["tx"][q][1], want["wr"][q][1], want["cr"][q],
                    want["e2e"][q]["cp"][1])
    c = after
    while any(t in busy for t in range(c - gap, c + gap + 1)):
        c += 1
    return c


def peer_ports(tb, q):
    """Node ``q``'s ports ``peer[q]``: counters, and per peer lists."""
    h, out = tb.harness, {}
    for n in PEER_RETRY_COUNTERS:
        out[n] = int(h.port(f"peer__{q}__{n}").value)
    for n in PEER_RETRY_PORTS:
        word = int(h.port(f"peer__{q}__{n}").value)
        out[n] = [word >> (16 * d) & 0xFFFF for d in range(tb.nodes)]
    return out


def compare_peer_ports(sb, tb, want, nodes):
    """Every node's ports ``peer[q]`` (:func:`peer_ports`) against the model's
    ``want["peer"]``; returns the RTL's ports by node."""
    peer = {q: peer_ports(tb, q) for q in range(nodes)}
    for q in range(nodes):
        for n, value in want["peer"][q].items():
            if isinstance(value, list):
                sb.compare(f"peer{q} {n}", peer[q][n], value, fmt=str)
            else:
                sb.equal(f"peer{q} {n}", peer[q][n], value)
    return peer


@cocotb.test()
async def nic_peer_matches_model(dut):
    p = cosim_params()
    w, nodes = p["width"], p["nodes"]
    retry, sflt = p.get("retry", False), p.get("switch_faults", False)
    model = NicSystemModel(w, p["framing"], nodes, p["link_latency"], p["mem_words"],
                           p["max_payload"], p["credits"], retry=retry, completion="e2e",
                           coalesce=p["coalesce"], flush_idle=p["flush_idle"],
                           timeout=p["timeout"], peer_retry=True,
                           peer_window=p["peer_window"], switch_faults=sflt)
    stores, ids, faults, drops = scenario(p)
    tbl = ()                       # the power-up table: id k to port k
    stop = None
    wires = LINK_FAULTS if retry else None
    if p["scenario"] == "forge":
        probe = model.run(stores, ids, faults=faults, table_writes=tbl,
                          stop=6 * p["timeout"])
        stop = quiet_stop(probe, nodes, 4 * p["timeout"])
    want = model.run(stores, ids, faults=faults, table_writes=tbl, stop=stop,
                     link_settings=wires, switch_drops=drops)
    tb = NicTestbench(dut, nodes, w, p["mem_words"], switch_faults=sflt)
    tb.load(stores, ids, faults=faults, table=tbl, link_settings=wires, switch_drops=drops)
    tb.arm(want)
    arm_completions(tb, want)
    await tb.run(timeout_cycles=4 * want["cycles"] + 2000, until=want["cycles"] + 8)
    cp = await read_completions(tb)
    sb = Scoreboard(dut._log)
    tb.compare(sb, want, links=retry)
    ports, counters = await compare_completions(sb, tb, want, cp)
    peer = compare_peer_ports(sb, tb, want, nodes)
    # The scenario's own oracle, from the stores alone and the RTL's ports.
    mem, words = oracle(stores, nodes, w, p["mem_words"])
    if p["scenario"] in ("loss", "switch_loss"):
        for q in range(nodes):
            sb.compare(f"intent mem{q} = the stores sent to it", tb.memory(q), mem[q])
            sb.equal(f"intent wr{q}: each word once", len(tb.write_events(q)[0]), words[q])
            sb.equal(f"intent nothing outstanding at {q}", sum(ports[q]["outstanding"]), 0)
            sent = [sum(len(s.segments(w, p["max_payload"])) for s in stores[q]
                        if s.dst == d) for d in range(nodes)]
            sb.compare(f"intent every frame of {q} completed", ports[q]["completed"], sent,
                       fmt=str)
        if drops:
            sb.equal("intent a frame lost per switch drop",
                     tb.switch_counters()["drop_fault"], sum(len(f) for f in drops.values()))
            sb.equal("intent the wires' losses replayed by link retry",
                     sum(c["tx_resent_frames"] for q in range(nodes)
                         for c in tb.link_counters(q).values()) > 0, True)
            sb.equal("intent a completion among the drops",
                     any(mid is None for _, mid in want["switch_dropped"]), True)
        else:
            sb.equal("intent a frame lost per damaged beat",
                     sum(tb.counters(q)["drop_fcs"] for q in range(nodes)),
                     sum(len(f) for f in LOSS_FAULTS.values()))
        sb.equal("intent frames resent", sum(sum(peer[q]["resent"]) for q in range(nodes))
                 > 0, True)
        sb.equal("intent gaps seen", sum(sum(peer[q]["gaps"]) for q in range(nodes)) > 0,
                 True)
    else:
        sb.compare("intent mem2 = the stores of nodes 0 and 1", tb.memory(2), mem[2])
        sb.equal("intent wr2: each word once", len(tb.write_events(2)[0]), words[2])
        for q in (0, 1):
            sb.equal(f"intent {q} completed its 20 to node 2", ports[q]["completed"][2], 20)
            sb.equal(f"intent {q} nothing outstanding to 2", ports[q]["outstanding"][2], 0)
        sb.equal("intent node 1 counted bad ACKs", counters[1]["cpl_bad"] >= 1, True)
        sb.equal("intent node 1 sent nothing to node 0", peer[1]["next_psn"][0], 0)
        sb.equal("intent node 3 timed out", peer[3]["timeouts"][0] >= 2, True)
        sb.equal("intent node 0 dropped duplicates", peer[0]["duplicates"][1] >= 6, True)
        sb.equal("intent node 0 took the forger's first 6 only",
                 tb.counters(0)["frames_ok"], 6)
    sb.check()
