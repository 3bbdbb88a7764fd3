"""Helpers for fast unit tests in the Amaranth simulator (no Verilog, no cocotb).

Use them from ``sim.add_testbench`` coroutines: :func:`stream_put`/:func:`stream_get`
move one payload with a full handshake; :func:`put_all`/:func:`get_all` move many with a
stall pattern (an iterable of 1 = go, 0 = stall, cycled).
"""

import itertools

from amaranth.sim import Simulator

__all__ = ["run_sim", "stream_put", "stream_get", "put_all", "get_all", "as_int"]


def run_sim(dut, *benches, deadline_cycles=200_000):
    """Simulate ``dut`` with a 1 MHz clock until every testbench coroutine returns.

    Raises ``AssertionError`` (a hang) when they are still running after
    ``deadline_cycles`` cycles.
    """
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    for bench in benches:
        sim.add_testbench(bench)

    async def watchdog(ctx):
        await ctx.delay(deadline_cycles * 1e-6)
        raise AssertionError(f"testbenches still running after {deadline_cycles} cycles")

    sim.add_testbench(watchdog, background=True)
    sim.run()


def _flat(value):
    return value.as_value() if hasattr(value, "as_value") else value


def as_int(value):
    """A simulator value (a view, a ``Const``, an int or a bool) as an int."""
    value = _flat(value)
    return value.value if hasattr(value, "value") else int(value)


async def stream_put(ctx, stream, payload):
    """Offer ``payload`` (a flat integer or a value of the payload shape) until taken."""
    ctx.set(stream.valid, 1)
    ctx.set(_flat(stream.payload), payload)
    await ctx.tick().until(stream.ready)
    ctx.set(stream.valid, 0)


async def stream_get(ctx, stream):
    """Take one payload (``ready`` high until a transfer)."""
    ctx.set(stream.ready, 1)
    payload, = await ctx.tick().sample(_flat(stream.payload)).until(stream.valid)
    ctx.set(stream.ready, 0)
    return as_int(payload)


async def put_all(ctx, stream, payloads, pattern=(1,)):
    """Send every payload, withholding ``valid`` in the cycles the pattern says 0."""
    gaps = itertools.cycle(pattern)
    for payload in payloads:
        while not next(gaps):
            await ctx.tick()
        await stream_put(ctx, stream, payload)


async def get_all(ctx, stream, count, pattern=(1,)):
    """Receive ``count`` payloads with ``ready`` following the pattern; returns them as
    flat integers with the cycle (since the first call) of each transfer."""
    gaps = itertools.cycle(pattern)
    out, cycle = [], 0
    while len(out) < count:
        ready = next(gaps)
        ctx.set(stream.ready, ready)
        _, _, valid, payload = await ctx.tick().sample(stream.valid, _flat(stream.payload))
        if ready and valid:
            out.append((as_int(payload), cycle))
        cycle += 1
    ctx.set(stream.ready, 0)
    return out
