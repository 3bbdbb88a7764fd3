"""The end-to-end completion blocks against their twins, cycle by cycle (Amaranth
simulator): CompletionGen and OutstandingTracker (twins in ``pymodel/nic/``), and their
parameter checks."""

import random

import pytest

from pymodel.fcs import fcs_bytes
from pymodel.nic.completion_gen import CompletionGenModel
from pymodel.nic.frames import build_completion, parse_completion, parse_header
from pymodel.nic.outstanding_tracker import OutstandingTrackerModel
from pymodel.nic.store import Store
from pymodel.nic.system import NicSystemModel
from pymodel.packet import beats_to_frames, unpack_beat
from rtl.nic.completion_gen import CompletionGen
from rtl.nic.nic_rx import NicRx
from rtl.nic.nic_tx import NicTx
from rtl.nic.outstanding_tracker import OutstandingTracker
from rtl.tops.nic_top import NicTop
from spec.formats.nic import NicOp, completion_bytes
from spec.nic import check_completion, completion_state_bits, link_credits
from tb.amsim import run_sim
from tb.nic.tx_lockstep import nic_tx_lockstep


@pytest.mark.parametrize("width,framing,coalesce,idle", [(8, "compact", 4, 5),
                                                         (16, "l2", 3, 9),
                                                         (64, "compact", 1, 2)])
def test_completion_gen_matches_twin(width, framing, coalesce, idle):
    """Random finished frames from 4 tracked sources and one untracked id, one in ten
    with ``ack_req``, random backpressure on each frame's first beat (the rest back to
    back, as NicTx takes them): every beat offered equals the twin's, and the
    ``ack_req_seen`` counter; independently, per source the completions are cumulative,
    the last one counts every frame and every drop, nothing is pending at the end, and
    the counter counts the flagged frames of tracked sources (the untracked id's are
    ignored)."""
    rng = random.Random(width + coalesce)
    peers, node_id = 4, 9
    dut = CompletionGen(width, framing, peers, coalesce, idle)
    twin = CompletionGenModel(width, framing, peers, coalesce, idle, node_id)
    nb = -(-completion_bytes(framing) // width)
    events = [(rng.randrange(peers + 1), rng.random() < 0.3, rng.random() < 0.1)
              if rng.random() < 0.4 else None for _ in range(400)]
    events += [None] * (idle + 8 * (nb + 2) * peers)
    got, want = [], []
    frames, seen = [], []

    async def bench(ctx):
        ctx.set(dut.node_id, node_id)
        mid = 0                               # beats of the current frame taken
        frame = b""
        for c, ev in enumerate(events):
            ctx.set(dut.ev.valid, ev is not None)
            if ev is not None:
                ctx.set(dut.ev.payload.src, ev[0])
                ctx.set(dut.ev.payload.dropped, ev[1])
                ctx.set(dut.ev.payload.ack_req, ev[2])
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
        seen.append(ctx.get(dut.ack_req_seen))

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
        assert last["dropped"] == sum(d for _, d, _r in mine)
    assert not any(twin.pending)
    flagged = sum(1 for ev in events if ev is not None and ev[0] < peers and ev[2])
    assert flagged > 0
    assert seen == [twin.ack_req_seen] == [flagged]


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


@pytest.mark.parametrize("framing", ["compact", "l2"])
def test_nic_tx_merges_completions_under_link_backpressure(framing):
    """NicTx with ``e2e`` against its twin, cycle by cycle, with the link's ``ready``
    low at random (a reliable link's replay buffer full) and credits coming back 5
    cycles after each beat: stores of 1 to 700 bytes (some cut in two frames) and
    completion frames offered at random cycles; every beat on ``o``, every ``sent``
    event and every completion start equal the twin's. Independently: each completion
    frame leaves whole, back to back only where ``ready`` allows, never inside a store
    frame, and the stores' frames leave whole."""
    from pymodel.nic.nic_tx import NicTxModel

    width, max_payload, delay = 16, 512, 5
    credits = link_credits(width, max_payload)
    rng = random.Random(7)
    dut = NicTx(width, framing, credits, max_payload, "e2e")
    twin = NicTxModel(width, framing, max_payload, credits, 3, "e2e")
    stores = [Store(1 + k % 3, 64 * k, rng.randbytes(rng.randint(1, 700)))
              for k in range(14)]
    cpls = [(rng.randrange(600), build_completion(framing, 3, k % 4, 0, k, 0, fcs=False))
            for k in range(10)]
    cpls.sort(key=lambda x: x[0])
    got, ready_log = nic_tx_lockstep(dut, twin, width, stores, cpls, rng, cycles=2500,
                                     ready_p=0.6, delay=delay)
    # Independent of the twin: the wire holds every store frame and every completion
    # frame (with its FCS) whole, and nothing leaves while ready is low.
    frames = beats_to_frames([b for _, b in got], width)
    completions = [f for f in frames if parse_header(framing, f)["opcode"] ==
                   NicOp.COMPLETION.value]
    assert completions == [raw + fcs_bytes(raw) for _, raw in cpls]
    assert len(frames) - len(completions) == sum(
        len(s.segments(width, max_payload)) for s in stores)
    assert all(ready_log[c] for c, _ in got)
    assert not all(ready_log[got[0][0]:got[-1][0]]), "ready never low: tests nothing"


def test_state_bits_formula():
    """4 peers, coalesce 16, flush 66, timeout 4096: receiver 4 x (32 + 5 + 7 + 1 + 1) +
    64 (counts, pending, age, dropped flag, ack-request flag), sender 4 x (48 + 12 +
    16)."""
    assert completion_state_bits(4, 16, 66, 4096) == (4 * 46 + 64, 4 * 76)


def _headline_e2e(stores):
    """The ``make sim`` headline top (64-byte beats, 2-cycle links, the board switch)
    with end-to-end completion and its defaults, compact framing; node 0's ``stores``."""
    from spec.nic import COMPLETION_DEFAULTS, HEADLINE_TOP, completion_flush_idle

    t = HEADLINE_TOP
    model = NicSystemModel(t["width"], "compact", 4, t["link_latency"], t["mem_words"],
                           t["max_payload"], link_credits(t["width"], t["max_payload"]),
                           completion="e2e", coalesce=COMPLETION_DEFAULTS["coalesce"],
                           flush_idle=completion_flush_idle(t["width"], "compact",
                                                            t["max_payload"]),
                           timeout=COMPLETION_DEFAULTS["timeout"])
    return model.run({0: stores}, [0, 1, 2, 3]), model


def lone_compact_store():
    """One 128-byte compact store with ``ack_req``, accepted in cycle 0, alone on the
    headline top with e2e completion: ``(write, completion)``, the cycles of its last
    payload word's memory write and of its completion at the sender. The path, from the
    blocks' Timing sections: its 3 beats (8 + 128 + 4 B) leave NicTx in cycles 0..2 and
    each reaches node 1's NicRx one way later (2 + 2 + 2: link, switch, link), the last
    in T = 8; the verdict is taken in T + 1 and the 3 buffered beats (two of payload,
    one of FCS) drain in T + 2 .. T + 4: the last payload word is written in T + 3 = 11
    and NicRx's ``ack`` is in 12. With ``ack_req`` the generator chooses the source in
    13 and offers the completion from 14; its one beat (8 + 4 B) leaves at once, reaches
    node 0 in 20, and the tracker takes it in the verdict cycle 21."""
    one_way = 2 + 2 + 2
    t_last = 2 + one_way
    ack = t_last + 2 + 2
    return t_last + 3, ack + 2 + one_way + 1


@pytest.mark.parametrize("ack_req", [True, False])
def test_lone_store_with_ack_req_completes_without_the_flush(ack_req):
    """One 128-byte compact store on the headline top completes as
    :func:`lone_compact_store` derives with ``ack_req``; without the flag the choice
    waits for the idle flush: ``flush_idle`` cycles later."""
    from spec.nic import HEADLINE_TOP, completion_flush_idle

    res, _ = _headline_e2e([Store(1, 0, bytes(range(128)), ack_req=ack_req)])
    (st,) = res["stores"]
    write, want = lone_compact_store()
    assert (write, want) == (11, 21)
    flush = completion_flush_idle(HEADLINE_TOP["width"], "compact",
                                  HEADLINE_TOP["max_payload"])
    assert st["accept"] == 0
    assert st["remote_write"] == write
    assert st["completion"] == want + (0 if ack_req else flush)
    assert res["e2e"][1]["ack_req_seen"] == int(ack_req)
    assert len(res["e2e"][1]["sent"]) == 1


def test_stream_still_coalesces_and_its_tail_asks():
    """40 back-to-back stores, the issuer's rule marks the last (no store queued behind
    it): node 1 sends completions at 16 and 32 frames (coalesced 1 per 16) and the tail's
    at once, 3 in all, the last counting 40; the tail's completion comes ``flush_idle``
    cycles earlier than with no flag, every earlier store's is unchanged."""
    from analysis.scenarios.nic import mark_last_queued
    from spec.nic import HEADLINE_TOP, completion_flush_idle

    plain = [Store(1, 128 * k, bytes(128)) for k in range(40)]
    marked = mark_last_queued({0: plain})[0]
    assert [s.ack_req for s in marked] == [False] * 39 + [True]
    asked, _ = _headline_e2e(marked)
    quiet, _ = _headline_e2e(plain)
    counts = [count for _c, _d, _s, count, _dr in asked["e2e"][1]["sent"]]
    assert counts == [16, 32, 40]
    assert asked["e2e"][1]["ack_req_seen"] == 1
    flush = completion_flush_idle(HEADLINE_TOP["width"], "compact",
                                  HEADLINE_TOP["max_payload"])
    a = [s["completion"] for s in asked["stores"]]
    q = [s["completion"] for s in quiet["stores"]]
    assert a[:32] == q[:32]
    assert [y - x for x, y in zip(a[32:], q[32:], strict=True)] == [flush] * 8


def test_forged_ack_req_on_every_frame_is_counted_and_bounded():
    """A sender that flags every one of 40 back-to-back frames (each frame arrives every
    3 cycles, a completion takes the generator 1 beat): every flag is counted, every
    frame still completes, and the generator sends a completion whenever it is free
    (more than the 3 of an honest stream, at most one per frame)."""
    stores = [Store(1, 128 * k, bytes(128), ack_req=True) for k in range(40)]
    res, _ = _headline_e2e(stores)
    sent = res["e2e"][1]["sent"]
    assert res["e2e"][1]["ack_req_seen"] == 40
    assert 3 < len(sent) <= 40
    assert sent[-1][3] == 40
    assert all(s["completion"] is not None for s in res["stores"])
    assert res["e2e"][0]["cpl_bad"] == 0


def test_stores_one_at_a_time_each_complete_as_a_lone_store():
    """The latency run of a NIC row (``one_at_a_time`` of tb.nic.cocotb_nic): 17 stores
    spaced by twice a lone store's run, each its issuer's last queued one (so each
    asks): every store's write and completion come as :func:`lone_compact_store`
    derives, after its own accept; back to back the same stores wait for their group of
    16 (a larger median completion)."""
    import statistics

    from analysis.scenarios.nic import mark_last_queued, one_at_a_time

    plain = [Store(1, 128 * k, bytes(128)) for k in range(17)]
    alone, _ = _headline_e2e(mark_last_queued({0: plain[:1]})[0])
    spaced = mark_last_queued(one_at_a_time({0: plain}, 2 * alone["cycles"]))[0]
    assert all(s.ack_req for s in spaced)
    assert [s.release for s in spaced] == [2 * alone["cycles"] * k for k in range(17)]
    res, _ = _headline_e2e(spaced)
    write, done = lone_compact_store()
    assert [(s["remote_write"] - s["accept"], s["completion"] - s["accept"])
            for s in res["stores"]] == [(write, done)] * 17
    b2b, _ = _headline_e2e(mark_last_queued({0: plain})[0])
    assert statistics.median(s["completion"] - s["accept"] for s in b2b["stores"]) > done
    with pytest.raises(ValueError, match="spacing"):
        one_at_a_time({0: plain}, 0)
