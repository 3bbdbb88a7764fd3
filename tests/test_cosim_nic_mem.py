"""NicMemTop (remote loads and 8-byte atomics) on Verilator and Icarus against its golden
model: every frame, memory write, landed response, counter, final memory byte and cycle
(the cocotb module's scoreboard). The tests here add oracles of their own, derived from
the stimulus alone: the bytes each load lands are the target's bytes, the atomics' old
values and final counts, the ordering rules (docs/nic.md, "Loads and atomics"), tag
exhaustion, and the hostile frames' counts."""

import json
import random
from pathlib import Path

import pytest

from pymodel.nic.mem_frames import build_mem_frame, request_payload
from rtl.tops.nic_mem_top import NicMemTop
from spec.formats.nic_mem import MEM_WIDTH, MemOp, MemStatus
from tb.cosim import run_cosim
from tb.nic.cocotb_nic_mem import memories

#: One small top for the compact tests (one build per simulator): 3 nodes on the board
#: fabric, 4 tags (so that tag exhaustion is reached), 16 KB memories, 256-byte loads.
TOP = dict(nodes=3, framing="compact", fabric="board", tags=4, mem_words=256,
           max_payload=256)
SEED = 7
M64 = (1 << 64) - 1


def _cmd(op, dst, addr, length=0, laddr=0, a=0, b=0):
    return [MemOp(op).value, dst, addr, length, laddr, a, b]


def _run(sim, test_id, cmds, raws=None, stalls=None, faults=None, **top):
    params = dict(TOP, **top)
    extra = {"faults": faults} if faults else {}
    run_dir = run_cosim(NicMemTop(**params, items=64, raws=16, events=512),
                        name="nic_mem_top", test_module="tb.nic.cocotb_nic_mem", sim=sim,
                        test_id=test_id,
                        params=dict(params, cmds=cmds, raws=raws or {}, mem_seed=SEED,
                                    stalls=stalls or {}, **extra))
    res = json.loads((Path(run_dir) / "nic_mem_results.json").read_text())
    assert res["mismatches"] == 0
    return res


def _bytes(words, addr, n):
    """``n`` bytes at byte ``addr`` of a memory image (a list of 64-byte words)."""
    first = addr // MEM_WIDTH
    raw = b"".join(w.to_bytes(MEM_WIDTH, "little") for w in words[first:first + 3 + n // 64])
    return raw[addr % MEM_WIDTH:addr % MEM_WIDTH + n]


def _rtl_mem(res, node):
    return [int(v, 16) for v in res["nodes"][str(node)]["mem_rtl"]]


def _landing(res, node, cmds):
    """``[(command index, landing cycle, status)]`` of node ``node``'s commands, from the
    RTL's request frames (in command order, with their tags) and its landed responses
    (tag, in landing order): each response belongs to the oldest unanswered request of
    its tag."""
    nd = res["nodes"][str(node)]
    issued = nd["issued"]
    assert len(issued) == len(cmds)
    open_ = {}
    for k, (tag, dst, _) in enumerate(issued):
        assert dst == cmds[k][1]
        open_.setdefault(tag, []).append(k)
    out = []
    for ev, cyc in zip(nd["landed"], nd["rsp_rtl"], strict=True):
        out.append((open_[ev["tag"]].pop(0), cyc, ev["status"]))
    assert not any(open_.values()), "a request without its response"
    return out


def loads_mix():
    """Node 0 loads from nodes 2 and 1 in turn (1 to 256 bytes, the edge sizes), node 1
    from nodes 2 and 0, node 2 four 256-byte loads from node 1: more loads than tags
    (exhaustion), and node 0's second load (to node 1, busy answering node 2) is
    overtaken by its third (to node 2). No load reads a word that a response lands in."""
    rng = random.Random(5)
    sizes = [1, 256, 8, 63, 64, 65, 127, 128, 129, 256, 200, 3]
    c0 = [_cmd(MemOp.LOAD, 2 - k % 2, 64 * rng.randrange(0, 90), s, 64 * 4 * k)
          for k, s in enumerate(sizes)]
    c1 = [_cmd(MemOp.LOAD, [2, 0][k % 2], 64 * (200 + k), 64 + k, 64 * (100 + 2 * k))
          for k in range(8)]
    c2 = [_cmd(MemOp.LOAD, 1, 64 * (120 + 4 * k), 256, 64 * (220 + 4 * k)) for k in range(4)]
    return {0: c0, 1: c1, 2: c2}


def _check_loads(res, cmds, nodes):
    init = memories(nodes, TOP["mem_words"], SEED)
    for q, lst in cmds.items():
        mem = _rtl_mem(res, q)
        for op, dst, addr, n, laddr, _, _ in lst:
            assert op == MemOp.LOAD.value
            assert _bytes(mem, laddr, n) == _bytes(init[dst], addr, n), (q, addr, n)


@pytest.mark.slow_variants("verilator*", reason=(
    "a Verilator build of NicMemTop of its own; Icarus runs the same case in make test"))
@pytest.mark.parametrize("stall_rate", [0, 128])
def test_loads_match_model(sim, stall_rate, test_id):
    """The loads mix, with the command players always valid or withholding about half
    their cycles."""
    cmds = loads_mix()
    res = _run(sim, test_id, cmds, stalls={q: [11 + q, stall_rate] for q in cmds})
    _check_loads(res, cmds, TOP["nodes"])
    c = res["counters"]
    assert (c["0"]["rsp_ok"], c["1"]["rsp_ok"], c["2"]["rsp_ok"]) == (12, 8, 4)
    assert sum(c[str(q)]["req_ok"] for q in range(3)) == 24
    # Ordering: per (requester, target) responses land in request order; across targets
    # they may not.
    landing = {q: _landing(res, q, cmds[q]) for q in cmds}
    for q, lst in landing.items():
        for dst in {cmds[q][k][1] for k, _, _ in lst}:
            order = [k for k, _, _ in lst if cmds[q][k][1] == dst]
            assert order == sorted(order), (q, dst, order)
    order0 = [k for k, _, _ in landing[0]]
    assert order0 != sorted(order0), "responses to node 0 never overtook each other"
    # Tag exhaustion: 4 tags, so the fifth load is issued only after a response landed
    # (the cycle after its tag was freed); nothing was dropped.
    nd = res["nodes"]["0"]
    assert nd["peak"] == TOP["tags"]
    assert nd["cmd_rtl"][TOP["tags"]] > min(nd["rsp_rtl"])


@pytest.mark.slow_variants("verilator*", reason=(
    "a Verilator build of NicMemTop of its own; Icarus runs the same case in make test"))
def test_atomics_match_model(sim, test_id):
    """12 fetch-and-adds of +1 from nodes 0 and 1 on one counter of node 2 (each old
    value returned once: the counter's values before each add, in some order), two
    compare-and-swaps on one word (the first with the right compare value swaps), and a
    misaligned fetch-and-add (ERROR, nothing written)."""
    ctr, cas = 8 * 3, 64 * 5 + 16
    c = {0: [], 1: []}
    for k in range(6):
        for q in (0, 1):
            c[q].append(_cmd(MemOp.FETCH_ADD, 2, ctr, laddr=64 * (40 + 2 * k + q), a=1))
    init = memories(3, TOP["mem_words"], SEED)
    cas_old = int.from_bytes(_bytes(init[2], cas, 8), "little")
    c[0].append(_cmd(MemOp.CMP_SWAP, 2, cas, laddr=64 * 60, a=cas_old, b=0x1234))
    c[1].append(_cmd(MemOp.CMP_SWAP, 2, cas, laddr=64 * 61, a=cas_old ^ 1, b=0x5678))
    c[0].append(_cmd(MemOp.FETCH_ADD, 2, ctr + 4, laddr=64 * 62, a=1))
    res = _run(sim, test_id, c)
    start = int.from_bytes(_bytes(init[2], ctr, 8), "little")
    final = _rtl_mem(res, 2)
    assert int.from_bytes(_bytes(final, ctr, 8), "little") == (start + 12) & M64
    olds = sorted(int.from_bytes(_bytes(_rtl_mem(res, q), 64 * (40 + 2 * k + q), 8), "little")
                  for k in range(6) for q in (0, 1))
    assert olds == sorted((start + i) & M64 for i in range(12))
    assert int.from_bytes(_bytes(final, cas, 8), "little") == 0x1234
    assert int.from_bytes(_bytes(_rtl_mem(res, 0), 64 * 60, 8), "little") == cas_old
    assert int.from_bytes(_bytes(_rtl_mem(res, 1), 64 * 61, 8), "little") in (cas_old, 0x1234)
    # The misaligned add: answered ERROR, its landing word untouched.
    assert _bytes(_rtl_mem(res, 0), 64 * 62, 64) == _bytes(init[0], 64 * 62, 64)
    counts = res["counters"]
    assert counts["2"]["req_ok"] == 14 and counts["2"]["req_err"] == 1
    assert counts["0"]["rsp_err"] == 1 and counts["0"]["rsp_ok"] == 7
    # Every byte of node 2 but the counter and the swapped word is as it was.
    for addr in range(0, 64 * TOP["mem_words"], 8):
        if addr not in (ctr, cas):
            assert _bytes(final, addr, 8) == _bytes(init[2], addr, 8), addr


def _raw(dst, op, tag, length, addr, payload=b"", status=0, opcode=3, src=2):
    frame = build_mem_frame("compact", src, dst, op, tag, length, addr, payload, status,
                            opcode)
    return [hex(int.from_bytes(frame, "little")), len(frame)]


@pytest.mark.slow_variants("verilator*", reason=(
    "a Verilator build of NicMemTop of its own; Icarus runs the same case in make test"))
def test_hostile_frames_are_dropped_or_refused(sim, test_id):
    """Node 2 sends forged and bad frames while node 0 loads from node 1: each is dropped
    or answered ERROR and counted; every load still lands its right bytes (the forged
    answer to a pending tag included), and node 1's memory is untouched."""
    raws = {2: [
        # A forged answer to node 0's first load (tag 0, 40 bytes, asked of node 1) that
        # arrives before node 1's: from the wrong node, so dropped (else node 0 would
        # land 40 forged bytes, and drop the real answer).
        _raw(0, MemOp.RESPONSE, 0, 40, 0, bytes(range(40))),
        # A response to node 0 whose length is not the one asked (its tag is pending or
        # not: dropped either way), and one to node 1, which has no tag outstanding.
        _raw(0, MemOp.RESPONSE, 3, 5, 0, bytes(5)),
        _raw(1, MemOp.RESPONSE, 2, 8, 0, bytes(8)),
        # Malformed requests: a load with 8 stray payload bytes; a store opcode.
        _raw(1, MemOp.LOAD, 0, 64, 0, bytes(8)),
        _raw(1, MemOp.LOAD, 0, 64, 0, opcode=1),
        # Requests node 1 cannot do: a misaligned atomic, a load of 0 and of 300 bytes.
        _raw(1, MemOp.FETCH_ADD, 0, 8, 64 * 7 + 4, request_payload(MemOp.FETCH_ADD, 1, 0)),
        _raw(1, MemOp.LOAD, 1, 0, 0),
        _raw(1, MemOp.LOAD, 2, 300, 0),
    ]}
    cmds = {0: [_cmd(MemOp.LOAD, 1, 64 * (8 * k), 40 if k == 0 else 64 * (1 + k % 4),
                     64 * 4 * k) for k in range(8)]}
    res = _run(sim, test_id, cmds, raws)
    _check_loads(res, cmds, TOP["nodes"])
    init = memories(3, TOP["mem_words"], SEED)
    assert _rtl_mem(res, 1) == init[1]
    c = res["counters"]
    assert (c["0"]["drop_tag"], c["0"]["rsp_ok"], c["0"]["rsp_err"]) == (2, 8, 0)
    assert (c["1"]["drop_tag"], c["1"]["drop_malformed"]) == (1, 2)
    assert (c["1"]["req_ok"], c["1"]["req_err"]) == (8, 3)
    # The three ERROR responses go back to node 2, which issued nothing: not its tags.
    assert (c["2"]["drop_tag"], c["2"]["rsp_err"]) == (3, 0)
    assert all(c[q]["drop_fcs"] == c[q]["drop_dst"] == c[q]["drop_full"] == 0 for q in c)
    assert MemStatus.ERROR == 1


@pytest.mark.slow_variants("verilator", reason=(
    "Icarus runs the same L2 point against the model; the compact loads, atomics and "
    "hostile frames run on both simulators"))
def test_l2_loads_and_atomics_match_model(sim, test_id):
    """The L2 framing (22-byte header, padded short frames): loads of the edge sizes and
    fetch-and-adds."""
    cmds = {0: [_cmd(MemOp.LOAD, 1, 64 * k, s, 64 * 4 * k)
                for k, s in enumerate([1, 37, 38, 42, 64, 128, 256])],
            1: [_cmd(MemOp.FETCH_ADD, 0, 64 * 250 + 8 * k, laddr=64 * (200 + k), a=k + 1)
                for k in range(4)]}
    res = _run(sim, test_id, cmds, framing="l2")
    _check_loads(res, {0: cmds[0]}, TOP["nodes"])
    init = memories(3, TOP["mem_words"], SEED)
    for k in range(4):
        old = int.from_bytes(_bytes(init[0], 64 * 250 + 8 * k, 8), "little")
        assert int.from_bytes(_bytes(_rtl_mem(res, 1), 64 * (200 + k), 8), "little") == old
        assert int.from_bytes(_bytes(_rtl_mem(res, 0), 64 * 250 + 8 * k, 8),
                              "little") == (old + k + 1) & M64


@pytest.mark.slow_variants("verilator", reason=(
    "Icarus runs the same point against the model; the model's timing with a target "
    "latency is checked against a hand derivation in tests/test_nic_mem_model.py"))
def test_target_latency_loads_and_atomics_match_model(sim, test_id):
    """Targets whose memory read takes 20 cycles, 2 in flight (an atomic fences them):
    node 0 mixes loads and fetch-and-adds to node 2, node 1 adds to the same counter;
    the bytes and the old values are the stimulus's, and node 0's first load lands 20
    cycles later than on the default top (the same commands)."""
    lat, ctr = 20, 8 * 250 * 8
    loads = [_cmd(MemOp.LOAD, 2, 64 * (10 + 4 * k), s, 64 * 4 * k)
             for k, s in enumerate([128, 1, 256, 65, 64])]
    c0 = loads[:2] + [_cmd(MemOp.FETCH_ADD, 2, ctr, laddr=64 * 100, a=1)] + loads[2:]
    c1 = [_cmd(MemOp.FETCH_ADD, 2, ctr, laddr=64 * (110 + k), a=1) for k in range(4)]
    cmds = {0: c0, 1: c1}
    base = _run(sim, f"{test_id}-base", cmds)
    res = _run(sim, test_id, cmds, target_latency=lat, target_reads=2)
    _check_loads(res, {0: loads}, TOP["nodes"])
    init = memories(3, TOP["mem_words"], SEED)
    start = int.from_bytes(_bytes(init[2], ctr, 8), "little")
    assert int.from_bytes(_bytes(_rtl_mem(res, 2), ctr, 8), "little") == (start + 5) & M64
    olds = [int.from_bytes(_bytes(_rtl_mem(res, 0), 64 * 100, 8), "little")]
    olds += [int.from_bytes(_bytes(_rtl_mem(res, 1), 64 * (110 + k), 8), "little")
             for k in range(4)]
    assert sorted(olds) == [(start + i) & M64 for i in range(5)]
    assert res["counters"]["2"]["req_ok"] == 10
    first = [_landing(r, 0, c0)[0] for r in (base, res)]
    assert first[0][0] == first[1][0] == 0
    nd0, nd1 = base["nodes"]["0"], res["nodes"]["0"]
    assert first[1][1] - nd1["cmd_rtl"][0] == first[0][1] - nd0["cmd_rtl"][0] + lat


#: Fault settings of the link-retry test (per 65,535 frames, per wire): about 5% of the
#: frames corrupted, 3% dropped or duplicated, and the retry's tags and ACK/NAKs
#: damaged too; the seed gives every kind at least once in this short run.
RETRY_FAULTS = dict(seed=3, drop_rate=2000, corrupt_rate=3000, dup_rate=2000,
                    tag_rate=1500, ack_drop_rate=2000, ack_corrupt_rate=2000)


@pytest.mark.slow_variants("verilator", reason=(
    "a Verilator build of NicMemTop with link_retry of its own; Icarus runs the same "
    "case in make test"))
def test_link_retry_loads_and_atomics_match_model(sim, test_id):
    """NicMemTop with ``link_retry`` over wires that drop, corrupt and duplicate frames
    and damage the retry's tags and ACK/NAKs: the loads mix (tag exhaustion, responses
    overtaking) and six fetch-and-adds of node 2 on a counter of node 0, with the
    command players withholding a quarter of their cycles. RTL = model on every beat,
    write, landed response, counter (the links' included) and cycle; each load lands
    the target's bytes, each add ran once, every command is answered OK once, and the
    per-(requester, target) order holds."""
    cmds = loads_mix()
    ctr = 64 * 240
    cmds[2] += [_cmd(MemOp.FETCH_ADD, 0, ctr, laddr=64 * (240 + k), a=1) for k in range(6)]
    res = _run(sim, test_id, cmds, stalls={q: [31 + q, 64] for q in cmds},
               faults=RETRY_FAULTS, link_retry=True)
    _check_loads(res, {0: cmds[0], 1: cmds[1], 2: cmds[2][:4]}, TOP["nodes"])
    init = memories(3, TOP["mem_words"], SEED)
    start = int.from_bytes(_bytes(init[0], ctr, 8), "little")
    assert int.from_bytes(_bytes(_rtl_mem(res, 0), ctr, 8), "little") == (start + 6) & M64
    olds = sorted(int.from_bytes(_bytes(_rtl_mem(res, 2), 64 * (240 + k), 8), "little")
                  for k in range(6))
    assert olds == [(start + i) & M64 for i in range(6)]
    c = res["counters"]
    assert [c[str(q)]["rsp_ok"] for q in range(3)] == [len(cmds[q]) for q in range(3)]
    assert all(c[str(q)]["rsp_err"] == c[str(q)]["drop_tag"] == c[str(q)]["drop_fcs"] == 0
               for q in range(3))
    for q, lst in ((q, _landing(res, q, cmds[q])) for q in cmds):
        for dst in {cmds[q][k][1] for k, _, _ in lst}:
            order = [k for k, _, _ in lst if cmds[q][k][1] == dst]
            assert order == sorted(order), (q, dst, order)
    # The wires did damage frames, tags and ACK/NAKs, and the links replayed.
    links = res["links"].values()
    for kind in ("dropped", "corrupted", "duplicated", "tag_corrupted", "acks_dropped",
                 "acks_corrupted"):
        assert sum(v[f"link_{kind}"] for v in links) > 0, kind
    assert sum(v["tx_resent_frames"] for v in links) > 0
