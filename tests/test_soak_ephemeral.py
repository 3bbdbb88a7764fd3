"""The ephemeral receiver's soak: the go-back-N senders and the lossy path
(analysis/scenarios/soak_ephemeral.py) on the receiver's twin, the knobs refused by name,
scripts/soak.py's ephemeral design, and a short co-simulated soak on the receiver's top
of make test (tb/soak/ephemeral.py)."""

import json
import types

import pytest

from analysis.scenarios.soak_ephemeral import SOAK_DEFAULTS, check_soak, soak_chunk, soak_errors
from pymodel.ephemeral.receiver import ReceiverModel
from scripts import soak
from spec.ephemeral import RECV_DELIVERS
from tb.ephemeral_receiver import invariant_errors, model_events

#: No random fault: only the tests' hand-made losses.
QUIET = dict(drop_rate=0, dup_rate=0, late_rate=0, ack_drop_rate=0)


def _delivered(chunk):
    out = {}
    for _, _, src, psn in chunk["events"][1]:
        out[(src, psn)] = out.get((src, psn), 0) + 1
    return out


def test_lost_packet_is_resent_and_delivered_once():
    """Source 0's third packet (a data packet of its open context) is dropped: the
    sender's timer sends it again (go-back-N: the ones after it, refused ``gap``, too),
    and every message is delivered exactly once."""
    c = soak_chunk(7, 0, 40, lose={(0, 2)}, sources=2, **QUIET)
    assert c["figures"]["dropped"] == 1
    assert c["figures"]["resent"] >= 1
    assert soak_errors(c) == []
    got = _delivered(c)
    mine = c["senders"][0].messages
    assert set(got) == {(s.src, m) for s in c["senders"] for m in s.messages}
    assert all(n == 1 for n in got.values())
    lost_psn = mine[2] if len(mine) > 2 else None
    assert lost_psn is not None
    first_send = min(t for t, p in zip(c["release"], c["pkts"], strict=True) if p[0] == 0)
    when = [t for t, _, src, psn in c["events"][1] if (src, psn) == (0, lost_psn)]
    # Resent after the timeout, not before.
    assert when and when[0] >= first_send + SOAK_DEFAULTS["timeout"]


def test_lost_close_is_recovered_by_idle():
    """One sender, one burst: its CLOSE (its packet after its 5 messages) is lost; the
    receiver's context closes on idle (the scan's ``expired``) and nothing else changes."""
    c = soak_chunk(3, 0, 5, lose={(0, 5)}, sources=1, **QUIET)
    assert [p[3] for p in c["pkts"]] == [0] * 5         # the CLOSE never arrived
    assert c["figures"]["closes"] == 1 and c["twin"].count["closed"] == 0
    closes = c["events"][3]
    assert [src for _, src in closes] == [0]
    assert closes[0][0] >= c["release"][-1] + SOAK_DEFAULTS["idle"]
    assert soak_errors(c) == [] and c["twin"].pool.used == 0


def test_lost_first_open_packet_is_delivered_once():
    """A context's first packet lost with more open packets in flight behind it: the
    receiver refuses them (an open packet's offset names its context's first PSN, which
    it has not seen: ``gap``), the first's resend opens the context at its PSN, and every
    message is delivered once. Were the offset not carried (every open packet taken as
    its context's first, ``off`` 0), the second would open the context past the first,
    and the first's resend would be a duplicate: never delivered (ReceiverModel, the
    rules of docs/ephemeral.md's table)."""
    r = ReceiverModel(4)
    assert r.arrive(1, 100, True, off=1) == "gap"        # PSN 99, the first, was dropped
    assert r.arrive(1, 101, True, off=2) == "gap"
    assert r.arrive(1, 99, True, off=0) == "opened"      # its resend: delivered
    assert [r.arrive(1, p, True, off=p - 99) for p in (100, 101)] == ["delivered"] * 2
    old = ReceiverModel(4)
    assert old.arrive(1, 100, True) == "opened"          # without the offset
    assert old.arrive(1, 99, True) == "duplicate"        # the first: lost
    # The senders of the soak: source 0's first packet lost, its next ones (open, up to
    # the window) sent behind it before its timer fires.
    c = soak_chunk(7, 0, 40, lose={(0, 0)}, sources=2, **QUIET)
    assert soak_errors(c) == []
    first = c["senders"][0].messages[0]
    opens = [p for p in c["pkts"] if p[0] == 0 and p[2]]
    assert opens[0][4] > 0 and opens[0][1] != first      # an open packet past the first
    outs = [o for (_, o, _), p in zip(c["events"][0], c["pkts"], strict=True) if p[0] == 0]
    assert outs[0] == "gap" and "opened" in outs
    assert _delivered(c)[(0, first)] == 1


def test_default_chunks_hold_and_the_twin_replays_them():
    """Chunks with the default faults: every message delivered once, none lost, no hang;
    every fault kind and the outcomes of recovery seen; the twin run on the arrivals alone
    (tb.ephemeral_receiver.model_events) gives the same events, and the model-free
    invariants hold."""
    seen = dict.fromkeys(("dropped", "duplicated", "late_copies", "acks_dropped"), 0)
    outcomes = set()
    for k in range(3):
        c = soak_chunk(1, k, 1500)
        assert soak_errors(c) == []
        assert c["figures"]["messages"] == 1500
        replay = model_events(c["pkts"], c["release"], SOAK_DEFAULTS["entries"],
                              SOAK_DEFAULTS["idle"], end=c["end"])
        assert replay[:4] == c["events"]
        assert invariant_errors(c["pkts"], c["events"][0], c["events"][1],
                                dict(c["twin"].count)) == []
        assert sum(c["twin"].count[o] for o in RECV_DELIVERS) >= 1500
        for key in seen:
            seen[key] += c["figures"][key]
        outcomes |= {o for o, n in c["twin"].count.items() if n}
    assert all(seen.values()), seen
    assert {"opened", "full", "delivered", "duplicate", "gap", "closed"} <= outcomes


@pytest.mark.parametrize("knob,value,name", [
    ("idle", 128, "idle"), ("timeout", 16, "timeout"), ("late", 300, "late"),
    ("drop_rate", 1.5, "drop_rate"), ("sources", 0, "sources"), ("entries", 6, "entries"),
    ("bogus", 1, "bogus"), ("max_drops", -1, "max_drops"), ("window", 1 << 23, "window"),
    ("window", (1 << 12) + 1, "OPEN_OFFSET_BITS")])
def test_bad_knobs_are_named(knob, value, name):
    with pytest.raises(ValueError, match=name):
        check_soak(dict(SOAK_DEFAULTS, **{knob: value}))
    if knob != "bogus":
        with pytest.raises(ValueError, match=name):
            soak_chunk(1, 0, 10, **{knob: value})


def test_soak_options(tmp_path, capsys):
    """scripts/soak.py: the ephemeral design is a job of the default soak and of --only
    ephemeral; a bad --ephemeral knob is an error naming it (exit 2) before any
    simulation."""
    args = soak._args(["--messages", "5000", "--rdma-chunk", "1000"])
    assert [j[0] for j in soak.jobs_of(args)] == ["nic", "rdma", "ephemeral"]
    args = soak._args(["--only", "ephemeral", "--ephemeral-messages", "30",
                       "--ephemeral", "drop_rate=0.02"])
    assert [(j[0], j[2]) for j in soak.jobs_of(args)] == [("ephemeral", 30)]
    assert args.ephemeral_drop_rate == 0.02
    for bad, name in ((["--ephemeral", "idle=100"], "idle"),
                      (["--ephemeral", "nothing=1"], "nothing"),
                      (["--ephemeral", "timeout=x"], "timeout"),
                      (["--ephemeral-chunk", "0"], "--ephemeral-chunk")):
        with pytest.raises(SystemExit) as exc:
            soak.main(["--only", "ephemeral", "--out", str(tmp_path), *bad])
        assert exc.value.code == 2
        assert name in capsys.readouterr().err
    assert not (tmp_path / "soak.json").exists()


def _args(tmp_path, sim, **kw):
    return types.SimpleNamespace(seed=5, out=str(tmp_path), ephemeral_sim=sim, **kw)


@pytest.mark.cosim
def test_short_soak_on_the_receivers_top(tmp_path):
    """Two chunks of 300 messages on Icarus (the top of the receiver's co-simulation
    test): every chunk compared with the twin, no mismatch, every message delivered once,
    the figures the sums of the chunks'."""
    from tb.soak.ephemeral import soak_ephemeral

    fig = soak_ephemeral(_args(tmp_path, "icarus", ephemeral_chunk=300), 600)
    assert fig["chunks"] == fig["chunks_compared"] == 2
    assert fig["messages"] == 600
    assert fig["lost"] == fig["duplicates_delivered"] == fig["hangs"] == 0
    assert fig["mismatches"] == fig["violations"] == 0
    assert fig["recovered"] == sum(c["recovered"] for c in fig["per_chunk"])
    lines = [json.loads(x) for x in
             (tmp_path / "soak_ephemeral_chunks.jsonl").read_text().splitlines()]
    assert [r["chunk"] for r in lines] == [0, 1]
    assert sum(r["by_outcome"]["delivered"] + r["by_outcome"]["opened"]
               + r["by_outcome"]["reopened"] for r in lines) >= 600


@pytest.mark.slow(reason="make test-all: the short soak above shows the chunks compared; "
                         "this one shows a broken chunk caught")
@pytest.mark.cosim
def test_broken_chunk_is_caught(tmp_path):
    """Chunk 1's RTL gets a 32nd of the twin's idle time: that chunk, and only that one, shows
    mismatches."""
    from tb.soak.ephemeral import soak_ephemeral

    fig = soak_ephemeral(_args(tmp_path, "icarus", ephemeral_chunk=300,
                               break_model_chunk=1), 900)
    assert fig["chunks_compared"] == 3
    assert [c["mismatches"] > 0 for c in fig["per_chunk"]] == [False, True, False]


def test_figures_count_a_missing_chunk_as_lost():
    """A planned chunk without a record (the simulation died before it) counts as not
    compared, a hang, its messages lost; the others' figures add up."""
    from tb.soak.ephemeral import summarise

    rec = dict(chunk=0, messages=10, lost=0, duplicates_delivered=0, hang=0, resent=3,
               compared=True, mismatches=0, violations=[], dropped=2, duplicated=1,
               late_copies=0, acks_dropped=1, by_outcome={"delivered": 10})
    fig = summarise([rec], [[0, 10], [1, 7]])
    assert fig["chunks"] == 2 and fig["chunks_compared"] == 1
    assert fig["lost"] == 7 and fig["hangs"] == 1 and fig["messages"] == 10
    assert fig["recovered"] == 4 and fig["retransmissions"] == 3
    assert soak.failures({"ephemeral": fig}) == [
        "ephemeral.lost", "ephemeral.hangs", "ephemeral.chunks_compared (1 of 2 chunks)"]


def test_cosim_params_are_refused_by_name_before_export():
    from tb.cosim_params import check_params

    for params, name in ((dict(chunks=[[0, 5]], knobs={"idle": 64}), "idle"),
                         (dict(chunks=[[0, 5]], colour=1), "colour"),
                         (dict(chunks=[]), "chunks")):
        with pytest.raises(ValueError, match=name):
            check_params("tb.soak.cocotb_ephemeral_soak", params)


def test_an_idle_below_the_bound_closes_live_contexts(monkeypatch):
    """What the idle rule guards against: with the check bypassed, a receiver idle time of
    48 (below the bound, 227 with the other defaults) at a drop rate of 5e-2 closes
    contexts whose senders still use them; their packets are then ``stale`` and their
    messages are never delivered. The check refuses that idle time by name."""
    import analysis.scenarios.soak_ephemeral as m

    with pytest.raises(ValueError, match="idle"):
        soak_chunk(1, 0, 1500, idle=48, drop_rate=0.05)
    monkeypatch.setattr(m, "check_soak", lambda k: k)
    c = m.soak_chunk(1, 0, 1500, idle=48, drop_rate=0.05)
    errors = soak_errors(c)
    assert c["twin"].count["stale"] > 0
    assert any("lost" in e for e in errors) and any("hang" in e for e in errors)
