"""cocotb test of NicMemTop: loads and atomics, every frame, memory write, landed
response, counter and final memory byte against the golden model
(:class:`pymodel.nic.mem_system.NicMemSystemModel`).

Parameters (``COSIM_PARAMS``): the top's (``nodes``, ``framing``, ``fabric``, ``tags``,
``mem_words``, ``max_payload``), ``cmds`` (``{node: [[op, dst, addr, length, laddr, a,
b], ...]}``), ``raws`` (``{node: [[data hex, nbytes], ...]}``: one-beat frames without
FCS) and ``mem_seed`` (every local memory starts with random words of that seed) and
``stalls`` (``{node: [seed, rate]}``: the command player's valid withheld by that
pattern), and with ``link_retry`` ``faults`` (the fields of a
:class:`pymodel.fabric.faulty_link.FaultSettings`: the ``flt`` ports, every link's
counters compared too). The model runs first; the recorders are armed with its counts,
and after they are done the simulator runs on for a round trip more, so that an extra
RTL event shows as a count mismatch. Results go to ``nic_mem_results.json`` in the run
folder: per node the command stamps and the landed responses of both sides, the RTL's
request frames in order (``issued``: tag, destination, op), its landed responses
(``landed``), its final memory (``mem_rtl``), and the mismatch count.
"""

import json
import random
from pathlib import Path

import cocotb
from cocotb.triggers import ClockCycles

from pymodel.fabric.faulty_link import FaultSettings
from pymodel.fields import pack, unpack
from pymodel.nic.mem_frames import parse_mem_header
from pymodel.nic.mem_system import NicMemSystemModel
from pymodel.packet import pack_beat, unpack_beat
from spec.fabric import COUNTER_PORTS
from spec.fabric_profiles import fabric_profile, round_trip
from spec.formats.nic_mem import MEM_WIDTH, MemOp, mem_cmd_layout, rsp_event_layout
from spec.nic_mem import MEM_RESP_COUNTERS, MEM_RX_COUNTERS
from tb.cosim import cosim_params
from tb.harness import Harness, dump_memory, load_memory
from tb.scoreboard import Scoreboard

TOP_KEYS = ("nodes", "framing", "fabric", "tags", "mem_words", "max_payload",
            "target_latency", "target_reads", "link_retry")
CMD_FIELDS = ("op", "dst", "addr", "length", "laddr", "a", "b")


def issued(beats, framing):
    """``(tag, dst, op)`` of each request frame among the uplink ``beats`` (flat), in
    the order they left."""
    out = []
    for bits in beats:
        data, _, first, _ = unpack_beat(MEM_WIDTH, bits)
        if not first:
            continue
        f = parse_mem_header(framing, data.to_bytes(MEM_WIDTH, "little"))
        if f["mem"]["op"] != MemOp.RESPONSE.value:
            out.append((f["mem"]["tag"], f["dst"], f["mem"]["op"]))
    return out


def memories(nodes, words, seed):
    rng = random.Random(seed)
    return {p: [rng.getrandbits(8 * MEM_WIDTH) for _ in range(words)] for p in range(nodes)}


def run_model(p):
    """The model's run of the parameters ``p`` and its inputs."""
    model = NicMemSystemModel(**{k: p[k] for k in TOP_KEYS if k in p})
    cmds = {int(n): [dict(zip(CMD_FIELDS, c, strict=True)) for c in lst]
            for n, lst in p.get("cmds", {}).items()}
    raws = {int(n): [(int(d, 16), nb, True, True) for d, nb in lst]
            for n, lst in p.get("raws", {}).items()}
    mem = memories(model.nodes, model.mem_words, p.get("mem_seed", 1))
    stalls = {int(n): tuple(v) for n, v in p.get("stalls", {}).items()}
    faults = FaultSettings(**p.get("faults", {}))
    return model, cmds, raws, mem, stalls, model.run(cmds, raws=raws, mem=mem, stalls=stalls,
                                                     link_settings=faults)


async def settle(dut, model, want):
    """Run on after the recorders are done: a round trip more (an extra RTL event then
    shows as a count mismatch) and, with ``link_retry``, to past the model's last busy
    cycle (a link may still replay a frame whose ACK was lost: its counters move)."""
    await ClockCycles(dut.clk, round_trip(fabric_profile(model.fabric)) + 64)
    left = int(want["cycles"]) + 16 - int(dut.now.value)
    if model.link_retry and left > 0:
        await ClockCycles(dut.clk, left)


def set_faults(h, settings):
    """Drive the ``flt`` ports of a top built with ``link_retry`` (before reset)."""
    for name, value in {**settings.ports(), **settings.retry_ports()}.items():
        h.set(f"flt__{name}", value)


def load_nodes(dut, h, n, cmds, raws, mem, want, stalls=None):
    """Each node's id, command and raw players (``stalls``: node -> the command player's
    ``(stall_seed, stall_rate)``), recorders armed for the model's run ``want`` and
    memory; returns the done ports of them all."""
    stalls = stalls or {}
    for q in range(n):
        h.set(f"node_id__{q}", q)
        h.load_player(f"cmd{q}", [pack(mem_cmd_layout, c) for c in cmds.get(q, [])],
                      stalls.get(q, (1, 0)))
        h.load_player(f"raw{q}", [pack_beat(MEM_WIDTH, *b) for b in raws.get(q, [])])
        for kind in ("tx", "wr", "rsp"):
            h.arm_recorder(f"{kind}{q}", len(want[kind][q]))
        load_memory(getattr(dut, f"mem{q}").mem, mem[q])
    return [f"{kind}{q}__done" for q in range(n) for kind in ("tx", "wr", "rsp", "cmd", "raw")]


@cocotb.test()
async def loads_and_atomics_match_model(dut):
    p = cosim_params()
    model, cmds, raws, mem, stalls, want = run_model(p)
    n = model.nodes
    h = Harness(dut)
    done = load_nodes(dut, h, n, cmds, raws, mem, want, stalls)
    if model.link_retry:
        set_faults(h, FaultSettings(**p.get("faults", {})))
    await h.reset()
    await h.wait_done(done, timeout_cycles=4 * want["cycles"] + 10_000)
    await settle(dut, model, want)
    sb = Scoreboard(dut._log)
    out = {"nodes": compare_nodes(dut, h, sb, model, cmds, want)}
    sb.equal("credit errors", int(dut.credit_errors.value), int(want["credit_errors"]))
    out["mismatches"] = len(sb.mismatches)
    out["cycles"] = want["cycles"]
    out["counters"] = want["counters"]
    out["links"] = want["links"]
    Path("nic_mem_results.json").write_text(json.dumps(out))
    sb.check()
    assert any(want["rsp"][q] for q in range(n)) or any(raws.values()), "nothing checked"


def compare_nodes(dut, h, sb, model, cmds, want):
    """Every node's frames, memory writes, landed responses (each with its cycle),
    command stamps, counters, busy tags and final memory against the model's run
    ``want``, into the scoreboard ``sb``. Returns ``{node: results}`` (see the module)."""
    n, words = model.nodes, model.mem_words
    nodes = {}
    for q in range(n):
        tx, tx_at = h.recorded(f"tx{q}")
        sb.compare(f"node {q} frames", tx, [pack_beat(MEM_WIDTH, *b) for _, b in want["tx"][q]])
        sb.compare(f"node {q} frame cycles", tx_at, [c for c, _ in want["tx"][q]], fmt=str)
        wr, wr_at = h.recorded(f"wr{q}")
        sb.compare(f"node {q} writes", wr, [a | be << (words - 1).bit_length()
                                             for _, a, be in want["wr"][q]])
        sb.compare(f"node {q} write cycles", wr_at, [c for c, _, _ in want["wr"][q]], fmt=str)
        rsp, rsp_at = h.recorded(f"rsp{q}")
        sb.compare(f"node {q} responses", rsp,
                   [pack(rsp_event_layout, tag=t, status=s, op=o)
                    for _, t, s, o in want["rsp"][q]])
        sb.compare(f"node {q} response cycles", rsp_at, [c for c, *_ in want["rsp"][q]],
                   fmt=str)
        stamps = h.played_stamps(f"cmd{q}", len(cmds.get(q, [])))
        sb.compare(f"node {q} command cycles", stamps, want["cmd_stamps"][q], fmt=str)
        for port, names in (("cnt_rx", MEM_RX_COUNTERS), ("cnt_resp", MEM_RESP_COUNTERS)):
            for name in names:
                sb.equal(f"node {q} {name}", int(getattr(dut, f"{port}__{q}__{name}").value),
                         want["counters"][q][name])
        sb.equal(f"node {q} outstanding", int(getattr(dut, f"outstanding__{q}").value),
                 want["outstanding"][q])
        for side in ("up", "down") if model.link_retry else ():
            for name in COUNTER_PORTS:    # tx_frames is port up__<q>__tx__frames
                port = f"{side}__{q}__" + name.replace("_", "__", 1)
                sb.equal(f"{side}{q} {name}", int(getattr(dut, port).value),
                         want["links"][f"{side}{q}"][name])
        final = dump_memory(getattr(dut, f"mem{q}").mem, words)
        sb.compare(f"node {q} memory", final, want["mem"][q])
        nodes[q] = {"cmd": want["cmd_stamps"][q], "cmd_rtl": stamps,
                           "rsp": [c for c, *_ in want["rsp"][q]], "rsp_rtl": rsp_at,
                           "peak": want["peak"][q],
                           "issued": issued(tx, model.framing),
                           "landed": [unpack(rsp_event_layout, v) for v in rsp],
                           "mem_rtl": [hex(v) for v in final]}
    return nodes
