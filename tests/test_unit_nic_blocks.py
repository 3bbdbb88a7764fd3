"""The NIC's small blocks against their twins, cycle by cycle (Amaranth simulator):
CreditReturn, FaultInjector, WindowTable (their twins in ``pymodel/nic/``)."""

import random

import pytest

from pymodel.nic.credit_return import CreditReturnModel
from pymodel.nic.fault_injector import FaultInjectorModel
from pymodel.nic.window_table import WindowTableModel
from pymodel.packet import pack_beat, unpack_beat
from rtl.nic.credit_return import CreditReturn
from rtl.nic.fault_injector import FaultInjector
from rtl.nic.window_table import WindowTable
from tb.amsim import run_sim


@pytest.mark.parametrize("latency", [1, 2, 7])
def test_credit_return_matches_twin(latency):
    rng = random.Random(latency)
    pulses = [int(rng.random() < 0.4) for _ in range(300)]
    dut, twin = CreditReturn(latency), CreditReturnModel(latency)
    got, want = [], []

    async def bench(ctx):
        for c, pulse in enumerate(pulses + [0] * (latency + 2)):
            ctx.set(dut.i, pulse)
            got.append(ctx.get(dut.o))
            want.append(twin.output(c))
            twin.step(c, {"i": pulse})
            await ctx.tick()

    run_sim(dut, bench)
    assert got == want
    # By the contract: the pulse of cycle c is out in c + latency, nothing else.
    assert got == [0] * latency + pulses + [0] * 2
    assert not twin.busy()


def test_credit_return_rejects_a_bad_latency():
    with pytest.raises(ValueError, match="latency"):
        CreditReturnModel(0)


@pytest.mark.parametrize("width", [8, 64])
def test_fault_injector_matches_twin(width):
    rng = random.Random(width)
    n = 200
    faults = sorted(rng.sample(range(n), 20))
    valid = [rng.random() < 0.7 for _ in range(int(n / 0.7) + 60)]
    dut, twin = FaultInjector(width), FaultInjectorModel(faults)
    got, want, sent = [], [], []

    async def bench(ctx):
        k = f = 0
        for c, v in enumerate(valid):
            v = v and k < n
            beat = pack_beat(width, rng.getrandbits(8 * width), width, 1, 1) if v else 0
            ctx.set(dut.i.valid, v)
            ctx.set(dut.i.payload.as_value(), beat)
            ctx.set(dut.faults.valid, f < len(faults))
            ctx.set(dut.faults.payload, faults[f] if f < len(faults) else 0)
            if v:
                sent.append(beat)
                got.append(ctx.get(dut.o.payload.as_value()))
                out = twin.step(c, {"i": unpack_beat(width, beat)})["o"]
                want.append(pack_beat(width, *out))
                k += 1
            if ctx.get(dut.faults.ready):
                f += 1
            await ctx.tick()
        assert k == n and f == len(faults)

    run_sim(dut, bench)
    assert got == want and twin.count == n
    # By the contract: exactly the chosen beats differ from what went in (lane 0).
    assert sum(g != b for g, b in zip(got, sent, strict=True)) == len(faults)


@pytest.mark.parametrize("width,depth", [(8, 16), (64, 1024)])
def test_window_table_matches_twin(width, depth):
    rng = random.Random(depth)
    dut, twin = WindowTable(width, depth), WindowTableModel(depth)
    sources = [1, 2, 3, 200]
    seen = []

    async def bench(ctx):
        held = (0, 0)                    # the window read last (a registered read)
        for c in range(600):
            write = None
            if rng.random() < 0.2:
                base = rng.randrange(depth)
                write = (rng.choice(sources), base, rng.randrange(depth + 1 - base))
            ctx.set(dut.wr.valid, write is not None)
            if write is not None:
                ctx.set(dut.wr.payload, dict(zip(("src", "base", "size"), write,
                                                 strict=True)))
            lookup = rng.random() < 0.5
            src = rng.choice(sources)
            ctx.set(dut.lookup, lookup)
            ctx.set(dut.src, src)
            addr = rng.choice([0, rng.randrange(depth * width), (1 << 32) - width])
            length = rng.randrange(1, 3 * width)
            ctx.set(dut.addr, addr)
            ctx.set(dut.length, length)
            inside = ctx.get(dut.inside)
            assert inside == WindowTableModel.inside(held, addr, length, width), c
            seen.append(inside)
            if lookup:
                held = twin.entry(src)   # the table as it is during this cycle
            twin.step(c, {"w": write})
            twin.commit()
            await ctx.tick()

    run_sim(dut, bench)
    assert 20 < sum(seen) < len(seen) - 20
