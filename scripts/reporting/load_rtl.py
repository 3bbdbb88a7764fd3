"""The RTL subset of the "Under load" section (:mod:`scripts.reporting.load`): points
co-simulated on ``--sim`` whose RTL rows must equal the model's (a failed run is a row
with a mismatch)."""

import json
from pathlib import Path

from analysis.load.rdma import best_rung, saturation
from spec.rdma_fabric import FABRIC_DEFAULTS

from .load_rows import MSG_BYTES
from .progress import Progress

#: The RTL subset: ``(kind, name, knobs, load)``: RDMA points on RdmaTop, NIC points on
#: NicTop (the load co-simulation's top, tests/test_cosim_nic_load.py) and incast on the
#: RDMA fabric (RdmaFabricTop, 4 nodes: ``nodes`` in its knobs, so that its results row
#: carries it as the model's multi-node rows do).
RTL_POINTS = (
    ("rdma", "rdma 1 QP, 50 %", dict(qps=1), 0.5),
    ("rdma", "rdma 64 QPs zipf / 16, 90 %", dict(qps=64, popularity="zipf"), 0.9),
    ("rdma", "rdma 4096 QPs uniform / 16, 70 %", dict(qps=4096, popularity="uniform"), 0.7),
    ("rdma", "rdma 1 QP issuer cpu, 100 %", dict(qps=1, issuer="cpu"), 1.0),
    ("nic", "nic L2 pair, 90 %", dict(pattern="pair", nodes=2), 0.9),
    ("nic", "nic L2 incast 3->1, 50 % per sender", dict(pattern="incast", nodes=4), 0.5),
    ("fabric", "rdma fabric incast 3->1, 50 %",
     dict(pattern="incast", nodes=FABRIC_DEFAULTS["nodes"]), 0.5),
)
#: NicTop of the NIC points (as tests/test_cosim_nic_load.py builds it).
NIC_RTL_TOP = dict(width=16, link_latency=2, mem_words=1024, max_payload=512)


def _rtl_point(task):
    kind, name, knobs, load, sim, messages = task
    tag = "".join(ch if ch.isalnum() else "_" for ch in name)
    row = {"point": name, "simulator": sim, "load": load, "knobs": knobs,
           "messages": messages}
    try:
        if kind == "rdma":
            from tb.rdma.load_run import run_rdma_load
            knobs = dict(knobs, rung=best_rung(knobs.get("issuer", "none"), MSG_BYTES))
            row["knobs"] = knobs
            service = saturation(MSG_BYTES, messages, **knobs)
            res = run_rdma_load(sim, f"load_{tag}", msg_bytes=MSG_BYTES, messages=messages,
                                load=load, service_cycles=service, **knobs)
            sides = {side: res[side] for side in ("rtl", "model")}
            mism = res["mismatches"] + int(res["per_rtl"] != res["per_model"])
        elif kind == "nic":
            from rtl.tops.nic_top import NicTop
            from tb.cosim import run_cosim
            n = min(messages, 32)
            top = NicTop(framing="l2", nodes=knobs["nodes"], items=256, events=2048,
                         **NIC_RTL_TOP)
            folder = run_cosim(top, name=f"nic_load_n{knobs['nodes']}",
                               test_module="tb.nic.cocotb_load", sim=sim,
                               test_id=f"load_{tag}",
                               params=dict(NIC_RTL_TOP, msg_bytes=MSG_BYTES, messages=n,
                                           load=load, seed=7, burst=1, framing="l2",
                                           **knobs))
            res = json.loads((Path(folder) / "load_results.json").read_text())
            sides = {side: res[side] for side in ("rtl", "model")}
            mism = res["mismatches"] + int(res["rtl"] != res["model"])
            row["messages"] = n
        else:
            from tb.rdma.fabric_runner import run_fabric
            n = min(messages, 24)
            top = ({} if knobs["nodes"] == FABRIC_DEFAULTS["nodes"]
                   else {"nodes": knobs["nodes"]})
            folder = run_fabric(top, params=dict(pattern=knobs["pattern"], messages=n,
                                                msg_bytes=MSG_BYTES, load=load,
                                                warmup=3000, out_json="m.json"),
                                sim=sim, test_id=f"load_{tag}")
            res = json.loads((Path(folder) / "m.json").read_text())
            sides = {side: res.get(side) for side in ("rtl", "model")}
            mism = res["mismatches"] + int(res.get("rtl") != res.get("model"))
            row["messages"] = n
    except Exception as exc:          # noqa: BLE001 - a failed co-simulation is a row
        row.update(mismatches=f"run failed: {str(exc).splitlines()[0][:200]}")
        return row
    for side, r in sides.items():
        for k, v in (r or {}).items():
            row[f"{k}_{side}"] = v
    row["mismatches"] = mism
    return row


def run_load_rtl(executor, sim, messages):
    """Co-simulate :data:`RTL_POINTS` on ``sim`` (up to ``messages`` each); their rows."""
    tasks = [(kind, n, k, load, sim, messages) for kind, n, k, load in RTL_POINTS]
    bar = Progress(len(tasks), f"under load: RTL subset ({sim})")
    return executor.map(_rtl_point, tasks, lambda r: bar.step(r["point"]))
