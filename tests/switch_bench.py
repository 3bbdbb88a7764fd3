"""One cycle of the switch's unit benches, shared by tests/test_unit_switch_*.py: the
ingress beats offered and the egress beats and credit pulses read, in the Amaranth
simulator (the RTL; each test steps its twin on what this returns)."""

from pymodel.packet import unpack_beat

__all__ = ["offer_beats", "take_egress"]


def offer_beats(ctx, dut, streams, c, width, ready=None, start=0):
    """Cycle ``c``'s inputs: ingress ``p`` offers the next beat of ``streams[p]`` (taken
    from the list) in cycles where ``c >= start`` and ``(c + p) % 3 != 0``; egress ``p``'s
    ``ready`` is ``ready[p]`` when ``ready`` is given. Returns ``{port: the unpacked beat
    offered}`` (the switch never holds its ingress)."""
    now = {}
    for p in range(len(streams)):
        link = dut.i[p]
        send = c >= start and bool(streams[p]) and (c + p) % 3 != 0
        ctx.set(link.valid, send)
        if send:
            beat = streams[p].pop(0)
            ctx.set(link.payload.as_value(), beat)
            now[p] = unpack_beat(width, beat)
        if ready is not None:
            ctx.set(dut.o[p].ready, ready[p])
    return now


def take_egress(ctx, dut, ports, ready=None):
    """Cycle ``c``'s outputs: ``(beats, credits)``, each egress's beat that leaves (valid,
    and ``ready[p]`` when ``ready`` is given) or None, and each ingress's credit pulse."""
    out = []
    for p in range(ports):
        o = dut.o[p]
        leaves = ctx.get(o.valid) and (ready is None or ready[p])
        out.append(ctx.get(o.payload.as_value()) if leaves else None)
    return out, [ctx.get(dut.credit[p]) for p in range(ports)]
