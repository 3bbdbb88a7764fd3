"""Co-simulation speed: the headline of each design on Verilator or Icarus, with or
without waveforms, after a warm-up run that builds the top; figures from cocotb's
results.xml (the test's wall time and simulated time) and the NIC run's own log."""

import functools
import json
import logging
import os
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from . import CLOCK_ONLY_CYCLES, MSG_BYTES, ROOT, WARMUP_MESSAGES

__all__ = ["nic_top_and_params", "read_results_xml", "read_phases", "measure_rtl",
           "measure_clock_only", "rdma_capacity", "relative"]


def nic_top_and_params(messages):
    """The NIC headline top (compact framing) sized for ``messages`` stores of 128 B, and
    its cocotb parameters: the same top and scenario as :mod:`tb.nic.headline`, so a run
    of 1000 messages shares its build with ``make sim``."""
    from rtl.tops.nic_top import NicTop
    from spec.nic import HEADLINE_TOP

    width = HEADLINE_TOP["width"]
    cmd_beats = messages * -(-MSG_BYTES // width)
    wire_beats = messages * -(-(20 + MSG_BYTES + 4) // width)
    depth = 1 << max(4, (max(cmd_beats, wire_beats) - 1).bit_length())
    top = NicTop(framing="compact", items=[depth, 16, 16, 16],
                 events=[depth, depth, 16, 16], **HEADLINE_TOP)
    params = dict(HEADLINE_TOP, framing="compact", credits=top.credits, scenario="pair",
                  seed=1, msg_bytes=MSG_BYTES, messages=messages)
    return top, params


def _design_top(design, top_messages):
    """``(top, name)`` of ``design``'s headline, the NIC's sized for ``top_messages``."""
    if design == "nic":
        return nic_top_and_params(top_messages)[0], "nic_headline_compact"
    from rtl.tops.rdma_top import RdmaTop

    return RdmaTop(), "rdma_top"


def _run_design(design, sim, messages, top_messages, opt, test_id):
    """One co-simulation of ``design``'s headline with ``messages`` messages, on the top
    built for ``top_messages``; returns the run folder."""
    if design == "nic":
        from tb.cosim import run_cosim

        top, params = nic_top_and_params(top_messages)
        params["messages"] = messages
        return Path(run_cosim(top, name="nic_headline_compact",
                              test_module="tb.nic.cocotb_nic", params=params, sim=sim,
                              test_id=test_id, opt=opt))
    from tb.rdma.runner import run_rdma

    params = dict(kind="writes", messages=messages, sizes=[MSG_BYTES], qps=1,
                  out_json="measurements.json")
    return run_rdma({}, params=params, sim=sim, test_id=test_id, opt=opt)


@functools.cache
def rdma_capacity(limit=None):
    """The most 128-byte WRITEs of the RDMA headline scenario that ``RdmaTop`` holds
    (cached): its recorders' room (``events`` marks, ``wire_beats`` beats at the beats
    one message puts on each link in the golden model, ``mmio`` words) and its host
    memories (the scenario builder refuses more: "host memory A ... is full"; found by
    bisection, no simulation). ``limit``: an upper bound instead of the recorders'."""
    from spec.rdma_engine import TOP_DEFAULTS
    from tb.rdma.cocotb_rdma import config, run_model, scenario
    from tb.rdma.testbench import wire_beats

    def build(n):
        p = dict(kind="writes", messages=n, sizes=[MSG_BYTES], qps=1)
        cfg, knobs = config({}, p)
        return cfg, scenario(p, cfg, knobs)

    def fits(n):
        try:
            build(n)
        except ValueError as exc:
            if "is full" in str(exc):
                return False
            raise
        return True

    if limit is None:
        cfg, (v, inject, _) = build(1)
        one = run_model(cfg, v, inject, (1, 0))
        per = max(len(wire_beats(one, link)[0]) for link in ("ab", "ba"))
        limit = min(TOP_DEFAULTS["events"], TOP_DEFAULTS["wire_beats"] // per,
                    TOP_DEFAULTS["mmio"])
    lo, hi = 1, limit
    if fits(hi):
        return hi
    while hi - lo > 1:               # fits(lo), not fits(hi)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def measure_clock_only(design, sim, top_messages, cycles, opt):
    """Cycles per second of ``design``'s headline top (the build of :func:`measure_rtl`)
    with only the clock running (:mod:`tb.cocotb_clock_only`): the most any test of that
    top can reach on ``sim``. Returns ``{"cycles", "seconds", "cycles_per_s"}``."""
    from tb.cosim import driven_inputs, run_cosim

    top, name = _design_top(design, top_messages)
    inputs = driven_inputs(top, name)
    run_dir = Path(run_cosim(top, name=name, test_module="tb.cocotb_clock_only",
                             params={"cycles": cycles, "inputs": inputs,
                                     "out_json": "clock_only.json"},
                             sim=sim, test_id=f"bench-clock-only-{cycles}", opt=opt))
    rec = json.loads((run_dir / "clock_only.json").read_text())
    rec["cycles_per_s"] = rec["cycles"] / rec["seconds"] if rec["seconds"] > 0 else None
    return rec


def read_results_xml(path):
    """``(wall_s, sim_time_ns)`` of the single cocotb test in ``results.xml``: cocotb's
    wall time of the test (from the start of the test coroutine to its end) and the
    simulated time it covered."""
    case = ET.parse(path).getroot().find(".//testcase")
    if case is None:
        raise ValueError(f"{path}: no testcase")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    unit = props.get("sim_time_unit", "ns")
    scale = {"fs": 1e-6, "ps": 1e-3, "ns": 1.0, "us": 1e3, "ms": 1e6, "sec": 1e9, "s": 1e9}
    if unit not in scale:
        raise ValueError(f"{path}: unknown sim_time_unit {unit!r}")
    return float(case.get("time")), float(props["sim_time_duration"]) * scale[unit]


def read_phases(log_text):
    """``{phase: seconds}`` of the last ``phases (s): name value, ...`` line a cocotb
    module logged (the RDMA test's, :mod:`tb.rdma.cocotb_rdma`), or None."""
    found = None
    for line in log_text.splitlines():
        if "phases (s):" in line:
            found = line.split("phases (s):", 1)[1]
    if found is None:
        return None
    phases = {}
    for part in found.split(","):
        name, _, value = part.strip().rpartition(" ")
        try:
            phases[name] = float(value)
        except ValueError:
            return None
    return phases


def _run_phase(run_dir, results_name):
    """``(design cycles, run-phase seconds)`` the cocotb module reports: the cycle count
    at the end of the run (``cycles`` of its results file) and the wall time from reset
    to the end of the run (its "simulator in X s" log line), or ``None`` each."""
    cycles = seconds = None
    results = run_dir / results_name
    if results.exists():
        cycles = json.loads(results.read_text()).get("cycles")
    log = run_dir / "sim.log"
    if log.exists():
        for line in log.read_text(errors="replace").splitlines():
            if "simulator in" in line:
                try:
                    seconds = float(line.rsplit("simulator in", 1)[1].split()[0])
                except (IndexError, ValueError):
                    pass
    return cycles, seconds


def measure_rtl(design, sim, waves, messages, opt):
    """Co-simulate the headline of ``design`` on ``sim``; return the run's figures.

    A first run of :data:`WARMUP_MESSAGES` messages on the same top exports and builds it
    if needed (not counted); the measured run then reuses the build. Without waves, a
    clock-only run of the same build follows (:func:`measure_clock_only`,
    ``clock_only_cycles_per_s``): the simulator's ceiling on that top.
    """
    from tb.harness import CLOCK_NS

    _quiet_runners()
    saved = os.environ.get("WAVES")
    os.environ["WAVES"] = "1" if waves else "0"
    try:
        t0 = time.perf_counter()
        _run_design(design, sim, WARMUP_MESSAGES, messages, opt, "bench-warmup")
        warmup = time.perf_counter() - t0
        t0 = time.perf_counter()
        run_dir = _run_design(design, sim, messages, messages, opt,
                              f"bench-{messages}x{MSG_BYTES}")
        process = time.perf_counter() - t0
    finally:
        if saved is None:
            os.environ.pop("WAVES", None)
        else:
            os.environ["WAVES"] = saved
    wall, sim_ns = read_results_xml(run_dir / "results.xml")
    cycles = sim_ns / CLOCK_NS
    rec = {"design": design, "sim": sim, "waves": waves, "messages": messages,
           "verilator_opt": opt if sim == "verilator" else None,
           "cycles": cycles, "test_wall_s": wall, "process_wall_s": process,
           "warmup_s": warmup, "cycles_per_s": cycles / wall if wall > 0 else None,
           "msgs_per_s": messages / wall if wall > 0 else None,
           "run_dir": relative(run_dir)}
    rec["design_cycles"], rec["run_phase_s"] = _run_phase(
        run_dir, "nic_results.json" if design == "nic" else "measurements.json")
    log = run_dir / "sim.log"
    phases = read_phases(log.read_text(errors="replace")) if log.exists() else None
    if phases:
        rec["phases_s"] = phases
        if "model" in phases and wall > phases["model"]:
            rec["cycles_per_s_without_model"] = cycles / (wall - phases["model"])
    if rec["design_cycles"] and rec["run_phase_s"]:
        rec["run_phase_cycles_per_s"] = rec["design_cycles"] / rec["run_phase_s"]
    if waves:
        fst = [p for p in (run_dir / "dump.fst", run_dir / "waves.fst") if p.exists()]
        rec["waves_bytes"] = fst[0].stat().st_size if fst else None
    else:
        clock = measure_clock_only(design, sim, messages, CLOCK_ONLY_CYCLES[sim], opt)
        rec["clock_only_cycles"] = clock["cycles"]
        rec["clock_only_cycles_per_s"] = clock["cycles_per_s"]
    return rec


def _skip_notice(record):
    return not record.getMessage().startswith("Skipping compilation")


def _quiet_runners():
    """Drop the "Skipping compilation of ..." warning of cocotb's runners (one per run of
    a built top), which would break the progress lines."""
    for name in ("Verilator", "Icarus"):
        logger = logging.getLogger(name)
        if _skip_notice not in logger.filters:
            logger.addFilter(_skip_notice)


def relative(path):
    """``path`` relative to the repository, as text (as it is when outside it)."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)

