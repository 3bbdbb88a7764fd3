"""The fabric profiles and their sizing rules (spec.fabric_profiles): values against
their sources (docs/fabric.md), rules against hand computation, and the NIC credit rule
against the golden model's credit loop."""

import pytest

from analysis.points import nic_stores
from pymodel.nic.system import NicSystemModel
from spec.fabric import retry_sizes
from spec.fabric_profiles import (
    FABRIC_PROFILES,
    RDMA_SPAN_NO_READS,
    FabricProfile,
    credit_loop,
    fabric_profile,
    nic_link_credits,
    nic_top_credits,
    one_way,
    rdma_records,
    rdma_timeout,
    replay_sizes,
    round_trip,
    switch_hop_latency,
)
from spec.formats.nic import frame_beats
from spec.host import PROFILES
from spec.nic import HEADLINE_TOP, link_credits
from spec.rdma_engine import REQUESTER_DEFAULTS, SIM_TIMEOUT, TOP_DEFAULTS


def test_profiles_and_their_paths():
    """The sources' figures (docs/fabric.md): board 2 + 2 + 2 (today's tops), rack a
    250 ns switch and 400 ns one way, pod a 250 ns switch and 1000 ns round trip."""
    assert set(FABRIC_PROFILES) == {"board", "rack", "pod"}
    board, rack, pod = (FABRIC_PROFILES[k] for k in ("board", "rack", "pod"))
    assert (board.link, board.switch) == (HEADLINE_TOP["link_latency"], 2)
    assert one_way("board") == TOP_DEFAULTS["link_latency"] == 6
    assert switch_hop_latency("board") == 0
    assert (rack.link, rack.switch, one_way(rack)) == (75, 250, 400)
    assert (pod.link, pod.switch, one_way(pod), round_trip(pod)) == (125, 250, 500, 1000)
    assert switch_hop_latency("pod") == 248


@pytest.mark.parametrize("bad", ["lab", None, 3])
def test_unknown_profile_is_named(bad):
    with pytest.raises(ValueError, match="fabric must be one of"):
        fabric_profile(bad)
    with pytest.raises(ValueError, match="fabric must be one of"):
        one_way(bad)


@pytest.mark.parametrize("link,switch,word", [(0, 2, "link"), (2, 1, "switch"),
                                              ("2", 2, "link"), (2, True, "switch")])
def test_bad_profile_fields_are_named(link, switch, word):
    with pytest.raises(ValueError, match=word):
        FabricProfile("x", link=link, switch=switch)


@pytest.mark.parametrize("bad", [1, "yes", None])
def test_bad_in_switch_reduction_is_named(bad):
    with pytest.raises(ValueError, match="in_switch_reduction"):
        FabricProfile("x", link=2, switch=2, in_switch_reduction=bad)


def test_sizing_rules_keep_board_and_grow_with_distance():
    """Board: today's sizes exactly; farther: by hand from the rules' definitions."""
    # (a) 64-byte beats, 1024-byte frames: L2 frame 20 + 1024 + 4 = 1048 B = 17 beats.
    assert nic_link_credits("board", 64, 1024) == link_credits(64, 1024) == 34
    assert nic_link_credits("rack", 64, 1024) == 2 * 75 + 2 - 1 + 17 == 168
    assert nic_link_credits("pod", 64, 1024) == 2 * 125 + 2 - 1 + 17 == 268
    # (b) the retry sizes of the profile's link.
    assert replay_sizes("board", 17) == retry_sizes(2, 17)
    tx, _, timeout = replay_sizes("pod", 17)
    trip = 2 * 125 + 2 * 17 + 8
    assert tx >= trip + 17 and timeout == trip + 17
    # (c) records: (1288 + round trip) / 4, to a power of two, at least 512.
    assert rdma_records("board") == REQUESTER_DEFAULTS["records"] == 512   # 325 -> 512
    assert rdma_records("rack") == 1024                                   # 522 -> 1024
    assert rdma_records("pod") == 1024                                    # 572 -> 1024
    # Without the host reads (WQE by MMIO, inline): (1288 - 2 x 560 + round trip) / 4.
    assert RDMA_SPAN_NO_READS == 1288 - 2 * PROFILES["pcie"].read_latency == 168
    assert rdma_records("pod", reads=False) == 512                        # 292 -> 512
    assert rdma_records("board", reads=False) == 512                      # 45 -> 512
    assert rdma_timeout("board") == SIM_TIMEOUT == 4096
    assert rdma_timeout("pod") == 4096 + 1000 - 12


def _accepts(link, credits, framing, msg_bytes, messages=300):
    """Accept cycles of back-to-back stores of node 0 to node 1 on the NIC model."""
    w, words, mp = 64, 512, 1024
    model = NicSystemModel(w, framing, 2, link, words, mp, credits)
    stores = nic_stores(msg_bytes, messages, 1, w, words * w, mp)
    res = model.run({0: stores}, [0, 1])
    assert not res["credit_errors"]
    acc = [s["accept"] for s in res["stores"]]
    assert len(acc) == messages
    return acc


def test_credit_loop_on_the_model():
    """34 credits at link latency 250, compact 128-byte stores (8 + 128 + 4 = 140 B, 3
    beats): 11 frames use 33 credits, the 12th needs beat 1 of the first back, taken at
    ``s + 1`` and usable at ``s + 1 + credit_loop(250)``: 11 stores every 503 cycles."""
    acc = _accepts(250, 34, "compact", 128)
    assert credit_loop(250) == 502
    assert {b - a for a, b in zip(acc[100:250], acc[111:261], strict=True)} == {503}


@pytest.mark.parametrize("profile", ["rack", "pod"])
@pytest.mark.parametrize("framing,msg_bytes,beats", [("compact", 128, 3), ("l2", 1024, 17)])
def test_credit_rule_keeps_line_rate(profile, framing, msg_bytes, beats):
    """With nic_link_credits, stores leave one frame every ``beats`` cycles (line rate:
    3 beats for 8 + 128 + 4 B, 17 for 20 + 1024 + 4 B at 64 B a beat); one credit fewer
    slows the longest frames (the rule is tight for them)."""
    link = fabric_profile(profile).link
    credits = nic_link_credits(profile, 64, 1024)
    acc = _accepts(link, credits, framing, msg_bytes)
    assert {b - a for a, b in zip(acc[50:-1], acc[51:], strict=True)} == {beats}
    if beats == 17:
        slow = _accepts(link, credits - 1, framing, msg_bytes)
        assert slow[-1] - slow[50] > 17 * (len(slow) - 51)


def test_credit_rule_with_retry_keeps_line_rate_at_pod():
    """Link-level retry at ``pod``, L2 framing, 1 KiB stores: the reliable uplink holds
    each frame until it has judged it (``n + 1`` cycles more than a plain link, its
    Timing section), so the credit loop is 2 L + 2 + 18 and the rule gives
    2 x 125 + 2 + 18 - 1 + 17 = 286 credits. With them the model sends a frame every 17
    cycles, the wire bound (20 + 1024 + 4 = 1048 bytes in 64-byte beats); one credit
    fewer is slower (the rule is tight)."""
    from pymodel.fabric.faulty_link import FaultSettings
    from pymodel.throughput import steady_ii

    w, words, mp = 64, 512, 1024
    link = fabric_profile("pod").link
    wire = -(-(20 + 1024 + 4) // w)
    assert wire == frame_beats(w, "l2", 1024) == 17
    credits = nic_top_credits("pod", w, mp, retry=True)
    assert credits == 2 * link + 2 + (wire + 1) - 1 + wire == 286
    clean = FaultSettings(**dict.fromkeys(vars(FaultSettings()), 0))

    def ii(c):
        model = NicSystemModel(w, "l2", 2, link, words, mp, c, retry=True, fabric="pod")
        res = model.run({0: nic_stores(1024, 200, 1, w, words * w, mp)}, [0, 1],
                        link_settings=clean)
        assert not res["credit_errors"]
        return steady_ii([s["accept"] for s in res["stores"]])

    assert ii(credits) == wire
    assert ii(credits - 1) > wire


@pytest.mark.parametrize("max_payload", [64, 128, 1024])
@pytest.mark.parametrize("link", [1, 2, 7, 40])
def test_nic_point_credits_follow_the_link_round_trip(max_payload, link):
    """A NIC point on ``board`` with any link latency and largest payload keeps line rate:
    its credits cover the link's credit loop plus a longest frame (2 L + 2 - 1 + n_max,
    worked out here from the rule's definition), so 128-byte compact stores leave one
    every wire-beat count of cycles (two 64-byte segments of 3 beats, or one frame of 3
    beats), whatever the link latency."""
    from analysis.points import cycle_point

    n_max = -(-(20 + max_payload + 4) // 64)                 # L2 header, payload, FCS
    assert nic_top_credits("board", 64, max_payload, link_latency=link) == max(
        2 * -(-(max_payload + 28) // 64), 2 * link + 2 - 1 + n_max)
    segments = -(-128 // max_payload)
    beats = segments * -(-(8 + min(128, max_payload) + 4) // 64)
    row = cycle_point("nic", msg_bytes=128, messages=120, framing="compact",
                      max_payload=max_payload, link_latency=link)
    assert row["ii_cycles"] == beats


def test_rdma_fabric_credits_by_the_nics_rule():
    """The RDMA fabric top's credits: the NIC's rule for the engine's longest frame, a
    4 KiB WRITE with RETH (14 + 20 + 8 + 12 + 16 + 4096 + 4 + 4 = 4174 B: 66 beats), at
    least two of them; with retry the reliable uplink's 66 + 1 cycles on the loop."""
    from spec.fabric_profiles import rdma_fabric_credits, rdma_fabric_top

    assert rdma_fabric_credits("board") == 2 * 66 == 132              # 2*2 + 2 - 1 + 66 = 71
    assert rdma_fabric_credits("board", retry=True) == 2 * 2 + 2 + 67 - 1 + 66 == 138
    assert rdma_fabric_credits("pod") == 2 * 125 + 2 - 1 + 66 == 317
    assert rdma_fabric_credits("pod", retry=True) == 317 + 67 == 384
    assert rdma_fabric_top("pod", True) == dict(link_latency=125, hop_latency=248,
                                                credits=384, link_retry=1)
    with pytest.raises(ValueError, match="fabric must be one of"):
        rdma_fabric_top("campus")
