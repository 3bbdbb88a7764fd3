"""cocotb test of NicTop under open-loop load: seeded arrivals in the timed command players.

The stores of :func:`analysis.load.nic.load_plan` (each with its arrival cycle as the
release of its first command beat) go into the ``cmd<p>`` players before reset; the
simulator then runs freely. Checked, as in :mod:`tb.nic.cocotb_nic`: every uplink beat
and its cycle, every command accept cycle, every local-memory write and its cycle,
every credit arrival, the receive and switch counters and the whole memories against
the model (:meth:`tb.nic.testbench.NicTestbench.compare`). Then the per-message arrays
(``accept``, ``remote_write``, ``completion``), worked out from the RTL's own stamps
only, against the model's, and the load row of each. And, independent of the model
(:func:`analysis.load.nic.load_intent`): each store landed once, where it was sent (the
word addresses each destination's recorder saw are exactly those of the stores sent
there), every memory holds what the stores wrote, every frame was received whole
(``frames_ok``, no drop), and no store was accepted before its arrival.

Writes ``load_results.json`` (the RTL's and the model's rows, the mismatch count) in
its run folder.
"""

import json
import time
from pathlib import Path

import cocotb
import numpy as np

from analysis.load.nic import (
    LOAD_TOP,
    MESSAGE_FIELDS,
    load_intent,
    load_plan,
    load_row,
    run_plan,
)
from pymodel.packet import unpack_beat
from tb.cosim import cosim_params
from tb.nic.testbench import NicTestbench
from tb.scoreboard import Scoreboard


def rtl_arrays(tb, plan):
    """The per-message arrays of the run from the RTL's stamps alone: ``accept`` the
    store's first command beat, ``completion`` the credit of its last wire beat at the
    sender (credits come back one per beat, in order), ``remote_write`` the cycle of the
    write of its last word at its destination (the j-th store to a slot is the j-th
    write of that slot's last word: slots belong to one sender, whose stores to a
    destination arrive in order). A value the RTL never produced is -1."""
    w = plan.top["width"]
    starts = {s: [a for a, _ in tb.sources[s].stamps()] for s in plan.stores}
    ends = {}                                    # sender -> index of each store's last beat
    for s, stores in plan.stores.items():
        beats, _ = tb.uplink_beats(s)
        last = [k for k, b in enumerate(beats) if unpack_beat(w, b)[3]]
        frames, k, out = iter(last), 0, []
        for st in stores:
            segs = len(st.segments(w, plan.top["max_payload"]))
            for _ in range(segs):
                k = next(frames, -1)
            out.append(k)
        ends[s] = out
    writes = {}
    for d in range(plan.top["nodes"]):
        for addr, _be, cyc in tb.writes(d):
            writes.setdefault((d, addr), []).append(cyc)
    cols = {f: [] for f in MESSAGE_FIELDS}
    for s, k in plan.order:
        st = plan.stores[s][k]
        cr = tb.credit_stamps(s)
        e = ends[s][k]
        word = (st.addr + len(st.payload) - 1) // w
        q = writes.get((st.dst, word), [])
        for f, v in zip(MESSAGE_FIELDS, (s, st.dst, st.release, starts[s][k],
                                         q.pop(0) if q else -1,
                                         cr[e] if 0 <= e < len(cr) else -1), strict=True):
            cols[f].append(v)
    return {f: np.asarray(v, dtype=np.int64) for f, v in cols.items()}


def check_intent(sb, tb, plan, arrays):
    """The model-free oracle: every store landed once, where it was sent."""
    mems, words = load_intent(plan)
    w, nodes = plan.top["width"], plan.top["nodes"]
    frames = {d: 0 for d in range(nodes)}
    for stores in plan.stores.values():
        for st in stores:
            frames[st.dst] += len(st.segments(w, plan.top["max_payload"]))
    for d in range(nodes):
        got = sorted(addr for addr, _, _ in tb.writes(d))
        sb.equal(f"intent wr{d}: the words of the stores sent there, once each",
                 got == words[d], True)
        data = b"".join(v.to_bytes(w, "little") for v in tb.memory(d))
        sb.equal(f"intent mem{d} holds what the stores wrote", data == mems[d], True)
        c = tb.counters(d)
        sb.equal(f"intent frames_ok{d}", c["frames_ok"], frames[d])
        sb.equal(f"intent drops{d}", sum(c.values()) - c["frames_ok"], 0)
    early = int((arrays["accept"] < arrays["arrival"]).sum())
    sb.equal("intent: no store accepted before its arrival", early, 0)


@cocotb.test()
async def nic_load_matches_model(dut):
    p = cosim_params()
    top = {k: p.get(k, v) for k, v in LOAD_TOP.items()}
    plan = load_plan(p["pattern"], p["nodes"], p["msg_bytes"], p["messages"], p["load"],
                     p["seed"], p.get("burst", 1), p["framing"], **top)
    t0 = time.perf_counter()
    arrays, row, want = run_plan(plan)
    t_model = time.perf_counter() - t0

    tb = NicTestbench(dut, p["nodes"], top["width"], top["mem_words"])
    cap = tb.capacity()
    need = max(sum(len(s.beats(top["width"])) for s in v) for v in plan.stores.values())
    assert need <= cap["cmd_depth"], f"{need} command beats; the players hold {cap}"
    tb.load(plan.stores, plan.node_ids)
    tb.arm(want)
    t0 = time.perf_counter()
    await tb.run(timeout_cycles=4 * want["cycles"] + 2000, until=want["cycles"] + 8)
    t_sim = time.perf_counter() - t0
    dut._log.info("%s, %d nodes, load %s: %d messages, model %d cycles in %.2f s; "
                  "simulator in %.2f s", p["pattern"], p["nodes"], p["load"],
                  len(plan.order), want["cycles"], t_model, t_sim)

    sb = Scoreboard(dut._log)
    tb.compare(sb, want)
    sb.equal("recorder overflows", tb.overflows(), [])
    got = rtl_arrays(tb, plan)
    for f in MESSAGE_FIELDS:
        sb.compare(f"per-message {f}", got[f].tolist(), arrays[f].tolist(), fmt=str)
    rtl_row = load_row(plan, got) if (got["remote_write"] >= 0).all() else None
    if rtl_row is None:
        sb.equal("every store's remote write seen", False, True)
    else:
        for key, value in row.items():
            sb.equal(f"row {key}", rtl_row[key], value)
    check_intent(sb, tb, plan, got)
    Path("load_results.json").write_text(json.dumps(
        {"rtl": rtl_row, "model": row, "mismatches": len(sb.mismatches),
         "checked": sb.checked, "cycles": tb.end}))
    sb.check()
