"""The NIC headline: 1000 stores of 128 B from node 0 to node 1 through the switch.

:func:`run_headline` runs it in co-simulation for both framings and returns the rows of
``results.json`` (SPEC.md, "What every run measures"); the L2 frames go to ``nic.pcap``.
"""

import json
import pathlib

from pymodel.pcap import write_pcapng
from rtl.tops.nic_top import NicTop
from tb.cosim import run_cosim

__all__ = ["run_headline", "HEADLINE_TOP"]

#: The headline top: 64-byte datapath, 4 nodes, 2-cycle links, 32 KB local memories.
HEADLINE_TOP = dict(width=64, nodes=4, link_latency=2, mem_words=512, max_payload=1024)

METRICS = ("latency_cycles", "completion_cycles", "ii_cycles", "wire_bytes", "ctrl_ops")


def run_headline(sim: str, out_dir: pathlib.Path, messages: int = 1000,
                 msg_bytes: int = 128) -> list[dict]:
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    w = HEADLINE_TOP["width"]
    cmd_beats = messages * -(-msg_bytes // w)
    wire_beats = messages * -(-(20 + msg_bytes + 4) // w)
    depth = 1 << max(4, (max(cmd_beats, wire_beats) - 1).bit_length())
    rows = []
    for framing in ("l2", "compact"):
        top = NicTop(framing=framing, items=[depth, 16, 16, 16],
                     events=[depth, depth, 16, 16], **HEADLINE_TOP)
        params = dict(HEADLINE_TOP, framing=framing, credits=top.credits, scenario="pair",
                      seed=1, messages=messages, msg_bytes=msg_bytes)
        run_dir = run_cosim(top, name=f"nic_headline_{framing}", test_module="tb.nic.cocotb_nic",
                            sim=sim, test_id=f"headline-{messages}x{msg_bytes}", params=params)
        res = json.loads((pathlib.Path(run_dir) / "nic_results.json").read_text())
        row = {"design": "nic", "framing": framing, "simulator": sim, "msg_bytes": msg_bytes,
               "messages": messages, "peers": 1}
        for key in METRICS:
            row[f"{key}_rtl"] = res["rtl"][key]
            row[f"{key}_model"] = res["model"][key]
        mism = res["mismatches"] + sum(row[f"{k}_rtl"] != row[f"{k}_model"] for k in METRICS)
        row["mismatches"] = mism
        rows.append(row)
        if framing == "l2":
            write_pcapng(out_dir / "nic.pcap",
                         [(cycle, bytes.fromhex(frame)) for cycle, frame in res["frames"]])
    return rows
