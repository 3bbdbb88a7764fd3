"""The results table of `make sim` (:mod:`scripts.sim`): one line per results row, RTL
figures, in the columns of :data:`COLUMNS`."""

COLUMNS = (
    ("design", "design", "{}"),
    ("row", None, "{}"),
    ("latency", "latency_cycles_rtl", "{:g}"),
    ("completion", "completion_cycles_rtl", "{:g}"),
    ("ii", "ii_cycles_rtl", "{:.2f}"),
    ("wire B", "wire_bytes_rtl", "{:.1f}"),
    ("wire eff", None, "{}"),
    ("host B", "host_bytes_rtl", "{:.0f}"),
    ("TLPs", None, "{}"),
    ("host util", "host_util_rtl", "{:.2f}"),
    ("ctrl ops", None, "{}"),
    ("in flight bits", "inflight_bits_rtl", "{}"),
    ("mismatch", "mismatches", "{}"),
)


def _cell(row, title, key, fmt):
    if title == "row":
        if row.get("design") == "ephemeral":
            lanes = (f", {row['lanes']} lanes ({row.get('limit_rtl', row.get('limit'))} "
                     f"limit)" if row.get("lanes", 1) > 1 else "")
            return (f"{row.get('pool_entries')} contexts, {row.get('peers')} peers "
                    f"{row.get('popularity')}, {row.get('fabric')}{lanes}")
        if row.get("design") == "rdma":
            from spec.rdma_engine import LADDER

            link = (f", link latency {row['link_latency']}" if "link_latency" in row else "")
            if row.get("fabric", "board") != "board":
                link = f", {row['fabric']}{link}"
            if row.get("header", "roce") != "roce":
                link = f", {row['header']} header{link}"
            if row.get("reliability", "go-back-N") != "go-back-N":
                link = f", {row['reliability']}{link}"
            if row.get("op", "write") != "write":       # a READ or atomic point
                return f"{row['op']}, {row.get('qps', 1)} QP{link}"
            if row.get("rung") not in dict(LADDER):     # a headline label names its point
                return f"{row.get('rung')}{link}"
            return (f"{row.get('rung')}, {row.get('qps')} QP / "
                    f"{row.get('cache_entries')} entries, {row.get('host')}{link}")
        op = f", {row['op']}" if row.get("op", "write") != "write" else ""
        return f"{row.get('framing')}, {row.get('peers')} peers{op}" + "".join(
            f", {row[key]}" + (" completion" if key == "completion" else "")
            for key, usual in (("attachment", "integrated"), ("fabric", "board"),
                               ("completion", "credit"), ("reliability", "none"))
            if row.get(key, usual) != usual) + (", per-peer retry" if row.get("peer_retry")
                                                 else "")
    if title == "TLPs":
        tlps = row.get("host_tlps_rtl")
        return f"{sum(tlps.values()):.2f}" if isinstance(tlps, dict) else "-"
    if title == "wire eff":
        wire = row.get("wire_bytes_rtl")
        return f"{100 * row['msg_bytes'] / wire:.1f}%" if wire else "-"
    if title == "ctrl ops":
        if row.get("design") == "ephemeral":
            return "-"
        ops = row.get("ctrl_ops_rtl") or {}
        return f"{sum(ops.values()):.2f}" if isinstance(ops, dict) else str(ops)
    value = row.get(key)
    return "-" if value is None else fmt.format(value)


def print_table(rows):
    table = [[title for title, _, _ in COLUMNS]]
    table += [[_cell(r, *c) for c in COLUMNS] for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    for k, line in enumerate(table):
        print("  ".join(cell.rjust(w) for cell, w in zip(line, widths, strict=True)))
        if k == 0:
            print("  ".join("-" * w for w in widths))
