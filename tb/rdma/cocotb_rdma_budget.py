"""RdmaTop run for a fixed number of cycles without the golden model: whether the RTL
ends a scenario the model cannot (a run the model stops with ``NoProgress``). The
parameters are those of :mod:`tb.rdma.cocotb_rdma` (kind ``mixed``) plus ``budget``
(cycles after reset) and ``out_json`` (file written in the run folder: ``ops``, the
operations the scenario posted, ``cqes``, the statuses of the CQEs the CQ holds, in CQ
order, ``hang`` and the engine's counters)."""

import json

import cocotb
from cocotb.triggers import ClockCycles

from spec.rdma import LINKS
from tb.cosim import cosim_params
from tb.rdma import cocotb_rdma
from tb.rdma.cocotb_rdma import config, scenario, with_cq
from tb.rdma.testbench import RdmaTestbench, run_ports

__all__ = ["check_budget_params"]


def check_budget_params(p):
    """:func:`tb.rdma.cocotb_rdma.check_params` for the rest; ``kind`` ``mixed`` (the
    scenario whose operations it counts), ``budget`` a positive number of cycles and
    ``out_json`` a file name, else ``ValueError`` naming them."""
    if not isinstance(p, dict):
        raise ValueError(f"RDMA budget run parameters must be a dict, not {p!r}")
    if p.get("kind") != "mixed":
        raise ValueError(f"kind must be 'mixed' for a budget run, not {p.get('kind')!r}")
    budget = p.get("budget")
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1:
        raise ValueError(f"budget must be a positive number of cycles, not {budget!r}")
    if not isinstance(p.get("out_json"), str) or not p["out_json"]:
        raise ValueError(f"out_json must be a file name, not {p.get('out_json')!r}")
    cocotb_rdma.check_params({k: v for k, v in p.items() if k not in ("budget", "out_json")})


@cocotb.test()
async def rdma_runs_to_budget(dut):
    p = cosim_params()
    cfg, knobs = config(p["top"], p)
    v, inject, _ = scenario(p, cfg, knobs)
    cfg = with_cq(cfg, v)
    items, release = v.mmio_items()
    tb = RdmaTestbench(dut, cfg.depth, cfg.link_retry, cfg.mr_in_host, cfg.read_words,
                       cfg.reads)
    ports = run_ports(cfg)
    tb.load(mem_a=v.mem_a, mem_b=v.mem_b, mr_table=v.mr_table, mmio=items, release=release,
            inject=inject, inject_stall=tuple(p.get("inject_stall", (1, 0))), ports=ports,
            links=dict(zip(LINKS, (cfg.faults_ab, cfg.faults_ba), strict=True)))
    tb.arm()                    # the recorders keep whatever comes

    async def budget():
        await ClockCycles(dut.clk, p["budget"])

    await tb.run(timeout_cycles=p["budget"] + 10_000, until=budget)
    ops = len(v.mix_ops)
    cqes = v.poll_cq(dict(enumerate(tb.memory("mem_a"))), ops)
    with open(p["out_json"], "w") as f:
        json.dump(dict(ops=ops, cqes=[c["status"] for c in cqes], hang=tb.hang,
                       counters=tb.counters()), f)
