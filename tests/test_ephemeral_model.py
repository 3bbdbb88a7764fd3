"""The ephemeral-context design's golden model: the flow through the pool (its rules, with
expectations worked out from the rules by hand), a point on the engine's datapath (its
figures against the RoCEv2 frame sizes), the spectrum's rows and the checks of bad
options."""

import math

import pytest

from analysis.ephemeral.flow import Datapath, ack_requests, max_overlap, run_flow
from pymodel.throughput import steady_ii
from spec.ephemeral import check_ephemeral, recv_context_bits, send_context_bits
from tb.ephemeral.point import datapath_row, model_point

DP = Datapath(ii=4, latency=37, completion=50, one_way=6)


def test_context_bits_are_the_fields_summed():
    """Sender: valid 1, destination 12, two 24-bit PSNs (BTH), outstanding 13 (up to 4096
    records), messages since the last ACK request 5, stamp 16; receiver: valid, source,
    expected PSN, stamp."""
    assert send_context_bits() == 1 + 12 + 24 + 24 + 13 + 5 + 16
    assert recv_context_bits() == 1 + 12 + 24 + 16


def test_one_destination_keeps_one_context_and_coalesces_acks():
    """2,000 messages to one destination: one context, opened once and closed once after
    the last ACK; an ACK request every 16th message (2000 / 16 = 125, the last message
    is the 125th request); the sends one every ``ii`` cycles."""
    r = run_flow([0] * 2000, DP)
    assert r.counters["opens"] == 1 and r.closes == 1
    assert sum(r.asked) == 125 and r.asked[-1]
    assert r.sent == [DP.ii * k for k in range(2000)]
    assert r.send_max == 1 and r.recv_max == 1 and r.counters["full_waits"] == 0


def test_round_robin_beyond_the_hold_opens_a_context_per_message():
    """Round robin over 4,096 destinations: a destination comes back every 4096 * 4
    cycles, far beyond a context's life (completion + idle + one scan), so every message
    opens a context and asks for an ACK (no other message to it in the lookahead); the
    contexts open at once follow Little's law: at least ``(completion + idle) / ii``, at
    most ``(completion + idle + entries) / ii + 1``."""
    n, entries, idle = 3000, 256, 64
    r = run_flow([k % 4096 for k in range(n)], DP, pool_entries=entries, idle=idle)
    assert r.counters["opens"] == n and r.closes == n and all(r.asked)
    lo = math.ceil((DP.completion + idle) / DP.ii)
    hi = math.ceil((DP.completion + idle + entries) / DP.ii) + 1
    assert lo <= r.send_max <= hi
    assert steady_ii(r.sent) == DP.ii


def test_a_lookahead_beyond_the_pool_is_refused():
    """Two entries and a lookahead of 19: two contexts can both wait on messages held
    behind a third destination that waits for a free entry, so the flow would never
    end; the model refuses the point by name instead of running it."""
    with pytest.raises(ValueError, match="lookahead"):
        check_ephemeral(2, 64, 16, 19)
    # Refused before it runs, even for messages that would not stop (each to a new
    # destination), so that without the check this test fails instead of hanging.
    with pytest.raises(ValueError, match="lookahead"):
        run_flow(list(range(6)), DP, pool_entries=2, lookahead=19)
    dests = [0, 1] + [2] + [0, 1] * 8
    r = run_flow(dests, DP, pool_entries=2, lookahead=2)
    assert None not in r.sent


def test_a_small_pool_makes_new_destinations_wait():
    """With 8 contexts and each held at least ``completion + idle`` cycles, the pool
    passes at most 8 messages per ``completion + idle`` cycles: the sends slow to at
    least that spacing, the waits are counted, and every message still goes (a lookahead
    of 8, the most 8 entries take)."""
    entries, idle = 8, 64
    r = run_flow([k % 4096 for k in range(400)], DP, pool_entries=entries, idle=idle,
                 lookahead=entries)
    assert None not in r.sent
    assert steady_ii(r.sent) >= (DP.completion + idle) / entries
    assert r.counters["full_waits"] > 0 and r.send_max == entries


def test_a_context_with_an_unacknowledged_message_never_closes():
    """Two messages to destination 0 four apart with a tiny idle: the first asks no ACK
    (the second follows within the lookahead), yet its context stays open until the
    second's ACK, so it is opened once."""
    r = run_flow([0, 1, 2, 3, 0], DP, idle=1)
    assert r.asked == [False, True, True, True, True]
    assert r.counters["opens"] == 4


def test_ack_requests_and_overlap_helpers():
    assert ack_requests([0, 1, 0, 2], 1) == [True, True, True, True]
    assert ack_requests([0, 1, 0, 2], 2) == [False, True, True, True]
    assert max_overlap([(0, 5), (3, 9), (6, 7), (10, 11)]) == 2


def test_point_on_one_destination_is_the_engine_at_one_qp():
    """The point's datapath is the RC engine's at 1 QP: the same ii, latency, completion,
    host bytes; its wire bytes are a RoCEv2 WRITE frame of 128 bytes (Ethernet 14 + IPv4
    20 + UDP 8 + BTH 12 + RETH 16 + 128 + ICRC 4 + FCS 4 = 206, plus 8 preamble and 12
    IFG) and, per 16 messages, an ACK frame (14 + 20 + 8 + 12 + AETH 4 + ICRC 4 + FCS 4
    = 66, plus 20): 126 ACK and CLOSE frames over 2,000 messages."""
    r = model_point(1, "board", messages=2000)
    d = datapath_row("board")
    for key in ("ii_cycles", "latency_cycles", "completion_cycles", "host_bytes"):
        assert r[f"{key}_model"] == d[f"{key}_model"]
    assert r["wire_bytes_model"] == pytest.approx(226 + 86 * 126 / 2000)
    assert r["context_state_bits_model"] == send_context_bits() + recv_context_bits()
    assert r["msgs_per_s_model"] == pytest.approx(1e9 / d["ii_cycles_model"])


@pytest.mark.parametrize("attachment", ["on_die", "pcie"])
def test_lanes_add_rate_until_the_attachment(attachment):
    """Two lanes over 64 destinations send at least as much as one, never more than the
    attachment carries (its busier direction ``host_util`` busy at the datapath's ii),
    more than one while one lane leaves the attachment room, and hold two datapaths'
    in-flight state."""
    one = model_point(64, "board", lanes=1, attachment=attachment)
    two = model_point(64, "board", lanes=2, attachment=attachment)
    d = datapath_row("board", attachment)
    cap = 1e9 / (d["ii_cycles_model"] * d["host_util_model"])
    assert one["msgs_per_s_model"] <= two["msgs_per_s_model"] <= cap * (1 + 1e-12)
    if one["msgs_per_s_model"] < cap * (1 - 1e-9):
        assert one["msgs_per_s_model"] < two["msgs_per_s_model"]
    else:
        assert two["limit"] == "host interface"
    assert two["datapath_state_bits_model"] == 2 * d["endpoint_state_bits_model"]


@pytest.mark.parametrize("kw,name", [
    (dict(peers=0), "peers"), (dict(peers=5000), "peers"), (dict(lanes=0), "lanes"),
    (dict(attachment="cxl"), "attachment"), (dict(fabric="lan"), "fabric"),
    (dict(popularity="pareto"), "popularity"), (dict(pool_entries=3), "pool_entries"),
    (dict(idle=0), "idle"), (dict(ack_every=0), "ack_every"), (dict(bogus=1), "bogus"),
    (dict(messages=1), "messages")])
def test_bad_point_options_are_named(kw, name):
    args = dict(peers=64, fabric="board")
    args.update(kw)
    with pytest.raises(ValueError, match=name):
        model_point(**args)


def test_bad_datapath_is_named():
    with pytest.raises(ValueError, match="ii"):
        Datapath(ii=0, latency=1, completion=1, one_way=1)
    with pytest.raises(ValueError, match="dests"):
        run_flow([], DP)


def test_nic_rate_does_not_depend_on_its_peers():
    """The spectrum's NIC rows at 64 peers and more take the rate and latency of 15 peers
    (its model top's most): its datapath holds nothing per peer, so they equal those of
    1 peer (its wire bytes do grow: one completion per store once the stores to a peer
    are too far apart to coalesce); its state is the completion state's formula at the
    row's peers, which grows with them."""
    from tb.ephemeral.spectrum import nic_row

    one, many = nic_row(1, "board", "round_robin", 100), nic_row(15, "board", "round_robin",
                                                                 100)
    for key in ("msgs_per_s", "latency_cycles"):
        assert one[key] == many[key]
    assert one["wire_bytes"] < many["wire_bytes"]
    assert one["endpoint_state_bits"] < many["endpoint_state_bits"]
    assert not one["note"] and not many["note"]


def test_spectrum_lines_show_every_row():
    from scripts.reporting.spectrum import sizing_lines, spectrum_lines

    row = dict(design="ephemeral", peers=4096, fabric="pod", popularity="zipf",
               msgs_per_s=2.5e8, latency_cycles=532, endpoint_state_bits=81920,
               context_state_bits=30000, host_context_bits=0, per_peer_bits=20.0,
               per_inflight_bits=315.0, msgs_per_s_per_kib=2.5e7, note="")
    lines = spectrum_lines([row])
    assert any(line.startswith("| ephemeral contexts | 4,096 | 250 M | 532 | 81,920 |")
               for line in lines)
    size = dict(design="rdma", peers=64, lanes=2, fabric="board", attachment="pcie",
                msgs_per_s=3e8, endpoint_state_bits=10, limit="host interface",
                reaches=False)
    assert sizing_lines([size])[-1] == ("| PCIe | RC engine, 256 entries | 64 | 2 | 300 M "
                                        "| 10 | no | host interface |")


def test_receiver_rules_never_deliver_twice():
    """The receiver's rules (docs/ephemeral.md) on the hazards: a retransmitted open
    packet whose ACK was lost, a late packet after the CLOSE, a new context of the same
    sender (its first PSN from the sender's count of packets sent, so above the old
    ones), a late copy of the old open packet inside the new context, a gap. Each PSN is
    written to memory once; every refusal is counted."""
    from pymodel.ephemeral.receiver import ReceiverModel

    r = ReceiverModel(entries=4)
    written = []

    def arrive(src, psn, open_):
        out = r.arrive(src, psn, open_)
        if out in ("opened", "delivered", "reopened"):
            written.append((src, psn))
        return out

    assert arrive(7, 100, True) == "opened"
    assert arrive(7, 101, True) == "delivered"
    assert arrive(7, 100, True) == "duplicate"        # resent: its ACK was lost
    assert arrive(7, 102, False) == "delivered"
    assert r.close(7) == "closed"
    assert r.close(7) == "stale"                      # a repeated CLOSE: nothing to free
    assert arrive(7, 102, False) == "stale"           # a late copy after the CLOSE
    assert arrive(7, 500, True) == "opened"           # the sender's next context
    assert arrive(7, 100, True) == "duplicate"        # the old open packet, very late
    assert arrive(7, 503, False) == "gap"             # 501, 502 lost: go-back-N resends
    assert arrive(7, 900, True) == "reopened"         # closed at the sender, CLOSE lost
    assert written == [(7, 100), (7, 101), (7, 102), (7, 500), (7, 900)]
    assert len(set(written)) == len(written)
    assert r.count == dict(stale=2, opened=2, full=0, delivered=2, duplicate=2,
                           reopened=1, gap=1, closed=1)


def test_receiver_full_pool_refuses_opens_and_keeps_open_contexts():
    """Forged opens from many sources fill the receiver's contexts: further opens are
    refused and counted, the honest context keeps delivering, and once a context is
    closed the refused sender's resent open is taken."""
    from pymodel.ephemeral.receiver import ReceiverModel, newer

    r = ReceiverModel(entries=3)
    assert r.arrive(1, 10, True) == "opened"
    assert [r.arrive(100 + k, 0, True) for k in range(4)] == ["opened", "opened", "full",
                                                              "full"]
    assert r.arrive(1, 11, False) == "delivered"
    assert r.close(100) == "closed"
    assert r.arrive(2, 5, True) == "opened"
    assert r.count["full"] == 2
    assert newer(0, (1 << 24) - 1) and not newer((1 << 24) - 1, 0)
    with pytest.raises(ValueError, match="entries"):
        ReceiverModel(0)


@pytest.mark.parametrize("rc_cap,rc_lanes,rc_rate", [(300e6, 2, 300e6), (250e6, 1, 250e6)])
def test_sizing_picks_the_fewest_lanes(monkeypatch, rc_cap, rc_lanes, rc_rate):
    """The sizing's rule on stand-in rows: a NIC lane of 333 M/s and no attachment needs
    3 lanes for 10^9 (state 3 lanes' worth); an RC lane of 250 M/s behind an attachment
    of ``rc_cap`` stops at the attachment, with the fewest lanes that reach its most; the
    ephemeral point's own cap (note) stops it at 2 lanes."""
    from tb.ephemeral import spectrum

    def nic(share, fabric, pattern, messages, attachment):
        return dict(msgs_per_s=1e9 / 3, endpoint_state_bits=100 * share, cap=None)

    def rc(share, fabric, pattern, messages, attachment):
        return dict(msgs_per_s=250e6, endpoint_state_bits=10 * share, cap=rc_cap)

    def eph(p, fabric, pattern, messages, lanes, attachment):
        capped = lanes * 250e6 > 1e9 / 3
        return dict(msgs_per_s=min(lanes * 250e6, 1e9 / 3), endpoint_state_bits=7 * lanes,
                    note="host interface full" if capped else "")

    monkeypatch.setattr(spectrum, "nic_row", nic)
    monkeypatch.setattr(spectrum, "rc_row", rc)
    monkeypatch.setattr(spectrum, "ephemeral_row", eph)
    rows = {r["design"]: r for r in spectrum.sizing_rows(peers=(64,))}
    assert (rows["nic"]["lanes"], rows["nic"]["reaches"]) == (3, True)
    assert rows["nic"]["endpoint_state_bits"] == 3 * 100 * (64 // 3)
    assert (rows["rdma"]["lanes"], rows["rdma"]["msgs_per_s"], rows["rdma"]["limit"]) == \
        (rc_lanes, rc_rate, "host interface")
    assert (rows["ephemeral"]["lanes"], rows["ephemeral"]["limit"]) == (2, "host interface")
    assert not rows["rdma"]["reaches"] and not rows["ephemeral"]["reaches"]


def test_spectrum_cells_in_processes_equal_the_cells_in_this_one():
    from tb.ephemeral.spectrum import spectrum_rows
    grid = dict(peers=(1,), profiles=("board",), patterns=("round_robin",), messages=100)
    assert spectrum_rows(workers=2, **grid) == spectrum_rows(workers=1, **grid)
