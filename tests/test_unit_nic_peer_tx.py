"""NicTx with the per-peer retry (``peer_retry``) against its twin, cycle by cycle
(Amaranth simulator): the PSN extension, the replay memory, the resends and the merge
with completions under link backpressure."""

import random

import pytest

from pymodel.nic.frames import build_completion, parse_header
from pymodel.nic.nic_tx import NicTxModel
from pymodel.nic.peer_retry import PeerRetrySenderModel
from pymodel.nic.store import Store
from pymodel.packet import beats_to_frames
from rtl.nic.nic_tx import NicTx
from spec.formats.nic import PSN_BYTES, NicOp, header_bytes
from spec.nic import link_credits
from tb.nic.tx_lockstep import nic_tx_lockstep

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
    cpls = sorted((rng.randrange(3000), build_completion(framing, 3, k % 4, 0, k, 0,
                                                         fcs=False)) for k in range(12))
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

    acks = {}

    def drive(c, ctx):
        ack = acks[c] = ack_of(c)
        ctx.set(dut.ack.valid, ack is not None)
        if ack is not None:
            ctx.set(dut.ack.payload.src, ack[0])
            ctx.set(dut.ack.payload.count, ack[1])
            ctx.set(dut.ack.payload.gap, ack[2])

    def observe(c, res):
        snd.step(c, {"send": res["sent"], "ack": acks.pop(c), "ready": res["resent"]})

    def check(c, ctx):
        for name in names:
            assert ctx.get(getattr(dut.peer, name)) == getattr(snd, name), (c, name)
        for name, arr in (("una", snd.una), ("next_psn", snd.next_psn),
                          ("timeouts", snd.timeouts), ("resent", snd.resent)):
            assert [ctx.get(getattr(dut.peer, name)[d]) for d in range(PEERS)] == arr

    got, _ = nic_tx_lockstep(dut, twin, width, stores, cpls, rng, cycles=6000, ready_p=0.7,
                             delay=delay, drive=drive, observe=observe, check=check)
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
