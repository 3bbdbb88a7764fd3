"""Print the cycle-by-cycle timing of a link-level retry (the diagrams of docs/recovery.md).

Usage::

    python scripts/retry_trace.py            # both cases: a NAK and a timeout
    python scripts/retry_trace.py --case nak --width 16 --latency 2

The cycles come from the golden model of ``ReliableLink``
(:class:`pymodel.fabric.reliable_link.ReliableLinkModel`), which the unit and
co-simulation tests hold equal to the RTL cycle for cycle. The fault pattern's seed is
searched so that exactly the wanted frame is hit.
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pymodel.fabric.faulty_link import FaultPattern, FaultSettings  # noqa: E402
from pymodel.fabric.reliable_link import ReliableLinkModel  # noqa: E402
from pymodel.fcs import fcs_bytes  # noqa: E402
from pymodel.packet import frame_to_beats  # noqa: E402

#: Per case: frames sent back to back, the fault kind, and which wire frames (in the
#: order they enter the wire, retransmissions included) it hits.
CASES = {"nak": (4, "corrupt", {1}), "timeout": (2, "drop", {1})}


def _seed_for(kind, hit, frames_on_wire=12):
    rate = 6000
    for seed in range(1, 65536):
        pattern = FaultPattern(FaultSettings(seed=seed, **{f"{kind}_rate": rate}))
        hits = {n for n in range(frames_on_wire) if pattern.next()[0][kind]}
        if hits == hit:
            return FaultSettings(seed=seed, **{f"{kind}_rate": rate})
    raise SystemExit(f"no seed gives exactly {kind} on frames {sorted(hit)}")


def trace(case, width, latency):
    count, kind, hit = CASES[case]
    settings = _seed_for(kind, hit)
    body = bytes(range(2 * width - 4 - 8))
    frames = [bytes([k]) * 8 + body for k in range(count)]
    beats = [b for f in frames for b in frame_to_beats(f + fcs_bytes(f), width)]
    model = ReliableLinkModel(width, latency, max_frame_beats=4, settings=settings)
    model.trace = []
    delivered = []
    c = 0
    while beats or model.busy():
        beat = beats[0] if beats and model.ready() else None
        if beat is not None:
            beats.pop(0)
        out = model.cycle(c, beat)
        if out is not None:
            delivered.append(c)
        c += 1
    rows = {}
    for cyc, event, d in model.trace:
        if event == "send":
            text = f"send F{d['seq']}{'' if d['first'] else '+'}{' again' if d['again'] else ''}"
        elif event == "verdict":
            ack = d["ack"]
            verdict = ("ok" if ack and not ack[1] and ack[0] == (d["seq"] + 1) % 65536
                       else "bad, NAK" if ack and ack[1]
                       else "duplicate, ACK again" if ack
                       else "out of order, discarded (NAK already sent)")
            text = f"RX judges F{d['seq']}: {verdict}"
        elif event == "ack":
            text = f"{'NAK' if d['nak'] else 'ACK'} {d['seq']} reaches TX"
        elif event == "rewind":
            text = f"TX goes back to F{d['to']}"
        else:
            text = f"timer expires (oldest F{d['oldest']})"
        rows.setdefault(cyc, []).append(text)
    for cyc in delivered:
        rows.setdefault(cyc, []).append("delivered beat")
    print(f"\n{case}: width {width} B, latency {latency}, {count} frames of 2 beats, "
          f"{kind} on wire frame {sorted(hit)} (seed {settings.seed}); timeout "
          f"{model.timeout} cycles")
    for cyc in sorted(rows):
        print(f"  {cyc:>4}  " + "; ".join(rows[cyc]))
    return model


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", choices=sorted(CASES), default=None)
    ap.add_argument("--width", type=int, default=16, choices=(8, 16, 32, 64))
    ap.add_argument("--latency", type=int, default=2)
    args = ap.parse_args(argv)
    for case in [args.case] if args.case else sorted(CASES):
        trace(case, args.width, args.latency)


if __name__ == "__main__":
    main()
