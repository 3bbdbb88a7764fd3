"""NicTx with the per-peer retry (``peer_retry``) against its twin, cycle by cycle
(Amaranth simulator): the PSN extension, the replay memory, the resends and the merge
with completions under link backpressure."""

import random

import pytest

from pymodel.fcs import fcs_bytes
from pymodel.nic.frames import build_completion, parse_header
from pymodel.nic.nic_tx import NicTxModel
from pymodel.nic.peer_retry import PeerRetrySenderModel
from pymodel.nic.store import Store
from pymodel.packet import beats_to_frames, pack_beat
from rtl.nic.nic_tx import NicTx
from spec.formats.nic import PSN_BYTES, NicOp, header_bytes, store_cmd_layout
from spec.nic import link_credits
from tb.amsim import run_sim

PEERS, WINDOW, TIMEOUT = 4, 4, 90


@pytest.mark.parametrize("framing", ["compact", "l2"])
def test_nic_tx_peer_retry_matches_twin(framing):
    """Stores of 1 to 700 bytes (some cut in two frames) to ids 1 .. 4 (4 is not a
    peer: refused by the sender, sent without a slot), completions offered at random
    cycles, the link's ready low at random, credits back 5 cycles after each beat, and
    ACKs driven from the twin's state (cumulative ACKs, NAKs, counts beyond what was
    sent, none for long stretches so that the 90-cycle timers fire; a window of 4 slots
    throttles): every beat on ``o``, every ``sent`` event and the sender's counters
    equal the twin's, every cycle. Independently: every resent frame is byte for byte
    the frame first sent with its destination and PSN, and each new frame carries its
    destination's PSNs 0, 1, ... after its header."""
    width, max_payload, delay = 16, 512, 5
    credits = link_credits(width, max_payload)
    rng = random.Random(5)
    cfg = {"peers": PEERS, "window": WINDOW, "timeout": TIMEOUT}
    dut = NicTx(width, framing, credits, max_payload, "e2e", peer_retry=cfg)
    snd = PeerRetrySenderModel(PEERS, WINDOW, TIMEOUT)
    twin = NicTxModel(width, framing, max_payload, credits, 3, "e2e", sender=snd)
    stores = [Store(1 + k % 4, 64 * k, rng.randbytes(rng.randint(1, 700)))
              for k in range(24)]
    for mid, s in enumerate(stores):
        for seg, slots, _ in twin.frames(s):
            twin.queue(mid, seg, slots)
    layout = store_cmd_layout(width)
    items = [layout.const({"dst": s.dst, "addr": s.addr, "length": s.length, "data": d,
                           "nbytes": n, "first": f, "last": la}).as_bits()
             for s in stores for d, n, f, la in s.beats(width)]
    cpls = sorted((rng.randrange(3000), build_completion(framing, 3, k % 4, 0, k, 0,
                                                         fcs=False)) for k in range(12))

    def beats(raw):
        n = -(-len(raw) // width)
        return [(int.from_bytes(raw[j * width:(j + 1) * width], "little"),
                 min(width, len(raw) - j * width), j == 0, j == n - 1) for j in range(n)]

    rtl_cpl = [beats(raw) for _, raw in cpls]
    model_cpl = [[pack_beat(width, *b) for b in beats(raw + fcs_bytes(raw))]
                 for _, raw in cpls]
    got, want, got_sent, want_sent = [], [], [], []
    names = ("ack_ok", "ack_bad", "refused")

    def ack_of(c):
        """An ACK event for cycle ``c`` from the twin's state (stimulus only)."""
        if (c // 400) % 2 or rng.random() > 0.08:      # silent stretches: timeouts
            return None
        d = rng.randrange(PEERS + 1)
        if d >= PEERS:
            return d, rng.randrange(1 << 16), False
        out = snd.outstanding(d)
        kind = rng.random()
        if kind < 0.6:
            return d, (snd.una[d] + rng.randint(0, out)) & 0xFFFF, False
        if kind < 0.8:
            return d, (snd.una[d] + rng.randint(0, out)) & 0xFFFF, True
        return d, (snd.una[d] + out + 1 + rng.randrange(100)) & 0xFFFF, False

    async def bench(ctx):
        ctx.set(dut.node_id, 3)
        k, ci, cj, mi = 0, 0, 0, 0
        sends = []
        for c in range(6000):
            ready = rng.random() < 0.7
            give = c - delay in sends
            ack = ack_of(c)
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
            ctx.set(dut.ack.valid, ack is not None)
            if ack is not None:
                ctx.set(dut.ack.payload.src, ack[0])
                ctx.set(dut.ack.payload.count, ack[1])
                ctx.set(dut.ack.payload.gap, ack[2])
            ctx.set(dut.o.ready, ready)
            ctx.set(dut.give, give)
            offer = model_cpl[mi] if mi < len(cpls) and c >= cpls[mi][0] else None
            res = twin.step(c, {"valid": k < len(items), "link_ready": ready, "give": give,
                                "cpl": offer})
            snd.step(c, {"send": res["sent"], "ack": ack, "ready": res["resent"]})
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
            await ctx.tick()
            for name in names:
                assert ctx.get(getattr(dut.peer, name)) == getattr(snd, name), (c, name)
            for name, arr in (("una", snd.una), ("next_psn", snd.next_psn),
                              ("timeouts", snd.timeouts), ("resent", snd.resent)):
                assert [ctx.get(getattr(dut.peer, name)[d]) for d in range(PEERS)] == arr
        assert not ctx.get(dut.underflow) and not ctx.get(dut.overflow)
        assert k == len(items) and ci == len(cpls) and mi == len(cpls)

    run_sim(dut, bench)
    assert got == want
    assert got_sent == want_sent
    # Independent of the twin.
    assert sum(snd.resent) > 0 and sum(snd.timeouts) > 0 and snd.refused > 0
    h = header_bytes(framing)
    first, psns = {}, {}
    frames = beats_to_frames([b for _, b in got], width)
    stored = [f for f in frames if parse_header(framing, f)["opcode"] != NicOp.COMPLETION.value]
    for f in stored:
        d = parse_header(framing, f)["dst"] if framing == "compact" else f[5]
        psn = int.from_bytes(f[h:h + PSN_BYTES], "little")
        if d >= PEERS:
            assert psn == 0, "a frame to an id beyond the peers has PSN 0"
            continue
        if (d, psn) in first:
            assert f == first[d, psn], "a resend differs from the frame first sent"
        else:
            assert psn == psns.get(d, 0), "a new frame's PSN out of order"
            first[d, psn], psns[d] = f, psn + 1
    assert len(first) == sum(len(s.segments(width, max_payload)) for s in stores
                             if s.dst < PEERS)
    assert len(stored) > len(first)
