"""`make sim`: the main job. Runs both designs' headline scenarios in co-simulation,
prints the comparison table and writes build/sim/results.json and the pcap files (a
single point: build/sim/point.json, and point.pcap with its frames when they are
Ethernet or the scale-up header's).

Options: --sim verilator|icarus (default $SIM or verilator), --messages N, --msg-bytes B,
--out DIR, --jobs N (headline co-simulations at a time, default $JOBS or 2; each is
independent, and results do not depend on it). Waveforms with WAVES=1 (then `make waves`).

Your own point instead of the headline: ``--design nic|rdma|ephemeral`` and the design's
options (``python scripts/sim.py --help``; through make: ``make sim ARGS="--design rdma
--qps 1024 --cache-entries 64 --rung db-batch --msg-bytes 256"``). The point is co-simulated against
the golden model (one results row, RTL and model side by side); every option is checked
first by the model's own parameter checks, so a bad value stops with an error naming it.
``--fabric board|rack|pod`` (both designs; spec/fabric_profiles.py, docs/fabric.md) runs
the point on a fabric profile: its links and switch hop, and the state sized from them
(the NIC's credits; the RDMA engine's path, window records and transport timeout).
``--design ephemeral`` co-simulates the sender's flow through its context pool and the
datapath around it, the engine's at 1 QP on RdmaFabricTop (docs/ephemeral.md, "make sim
--design ephemeral"); the figures after the table say where each comes from. ``--lanes N``
co-simulates N of its senders side by side, the destinations split among them
(docs/ephemeral.md, "make sim --design ephemeral --lanes N").
The RDMA rungs with inline data (bf-inline and after, the default best among them) carry
a message in its WQE, so their messages are at most that many bytes (see --msg-bytes).
"""

import argparse
import concurrent.futures
import importlib
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# The results table and the design point's options live in their own modules; their
# names are re-exported here (callers use ``scripts.sim``).
from pymodel.pcap import write_pcapng  # noqa: E402
from scripts.sim_point import (  # noqa: E402
    EPHEMERAL_SHARED,
    LANES_NOT_BUILT,
    POINT_OPTIONS,
    RUNG_ALIASES,  # noqa: F401
    check_lanes,
    check_point,
    gap_profiles,
    run_design_point,
    rung_name,  # noqa: F401
    takes,
)
from scripts.sim_table import COLUMNS, _cell, print_table  # noqa: E402, F401
from spec.formats.scaleup import LINKTYPE_SCALEUP  # noqa: E402
from tb.cosim import SIMULATORS, CosimFailure, selected_sim  # noqa: E402

DESIGNS = (("nic", "tb.nic.headline"), ("rdma", "tb.rdma.headline"))


def parse_args(argv=None):
    from pymodel.rdma.verbs import inline_limit

    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Without --design: the headline of both designs.")
    ap.add_argument("--sim", default=None, help=f"one of {', '.join(SIMULATORS)}")
    ap.add_argument("--messages", type=int, default=None,
                    help="messages (default 1000; --design ephemeral: 2000)")
    ap.add_argument("--msg-bytes", type=int, default=128,
                    help="bytes per message, 1..4096 (default 128; RDMA rungs with inline "
                    f"data, bf-inline and after: at most the {inline_limit()} bytes a WQE "
                    f"carries)")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "sim")
    ap.add_argument("--jobs", type=int, default=None,
                    help="co-simulations at a time for the headline (default $JOBS or 2; "
                    "not with --design: a point is its two runs, one after the other)")
    ap.add_argument("--design", choices=("nic", "rdma", "ephemeral"), default=None,
                    help="co-simulate one point of this design instead of the headline")
    ap.add_argument("--link-retry", action="store_true",
                    help="[nic, rdma] every link with link-level retry (ReliableLink; "
                    "docs/recovery.md); the RDMA engine keeps its go-back-N above it")
    ap.add_argument("--selective", action="store_true",
                    help="[rdma] selective repeat at both ends instead of go-back-N "
                    "(the engines' run-time port; docs/recovery.md, 'Selective repeat')")
    ap.add_argument("--gap", default=None,
                    help="fabric profiles of the 'where the gap comes from' table, comma "
                    "separated (default board,pod; 'none': no table; not with --design); "
                    "tb/gap_table.py")
    ap.add_argument("--gap-destinations", action="store_true",
                    help="the table's row of the NIC at 4096 destinations too (two tops of "
                    "several MB of Verilog: minutes each; make report runs it always)")
    for opt, knob, design, kind, text in POINT_OPTIONS:
        tag = "nic, rdma" if design == "both" else design
        if knob in EPHEMERAL_SHARED:
            tag += ", ephemeral"
        ap.add_argument(opt, dest=knob, type=kind, default=None,
                        help=f"[{tag}] {text}".replace("%", "%%"))
    args = ap.parse_args(argv)
    try:
        args.sim = selected_sim(args.sim)
    except ValueError as exc:
        ap.error(str(exc))
    for opt, value in (("--jobs", args.jobs), ("--gap", args.gap),
                       ("--gap-destinations", args.gap_destinations or None)):
        if args.design and value is not None:
            ap.error(f"{opt}: an option of the headline, not of --design {args.design} "
                     f"(a point runs alone)")
    if args.gap_destinations and args.gap is not None and not gap_profiles(args.gap, ap):
        ap.error("--gap-destinations: a row of the gap table, which --gap none leaves out")
    if args.jobs is None:
        try:
            args.jobs = int(os.environ.get("JOBS") or 2)
        except ValueError:
            ap.error(f"JOBS must be a whole number, not {os.environ['JOBS']!r}")
    if args.jobs < 1:
        ap.error(f"--jobs must be at least 1, not {args.jobs}")
    if args.messages is None:
        args.messages = 2000 if args.design == "ephemeral" else 1000
    if args.messages < 1:
        ap.error(f"--messages must be at least 1, not {args.messages}")
    if not 1 <= args.msg_bytes <= 4096:
        ap.error(f"--msg-bytes must be 1 to 4096, not {args.msg_bytes}")
    args.gap = gap_profiles("board,pod" if args.gap is None else args.gap, ap)
    given = {knob: (opt, design) for opt, knob, design, _, _ in POINT_OPTIONS
             if getattr(args, knob) is not None}
    if given and args.design is None:
        ap.error(f"{', '.join(o for o, _ in given.values())}: give --design too")
    if args.design in LANES_NOT_BUILT and "lanes" in given:
        try:
            check_lanes(args.design, args.lanes)
        except ValueError as exc:
            ap.error(str(exc))
        del given["lanes"]                  # one lane: the design's own point
    wrong = [o for knob, (o, d) in given.items()
             if args.design and not takes(args.design, knob, d)]
    if wrong:
        ap.error(f"{', '.join(wrong)}: not an option of --design {args.design}")
    args.knobs = {k: getattr(args, k) for k in given}
    if args.link_retry:
        if args.design is None:
            ap.error("--link-retry: give --design too")
        if args.design == "ephemeral":
            ap.error("--link-retry: not an option of --design ephemeral (its datapath's "
                     "figures are the engine's with link retry, the level field)")
        args.knobs["link_retry"] = True
    if args.selective:
        if args.design != "rdma":
            ap.error("--selective: an option of --design rdma")
        args.knobs["selective"] = 1
    if args.design:
        try:
            args.knobs = check_point(args.design, args.msg_bytes, args.messages, args.knobs,
                                     sim=args.sim)
        except ValueError as exc:
            ap.error(option_names(str(exc)))
    return args


def option_names(text):
    """An error of the point's checks in the names users type: every knob name with an
    underscore (an identifier, never a word of prose) becomes its option (``cache_entries``
    -> ``--cache-entries``), and a leading knob name without one gains its option (``qps
    must be ...`` -> ``--qps: qps must be ...``)."""
    from spec.design_point import option_names as named

    return named(text, [(knob, opt) for opt, knob, *_ in POINT_OPTIONS] + [
        ("messages", "--messages"), ("msg_bytes", "--msg-bytes"),
        ("link_retry", "--link-retry"), ("selective", "--selective")])



def main(argv=None):
    args = parse_args(argv)
    sim = args.sim
    args.out.mkdir(parents=True, exist_ok=True)
    if args.design:
        t0 = time.monotonic()
        print(f"[sim] {args.design} point {args.knobs}: {args.messages} messages of "
              f"{args.msg_bytes} B on {sim} ...", flush=True)
        try:
            row = run_design_point(args)
        except CosimFailure as exc:     # failed or crashed (not a counted mismatch)
            first = str(exc).strip().splitlines()[:3]
            print(f"[sim] FAIL: a co-simulation of the {args.design} point failed: "
                  + " / ".join(first), file=sys.stderr)
            return 1
        if row.get("ii_cycles_rtl") is None:
            print(f"[sim] ii not measured: {args.messages} message(s) back to back are too "
                  f"few for a steady state (the first and last quarters are left out; "
                  f"docs/results.md)", flush=True)
        frames = row.pop("frames", None)
        row.pop("cycles", None)
        if frames and point_pcap(row):
            write_pcapng(args.out / "point.pcap", [(c, _as_bytes(f)) for c, f in frames],
                         linktype=point_pcap(row))
        print(f"[sim] {args.design}: 1 row in {time.monotonic() - t0:.1f} s", flush=True)
        path = args.out / "point.json"
        path.write_text(json.dumps([row], indent=2) + "\n")
        print()
        print_table([row])
        if args.design == "ephemeral":
            from tb.ephemeral.sim_point import figure_lines

            lanes = row.get("lanes", 1)
            print("\nfigures (RTL: " + ("the sender's flow" if lanes == 1 else
                                        f"the {lanes} senders' flows side by side")
                  + " and the engine's datapath at 1 QP co-simulated; model: the engine's "
                  "datapath at 1 QP and the pool twin" + ("" if lanes == 1 else " per lane")
                  + "):")
            print("\n".join(figure_lines(row)))
        print(f"\n[sim] wrote {path}" + (f", {args.out / 'point.pcap'}"
                                          if frames and point_pcap(row) else ""))
        if row.get("mismatches"):
            print(f"[sim] FAIL: {row['mismatches']} RTL/model mismatches", file=sys.stderr)
            return 1
        return 0

    rows, missing, work = [], [], []
    for design, module in DESIGNS:
        try:
            runner = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name and module.startswith(exc.name):
                missing.append(design)
                continue
            raise
        jobs = runner.headline_jobs(sim, messages=args.messages, msg_bytes=args.msg_bytes)
        work.append((design, runner, jobs))
    gap = []
    if args.gap and not missing:
        from tb import gap_table

        gap = gap_table.gap_jobs(sim, args.gap, args.messages, args.msg_bytes,
                                 args.gap_destinations)
    total = sum(len(jobs) for *_, jobs in work)
    if total:
        print(f"[sim] {total} co-simulations ({', '.join(d for d, *_ in work)}) of "
              f"{args.messages} messages of {args.msg_bytes} B on {sim}, {args.jobs} at a "
              f"time ...", flush=True)
    if gap:
        print(f"[sim] then {len(gap)} co-simulations of the 'where the gap comes from' "
              f"table ({', '.join(args.gap)})", flush=True)
    done = run_jobs([job for *_, jobs in work for job in jobs] + gap, args.jobs)
    k = 0
    for _, runner, jobs in work:
        rows += runner.finish_headline(done[k:k + len(jobs)], args.out)
        k += len(jobs)
    gap_rows = (gap_table.finish_gap(done[k:], args.gap, args.messages, args.msg_bytes,
                                     args.gap_destinations) if gap else [])
    if missing:
        print(f"[sim] not built yet: {', '.join(missing)}")
    if not rows:
        return foundation_demo(sim, args.out)

    (args.out / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    print()
    print_table(rows)
    print()
    for profile in args.gap if gap_rows else ():
        print("\n".join(gap_table.gap_table_lines(gap_rows, profile)))
        print()
    if gap_rows:
        (args.out / "gap.json").write_text(json.dumps(gap_rows, indent=2) + "\n")
    print(f"[sim] wrote {args.out / 'results.json'}"
          + "".join(f", {args.out / n}" for n in ("gap.json", "nic.pcap", "rdma.pcap")
                    if (args.out / n).exists()))
    bad = sum(r.get("mismatches", 0) for r in rows + gap_rows)
    if bad:
        print(f"[sim] FAIL: {bad} RTL/model mismatches", file=sys.stderr)
        return 1
    return 0


def point_pcap(row):
    """The pcapng link type of a point's frames (``row["frames"]``), or None when they go to
    no file: Ethernet (1) for the NIC's L2 framing and the engine's RoCEv2, the scale-up
    link type (:data:`spec.formats.scaleup.LINKTYPE_SCALEUP`, dissected by
    scripts/wireshark/scaleup.lua) for the engine's scale-up header; the NIC's compact
    header has no dissector."""
    if row.get("design") == "nic":
        return 1 if row.get("framing") == "l2" else None
    if row.get("design") == "rdma":
        return {"rocev2": 1, "scaleup": LINKTYPE_SCALEUP}.get(row.get("framing"))
    return None


def _as_bytes(frame):
    """A frame as bytes (the NIC's rows carry hex strings, the engine's bytes)."""
    return bytes.fromhex(frame) if isinstance(frame, str) else bytes(frame)


def run_jobs(jobs, workers):
    """Results of ``jobs`` (``[(label, function, kwargs)]``, independent co-simulations)
    in their order, ``workers`` processes at a time (1: in this process). Prints each as
    it finishes, with the elapsed time."""
    t0 = time.monotonic()

    def report(k, label):
        print(f"[sim] {k}/{len(jobs)} done: {label} ({time.monotonic() - t0:.0f} s)",
              flush=True)

    if workers <= 1 or len(jobs) <= 1:
        out = []
        for label, fn, kw in jobs:
            out.append(fn(**kw))
            report(len(out), label)
        return out
    order = start_order(job_tops(jobs))
    results = [None] * len(jobs)
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(jobs[k][1], **jobs[k][2]): (k, jobs[k][0]) for k in order}
        for n, fut in enumerate(concurrent.futures.as_completed(futures), 1):
            k, label = futures[fut]
            results[k] = fut.result()
            report(n, label)
    return results


#: A top's export and Verilator build from cold, in seconds of CPU, by the first pattern
#: its Verilog name holds: the two-node RDMA fabric, RdmaTop, a NIC top behind the PCIe
#: host interface, any other top. Only their order matters (:func:`start_order`).
#: Ref: docs/bench.md, "Where the time of make sim goes" (phases of a cold run).
BUILD_CPU = (("rdma_fabric", 130), ("rdma_top", 100), ("_pcie", 90), ("", 55))


def job_tops(jobs):
    """The first top each of ``jobs`` (``[(label, function, kwargs)]``) builds, as
    ``(Verilog name, export key)``, listed by :mod:`tb.cosim`'s ``COSIM_LIST`` mode:
    nothing is exported, built or run. ``None`` for a job that builds no top, and for
    one whose function is not a co-simulation point (no ``check_only`` parameter), which
    is not called."""
    import inspect
    import tempfile
    import unittest

    tops, saved = [], os.environ.get("COSIM_LIST")
    with tempfile.TemporaryDirectory() as tmp:
        listing = Path(tmp) / "tops.jsonl"
        listing.touch()
        os.environ["COSIM_LIST"] = str(listing)
        try:
            for _, fn, kw in jobs:
                top = None
                if "check_only" in inspect.signature(fn).parameters:
                    seen = len(listing.read_text().splitlines())
                    try:
                        fn(**kw)
                    except unittest.SkipTest:
                        pass
                    lines = listing.read_text().splitlines()
                    if len(lines) > seen:
                        entry = json.loads(lines[seen])
                        top = (entry["name"], entry["key"])
                tops.append(top)
        finally:
            if saved is None:
                os.environ.pop("COSIM_LIST", None)
            else:
                os.environ["COSIM_LIST"] = saved
    return tops


def start_order(tops):
    """The order in which to start jobs whose first tops are ``tops`` (:func:`job_tops`):
    the first job of each distinct top (``None``: a top of its own), then the others,
    each part by :data:`BUILD_CPU` of its top, the costliest first, and then in the jobs'
    order. The exports and builds of distinct tops thus run side by side, the longest
    first, and no worker waits on the build lock of a top that another is building,
    except at the end."""
    def cpu(top):
        name = top[0] if top else ""
        return next(c for pattern, c in BUILD_CPU if pattern in name)

    first = {}
    for k, top in enumerate(tops):
        first.setdefault(("job", k) if top is None else top, k)
    return sorted(range(len(tops)), key=lambda k: (
        first[("job", k) if tops[k] is None else tops[k]] != k, -cpu(tops[k]), k))


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
    os.environ.setdefault("COSIM_PROGRESS", "1")     # each co-simulation phase, timed
    sys.exit(main())
