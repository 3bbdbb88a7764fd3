"""The report's files: results.csv (one row per point, every key) and report.md (the
headline table, RTL against the model, the sweeps, the area proxies, the plots)."""

import csv
import json
import time

from .grid import CACHES, FRAMINGS, PEERS, QPS, SIZES
from .rtl_subset import row_fails

__all__ = ["efficiency", "ctrl_total", "write_csv", "find", "area_components", "state_per",
           "fmt", "headline_table", "host_table", "write_report"]


def efficiency(row, suffix="model"):
    wire = row.get(f"wire_bytes_{suffix}")
    return row["msg_bytes"] / wire if wire else None


def ctrl_total(ops):
    return sum(ops.values()) if isinstance(ops, dict) else ops


def write_csv(rows, path):
    keys = []
    for r in rows:
        for k in r:
            if k not in keys:
                keys.append(k)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else v
                        for k, v in r.items()})


def find(rows, **want):
    """The first row with every ``want`` key equal. A NIC row with an ``attachment`` other
    than integrated, or an RDMA row with a ``rung`` other than pipelined, matches only
    when ``want`` names it (an RDMA row's ``attachment`` is its ``host``: matched only
    when ``want`` names one)."""
    for r in rows:
        if r.get("design") != "rdma" and (r.get("attachment", "integrated")
                                          != want.get("attachment", "integrated")):
            continue
        if r.get("rung", "pipelined") != want.get("rung", "pipelined"):
            continue
        if all(r.get(k) == v for k, v in want.items()):
            return r
    return None


def area_components(area):
    """area.json's components as a dict by name (the file keeps a list)."""
    comps = (area or {}).get("components", [])
    if isinstance(comps, dict):
        return comps
    return {c["component"]: c for c in comps}


def state_per(area, design):
    """State bits per peer (NIC) or per QP (RDMA) from area.json, as a table cell."""
    st = (area or {}).get("state", {})
    if design == "nic":
        v = st.get("nic", {}).get("per_peer_bits")
        return "-" if v is None else str(v)
    r = st.get("rdma", {})
    if "qp_context_host_bits" not in r:
        return "-"
    slot = (f" + {r['window_slot_bits']} in the window table" if r.get("window_slot_bits")
            else "") + (f" + {r['ack_slot_bits']} in the ACK queue" if r.get("ack_slot_bits")
                        else "")
    return (f"{r['qp_context_host_bits']} in host memory + {r['on_chip_bits_per_cached_qp']}"
            f" on chip while cached{slot}")



def fmt(v, digits=1):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}".rstrip("0").rstrip(".") if not v.is_integer() else str(int(v))
    return str(v)


def headline_table(grid, area):
    designs = (area or {}).get("designs", {})
    lines = ["| at 128 B | latency | completion | ii | wire eff. | ctrl ops | ctrl bytes "
             "| state bits per peer / QP | flip-flop bits | memory bits |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    cases = [("NIC compact", dict(design="nic", framing="compact", peers=1), "nic"),
             ("NIC L2", dict(design="nic", framing="l2", peers=1), "nic"),
             ("RDMA 1 QP", dict(design="rdma", qps=1, cache_entries=16), "rdma_c16"),
             ("RDMA 4096 QPs, 16-entry cache", dict(design="rdma", qps=4096,
                                                   cache_entries=16), "rdma_c16")]
    for name, sel, design in cases:
        r = find(grid, msg_bytes=128, **sel)
        if not r:
            continue
        per = state_per(area, design[:4].rstrip("_"))
        total = designs.get(f"{design.split('_')[0]}_design"
                            + (f"_{design.split('_')[1]}" if "_" in design else ""), {})
        lines.append("| " + " | ".join([
            name, fmt(r["latency_cycles_model"]), fmt(r["completion_cycles_model"]),
            fmt(r["ii_cycles_model"]), f"{100 * efficiency(r):.1f} %",
            fmt(ctrl_total(r["ctrl_ops_model"]), 2), fmt(r.get("ctrl_bytes_model", 0)),
            per, fmt(total.get("ff_bits")), fmt(total.get("mem_bits"))]) + " |")
    return lines


def host_table(grid, rtl, msg_bytes=128):
    """Host-interface bytes and TLPs per message on the ``pcie`` profile: the NIC's
    ``pcie`` attachment and every rung of the RDMA ladder, with the derivation of the
    bytes from the TLP counts and the profile's per-TLP overheads (spec/host.py):
    ``payload + read requests x req + writes x req + completions x cpl + host writes x
    mmio``. The payload column is what is left; it must hold the message at least
    twice (in from the sender's host, out to the receiver's)."""
    from spec.host import PROFILES
    from spec.rdma_engine import LADDER
    pcie = PROFILES["pcie"]
    ovh = {"read_req": pcie.req_overhead, "write": pcie.req_overhead,
           "completion": pcie.cpl_overhead, "mmio": pcie.mmio_overhead}
    lines = [f"| per {msg_bytes} B message (pcie) | read req | write | completion | host write "
             "| payload B | overhead B (TLPs x bytes) | host B (model) | host B (RTL) |",
             "|---|---|---|---|---|---|---|---|---|"]
    cases = [("NIC L2, pcie attachment", dict(design="nic", framing="l2", peers=1,
                                              attachment="pcie"))]
    cases += [(f"RDMA {name}", dict(design="rdma", qps=1, cache_entries=16,
                                    **({} if name == "pipelined" else {"rung": name})))
              for name, _ in LADDER]
    for name, sel in cases:
        r = find(grid, msg_bytes=msg_bytes, **sel)
        if not r or not r.get("host_tlps_model"):
            continue
        tlps, total = r["host_tlps_model"], r["host_bytes_model"]
        overhead = sum(tlps[k] * ovh[k] for k in ovh)
        terms = " + ".join(f"{fmt(tlps[k], 3)} x {ovh[k]}" for k in ovh if tlps[k])
        got = find(rtl, msg_bytes=msg_bytes, **sel)
        payload = total - overhead
        lines.append("| " + " | ".join([
            name, *(fmt(tlps[k], 3) for k in ovh),
            fmt(payload, 2) + ("" if payload >= 2 * msg_bytes else " (short!)"),
            f"{terms} = {fmt(overhead, 2)}", fmt(total, 2),
            fmt(got.get("host_bytes_rtl"), 2) if got else "-"]) + " |")
    return lines


def write_report(grid, rtl, area, pngs, out, args, elapsed):
    md = ["# Report: MAC-routed NIC against a QP-based RDMA engine", "",
          f"Written by `make report` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())},"
          f" {elapsed:.0f} s). Golden-model grid: {len(grid)} points; RTL "
          f"co-simulation ({args.sim}): {len(rtl)} points. Cycles are clock cycles of "
          "the 64-byte datapath. Definitions: ../../docs/findings.md and SPEC.md.", "",
          "## Headline (128-byte stores, golden model; the RTL agrees on every RTL point)",
          ""] + headline_table(grid, area)
    md += ["", "State bits per peer / QP and the flip-flop and memory bits come from "
           "area.json (`make area`): the NIC's are one compact-framing node plus a quarter "
           "of the 4-port switch, the RDMA engine's are requester + responder with a "
           "16-entry cache (docs/area.md)." if area else "", ""]
    md += ["## RTL against the model", "",
           "| design | framing | bytes | QPs / peers | cache | messages | latency | ii | "
           "wire B | mismatches | fast path |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rtl, key=lambda r: (r["design"], r.get("framing"), r["msg_bytes"],
                                        r.get("qps", r.get("peers")))):
        fp = r.get("fast_path_differs")
        md.append("| " + " | ".join([
            r["design"], r["framing"], str(r["msg_bytes"]),
            str(r.get("qps", r.get("peers"))), fmt(r.get("cache_entries")),
            str(r["messages"]), fmt(r.get("latency_cycles_rtl")), fmt(r.get("ii_cycles_rtl")),
            fmt(r.get("wire_bytes_rtl")), str(r["mismatches"]),
            "equal" if fp == [] else str(fp)]) + " |")
    bad = [r for r in rtl if row_fails(r)]
    md += ["", "RTL points with mismatches, errors or fast-path differences beyond "
           f"tolerance: {len(bad)} of {len(rtl)}."]
    for r in bad:
        where = f"- {r['design']} {r['msg_bytes']} B"
        if "error" in r:
            md.append(f"{where}: {r['error']}")
        elif isinstance(r.get("fast_path_differs"), list) and r["fast_path_differs"]:
            md.append(f"{where}: fast path differs from the cycle model: "
                      f"{', '.join(r['fast_path_differs'])}")
    md += [""]
    md += ["## Host interface per 128-byte message (pcie profile)", "",
           "TLPs per message by kind, from the host interfaces' counters (golden model; "
           "RTL where the RTL subset ran the point); docs/host_interface.md derives each "
           "row transaction by transaction.", ""] + host_table(grid, rtl) + [""]
    md += ["## Sweeps (golden model)", ""]
    md += ["### Cycles and wire efficiency against message size", "",
           "| design | bytes | latency | completion | ii | wire B | efficiency |",
           "|---|---|---|---|---|---|---|"]
    for label, sel in (("NIC compact", dict(design="nic", framing="compact", peers=1)),
                       ("NIC L2", dict(design="nic", framing="l2", peers=1)),
                       ("RDMA 1 QP", dict(design="rdma", qps=1, cache_entries=16))):
        for s in SIZES:
            r = find(grid, msg_bytes=s, **sel)
            if r:
                md.append(f"| {label} | {s} | {fmt(r['latency_cycles_model'])} | "
                          f"{fmt(r['completion_cycles_model'])} | {fmt(r['ii_cycles_model'])}"
                          f" | {fmt(r['wire_bytes_model'])} | {100 * efficiency(r):.1f} % |")
    md += ["", "### RDMA at 128 B against QPs and context-cache entries", "",
           "| QPs | cache | latency | ii | ctx misses / msg | write-backs / msg | "
           "ctrl bytes / msg |", "|---|---|---|---|---|---|---|"]
    for q in QPS:
        for c in CACHES:
            r = find(grid, design="rdma", msg_bytes=128, qps=q, cache_entries=c)
            if r:
                ops = r["ctrl_ops_model"]
                md.append(f"| {q} | {c} | {fmt(r['latency_cycles_model'])} | "
                          f"{fmt(r['ii_cycles_model'])} | {fmt(ops.get('ctx_misses'), 3)} | "
                          f"{fmt(ops.get('ctx_writebacks'), 3)} | "
                          f"{fmt(r.get('ctrl_bytes_model'))} |")
    md += ["", "### NIC at 128 B against destination peers", "",
           "| framing | peers | latency | ii | state bits per peer |", "|---|---|---|---|---|"]
    per_peer = state_per(area, "nic")
    for f in FRAMINGS:
        for p in PEERS:
            r = find(grid, design="nic", framing=f, msg_bytes=128, peers=p)
            if r:
                md.append(f"| {f} | {p} | {fmt(r['latency_cycles_model'])} | "
                          f"{fmt(r['ii_cycles_model'])} | {per_peer} |")
    comps = area_components(area)
    for name, d in (area or {}).get("designs", {}).items():
        comps[name] = dict(d, group="design")
    if comps:
        md += ["", "## Area proxies (Yosys; see docs/area.md)", "",
               "| component | group | flip-flop bits | memory bits | ROM bits | cells | LUT4 |",
               "|---|---|---|---|---|---|---|"]
        for n in sorted(comps, key=lambda n: (comps[n].get("group", ""), n)):
            c = comps[n]
            md.append(f"| {n} | {c.get('group', '')} | {fmt(c.get('ff_bits'))} | "
                      f"{fmt(c.get('mem_bits'))} | {fmt(c.get('rom_bits'))} | "
                      f"{fmt(c.get('cells'))} | {fmt(c.get('lut4'))} |")
    md += ["", "## Plots", ""] + [f"![{p}]({p})" for p in pngs]
    md += ["", "Files: results.json and results.csv (one row per point, SPEC.md format; "
           "`simulator: \"model\"` rows are golden-model only), area.json, the PNGs.", ""]
    (out / "report.md").write_text("\n".join(md))

