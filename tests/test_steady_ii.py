"""``ii_cycles`` is a throughput (spec.metrics.STEADY_WINDOW), for both designs: a sender
that bursts and then waits for credits reads as its real rate, never as its burst gap."""

import pytest

from analysis.fastpath import fast_point
from analysis.points import cycle_point
from pymodel.throughput import steady_ii
from spec.formats.nic import header_bytes
from spec.nic import HEADLINE_TOP, link_credits


def test_a_burst_then_a_wait_reads_as_the_mean_rate():
    # Bursts of 3 messages 3 cycles apart, then a wait: a period of 3 messages every 20
    # cycles. The middle half of 24 messages (messages 6 to 18) spans 4 periods.
    cycles = [20 * (k // 3) + 3 * (k % 3) for k in range(24)]
    assert steady_ii(cycles) == pytest.approx(80 / 12)
    gaps = sorted(b - a for a, b in zip(cycles, cycles[1:], strict=False))
    assert gaps[len(gaps) // 2] == 3          # what a median of gaps would have said


def test_order_and_short_runs():
    assert steady_ii([]) is None and steady_ii([5]) is None
    assert steady_ii([0, 4]) == 4
    assert steady_ii([12, 0, 8, 4]) == steady_ii([0, 4, 8, 12]) == 4


def _store_beats(framing, msg_bytes, width):
    """Wire beats of one store that fits one frame: header + payload + 4-byte FCS."""
    return -(-(header_bytes(framing) + msg_bytes + 4) // width)


@pytest.mark.parametrize("framing", ["compact", "l2"])
def test_nic_at_board_distance_is_wire_limited(framing):
    w = HEADLINE_TOP["width"]
    p = cycle_point("nic", msg_bytes=128, messages=400, framing=framing)
    assert p["ii_cycles"] == _store_beats(framing, 128, w) == 3


@pytest.mark.parametrize("latency", [50, 250])
def test_nic_stalled_by_its_credits_reads_its_real_rate(latency):
    """Little's law on the credits: the sender holds at most k = floor(C / b) stores of b
    beats in flight, and each one's credit returns at least 2 * latency cycles after it
    was accepted (a link each way): any 2 * latency cycles accept at most k stores. Over
    the window of n messages that ii spans (S cycles), n <= k * (S / (2 * latency) + 1),
    so ii = S / n >= 2 * latency * (n - k) / (k * n). The switch and the sender's pipeline
    add a few cycles to the loop (<= 4 * b + 8 here), which bounds ii from above by
    (n / k + 1) * (2 * latency + 4 * b + 8) / n. The credits are two of the longest
    frames (spec.nic.link_credits), fewer than the link's round trip needs (the default
    rule would keep line rate)."""
    w, mp = HEADLINE_TOP["width"], HEADLINE_TOP["max_payload"]
    credits = link_credits(w, mp)
    b = _store_beats("compact", 128, w)
    in_flight = credits // b
    messages = 600
    p = cycle_point("nic", msg_bytes=128, messages=messages, framing="compact",
                    link_latency=latency, credits=credits)
    n, k, rtt = 3 * messages // 4 - messages // 4, in_flight, 2 * latency
    assert rtt * (n - k) / (k * n) <= p["ii_cycles"] <= (n / k + 1) * (rtt + 4 * b + 8) / n
    assert p["ii_cycles"] > 3 * b             # far from the wire's rate: the stall shows
    # The run's cycles per message (the whole run, fill and drain included) agree with ii
    # to within the fill and drain of one credit round trip.
    assert abs(p["cycles"] / 600 - p["ii_cycles"]) <= (2 * latency + 20) / 600 * 3
    fast = fast_point("nic", msg_bytes=128, messages=600, framing="compact",
                      link_latency=latency, credits=credits)
    assert fast["ii_cycles"] == p["ii_cycles"]
