"""The report's "The state spectrum" section: :mod:`tb.ephemeral.spectrum` (the NIC, the
NIC with per-peer end-to-end retry, the ephemeral-context design and the RC engine at 1
to 4,096 peers, ``board`` and ``pod``, round robin and Zipf) and the sizing table for
10^9 messages a second. Every cell is the golden model's (none co-simulated:
``simulator`` ``"model"``); spectrum.json holds the rows."""

import json
import os

from tb.ephemeral.spectrum import PATTERNS, PROFILES, TARGET, sizing_rows, spectrum_rows

__all__ = ["spectrum_section", "spectrum_lines", "sizing_lines"]

_NAMES = {"nic": "NIC (e2e completion)", "nic_retry": "NIC with per-peer retry",
          "ephemeral": "ephemeral contexts",
          "rdma": "RC engine, 256 entries"}


def _m(x):
    return f"{x / 1e6:.0f} M"


def spectrum_lines(rows):
    """The markdown tables, one per fabric and destination pattern."""
    out = []
    for fabric in PROFILES:
        for pattern in PATTERNS:
            sel = [r for r in rows if r["fabric"] == fabric and r["popularity"] == pattern]
            if not sel:
                continue
            out += ["", f"**{fabric}, {pattern.replace('_', ' ')} destinations** (model)", "",
                    "| design | peers | msgs/s | latency | endpoint state bits | contexts on "
                    "chip | contexts in host memory | per peer | per msg in flight | "
                    "msgs/s per KiB | note |",
                    "|---|---|---|---|---|---|---|---|---|---|---|"]
            for r in sel:
                out.append(
                    f"| {_NAMES[r['design']]} | {r['peers']:,} | {_m(r['msgs_per_s'])} | "
                    f"{r['latency_cycles']:g} | {r['endpoint_state_bits']:,.0f} | "
                    f"{r['context_state_bits']:,} | {r['host_context_bits']:,} | "
                    f"{r['per_peer_bits']:,.0f} | {r['per_inflight_bits']:,.0f} | "
                    f"{r['msgs_per_s_per_kib'] / 1e6:.2f} M | {r['note']} |")
    return out


def sizing_lines(rows):
    """The sizing table for :data:`tb.ephemeral.spectrum.TARGET` messages a second."""
    out = ["", f"**Sizing for {TARGET:.0e} messages of 128 B a second** (model, "
           f"{rows[0]['fabric']}, round robin; lanes share one attachment)", "",
           "| attachment | design | peers | lanes | msgs/s | endpoint state bits | "
           "reaches 10^9 | what stops it |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        att = {"pcie": "PCIe", "on_die": "on die (NIC integrated)"}[r["attachment"]]
        out.append(f"| {att} | {_NAMES[r['design']]} | {r['peers']:,} | {r['lanes']} | "
                   f"{_m(r['msgs_per_s'])} | {r['endpoint_state_bits']:,.0f} | "
                   f"{'yes' if r['reaches'] else 'no'} | "
                   f"{'-' if r['reaches'] else r['limit']} |")
    return out


def spectrum_section(out, messages=1000, workers=None):
    """Run the spectrum (``workers`` processes, default one per CPU) and the sizing,
    write ``out/spectrum.json`` and return ``(markdown, rows)`` (the rows, with the
    sizing rows, for results.json)."""
    rows = spectrum_rows(messages=messages, workers=workers or os.cpu_count() or 1)
    sizing = [r for att in ("pcie", "on_die")
              for r in sizing_rows(messages=messages, attachment=att)]
    (out / "spectrum.json").write_text(json.dumps({"spectrum": rows, "sizing": sizing},
                                                  indent=1))
    md = ["## The state spectrum", "",
          "Endpoint state that each design holds to keep its rate: the NIC with its "
          "end-to-end completion, the NIC with per-peer end-to-end retry (a PSN and a "
          "go-back-N replay buffer: docs/nic.md, \"Per-peer retry\"; the NIC's model "
          "run with it, its window sized for the cell's round trip), "
          "ephemeral delivery contexts (docs/ephemeral.md) and the "
          "RC engine at its best rung, on one level field (the NIC's switch, link retry, "
          "Ethernet-class headers, end-to-end completion, all behind the PCIe host "
          "interface), 128-byte messages. Every cell is the golden model's (none is "
          "co-simulated); how each is computed, and which cells extrapolate (the note "
          "column): tb/ephemeral/spectrum.py. Endpoint state: in flight, contexts on chip "
          "and, for the RC engine, its contexts in host memory (the per-peer retry's replay "
          "buffer is in flight); latency: a message alone; "
          "msgs/s: back to back."]
    md += spectrum_lines(rows) + sizing_lines(sizing)
    return "\n".join(md), rows + [dict(r, sizing=True) for r in sizing]


def main(argv=None):
    """Print the section (``--out``: where spectrum.json goes)."""
    import argparse
    from pathlib import Path

    ap = argparse.ArgumentParser(description="The state spectrum on the golden model")
    ap.add_argument("--out", type=Path, default=Path("build/report"))
    ap.add_argument("--messages", type=int, default=1000)
    args = ap.parse_args(argv)
    if args.messages < 20:
        ap.error(f"--messages must be at least 20, not {args.messages}")
    args.out.mkdir(parents=True, exist_ok=True)
    print(spectrum_section(args.out, args.messages)[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
