"""Soak both designs on Verilator over faulty links: nothing lost, nothing corrupted.

Usage::

    python scripts/soak.py                         # 1,000,000 messages per design, as `make soak`
    python scripts/soak.py --messages 100000 --rdma-messages 5000
    make soak MESSAGES=200000

The NIC runs with link-level retry on all 8 wires of its 4-node top (W = 64 bytes,
compact framing, all-to-all stores of 64 to 256 bytes with random gaps); the RDMA
engine runs with go-back-N over faulty data and ACK links. Both see a corruption rate
of 1e-3 per frame per wire by default (plus drops and duplicates at ``--drop-rate`` and
``--dup-rate``); the NIC's wires also damage the retry's sequence tags and drop and
damage its ACK/NAKs (``--tag-rate``, ``--ack-drop-rate``, ``--ack-corrupt-rate``, by
default at the frames' corruption and drop rates). Each design is one Verilator
simulation (``-O2``) in chunks; the first chunk of each is also compared with the golden
model.

Prints, per design: messages, recovered (frames the wires damaged, all of which then
arrived once and whole), lost (must be 0), corrupted memory bytes (must be 0), hangs
(must be 0), retransmissions, cycles lost to recovery; writes the same figures to
``build/soak/soak.json`` (``{design: {messages, recovered, lost, corrupted_bytes, hangs,
retransmissions, recovery_cycles, ...}}``) and exits non-zero if any must-be-0 figure
is not.
"""

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pymodel.fabric.faulty_link import rate_per_65535  # noqa: E402

OUT = ROOT / "build" / "soak"
KEYS = ("messages", "recovered", "lost", "corrupted_bytes", "hangs", "retransmissions",
        "recovery_cycles")
MUST_BE_ZERO = ("lost", "corrupted_bytes", "hangs")


def _rate(text):
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"a rate is a probability from 0 to 1, not {text}")
    return value


def _positive(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text}")
    return value


def _args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=_positive, default=1_000_000,
                    help="messages of each design (default 1000000)")
    ap.add_argument("--rdma-messages", type=_positive, default=None,
                    help="RDMA WRITEs, when not --messages")
    ap.add_argument("--corrupt-rate", type=_rate, default=1e-3,
                    help="probability that a frame gets a flipped bit, per wire "
                         "(default 1e-3)")
    ap.add_argument("--drop-rate", type=_rate, default=1e-4,
                    help="probability that a frame is dropped, per wire (default 1e-4)")
    ap.add_argument("--dup-rate", type=_rate, default=1e-4,
                    help="probability that a frame is sent twice, per wire (default 1e-4)")
    ap.add_argument("--tag-rate", type=_rate, default=None,
                    help="NIC: probability that a frame's sequence tag gets a flipped bit, "
                         "per wire (default: --corrupt-rate)")
    ap.add_argument("--ack-drop-rate", type=_rate, default=None,
                    help="NIC: probability that an ACK/NAK is lost, per wire (default: "
                         "--drop-rate)")
    ap.add_argument("--ack-corrupt-rate", type=_rate, default=None,
                    help="NIC: probability that an ACK/NAK gets a flipped bit, per wire "
                         "(default: --corrupt-rate)")
    ap.add_argument("--stall-rate", type=int, default=64, choices=range(0, 256),
                    metavar="0..255",
                    help="gaps in every command stream, out of 256 cycles (default 64)")
    ap.add_argument("--seed", type=int, default=1, help="seed of traffic and faults")
    ap.add_argument("--only", choices=("nic", "rdma"), default=None,
                    help="soak one design only")
    ap.add_argument("--out", default=str(OUT), help="folder of soak.json (build/soak)")
    args = ap.parse_args(argv)
    # The retry's signalling is damaged at the rates of the frames by default.
    for name, like in (("tag_rate", "corrupt_rate"), ("ack_drop_rate", "drop_rate"),
                       ("ack_corrupt_rate", "corrupt_rate")):
        if getattr(args, name) is None:
            setattr(args, name, getattr(args, like))
    return args


def soak_nic(args, messages):
    from rtl.tops.nic_top import NicTop
    from tb.cosim import run_cosim

    top = dict(width=64, nodes=4, link_latency=2, mem_words=256, max_payload=256)
    per_chunk = 4096
    chunks = max(math.ceil((messages - 4 * 64) / (4 * per_chunk)), 0)
    design = NicTop(framing="compact", items=per_chunk * 4, events=1024, retry=True, **top)
    params = dict(top, framing="compact", credits=design.credits, seed=args.seed,
                  model_stores=64, per_chunk=per_chunk, chunks=chunks,
                  corrupt_rate=rate_per_65535(args.corrupt_rate),
                  drop_rate=rate_per_65535(args.drop_rate),
                  dup_rate=rate_per_65535(args.dup_rate), stall_rate=args.stall_rate,
                  **{k: rate_per_65535(getattr(args, k))
                     for k in ("tag_rate", "ack_drop_rate", "ack_corrupt_rate")})
    print(f"nic: {4 * (64 + chunks * per_chunk)} stores in {chunks + 1} chunks "
          "(Verilator -O2; progress in the simulator's log)", flush=True)
    run = run_cosim(design, name="nic_soak_top", test_module="tb.soak.cocotb_nic_soak",
                    sim="verilator", test_id=f"seed{args.seed}", params=params, opt="-O2")
    return json.loads((Path(run) / "soak_nic.json").read_text())


def main(argv=None):
    args = _args(argv)
    rdma = args.messages if args.rdma_messages is None else args.rdma_messages
    from tb.soak.rdma import soak_rdma
    runs = {"nic": (soak_nic, args.messages), "rdma": (soak_rdma, rdma)}
    results = {}
    t0 = time.perf_counter()
    for name, (fn, count) in runs.items():
        if args.only and name != args.only:
            continue
        start = time.perf_counter()
        results[name] = fn(args, count)
        results[name]["wall_s"] = round(time.perf_counter() - start, 1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    settings = {k: getattr(args, k) for k in ("corrupt_rate", "drop_rate", "dup_rate",
                                                "tag_rate", "ack_drop_rate",
                                                "ack_corrupt_rate", "stall_rate", "seed")}
    path = out / "soak.json"
    if args.only and path.exists():
        # One design re-soaked: keep the other's figures if they came from the same
        # settings (each design's entry records how many messages it ran).
        old = json.loads(path.read_text())
        if old.get("settings") == settings:
            results = {**{k: v for k, v in old.items() if k != "settings"}, **results}
    path.write_text(json.dumps(dict(results, settings=settings), indent=2))
    print(f"\n{'':<16}" + "".join(f"{d:>14}" for d in results))
    for key in KEYS:
        print(f"{key:<16}" + "".join(f"{results[d].get(key, '-'):>14}" for d in results))
    print(f"\nwrote {path} in {time.perf_counter() - t0:.0f} s")
    failed = [f"{d}.{k}" for d in results for k in MUST_BE_ZERO if results[d].get(k)]
    if failed:
        print("FAILED: " + ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
