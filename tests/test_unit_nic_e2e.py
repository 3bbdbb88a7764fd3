"""The end-to-end completion blocks against their twins, cycle by cycle (Amaranth
simulator): CompletionGen and OutstandingTracker (twins in ``pymodel/nic/``), and their
parameter checks."""

import random

import pytest

from pymodel.nic.completion_gen import CompletionGenModel
from pymodel.nic.frames import build_completion, parse_completion
from pymodel.nic.outstanding_tracker import OutstandingTrackerModel
from pymodel.nic.system import NicSystemModel
from pymodel.packet import unpack_beat
from rtl.nic.completion_gen import CompletionGen
from rtl.nic.nic_rx import NicRx
from rtl.nic.nic_tx import NicTx
from rtl.nic.outstanding_tracker import OutstandingTracker
from rtl.tops.nic_top import NicTop
from spec.formats.nic import completion_bytes
from spec.nic import check_completion, completion_state_bits, link_credits
from tb.amsim import run_sim


@pytest.mark.parametrize("width,framing,coalesce,idle", [(8, "compact", 4, 5),
                                                         (16, "l2", 3, 9),
                                                         (64, "compact", 1, 2)])
def test_completion_gen_matches_twin(width, framing, coalesce, idle):
    """Random finished frames from 4 tracked sources and one untracked id, random
    backpressure on each frame's first beat (the rest back to back, as NicTx takes
    them): every beat offered equals the twin's; independently, per source the
    completions are cumulative, the last one counts every frame and every drop, and
    nothing is pending at the end."""
    rng = random.Random(width + coalesce)
    peers, node_id = 4, 9
    dut = CompletionGen(width, framing, peers, coalesce, idle)
    twin = CompletionGenModel(width, framing, peers, coalesce, idle, node_id)
    nb = -(-completion_bytes(framing) // width)
    events = [(rng.randrange(peers + 1), rng.random() < 0.3) if rng.random() < 0.4 else None
              for _ in range(400)] + [None] * (idle + 8 * (nb + 2) * peers)
    got, want = [], []
    frames = []

    async def bench(ctx):
        ctx.set(dut.node_id, node_id)
        mid = 0                               # beats of the current frame taken
        frame = b""
        for c, ev in enumerate(events):
            ctx.set(dut.ev.valid, ev is not None)
            if ev is not None:
                ctx.set(dut.ev.payload.src, ev[0])
                ctx.set(dut.ev.payload.dropped, ev[1])
            ready = mid > 0 or rng.random() < 0.6
            ctx.set(dut.o.ready, ready)
            valid = ctx.get(dut.o.valid)
            offer = twin.offer(c)
            if mid == 0:
                got.append(bool(valid))
                want.append(offer is not None)
            started = False
            if valid and ready:
                data, n, first, last = (ctx.get(dut.o.payload.data), ctx.get(
                    dut.o.payload.nbytes), ctx.get(dut.o.payload.first),
                    ctx.get(dut.o.payload.last))
                assert first == (mid == 0)
                frame += data.to_bytes(width, "little")[:n]
                started = mid == 0
                mid += 1
                if last:
                    assert mid == nb
                    frames.append(frame)
                    mid, frame = 0, b""
            if started:
                assert offer is not None
                wire = b"".join(unpack_beat(width, b)[0].to_bytes(width, "little")[
                    :unpack_beat(width, b)[1]] for b in offer)
                assert wire[:completion_bytes(framing)] == build_completion(
                    framing, node_id, *twin.sent[-1][1:], fcs=False)
            twin.step(c, {"ev": ev if ev is not None and ev[0] < peers else None,
                          "started": started})
            await ctx.tick()

    run_sim(dut, bench)
    assert got == want
    assert frames and len(frames) == len(twin.sent)
    for f, (_c, dst, status, count, dropped) in zip(frames, twin.sent, strict=True):
        assert f == build_completion(framing, node_id, dst, status, count, dropped,
                                     fcs=False)
    # Independent of the twin: the last completion of each source counts everything.
    for s in range(peers):
        mine = [ev for ev in events if ev is not None and ev[0] == s]
        last = [parse_completion(framing, f) for f in frames
                if (f[5] if framing == "l2" else f[0]) == s][-1]
        assert last["count"] == len(mine)
        assert last["dropped"] == sum(d for _, d in mine)
    assert not any(twin.pending)


@pytest.mark.parametrize("timeout", [2, 17])
def test_outstanding_tracker_matches_twin(timeout):
    """Random frames sent to 3 tracked destinations and one untracked id, completions
    that are right, stale, forged (beyond what was sent), from a source sent nothing or
    unknown: every port equals the twin's every cycle; independently, accepted plus
    dropped completions equal the completions offered."""
    rng = random.Random(timeout)
    peers = 3
    dut, twin = OutstandingTracker(peers, timeout), OutstandingTrackerModel(peers, timeout)
    sent_total = [0] * (peers + 1)
    offered = 0

    async def bench(ctx):
        nonlocal offered
        for c in range(600):
            dst = rng.randrange(peers + 1) if rng.random() < 0.3 else None
            cpl = None
            if rng.random() < 0.2:
                src = rng.randrange(peers + 2)
                base = sent_total[src] if src <= peers else 0
                count = rng.choice([base, base + rng.randrange(1, 5),
                                    max(0, base - rng.randrange(0, 4))]) & 0xFFFF
                cpl = (src, rng.random() < 0.9, 0, count, rng.randrange(3))
            ctx.set(dut.sent.valid, dst is not None)
            ctx.set(dut.sent.payload.dst, dst or 0)
            ctx.set(dut.cpl.valid, cpl is not None)
            if cpl is not None:
                offered += 1
                for k, v in zip(("src", "known", "status", "count", "dropped"), cpl,
                                strict=True):
                    ctx.set(getattr(dut.cpl.payload, k), int(v))
            for name, values in twin.ports().items():
                assert [ctx.get(getattr(dut, name)[d]) for d in range(peers)] == values, (
                    c, name)
            assert ctx.get(dut.cpl_ok) == twin.cpl_ok and ctx.get(dut.cpl_bad) == twin.cpl_bad
            twin.step(c, {"sent": dst, "cpl": cpl})
            if dst is not None:
                sent_total[dst] += 1
            await ctx.tick()

    run_sim(dut, bench)
    assert twin.cpl_ok > 0 and twin.cpl_bad > 0
    assert twin.cpl_ok + twin.cpl_bad == offered
    assert sum(twin.timeouts) > 0


def test_tracker_drops_a_count_beyond_what_was_sent():
    """By the contract alone: 2 frames sent to node 1; a completion counting 3 is
    dropped, one counting 2 is accepted, one from node 2 (sent nothing) is dropped."""
    t = OutstandingTrackerModel(4, 100)
    t.step(0, {"sent": 1})
    t.step(1, {"sent": 1})
    assert t.step(2, {"cpl": (1, True, 0, 3, 0)}) == {"ok": False}
    assert t.step(3, {"cpl": (2, True, 0, 1, 0)}) == {"ok": False}
    assert t.step(4, {"cpl": (1, True, 0, 2, 0)}) == {"ok": True}
    assert (t.cpl_ok, t.cpl_bad, t.outstanding(1)) == (1, 2, 0)


def test_e2e_parameters_are_checked():
    with pytest.raises(ValueError, match="completion"):
        check_completion("ack")
    with pytest.raises(ValueError, match="completion"):
        NicTop(completion="ack")
    with pytest.raises(ValueError, match="completion"):
        NicTop(width=64, completion="e2e", attachment="pcie")
    with pytest.raises(ValueError, match="completion"):
        NicTop(completion="e2e", retry=True)
    with pytest.raises(ValueError, match="completion"):
        NicRx(16, "compact", 512, 256, completion="x")
    with pytest.raises(ValueError, match="completion"):
        NicTx(16, "compact", 68, 512, completion="x")
    with pytest.raises(ValueError, match="completion"):
        NicSystemModel(16, "compact", 4, 2, 256, 512, link_credits(16, 512),
                       completion="x")
    for kw, name in ((dict(peers=0), "peers"), (dict(coalesce=0), "coalesce"),
                     (dict(flush_idle=0), "flush_idle")):
        args = dict(width=16, framing="compact", peers=4, coalesce=16, flush_idle=8) | kw
        with pytest.raises(ValueError, match=name):
            CompletionGen(**args)
    with pytest.raises(ValueError, match="timeout"):
        OutstandingTracker(4, 1)
    with pytest.raises(ValueError, match="peers"):
        OutstandingTracker(0, 100)


def test_state_bits_formula():
    """4 peers, coalesce 16, flush 66, timeout 4096: receiver 4 x (32 + 5 + 7 + 1) + 64,
    sender 4 x (48 + 12 + 16)."""
    assert completion_state_bits(4, 16, 66, 4096) == (4 * 45 + 64, 4 * 76)
