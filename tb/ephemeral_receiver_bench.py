"""The cocotb side shared by the ephemeral receiver's co-simulations (its test, its fuzz and
its soak, on :class:`rtl.tops.ephemeral_receiver_top.EphemeralReceiverTop`): play one
packet stream into a reset top and read back what it did, then compare that with the
twin's events (:func:`tb.ephemeral_receiver.model_events` or a soak chunk's own).

Nothing awaits per cycle: the packets go into the timed player before reset, the run
goes freely until the player is done (or a budget passes: a hang) and then to the run's
end cycle, and the recorders are read in one snapshot."""

from types import SimpleNamespace

from cocotb.triggers import ClockCycles

from rtl.ephemeral.receiver import ack_layout, deliver_layout, outcome_layout, pkt_layout
from spec.ephemeral import NODE_BITS, RECV_OUTCOMES
from tb.harness import HarnessTimeout

__all__ = ["PKT_FIELDS", "run_stream", "compare_with_twin"]

#: The packet's fields in :func:`rtl.ephemeral.receiver.pkt_layout`, in the order of the
#: stream generators' tuples.
PKT_FIELDS = ("src", "psn", "open", "close", "off")


def _fields(layout, value):
    """The fields of a flat ``value`` of ``layout`` as integers."""
    return {name: (value >> f.offset) & ((1 << f.width) - 1) for name, f in layout}


async def run_stream(dut, harness, pkts, release, entries, idle, end, budget):
    """Play ``pkts`` (packet ``k`` released in cycle ``release[k]``) into the top after a
    reset with its ``idle`` port at ``idle``, run to cycle ``end`` (at least one cycle
    after the player is done) and read everything back. ``budget``: the cycles beyond the
    last release within which the player must be done, else ``hang`` says so (the run
    still goes on to ``end``). Returns a namespace: ``played`` (the release cycle of each
    packet as played), ``outs`` (cycle, outcome, entry), ``delivers`` (cycle, entry, src,
    psn), ``acks`` (cycle, src, psn), ``closes`` (cycle, src) of the idle scan,
    ``counters`` (each outcome's, ``used``, ``used_max``), ``stop`` (the top's ``now`` at
    the end) and ``hang`` (None, or what timed out)."""
    play = pkt_layout(NODE_BITS)
    lays = {"outcome": outcome_layout(entries), "deliver": deliver_layout(entries, NODE_BITS),
            "ack": ack_layout(NODE_BITS), "expired": None}
    harness.load_player("pkts", [play.const(dict(zip(PKT_FIELDS, pk, strict=True)))
                                 .as_value().value for pk in pkts], release=release)
    for name in lays:
        harness.arm_recorder(name, len(pkts))
    harness.set("idle", idle)
    await harness.reset()
    hang = None
    try:
        now = await harness.wait_done(["pkts__done"], release[-1] + budget)
    except HarnessTimeout as exc:
        hang, now = str(exc), int(dut.now.value)
    await ClockCycles(dut.clk, max(end - now, 1))
    counters = {n: int(getattr(dut, n).value) for n in RECV_OUTCOMES + ("used", "used_max")}
    stop = int(dut.now.value)
    await harness.snapshot(players=[("pkts", len(pkts))], recorders=tuple(lays))
    got = {}
    for name, lay in lays.items():
        items, stamps = harness.recorded(name)
        got[name] = [(t, _fields(lay, v) if lay is not None else v)
                     for v, t in zip(items, stamps, strict=True)]
    return SimpleNamespace(
        played=harness.played_stamps("pkts", len(pkts)),
        outs=[(t, RECV_OUTCOMES[f["outcome"]], f["entry"]) for t, f in got["outcome"]],
        delivers=[(t, f["entry"], f["src"], f["psn"]) for t, f in got["deliver"]],
        acks=[(t, f["src"], f["psn"]) for t, f in got["ack"]],
        closes=list(got["expired"]), counters=counters, stop=stop, hang=hang)


def compare_with_twin(sb, run, release, want, twin):
    """Compare a :func:`run_stream` ``run`` with the twin's events ``want`` (``(outcomes,
    delivers, acks, closes, ...)`` as :func:`tb.ephemeral_receiver.model_events` gives
    them; the idle closes up to the run's ``stop``) and its final ``twin`` on the
    scoreboard ``sb``: the packets played at their release cycles, every outcome,
    delivery, ACK and idle close with its cycle, the counters, ``used`` and
    ``used_max``."""
    sb.compare("packets played at their release cycles", run.played, release, fmt=str)
    sb.compare("outcomes (cycle, outcome, entry)", run.outs, want[0], fmt=str)
    sb.compare("deliveries (cycle, entry, src, psn)", run.delivers, want[1], fmt=str)
    sb.compare("ACKs (cycle, src, psn)", run.acks, want[2], fmt=str)
    sb.compare("idle closes (cycle, src)", run.closes,
               [e for e in want[3] if e[0] < run.stop], fmt=str)
    sb.compare("counters, used, used_max", [run.counters],
               [dict(twin.count, used=twin.pool.used, used_max=twin.pool.used_max)], fmt=str)
