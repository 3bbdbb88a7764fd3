"""cocotb test of RdmaFabricTop: an open-loop scenario over the switch, bulk loaded, run,
compared with the golden model (:mod:`pymodel.rdma.fabric_system`).

Everything is loaded before reset (every node's two host memories, its MR table, its
MMIO player) and drained after the run (recorders, counters, memories) by
:class:`FabricTestbench`: no Python runs per cycle. Compared exactly: every uplink beat
and its cycle, every written and completed mark, every MMIO accept cycle, every counter
(requesters, responders, host interfaces, merges, switch), every host-memory word.
Independently of the model: every frame on the wire decoded with its ICRC and FCS
recomputed (:mod:`tb.rdma.wirecheck`), each node's MRs hold exactly the bytes posted to
it, every sender's CQ holds one CQE per signalled WRITE, per QP in posting order, all
SUCCESS, and the merges' error flags stay low.

Kind ``writes`` (``params["kind"]``, :mod:`tb.rdma.fabric_writes`): the RdmaTop
headline's run on the fabric of two nodes: node 0's requester posts the WRITEs of
:func:`analysis.scenarios.rdma.writes_scenario` to node 1's responder (its MACs route node
A to port 0 and node B to port 1 of the power-up table); both sides' records in the
shape of :func:`analysis.rdma.point.reduce_run` (node 0's uplink as the A->B link, node
1's as B->A, node 0's requester host interface as host A, node 1's responder's as host
B), reduced by it into ``out_json`` as :mod:`tb.rdma.cocotb_rdma` does, with each side's
``fabric_beats``: node 0's merge ``credits_max``, the switch ingress beats the sender's
frames held.

Kind ``reads``: the READ/atomic point of `make sim` on two nodes
(:mod:`tb.rdma.cocotb_fabric_reads`).
"""

import json
import time

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly

from analysis.rdma.fabric_point import fabric_arrays, fabric_load_row
from analysis.rdma.point import reduce_run
from analysis.scenarios.rdma_fabric import fabric_scenario
from pymodel.fields import pack
from pymodel.packet import frame_to_beats
from pymodel.rdma.fabric_system import simulate_fabric
from pymodel.rdma.verbs import mr_table_in_host
from spec.fabric import SWITCH_COUNTERS
from spec.host import HOST_COUNTERS, mmio_layout
from spec.rdma_engine import (
    REQUESTER_COUNTERS,
    RESPONDER_COUNTERS,
)
from spec.rdma_fabric import (
    FABRIC_DEFAULTS,
    MERGE_COUNTERS,
    MERGE_FLAGS,
    MERGE_ROOM,
    PAUSE_COUNTERS,
)
from tb.cosim import cosim_params
from tb.harness import Harness, HarnessTimeout, dump_memory, load_image, load_memory
from tb.rdma.fabric_writes import fabric_config, pair_run, writes_images, writes_setup
from tb.rdma.intent import cqes_per_qp, intended_statuses
from tb.rdma.testbench import frames_of, member_port, value_of
from tb.rdma.wirecheck import wire_problems
from tb.scoreboard import Scoreboard

__all__ = ["FabricTestbench", "fabric_config", "fabric_run_scenario"]

#: Cycles the design keeps running after the last expected event, to catch extras.
SETTLE = 300
#: Blocks of counters per node: (model key, the top's counters port, names).
_BLOCKS = (("req", "req", REQUESTER_COUNTERS), ("resp", "resp", RESPONDER_COUNTERS),
           ("host_rq", "hrq", HOST_COUNTERS), ("host_rs", "hrs", HOST_COUNTERS),
           ("merge", "merge", MERGE_FLAGS + MERGE_COUNTERS))


def fabric_run_scenario(top, p):
    """The :class:`~analysis.scenarios.rdma_fabric.FabricScenario` of run parameters
    ``p`` on a top with parameters ``top``."""
    t = dict(FABRIC_DEFAULTS, **top)
    return fabric_scenario(p["pattern"], t["nodes"], p["messages"], p["msg_bytes"],
                           p["load"], seed=p.get("seed", 1), qps=p.get("qps", 1),
                           depth=t["depth"], mr_entries=t["mr_entries"],
                           warmup=p.get("warmup", 0))


class FabricTestbench:
    """Load, arm, run and compare one RdmaFabricTop co-simulation."""

    def __init__(self, dut, nodes, depth, pause=False, mr_in_host=False):
        self.dut, self.nodes, self.depth, self.mr_in_host = dut, nodes, depth, mr_in_host
        self.blocks = _BLOCKS + ((("pause", "pause", PAUSE_COUNTERS),) if pause else ())
        self.harness = Harness(dut)
        self.hang = None

    def recorders(self):
        return [f"{kind}{n}" for n in range(self.nodes)
                for kind in ("wire", "written", "completed")]

    def load(self, images, ports):
        d, h = self.dut, self.harness
        layout = mmio_layout()
        for n, img in enumerate(images):
            load_image(getattr(d, f"mem_rq{n}").mem, img["mem_rq"])
            if self.mr_in_host:         # the MR table in host memory (RdmaTop's layout)
                load_image(getattr(d, f"mem_rs{n}").mem,
                           mr_table_in_host(img["mem_rs"], img["mr_table"], self.depth))
            else:
                load_image(getattr(d, f"mem_rs{n}").mem, img["mem_rs"])
                table = getattr(d, f"responder{n}").mr_table
                load_memory(table, list(img["mr_table"]) + [0] * (len(table)
                                                                  - len(img["mr_table"])))
            h.load_player(f"mmio{n}", [pack(layout, w) for w in img["mmio"]], (1, 0),
                          release=list(img["release"]))
        for name, value in ports.items():
            h.set(name, value)

    def arm_for(self, model):
        for n in range(self.nodes):
            self.harness.arm_recorder(f"wire{n}", sum(len(c) for c, _ in model["wire"][n]))
            self.harness.arm_recorder(f"written{n}", len(model["written"][n]))
            self.harness.arm_recorder(f"completed{n}", len(model["completed"][n]))

    async def run(self, timeout_cycles, settle=SETTLE):
        done = [f"mmio{n}__done" for n in range(self.nodes)]
        done += [f"{r}__done" for r in self.recorders()]
        await self.harness.reset()
        try:
            await self.harness.wait_done(done, timeout_cycles=timeout_cycles)
        except HarnessTimeout as exc:
            self.hang = str(exc)
        await ClockCycles(self.dut.clk, settle)
        await ReadOnly()
        d = self.dut
        await self.harness.snapshot(
            [(getattr(d, f"{mem}{n}").mem, self.depth) for n in range(self.nodes)
             for mem in ("mem_rq", "mem_rs")],
            players=[(f"mmio{n}", value_of(getattr(d, f"mmio{n}__count")))
                     for n in range(self.nodes)],
            recorders=self.recorders())

    def compare(self, sb, model, images):
        """Compare everything with the model on ``sb``; returns the run in the model's
        shape (``wire``, ``written``, ``completed``, ``mmio_stamps``, counter blocks,
        ``mem_rq``/``mem_rs`` as word lists)."""
        d, h = self.dut, self.harness
        got = {k: [] for k in ("wire", "written", "completed", "mmio_stamps", "mem_rq",
                               "mem_rs", *(b for b, _, _ in self.blocks))}
        for n in range(self.nodes):
            beats, stamps = [], []
            for cycles, frame in model["wire"][n]:
                beats += frame_to_beats(frame, 64)
                stamps += list(cycles)
            items, cycles = h.recorded(f"wire{n}")
            sb.compare(f"node {n} uplink beats", items, beats)
            sb.compare(f"node {n} uplink beat cycles", cycles, stamps, fmt=str)
            try:
                got["wire"].append(frames_of(items, cycles))
            except ValueError:
                got["wire"].append([])
            for name in ("written", "completed"):
                tags, cyc = h.recorded(f"{name}{n}")
                got[name].append(list(zip(cyc, tags, strict=True)))
                sb.compare(f"node {n} {name} (cycle, tag)", got[name][n], model[name][n],
                           fmt=str)
            count = len(images[n]["mmio"])
            got["mmio_stamps"].append(h.played_stamps(f"mmio{n}", count) if count else [])
            sb.compare(f"node {n} MMIO accept cycles", got["mmio_stamps"][n],
                       model["mmio_stamps"][n], fmt=str)
            for block, port, names in self.blocks:
                values = {c: value_of(getattr(d, member_port(f"{port}__{n}", c)))
                          for c in names}
                got[block].append(values)
                for c in names:
                    sb.equal(f"node {n} {block} counter {c}", values[c], model[block][n][c])
            for mem in ("mem_rq", "mem_rs"):
                words = dump_memory(getattr(d, f"{mem}{n}").mem, self.depth)
                got[mem].append(words)
                want = model[mem][n]
                bad = [a for a in range(self.depth) if words[a] != want.get(a, 0)]
                sb.equal(f"node {n} {mem}: words that differ (first 8)", bad[:8], [])
        got["switch"] = {c: value_of(getattr(d, member_port("switch_counters", c)))
                         for c in SWITCH_COUNTERS}
        for c in SWITCH_COUNTERS:
            sb.equal(f"switch counter {c}", got["switch"][c], model["switch"][c])
        return got


def check_intent(sb, sc, got):
    """What the run must have done, from the posted work requests alone."""
    nodes = len(sc.verbs)
    frames = [f for n in range(nodes) for _, f in got["wire"][n]]
    for k, problems in wire_problems(frames):
        sb.equal(f"independent check of uplink frame {k}", problems, [])
    sb.equal("frames on the uplinks", len(frames) > 0, True)
    for n in range(nodes):
        for flag in MERGE_FLAGS:
            sb.equal(f"node {n} merge {flag}", got["merge"][n][flag], 0)
        words = got["mem_rs"][n]
        for base, want in sc.expected_mr_bytes(n).items():
            nw = -(-len(want) // 64)
            have = b"".join(words[base // 64 + k].to_bytes(64, "little")
                            for k in range(nw))[:len(want)]
            bad = [k for k in range(len(want)) if have[k] != want[k]]
            sb.equal(f"node {n} MR at {base:#x}: bytes that differ from the posted data "
                     f"(first 8)", bad[:8], [])
        v = sc.verbs[n]
        v.cq_next = 0
        cqes = v.poll_cq(dict(enumerate(got["mem_rq"][n])), len(v.messages) + 1)
        sb.equal(f"node {n} CQEs polled", len(cqes), len(v.messages))
        per_qp, want = cqes_per_qp(v.messages, intended_statuses(v.messages), cqes)
        sb.equal(f"node {n} CQE (send-queue index, status) per QP, in order", per_qp, want)
    sb.equal("messages posted", len(sc.messages) > 0, True)


def _ports(cfg):
    return dict(qpc_base=cfg.qpc_base, cq_base=cfg.cq_base, cq_log2=cfg.cq_log2,
                ack_timeout=cfg.timeout, ack_every=cfg.ack_every, ack_frames=cfg.ack_frames,
                serial=cfg.serial, cache_log2=cfg.cache_entries.bit_length() - 1,
                qpc_log2=cfg.qpc_log2)


async def run_and_compare(dut, cfg, images):
    """One two-node run of the images on the golden model and the RTL: load, arm, run,
    compare every recorded item (:meth:`FabricTestbench.compare`), then check without the
    model every frame on both uplinks (:func:`tb.rdma.wirecheck.wire_problems`) and that
    no merge raised a flag. Returns ``(model, scoreboard, got)``."""
    model = simulate_fabric(cfg, images)
    tb = FabricTestbench(dut, cfg.nodes, cfg.depth, mr_in_host=cfg.mr_in_host)
    tb.load(images, _ports(cfg))
    tb.arm_for(model)
    await tb.run(timeout_cycles=model["cycles"] + 5000)
    sb = Scoreboard(dut._log)
    if tb.hang:
        sb.equal("recorders done", tb.hang, "")
    got = tb.compare(sb, model, images)
    frames = [f for n in range(2) for _, f in got["wire"][n]]
    for k, problems in wire_problems(frames):
        sb.equal(f"independent check of uplink frame {k}", problems, [])
    for n in range(2):
        for flag in MERGE_FLAGS:
            sb.equal(f"node {n} merge {flag}", got["merge"][n][flag], 0)
    return model, sb, got


async def writes_matches_model(dut, p):
    """The ``writes`` kind: run, compare, check the intent, reduce both sides."""
    cfg, v = writes_setup(p["top"], {k: x for k, x in p.items() if k != "top"})
    images = writes_images(v)
    model, sb, got = await run_and_compare(dut, cfg, images)
    # Independent of the model: every CQE per QP in order, the MR's bytes.
    cqes = v.poll_cq(dict(enumerate(got["mem_rq"][0])), len(v.messages) + 1)
    status = intended_statuses(v.messages)
    signalled = [m for m in v.messages if m.signalled]
    sb.equal("CQEs polled", len(cqes), len(signalled))
    per_qp, want = cqes_per_qp(v.messages, status, cqes)
    sb.equal("CQE (send-queue index, status) per QP, in order", per_qp, want)
    words = got["mem_rs"][1]
    for base, data in v.expected_mr_bytes().items():
        nw = -(-len(data) // 64)
        have = b"".join(words[base // 64 + k].to_bytes(64, "little")
                        for k in range(nw))[:len(data)]
        bad = [k for k in range(len(data)) if have[k] != data[k]]
        sb.equal(f"MR at {base:#x}: bytes that differ from the posted data (first 8)",
                 bad[:8], [])
    if p.get("out_json"):
        n = max(len(v.messages), 1)
        try:
            rtl = reduce_run(v, pair_run(got), n)
            rtl["fabric_beats"] = got["merge"][0]["credits_max"]
        except (ValueError, IndexError, KeyError, TypeError):     # see the scoreboard
            rtl = None
        mdl = reduce_run(v, pair_run(model), n)
        mdl["fabric_beats"] = model["merge"][0]["credits_max"]
        with open(p["out_json"], "w") as f:
            json.dump({"rtl": rtl, "model": mdl, "mismatches": len(sb.mismatches),
                       "cycles": model["cycles"],
                       "frames": sorted([[c[0], fr.hex()] for c, fr in
                                         got["wire"][0] + got["wire"][1]])}, f)
    if sb.mismatches:
        with open("mismatches.txt", "w") as f:
            f.write("\n".join(sb.mismatches) + "\n")
    sb.check()


@cocotb.test()
async def fabric_matches_model(dut):
    p = cosim_params()
    if p.get("kind") == "writes":
        await writes_matches_model(dut, p)
        return
    top = dict(FABRIC_DEFAULTS, **p["top"])
    sc = fabric_run_scenario(top, p)
    cfg = fabric_config(top, sc)
    images = sc.images()
    t0 = time.perf_counter()
    model = simulate_fabric(cfg, images)
    t1 = time.perf_counter()
    tb = FabricTestbench(dut, cfg.nodes, cfg.depth, pause=bool(cfg.pause),
                         mr_in_host=cfg.mr_in_host)
    tb.load(images, dict(qpc_base=cfg.qpc_base, cq_base=cfg.cq_base, cq_log2=cfg.cq_log2,
                         ack_timeout=cfg.timeout, ack_every=cfg.ack_every,
                         ack_frames=cfg.ack_frames,
                         serial=cfg.serial,
                         cache_log2=cfg.cache_entries.bit_length() - 1,
                         qpc_log2=cfg.qpc_log2))
    tb.arm_for(model)
    t2 = time.perf_counter()
    await tb.run(timeout_cycles=model["cycles"] + 5000)
    t3 = time.perf_counter()
    dut._log.info("model %d cycles in %.2f s; load %.2f s; simulator %.2f s",
                  model["cycles"], t1 - t0, t2 - t1, t3 - t2)
    sb = Scoreboard(dut._log)
    if tb.hang:
        sb.equal("recorders done", tb.hang, "")
    got = tb.compare(sb, model, images)
    check_intent(sb, sc, got)
    if p.get("expect_merge_wait"):
        # The scenario must exercise the credit gate: a sender's merge held frames.
        levels = [got["merge"][n]["level_max"] for n in range(cfg.nodes)]
        sb.equal(f"a merge buffered a frame behind the credits (level_max {levels})",
                 any(isinstance(v, int) and v > 1 for v in levels), True)
    if p.get("expect_merge_held"):
        # The scenario must exercise the flow control: a merge's level passed the room
        # threshold, so its requester was held between frames.
        levels = [got["merge"][n]["level_max"] for n in range(cfg.nodes)]
        sb.equal(f"a merge held its requester (level_max {levels} above "
                 f"{cfg.merge_depth - MERGE_ROOM})",
                 any(isinstance(v, int) and v > cfg.merge_depth - MERGE_ROOM
                     for v in levels), True)
    if p.get("expect_pause"):
        # The scenario must exercise the pause, and it must lose nothing: a responder
        # raised XOFF; no responder dropped a frame, no requester resent one.
        xoffs = [got["pause"][n]["xoffs"] for n in range(cfg.nodes)]
        sb.equal(f"a responder paused its downlink (xoffs {xoffs})",
                 any(isinstance(v, int) and v > 0 for v in xoffs), True)
        for n in range(cfg.nodes):
            sb.equal(f"node {n} responder frames dropped (overflow)",
                     got["resp"][n]["overflow"], 0)
            sb.equal(f"node {n} requester retransmissions",
                     got["req"][n]["retransmissions"], 0)
    dut._log.info("compare and checks %.2f s", time.perf_counter() - t3)
    if p.get("out_json"):
        # Both sides' load rows (rates of the whole fabric, latency from arrival), from
        # their own records.
        rows = {}
        for side, run in (("rtl", got), ("model", model)):
            try:
                arr = fabric_arrays(sc, run, cfg.nodes)
                rows[side] = fabric_load_row(arr, p["pattern"], cfg.nodes, p["msg_bytes"],
                                             p["load"])
            except (RuntimeError, ValueError, IndexError, KeyError, TypeError):
                rows[side] = None
        with open(p["out_json"], "w") as f:
            json.dump(dict(rows, mismatches=len(sb.mismatches)), f)
    if sb.mismatches:
        with open("mismatches.txt", "w") as f:
            f.write("\n".join(sb.mismatches) + "\n")
    sb.check()
