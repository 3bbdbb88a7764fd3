"""NicTx against its twin, cycle by cycle, in the Amaranth simulator: the unit bench of
the NIC's transmit path with completions merged in (``e2e``) and, with a per-peer
sender, its resends. Stimulus only at the block's ports; the twin stepped in the same
cycle on the same inputs."""

from pymodel.fcs import fcs_bytes
from pymodel.packet import pack_beat
from spec.formats.nic import store_cmd_layout
from tb.amsim import run_sim

__all__ = ["nic_tx_lockstep"]


def _beats(raw, width):
    """``raw`` as the beats ``(data, nbytes, first, last)`` of a ``width``-byte bus."""
    n = -(-len(raw) // width)
    return [(int.from_bytes(raw[j * width:(j + 1) * width], "little"),
             min(width, len(raw) - j * width), j == 0, j == n - 1) for j in range(n)]


def nic_tx_lockstep(dut, twin, width, stores, cpls, rng, *, cycles, ready_p, delay,
                    drive=None, observe=None, check=None):
    """Run NicTx ``dut`` (``e2e``) and its twin ``twin`` for ``cycles`` cycles.

    ``stores`` (:class:`pymodel.nic.store.Store`) are queued in the twin and offered on
    ``cmd`` beat by beat; ``cpls`` (``(cycle, frame without FCS)``, sorted) are offered
    on ``cpl`` from their cycle (the twin gets them with their FCS); ``o.ready`` is high
    with chance ``ready_p`` (from ``rng``, drawn first in each cycle) and a credit comes
    back on ``give`` ``delay`` cycles after each beat taken. Hooks, each cycle:
    ``drive(c, ctx)`` after ``ready`` is drawn (more inputs of the block),
    ``observe(c, res)`` with the twin's step result, ``check(c, ctx)`` after the clock
    edge. Fails unless every beat on ``o`` and every ``sent`` event equal the twin's,
    every store beat and completion is taken, and neither credit counter under- or
    overflows. Returns ``(got, ready_log)``: ``(cycle, beat)`` of every beat on ``o``,
    and ``ready`` per cycle."""
    for mid, s in enumerate(stores):
        for seg, slots, _ in twin.frames(s):
            twin.queue(mid, seg, slots)
    layout = store_cmd_layout(width)
    items = [layout.const({"dst": s.dst, "addr": s.addr, "length": s.length, "data": d,
                           "nbytes": n, "first": f, "last": la}).as_bits()
             for s in stores for d, n, f, la in s.beats(width)]
    rtl_cpl = [_beats(raw, width) for _, raw in cpls]
    model_cpl = [[pack_beat(width, *b) for b in _beats(raw + fcs_bytes(raw), width)]
                 for _, raw in cpls]
    got, want, got_sent, want_sent, ready_log = [], [], [], [], []

    async def bench(ctx):
        ctx.set(dut.node_id, 3)
        k, ci, cj, mi = 0, 0, 0, 0           # cmd item; RTL cpl frame, beat; model frame
        sends = []
        for c in range(cycles):
            ready = rng.random() < ready_p
            give = c - delay in sends
            if drive is not None:
                drive(c, ctx)
            ctx.set(dut.cmd.valid, k < len(items))
            if k < len(items):
                ctx.set(dut.cmd.payload.as_value(), items[k])
            offer_rtl = ci < len(cpls) and c >= cpls[ci][0]
            ctx.set(dut.cpl.valid, offer_rtl)
            if offer_rtl:
                data, n, first, last = rtl_cpl[ci][cj]
                ctx.set(dut.cpl.payload.data, data)
                ctx.set(dut.cpl.payload.nbytes, n)
                ctx.set(dut.cpl.payload.first, first)
                ctx.set(dut.cpl.payload.last, last)
            ctx.set(dut.o.ready, ready)
            ctx.set(dut.give, give)
            offer = model_cpl[mi] if mi < len(cpls) and c >= cpls[mi][0] else None
            res = twin.step(c, {"valid": k < len(items), "link_ready": ready, "give": give,
                                "cpl": offer})
            if observe is not None:
                observe(c, res)
            if res["o"] is not None:
                want.append((c, res["o"][1]))
            if res["sent"] is not None:
                want_sent.append((c, res["sent"]))
            if res["started"]:
                mi += 1
            if ctx.get(dut.o.valid) and ready:
                got.append((c, ctx.get(dut.o.payload.as_value())))
                sends.append(c)
            if ctx.get(dut.sent.valid):
                got_sent.append((c, ctx.get(dut.sent.payload.dst)))
            if offer_rtl and ctx.get(dut.cpl.ready):
                cj += 1
                if cj == len(rtl_cpl[ci]):
                    ci, cj = ci + 1, 0
            if k < len(items) and ctx.get(dut.cmd.ready):
                k += 1
            ready_log.append(ready)
            await ctx.tick()
            if check is not None:
                check(c, ctx)
        assert not ctx.get(dut.underflow) and not ctx.get(dut.overflow)
        assert k == len(items) and ci == len(cpls) and mi == len(cpls)

    run_sim(dut, bench)
    assert got == want
    assert got_sent == want_sent
    return got, ready_log
