"""`make sim`: the main job. Runs both designs' headline scenarios in co-simulation,
prints the comparison table and writes build/sim/results.json and the pcap files.

Options: --sim verilator|icarus (default $SIM or verilator), --messages N, --msg-bytes B,
--out DIR. Waveforms with WAVES=1 (then `make waves`).
"""

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tb.cosim import SIMULATORS, selected_sim  # noqa: E402

DESIGNS = (("nic", "tb.nic.headline"), ("rdma", "tb.rdma.headline"))

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
        if row.get("design") == "rdma":
            return (f"{row.get('rung')}, {row.get('qps')} QP / "
                    f"{row.get('cache_entries')} entries, {row.get('host')}")
        return f"{row.get('framing')}, {row.get('peers')} peers" + (
            f", {row['attachment']}" if row.get("attachment") else "")
    if title == "TLPs":
        tlps = row.get("host_tlps_rtl")
        return f"{sum(tlps.values()):.2f}" if isinstance(tlps, dict) else "-"
    if title == "wire eff":
        wire = row.get("wire_bytes_rtl")
        return f"{100 * row['msg_bytes'] / wire:.1f}%" if wire else "-"
    if title == "ctrl ops":
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", default=None, help=f"one of {', '.join(SIMULATORS)}")
    ap.add_argument("--messages", type=int, default=1000)
    ap.add_argument("--msg-bytes", type=int, default=128)
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "sim")
    args = ap.parse_args(argv)
    try:
        sim = selected_sim(args.sim)
    except ValueError as exc:
        ap.error(str(exc))
    if args.messages < 1:
        ap.error(f"--messages must be at least 1, not {args.messages}")
    if not 1 <= args.msg_bytes <= 4096:
        ap.error(f"--msg-bytes must be 1 to 4096, not {args.msg_bytes}")
    args.out.mkdir(parents=True, exist_ok=True)

    rows, missing = [], []
    for design, module in DESIGNS:
        try:
            runner = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name and module.startswith(exc.name):
                missing.append(design)
                continue
            raise
        t0 = time.monotonic()
        print(f"[sim] {design}: {args.messages} messages of {args.msg_bytes} B on {sim} ...",
              flush=True)
        got = runner.run_headline(sim, args.out, messages=args.messages,
                                  msg_bytes=args.msg_bytes)
        print(f"[sim] {design}: {len(got)} rows in {time.monotonic() - t0:.1f} s", flush=True)
        rows += got
    if missing:
        print(f"[sim] not built yet: {', '.join(missing)}")
    if not rows:
        return foundation_demo(sim, args.out)

    (args.out / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    print()
    print_table(rows)
    print()
    print(f"[sim] wrote {args.out / 'results.json'}"
          + "".join(f", {args.out / n}" for n in ("nic.pcap", "rdma.pcap")
                    if (args.out / n).exists()))
    bad = sum(r.get("mismatches", 0) for r in rows)
    if bad:
        print(f"[sim] FAIL: {bad} RTL/model mismatches", file=sys.stderr)
        return 1
    return 0


def foundation_demo(sim, out):
    """Before the designs exist: the shared FCS blocks on 1000 frames of 128 bytes."""
    from rtl.tops.fcs_top import FcsTop
    from tb.cosim import run_cosim

    print(f"[sim] foundation demo on {sim}: FCS inserter and checker, cycle-exact "
          f"against the golden model")
    run_dir = run_cosim(FcsTop(64, depth=2048), name="fcs_top_w64",
                        test_module="tb.cocotb_fcs", sim=sim, test_id="make_sim",
                        params={"width": 64, "seed": 1, "max_len": 300, "long_frames": 4})
    for line in (run_dir / "sim.log").read_text().splitlines():
        if "scoreboard:" in line or "frames framed" in line:
            print("[sim]", line.split("INFO", 1)[-1].strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
