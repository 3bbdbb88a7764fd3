"""cocotb module: what a simulator costs per cycle on a top with only the clock running.

The ceiling of any co-simulation of that top: no stimulus, no checks, no Python per
cycle. Every input port in ``params["inputs"]`` is set to 0 (Icarus would otherwise
leave them at Z and propagate X), reset is held for the harness's two cycles
(:meth:`tb.harness.Harness.reset`, cocotb's C clock), then one ``Timer`` lets
``params["cycles"]`` cycles pass. The players and recorders hold no items, so only the
free-running parts of the design (cycle counters, LFSRs, timers) change. Writes
``{"cycles": n, "seconds": s}`` (the wall time of the ``Timer``) to
``params["out_json"]`` in the run folder.
"""

import json
import time

import cocotb
from cocotb.triggers import Timer

from tb.cosim import cosim_params
from tb.harness import CLOCK_NS, Harness


@cocotb.test()
async def clock_only(dut):
    p = cosim_params()
    cycles = int(p.get("cycles", 0))
    if cycles <= 0:
        raise ValueError(f"cycles must be a positive number of cycles, not {p.get('cycles')!r}")
    for name in p.get("inputs", ()):
        getattr(dut, name).value = 0
    await Harness(dut).reset()
    t0 = time.perf_counter()
    await Timer(cycles * CLOCK_NS, "ns")
    seconds = time.perf_counter() - t0
    dut._log.info("%d cycles with only the clock running in %.3f s", cycles, seconds)
    with open(p.get("out_json", "clock_only.json"), "w") as f:
        json.dump({"cycles": cycles, "seconds": seconds}, f)
