"""cocotb test of HostInterfaceTop: every output word and its cycle, every input's
accept cycle, every counter and the final host memory against the golden model."""

import random
import time

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly

from spec.host import HOST_COUNTERS, HostProfile
from tb.cosim import cosim_params
from tb.harness import Harness, dump_memory, load_memory
from tb.host_interface import (
    SOURCES,
    Stalls,
    layouts,
    pack,
    random_stimulus,
    run_model,
    unpack,
)
from tb.scoreboard import Scoreboard

#: Cycles the recorders keep watching after the last expected word: nothing may come.
QUIET_CYCLES = 64


@cocotb.test()
async def host_interface_matches_model(dut):
    """A seeded random mix of reads, posted writes and host writes, with gaps on every
    input and backpressure on ``mmio``: the recorded words and their cycles, the cycles
    each input item was taken, the counters and the whole host memory equal the model's.
    """
    p = cosim_params()
    profile, depth = HostProfile(**p["profile"]), p["depth"]
    stim = random_stimulus(random.Random(p["seed"]), profile, depth, **p["mix"])
    stalls = Stalls(**{k: tuple(v) for k, v in p["stalls"].items()})
    want = run_model(profile, depth, stim, stalls, tail=0)
    lay = layouts(depth)

    fab = Harness(dut)
    for name in SOURCES:
        # The host's gaps come from the top's mmio_gap pattern, between writes only.
        stall = (1, 0) if name == "mmio_in" else getattr(stalls, name)
        fab.load_player(name, [pack(lay[name], item) for item in getattr(stim, name)], stall)
    fab.set("mmio_gap_seed", stalls.mmio_in[0])
    fab.set("mmio_gap_rate", stalls.mmio_in[1])
    fab.arm_recorder("rd_data", len(want.rd_data))
    fab.arm_recorder("mmio", len(want.mmio), stalls.mmio)
    load_memory(dut.host_mem.mem, [stim.mem.get(a, 0) for a in range(depth)])
    await fab.reset()
    t0 = time.perf_counter()
    end = await fab.wait_done([f"{n}__done" for n in (*SOURCES, "rd_data", "mmio")],
                              timeout_cycles=2 * want.cycles + 1000)
    await ClockCycles(dut.clk, max(QUIET_CYCLES, want.cycles - end + 8))
    await ReadOnly()
    cycles = int(dut.now.value)
    seconds = time.perf_counter() - t0
    dut._log.info("simulated %d cycles in %.2f s (%.0f cycles/s)", cycles, seconds,
                  cycles / seconds)

    sb = Scoreboard(dut._log)
    for name in ("rd_data", "mmio"):
        items, stamps = fab.recorded(name)
        expected = getattr(want, name)
        sb.compare(f"{name} words", [unpack(lay[name], i) for i in items],
                   [w for _, w in expected])
        sb.compare(f"{name} cycles", stamps, [c for c, _ in expected], fmt=str)
        sb.equal(f"{name} recorder overflow", int(getattr(dut, f"{name}__overflow").value), 0)
    for name in SOURCES:
        sb.compare(f"{name} accept cycles", fab.played_stamps(name, len(want.taken[name])),
                   want.taken[name], fmt=str)
    for name in HOST_COUNTERS:
        sb.equal(name, int(getattr(dut, f"counters__{name}").value), want.counters[name])
    sb.compare("host memory", dump_memory(dut.host_mem.mem, depth),
               [want.mem.get(a, 0) for a in range(depth)])
    sb.check()
    assert want.rd_data and want.mmio and want.counters["up_wr_tlps"], "an empty mix"
    dut._log.info("%d reads, %d write words, %d host write words: %d words back, "
                  "counters %s", len(stim.rd_req), len(stim.wr), len(stim.mmio_in),
                  len(want.rd_data), want.counters)

    # A broken expectation must be caught: one model word one bit off.
    items, _ = fab.recorded("rd_data")
    broken = [w for _, w in want.rd_data]
    broken[len(broken) // 2] = dict(broken[len(broken) // 2],
                                    data=broken[len(broken) // 2]["data"] ^ 8)
    probe = Scoreboard().compare("probe", [unpack(lay["rd_data"], i) for i in items], broken)
    assert probe.mismatches, "the scoreboard missed a flipped model bit"
