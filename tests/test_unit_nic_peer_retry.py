"""Per-peer end-to-end retry: the receiver's in-order check, the sender's go-back-N
replay, and frames dropped in the switch recovered end to end on the twins' path
(:mod:`pymodel.nic.peer_retry`); the state formula and the refused values."""

import pytest

from pymodel.nic.peer_retry import (
    PeerRetryReceiverModel,
    PeerRetrySenderModel,
    run_peer_retry,
)
from spec.formats.nic import PSN_BITS, CompletionStatus, frame_beats
from spec.nic import PEER_RETRY_DEFAULTS, check_peer_retry, peer_retry_state_bits


def _stores(nodes=3, per_pair=40):
    """Every node stores to every other; every fifth store rewrites an earlier address,
    so that the memory depends on the order of the writes."""
    out = []
    for k in range(per_pair):
        for s in range(nodes):
            for d in range(nodes):
                if s != d:
                    addr = 64 * (s * per_pair + (k - 3 if k % 5 == 4 else k))
                    out.append((s, d, addr, (s, d, k)))
    return out


def _expected_writes(stores):
    n = {}
    for _, d, addr, _ in stores:
        n[d, addr] = n.get((d, addr), 0) + 1
    return n


def test_receiver_rules():
    rx = PeerRetryReceiverModel(2)
    assert rx.check(1, 0) == "accept"
    assert rx.check(1, 2) == "nak"            # 1 lost: the first gap asks for a NAK
    assert rx.check(1, 3) == "gap"            # the next ones only count
    assert rx.check(1, 0) == "duplicate"
    assert rx.check(1, 1) == "accept"
    assert rx.check(1, 3) == "nak"            # a new gap after a frame in order
    assert (rx.expected, rx.gaps, rx.duplicates) == ([0, 2], [0, 3], [0, 1])
    rx.expected[0] = (1 << PSN_BITS) - 1      # PSNs wrap
    assert rx.check(0, (1 << PSN_BITS) - 1) == "accept" and rx.check(0, 0) == "accept"


def test_sender_go_back_n():
    tx = PeerRetrySenderModel(3, window=4, timeout=5)
    psns = [tx.send(2, f"f{k}") for k in range(4)]
    assert psns == [0, 1, 2, 3] and not tx.can_send()
    assert tx.ack(2, 2)                       # cumulative: frees 0 and 1
    assert tx.can_send() and tx.una[2] == 2 and len(tx.slots) == 2
    assert not tx.ack(2, 2)                   # does not advance
    assert not tx.ack(2, 7)                   # beyond what was sent
    assert tx.ack(2, 2, CompletionStatus.GAP)  # NAK: back to 2
    assert [tx.resend() for _ in range(3)] == [(2, 2, "f2"), (2, 3, "f3"), None]
    tx.tick()                                 # the ACKs' cycle: the timer restarts
    for _ in range(5):                        # timeout: back to the oldest unacked
        assert tx.timeouts[2] == 0 and tx.back[2] is None
        tx.tick()
    assert tx.timeouts[2] == 1 and tx.resend() == (2, 2, "f2")
    assert (tx.ack_ok, tx.ack_bad) == (2, 2)


def test_switch_drops_recovered_end_to_end():
    stores = _stores()
    clean = run_peer_retry(stores, 3)
    assert clean["dropped"] == [] and sum(sum(t.resent) for t in clean["senders"]) == 0
    # A store frame, several in a row of one pair, and completions: order at the switch.
    drops = {5, 17, 18, 19, 60, 61, 200, 201, 202, 203, 250}
    run = run_peer_retry(stores, 3, drops=drops)
    kinds = {f[0] for f in run["dropped"]}
    assert len(run["dropped"]) == len(drops) and kinds == {"store", "cpl"}
    assert run["mem"] == clean["mem"]
    assert run["writes"] == clean["writes"] == _expected_writes(stores)
    assert sum(sum(t.resent) for t in run["senders"]) > 0
    assert sum(sum(r.gaps) for r in run["receivers"]) > 0
    for t in run["senders"]:                  # all acknowledged, every slot free
        assert t.slots == {} and t.una == t.next_psn


def test_lost_ack_and_last_frame_recovered_by_timeout():
    """The last store of a pair and its completion lost: no later frame shows the gap,
    only the timer; the resent frame is a duplicate only if it had arrived."""
    stores = [(0, 1, 64 * k, k) for k in range(8)]
    clean = run_peer_retry(stores, 2, timeout=64)
    last = len(stores) - 1
    run = run_peer_retry(stores, 2, timeout=64, drops={last})
    assert run["mem"] == clean["mem"] and run["writes"] == _expected_writes(stores)
    assert run["senders"][0].timeouts[1] >= 1
    ack = run_peer_retry(stores, 2, timeout=64, drops={len(stores)})  # the completion
    assert ack["dropped"][0][0] == "cpl"
    assert ack["mem"] == clean["mem"] and ack["writes"] == _expected_writes(stores)
    assert sum(ack["receivers"][1].duplicates) > 0


def test_window_bounds_the_frames_in_flight():
    stores = [(0, 1, 64 * k, k) for k in range(64)]
    run = run_peer_retry(stores, 2, window=4, latency=10, drops={9})
    assert run["mem"] == run_peer_retry(stores, 2)["mem"]
    assert run["writes"] == _expected_writes(stores)


def test_default_window_covers_a_pod_round_trip():
    # The default's basis (spec.nic.PEER_RETRY_DEFAULTS): 2 x 500 cycles one way at pod
    # plus 24 cycles to the completion, a 128-byte L2 frame every 3 cycles at W = 64.
    from spec.fabric_profiles import one_way
    in_flight = -(-(2 * one_way("pod") + 24) // frame_beats(64, "l2", 128))
    w = PEER_RETRY_DEFAULTS["window"]
    assert in_flight <= w < 2 * in_flight and w & (w - 1) == 0


def test_state_formula():
    # docs/nic.md, "Per-peer retry": per source the gap and duplicate counters and the
    # NAK flag; per destination the cursor PSN, the flag and the resent counter; slots
    # of frame, destination, PSN and valid flag.
    frame = 20 + 2 + 128                      # L2 header, PSN, payload (FCS made again)
    rx, tx, replay = peer_retry_state_bits(15, 512, frame)
    assert rx == 15 * (16 + 16 + 1) and tx == 15 * (16 + 1 + 16)
    assert replay == 512 * (8 * frame + 8 + 16 + 1)


@pytest.mark.parametrize("kw, name", [
    (dict(peer_retry=1, completion="e2e"), "peer_retry"),
    (dict(peer_retry=True, completion="credit"), "peer_retry"),
    (dict(peer_retry=True, completion="e2e", window=3), "window"),
    (dict(peer_retry=True, completion="e2e", window=1), "window"),
    (dict(peer_retry=True, completion="e2e", window=1 << 16), "window"),
    (dict(peer_retry=True, completion="e2e", window=True), "window"),
])
def test_bad_values_refused(kw, name):
    with pytest.raises(ValueError, match=name):
        check_peer_retry(**kw)


def test_bad_run_values_refused():
    with pytest.raises(ValueError, match="latency"):
        run_peer_retry([], 2, latency=0)
    with pytest.raises(ValueError, match="timeout"):
        PeerRetrySenderModel(2, 4, 0)
    with pytest.raises(ValueError, match="peers"):
        PeerRetryReceiverModel(0)
    assert check_peer_retry(False, "credit") == (False, PEER_RETRY_DEFAULTS["window"])


def _nic_stand_in(peers, completion=36.0):
    """A ``nic`` spectrum row as :func:`tb.ephemeral.spectrum.nic_row` gives it (no model
    run): 3 cycles a message, the state of the completion counters."""
    from tb.ephemeral.spectrum import finish
    row = dict(design="nic", peers=peers, lanes=1, fabric="board", attachment="pcie",
               popularity="round_robin", simulator="model", note="", cap=None,
               latency_cycles=24.0, completion_cycles=completion,
               context_state_bits=100 * peers, host_context_bits=0, wire_bytes=256,
               width=64)
    return finish(row, 100 * peers, 3.0, completion)


@pytest.mark.parametrize("completion, window", [(36.0, 32), (1024.0, 512), (1.0, 32)])
def test_spectrum_retry_window(completion, window):
    """The row's window holds the frames of one completion's wait (the completion and
    the 15 frames of its coalesced group after it, at 3 cycles a frame)."""
    from tb.ephemeral.spectrum import retry_window
    frames = (completion + 16 * 3) / 3
    assert window // 2 < frames <= window
    assert retry_window(3.0, completion) == window


@pytest.mark.slow_variants("pod", reason=(
    "about 30 s of model runs (pod's 1 us round trips, a window of 512); make test runs "
    "the board variant, the same row's construction with a window of 32"))
@pytest.mark.parametrize("fabric", ["board", "pod"])
def test_spectrum_retry_row(fabric):
    """The row is the NIC's model point run with the per-peer retry, its window sized
    from the cell's ``nic`` row: fault free, that window covers the round trip, so its
    rate and latency are the NIC's (a 128-byte frame with its PSN fills the same 64-byte
    beats) and its wire bytes 2 more a message (the PSN); its state is the NIC row's
    plus the formula at the row's peers."""
    from tb.ephemeral.spectrum import nic_retry_row, nic_row, retry_window
    for peers in (1, 64):
        nic = nic_row(peers, fabric, "round_robin", messages=40)
        r = nic_retry_row(peers, fabric, "round_robin", messages=40, nic=dict(nic))
        window = retry_window(1e9 / nic["msgs_per_s"], nic["completion_cycles"])
        assert r["design"] == "nic_retry" and r["window"] == window
        for key in ("msgs_per_s", "latency_cycles", "completion_cycles"):
            assert r[key] == nic[key], key
        assert r["wire_bytes"] == pytest.approx(nic["wire_bytes"] + 2)
        rx, tx, replay = peer_retry_state_bits(peers, window, 20 + 2 + 128)
        assert r["endpoint_state_bits"] == nic["endpoint_state_bits"] + rx + tx + replay
        assert r["replay_bits"] == replay and "window" in r["note"]
        assert r["per_peer_bits"] == r["endpoint_state_bits"] / peers


def test_spectrum_retry_row_window_bounds_the_rate():
    """A window smaller than the round trip shows in the row's rate: the model's sender
    waits for a free slot (a stand-in ``nic`` row whose 0-cycle completion sizes a
    window of 16, the coalesced group alone)."""
    from tb.ephemeral.spectrum import nic_retry_row, nic_row
    nic = nic_row(1, "board", "round_robin", messages=40)
    r = nic_retry_row(1, "board", "round_robin", messages=40,
                      nic=dict(nic, completion_cycles=0.0))
    assert r["window"] == 16
    assert r["msgs_per_s"] < nic["msgs_per_s"]


def test_spectrum_lines_name_the_retry_row():
    from scripts.reporting.spectrum import spectrum_lines
    from tb.ephemeral.spectrum import nic_retry_row, nic_row
    nic = nic_row(1, "board", "round_robin", messages=40)
    r = nic_retry_row(1, "board", "round_robin", messages=40, nic=dict(nic))
    rate = f"{r['msgs_per_s'] / 1e6:.0f} M"
    assert any(line.startswith(f"| NIC with per-peer retry | 1 | {rate} |")
               for line in spectrum_lines([r]))


def test_spectrum_cells_hold_the_retry_row(monkeypatch):
    """Every cell of the spectrum has the four endpoints (stand-in rows: no model run)."""
    from tb.ephemeral import spectrum

    def nic(p, fabric, pattern, messages, attachment):
        return dict(_nic_stand_in(p), fabric=fabric, popularity=pattern)

    def other(name):
        return lambda p, fabric, pattern, *a, **k: dict(design=name, peers=p, fabric=fabric,
                                                         popularity=pattern)

    monkeypatch.setattr(spectrum, "nic_row", nic)
    monkeypatch.setattr(spectrum, "nic_retry_row",
                        lambda p, *a, nic=None, **k: dict(nic, design="nic_retry"))
    monkeypatch.setattr(spectrum, "ephemeral_row", other("ephemeral"))
    monkeypatch.setattr(spectrum, "rc_row", other("rdma"))
    rows = spectrum.spectrum_rows()
    cells = {(r["fabric"], r["popularity"], r["peers"]) for r in rows}
    assert len(cells) == len(spectrum.PEERS) * len(spectrum.PROFILES) * len(spectrum.PATTERNS)
    for cell in cells:
        designs = sorted(r["design"] for r in rows
                         if (r["fabric"], r["popularity"], r["peers"]) == cell)
        assert designs == ["ephemeral", "nic", "nic_retry", "rdma"]


def test_check_rtl_matches_twin():
    """Random PSNs of 3 tracked sources and an untracked id, mostly in order with gaps
    and duplicates (the PSN's wrap: test_receiver_rules on the twin): the verdict and
    every port equal the twin's every cycle; independently, every verdict occurs."""
    import random

    from rtl.nic.peer_retry_check import PeerRetryCheck
    from tb.amsim import run_sim

    rng = random.Random(7)
    peers = 3
    dut, twin = PeerRetryCheck(peers), PeerRetryReceiverModel(peers)
    nxt = [0] * (peers + 1)
    seen = set()

    async def bench(ctx):
        for c in range(800):
            i = None
            if rng.random() < 0.7:
                src = rng.randrange(peers + 1)
                psn = (nxt[src] + rng.choice([0, 0, 0, 0, 1, 2, -1, -3, 40000])) & 0xFFFF
                i = (src, psn)
                if psn == nxt[src]:
                    nxt[src] = (psn + 1) & 0xFFFF
            ctx.set(dut.i.valid, i is not None)
            if i is not None:
                ctx.set(dut.i.payload.src, i[0])
                ctx.set(dut.i.payload.psn, i[1])
            for name in ("expected", "gaps", "duplicates"):
                got = [ctx.get(getattr(dut, name)[s]) for s in range(peers)]
                assert got == getattr(twin, name), (c, name)
            want = twin.step(c, {"i": i})["verdict"]
            if i is not None:
                assert ctx.get(dut.verdict) == want, (c, i)
                seen.add(want)
            await ctx.tick()

    run_sim(dut, bench)
    assert seen == {0, 1, 2, 3}


def test_check_rtl_refuses_bad_peers():
    from rtl.nic.peer_retry_check import PeerRetryCheck
    with pytest.raises(ValueError, match="peers"):
        PeerRetryCheck(0)


@pytest.mark.parametrize("window, timeout", [(4, 7), (8, 40)])
def test_sender_rtl_matches_twin(window, timeout):
    """Random new frames (some offered without a free slot, while going back, or to an
    untracked id), completions that advance, NAK, repeat, or count beyond what was sent,
    and a framer that takes resends at random: every output and port equals the twin's
    every cycle; independently, sends taken plus refused equal the sends offered, and
    acks accepted plus bad the acks offered."""
    import random

    from rtl.nic.peer_retry_sender import PeerRetrySender
    from tb.amsim import run_sim

    rng = random.Random(window * 1000 + timeout)
    peers = 3
    dut, twin = PeerRetrySender(peers, window, timeout), PeerRetrySenderModel(peers, window,
                                                                             timeout)
    offered = {"send": 0, "ack": 0}

    async def bench(ctx):
        for c in range(1500):
            dst = rng.randrange(peers + 1) if rng.random() < 0.5 else None
            ack = None
            if rng.random() < 0.25:
                src = rng.randrange(peers + 1)
                una = twin.una[src] if src < peers else 0
                out = twin.outstanding(src) if src < peers else 0
                count = (una + rng.choice([0, rng.randrange(out + 1), out, out + 1])) & 0xFFFF
                ack = (src, count, rng.random() < 0.3)
            ready = rng.random() < 0.6
            ctx.set(dut.send.valid, dst is not None)
            ctx.set(dut.send.payload.dst, dst or 0)
            ctx.set(dut.ack.valid, ack is not None)
            if ack is not None:
                for k, v in zip(("src", "count", "gap"), ack, strict=True):
                    ctx.set(getattr(dut.ack.payload, k), int(v))
            ctx.set(dut.resend.ready, ready)
            for name in ("next_psn", "una", "timeouts", "resent"):
                got = [ctx.get(getattr(dut, name)[d]) for d in range(peers)]
                assert got == getattr(twin, name), (c, name)
            for name in ("ack_ok", "ack_bad", "refused"):
                assert ctx.get(getattr(dut, name)) == getattr(twin, name), (c, name)
            want = twin.step(c, {"send": dst, "ack": ack, "ready": ready})
            assert ctx.get(dut.can_send) == want["can_send"], c
            if want["slot"] is not None:
                assert ctx.get(dut.slot) == want["slot"], c
            if want["psn"] is not None:
                assert ctx.get(dut.psn) == want["psn"], c
            r = want["resend"]
            assert ctx.get(dut.resend.valid) == (r is not None), c
            if r is not None:
                p = dut.resend.payload
                assert (ctx.get(p.dst), ctx.get(p.psn), ctx.get(p.slot)) == r, c
            offered["send"] += dst is not None
            offered["ack"] += ack is not None
            await ctx.tick()

    run_sim(dut, bench)
    sent = sum(twin.next_psn)
    assert sent > 0 and twin.refused > 0 and sent + twin.refused == offered["send"]
    assert twin.ack_ok > 0 and twin.ack_bad > 0
    assert twin.ack_ok + twin.ack_bad == offered["ack"]
    assert sum(twin.resent) > 0 and sum(twin.timeouts) > 0


def test_sender_rtl_refuses_bad_values():
    from rtl.nic.peer_retry_sender import PeerRetrySender
    for kw, name in ((dict(peers=0, window=4, timeout=8), "peers"),
                     (dict(peers=2, window=6, timeout=8), "window"),
                     (dict(peers=2, window=4, timeout=1), "timeout")):
        with pytest.raises(ValueError, match=name):
            PeerRetrySender(**kw)
