"""The RDMA headline scenario of ``make sim``: WRITEs of one size, one QP versus 4096 QPs
round robin over a 16-entry QP-context cache, in co-simulation.

``run_headline`` returns rows in the SPEC.md results format and writes the wire
traffic of both runs to ``out_dir / "rdma.pcap"``.
"""

import json
import pathlib

from pymodel.pcap import write_pcapng
from spec.metrics import row_metrics
from spec.rdma import DEFAULTS, HEADLINE_QPS
from tb.rdma.runner import run_rdma

__all__ = ["run_headline", "run_point"]

#: The metrics of an RDMA results row.
_METRICS = row_metrics("rdma")


def run_point(sim: str, msg_bytes: int, messages: int, qps: int = 1,
              cache_entries: int | None = None, test_id: str | None = None) -> dict:
    """Co-simulate ``messages`` RDMA WRITEs of ``msg_bytes`` round robin over ``qps`` QPs
    with a QP-context cache of ``cache_entries`` (default: the top's). Returns the
    results row (SPEC.md) plus ``cycles`` and ``frames`` (``(cycle, bytes)`` on A->B)."""
    top = {} if cache_entries in (None, DEFAULTS["cache_entries"]) else \
        {"cache_entries": cache_entries}
    entries = top.get("cache_entries", DEFAULTS["cache_entries"])
    run_dir = run_rdma(top, params=dict(kind="writes", messages=messages,
                                        sizes=[msg_bytes], qps=qps,
                                        out_json="measurements.json"),
                       sim=sim, test_id=test_id or
                       f"point_{sim}_q{qps}_c{entries}_n{messages}_b{msg_bytes}")
    meas = json.loads((run_dir / "measurements.json").read_text())
    row = {"design": "rdma", "framing": "rocev2", "simulator": sim,
           "msg_bytes": msg_bytes, "messages": messages, "qps": qps,
           "cache_entries": entries}
    for key in _METRICS:
        row[f"{key}_rtl"] = meas["rtl"][key]
        row[f"{key}_model"] = meas["model"][key]
    row["mismatches"] = meas["mismatches"]
    row["cycles"] = meas.get("cycles")
    row["frames"] = [(cycle, bytes.fromhex(hexa)) for cycle, hexa in meas["frames"]]
    return row


def run_headline(sim: str, out_dir: pathlib.Path, messages: int = 1000,
                 msg_bytes: int = 128) -> list[dict]:
    """Run both headline scenarios on ``sim``; return one results row per QP count."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows, pcap, offset = [], [], 0
    for qps in HEADLINE_QPS:
        row = run_point(sim, msg_bytes, messages, qps,
                        test_id=f"headline_{sim}_q{qps}_n{messages}_b{msg_bytes}")
        frames = [(cycle + offset, fr) for cycle, fr in row.pop("frames")]
        row.pop("cycles")
        rows.append(row)
        pcap += frames
        if frames:
            offset = frames[-1][0] + 1000
    write_pcapng(out_dir / "rdma.pcap", pcap)
    return rows
