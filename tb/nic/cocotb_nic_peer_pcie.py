"""cocotb test of NicTop with the per-peer retry (``peer_retry``) behind PCIe with
completion records (the state spectrum's ``nic_retry`` endpoint, :mod:`tb.ephemeral.
spectrum`): RTL = model, and the scenario's own oracle (independent of the model).

The scenario is ``loss`` of :mod:`tb.nic.cocotb_nic_peer` (4 nodes, each 12 stores of 8
to 64 bytes to random other nodes, each at an address of its own) on a top with
``attachment`` ``pcie`` (W = 64: each store is one posted write of the host),
``records`` (the ring at the top of each node's memory) and, with ``retry``, reliable
links over clean wires; the downlinks' fault injectors damage one beat of 7 frames
(:data:`LOSS_FAULTS_PCIE`, store frames or completions), so frames are lost after the
last reliable link and recovered end to end.

Compared cycle for cycle with :class:`pymodel.nic.system.NicSystemModel` (``peer_retry``,
``pcie``, ``records``): every uplink beat (resends and completions included), command
accept, memory write (NicRx's and the records'), credit, receive and host counter and
memory word (:meth:`tb.nic.testbench.NicTestbench.compare`), every completion at each
node (recorder ``cp<p>``), every record and the cycle it reached host memory (recorder
``cq<p>``), the CPL counters, the tracker ports (the sender's registers) and the
per-peer ports ``peer[p]``.

Oracle, from the stores alone and the RTL's ports: every memory below the ring holds
exactly the stores sent to it, each word written once (the RTL's ``wr`` recorders),
nothing outstanding, every frame completed, a frame lost per damaged beat
(``drop_fcs``), frames resent; and per destination the records' counts rise with every
record (a record stands for frames newly completed) and end at the frames sent there.
"""

import cocotb

from pymodel.fabric.faulty_link import FaultSettings
from pymodel.nic.system import NicSystemModel
from tb.cosim import cosim_params
from tb.nic.cocotb_nic_peer import compare_peer_ports, scenario
from tb.nic.e2e_check import (
    arm_completions,
    arm_records,
    compare_completions,
    compare_records,
    read_completions,
    read_records,
)
from tb.nic.store_oracle import oracle
from tb.nic.testbench import NicTestbench
from tb.scoreboard import Scoreboard

#: Downlink beats damaged (at least a frame apart, within each node's beats at W = 64:
#: 7 frames lost).
LOSS_FAULTS_PCIE = {0: [3], 1: [2, 12, 20], 2: [1, 15], 3: [8]}


@cocotb.test()
async def nic_peer_pcie_matches_model(dut):
    p = cosim_params()
    w, nodes, records, retry = p["width"], p["nodes"], p["records"], p["retry"]
    model = NicSystemModel(w, p["framing"], nodes, p["link_latency"], p["mem_words"],
                           p["max_payload"], p["credits"], retry=retry, attachment="pcie",
                           completion="e2e", coalesce=p["coalesce"],
                           flush_idle=p["flush_idle"], timeout=p["timeout"],
                           records=records, peer_retry=True, peer_window=p["peer_window"])
    stores, ids, _, _ = scenario(dict(p, scenario="loss"))
    stores = {q: [t for s in ss for t in s.host_writes()] for q, ss in stores.items()}
    faults = LOSS_FAULTS_PCIE
    # A retry top's wires have fault settings ports (flt_*): clean wires, every port 0.
    clean = FaultSettings(**dict.fromkeys(vars(FaultSettings()), 0)) if retry else None
    want = model.run(stores, ids, faults=faults, link_settings=clean)
    tb = NicTestbench(dut, nodes, w, p["mem_words"])
    tb.load(stores, ids, faults=faults, link_settings=clean)
    tb.arm(want)
    arm_completions(tb, want)
    arm_records(tb, want)
    await tb.run(timeout_cycles=4 * want["cycles"] + 2000, until=want["cycles"] + 8)
    cp = await read_completions(tb, records=True)
    cq = read_records(tb)
    sb = Scoreboard(dut._log)
    tb.compare(sb, want)
    ports, _ = await compare_completions(sb, tb, want, cp)
    compare_records(sb, want, cq, records)
    peer = compare_peer_ports(sb, tb, want, nodes)
    # The scenario's own oracle, from the stores alone and the RTL's ports.
    mem, words = oracle(stores, nodes, w, p["mem_words"])
    ring = p["mem_words"] - records             # the records' words from here on
    for q in range(nodes):
        sb.compare(f"intent mem{q} = the stores sent to it", tb.memory(q)[:ring],
                   mem[q][:ring])
        sb.equal(f"intent wr{q}: each word once", sum(a < ring for a, _, _ in tb.writes(q)),
                 words[q])
        sb.equal(f"intent nothing outstanding at {q}", sum(ports[q]["outstanding"]), 0)
        sent = [sum(len(s.segments(w, p["max_payload"])) for s in stores[q] if s.dst == d)
                for d in range(nodes)]
        sb.compare(f"intent every frame of {q} completed", ports[q]["completed"], sent,
                   fmt=str)
        seen = {}
        for e in cq[q][0]:
            sb.equal(f"intent record of {q} to {e[0]} moves the count",
                     e[3] > seen.get(e[0], 0), True)
            seen[e[0]] = e[3]
        sb.compare(f"intent records of {q} end at the frames sent",
                   [seen.get(d, 0) for d in range(nodes)], sent, fmt=str)
    sb.equal("intent a frame lost per damaged beat",
             sum(tb.counters(q)["drop_fcs"] for q in range(nodes)),
             sum(len(f) for f in LOSS_FAULTS_PCIE.values()))
    sb.equal("intent frames resent", sum(sum(peer[q]["resent"]) for q in range(nodes)) > 0,
             True)
    sb.check()
