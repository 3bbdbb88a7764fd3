"""cocotb tests of MemCreditTop: memory model and credit counter against their twins."""

import random

import cocotb

from pymodel.credit_counter import CreditCounterModel
from pymodel.latency_memory import LatencyMemoryModel
from pymodel.stall import stall_pattern
from rtl.tops.mem_credit_top import credit_obs_layout, credit_op_layout, mem_op_layout
from tb.cosim import cosim_params
from tb.harness import Harness, dump_memory
from tb.scoreboard import Scoreboard


def _pack(layout, **fields):
    return layout.const(fields).as_value().value


def _issue_cycles(n, seed, rate):
    """The cycles in which a never-backpressured player issues its ``n`` items."""
    stalls = stall_pattern(seed, rate, 8 * n + 64)
    return [c for c in range(len(stalls)) if not stalls[c]][:n]


@cocotb.test()
async def memory_and_credits_match_model(dut):
    p = cosim_params()
    width, depth, latency, cap = p["width"], p["depth"], p["latency"], p["max_credits"]
    rng = random.Random(p["seed"])
    n = p["ops"]
    src = (7, p["stall_rate"])

    # Memory: random reads and byte-masked writes, often to the same word.
    ops = [dict(rd=rng.random() < 0.7, rd_addr=rng.randrange(depth),
                wr=rng.random() < 0.5, wr_addr=rng.randrange(depth),
                wr_data=rng.getrandbits(8 * width), wr_be=rng.getrandbits(width))
           for _ in range(n)]
    for k in range(0, n, 5):                # read-during-write of the same word
        ops[k].update(rd=True, wr=True, rd_addr=ops[k]["wr_addr"])
    mem = LatencyMemoryModel(width, depth, latency)
    issue = _issue_cycles(n, *src)
    want, want_at = [], []
    k = 0
    for c in range(issue[-1] + latency + 1):
        op = ops[k] if k < n and issue[k] == c else None
        out = mem.cycle(op["rd_addr"] if op and op["rd"] else None,
                        (op["wr_addr"], op["wr_data"], op["wr_be"]) if op and op["wr"] else None)
        if out is not None:
            want.append(out)
            want_at.append(c)
        if op is not None:
            k += 1

    # Credits: takes and returns that also try to underflow and overflow.
    # Drain past zero (underflow), refill past the top (overflow), then random traffic.
    cops = ([dict(take=1, give=0)] * (cap + 1) + [dict(take=0, give=cap)] * 2
            + [dict(take=rng.random() < 0.6, give=rng.choice([0, 0, 0, 1, 2, cap]))
               for _ in range(n - cap - 3)])
    cnt = CreditCounterModel(cap)
    c_issue = _issue_cycles(n, *src)
    obs_layout = credit_obs_layout(cap)
    c_want = []
    for op in cops:
        c_want.append(_pack(obs_layout, credits=cnt.credits, available=cnt.available,
                            underflow=cnt.underflow, overflow=cnt.overflow))
        cnt.cycle(op["take"], op["give"])

    harness = Harness(dut)
    harness.load_player("mem_ops", [_pack(mem_op_layout(width, depth), **o) for o in ops], src)
    harness.load_player("credit_ops", [_pack(credit_op_layout(cap), **o) for o in cops], src)
    harness.arm_recorder("rd_data", len(want))
    harness.arm_recorder("credit_obs", n)
    await harness.reset()
    await harness.wait_done(["rd_data__done", "credit_obs__done", "mem_ops__done"],
                        timeout_cycles=20 * n + 1000)
    got, got_at = harness.recorded("rd_data")
    c_got, c_at = harness.recorded("credit_obs")

    sb = Scoreboard(dut._log)
    sb.compare("read data", got, want)
    sb.compare("read data cycles", got_at, want_at, fmt=str)
    sb.compare("credit observations", c_got, c_want)
    sb.compare("credit op cycles", c_at, c_issue, fmt=str)
    sb.compare("memory contents", dump_memory(dut.memory.mem, depth), mem.words)
    sb.equal("underflow flag", int(dut.underflow.value), int(cnt.underflow))
    sb.equal("overflow flag", int(dut.overflow.value), int(cnt.overflow))
    sb.check()
    assert cnt.underflow and cnt.overflow, "the scenario must provoke both counter errors"
