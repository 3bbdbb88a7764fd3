"""The NIC at ``pod`` distance (spec.fabric_profiles): 125-cycle links, a 250-cycle switch
hop and the credits of the bandwidth-delay rule, on Verilator and Icarus. Back-to-back
128-byte compact stores: RTL = model on every frame, write, credit and stamp, and the
steady state is the wire limit (a store every frame's beats), paid for in credits held
in flight."""

import pytest

from spec.fabric_profiles import credit_loop, fabric_profile, nic_top_credits, one_way
from spec.formats.nic import frame_beats
from spec.metrics import row_metrics
from spec.nic import HEADLINE_TOP
from tb.nic.headline import run_point

#: Enough stores that the middle half (the steady-state window) lies well past the first
#: credit round trip (about 250 cycles, some 85 stores at line rate): 300 stores take
#: about 1,400 cycles, a few seconds on Icarus.
MESSAGES = 300
#: Stores sent one at a time for the latency figures: two, not the headline's 16 (each
#: crosses the pod round trip alone; the figures checked here hold for any count).
LATENCY_MESSAGES = 2


@pytest.mark.slow(reason=(
    "make sim co-simulates the NIC at pod (the pod gap table's rows, Verilator, RTL = "
    "model); make test runs the pod profile's links and hop on Icarus "
    "(test_cosim_nic_retry_pod.py::test_nic_retry_at_pod_recovers_drops); the point is a "
    "top of its own (an export of about 30 s)"))
def test_nic_at_pod_keeps_the_wire_rate(sim, test_id):
    pod = fabric_profile("pod")
    w, mp = HEADLINE_TOP["width"], HEADLINE_TOP["max_payload"]
    row = run_point(sim, "compact", 128, MESSAGES, fabric="pod",
                    latency_messages=LATENCY_MESSAGES, test_id=test_id)
    assert row["mismatches"] == 0
    for key in row_metrics("nic"):
        assert row[f"{key}_rtl"] == row[f"{key}_model"], key
    assert (row["fabric"], row["attachment"], row["completion"], row["reliability"],
            row["header"]) == ("pod", "integrated", "credit", "none", "compact")
    # The wire limit: one beat a cycle, so a store every frame's beats (8-byte header,
    # 128 bytes, 4-byte FCS on 64-byte beats: 3).
    beats = frame_beats(w, "compact", 128)
    assert beats == 3
    assert row["ii_cycles_rtl"] == beats
    # Distance costs latency: the payload crosses link, switch and link one way.
    assert row["latency_cycles_rtl"] >= one_way(pod)
    # ... and state: at the wire rate the beats of a whole credit loop are out at once
    # (each holds its credit for about 2 L cycles), within the credits the rule gives
    # (and a store's beats more: a store counts whole until its last credit is back).
    held = row["inflight_bits_rtl"] // (8 * w)
    assert credit_loop(pod.link) - beats <= held <= nic_top_credits(pod, w, mp) + beats
