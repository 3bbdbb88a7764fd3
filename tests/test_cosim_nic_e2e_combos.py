"""End-to-end completion beside the other NIC options: behind the ``pcie`` host
interface, over reliable links (link-level retry), and both at ``pod`` distance, as
:func:`tb.nic.headline.run_point` measures them (the gap table's rows). RTL = model on
every frame (completions included), write, credit, stamp and completion; the figures
checked from the spec where they follow from it."""

import pytest

from spec.fabric_profiles import fabric_profile, one_way
from spec.formats.nic import frame_beats
from spec.metrics import row_metrics
from spec.nic import COMPLETION_DEFAULTS, HEADLINE_TOP
from tb.nic.headline import run_point

#: Stores of 128 B from node 0 to node 1: enough for a steady window past the first
#: credit round trip at ``pod`` (as tests/test_cosim_nic_retry_pod.py).
STORES, MSG_BYTES = 250, 128


@pytest.mark.parametrize("attachment,retry,fabric", [
    ("pcie", False, "board"), ("integrated", True, "board"), ("pcie", True, "pod")])
def test_e2e_point(sim, attachment, retry, fabric, test_id):
    """RTL = model (the row's ``mismatches`` and every metric); independently of both:
    node 1 sends ``ceil(STORES / coalesce)`` completions (one per 16 frames, the last
    10 flushed when the stream goes quiet), so ``acks_sent`` per store is that over
    ``STORES``, every one accepted at node 0; the stores leave at the wire limit (an L2
    frame of 128 B is 3 beats of 64 B: one store every 3 cycles; behind PCIe the host's
    posted writes keep up: 152 bytes per store on the down link); a store completes
    after its last write (the completion crosses the fabric back: at least one
    ``one_way`` more)."""
    w = HEADLINE_TOP["width"]
    row = run_point(sim, "l2", MSG_BYTES, STORES, attachment=attachment, fabric=fabric,
                    retry=retry, completion="e2e", test_id=test_id)
    assert row["mismatches"] == 0
    for key in row_metrics("nic", host=attachment == "pcie"):
        assert row[f"{key}_rtl"] == row[f"{key}_model"], key
    assert (row["attachment"], row["fabric"], row["completion"], row["reliability"]) == (
        attachment, fabric, "e2e", "link-retry" if retry else "none")
    assert row["messages"] == STORES
    cpls = -(-STORES // COMPLETION_DEFAULTS["coalesce"])
    assert cpls == 16
    assert row["ctrl_ops_rtl"]["acks_sent"] == cpls / STORES
    assert row["ctrl_ops_rtl"]["acks_received"] == cpls / STORES
    beats = frame_beats(w, "l2", MSG_BYTES)
    assert beats == 3
    assert row["ii_cycles_rtl"] == beats
    profile = fabric_profile(fabric)
    assert row["latency_cycles_rtl"] >= one_way(profile)
    assert row["completion_cycles_rtl"] >= row["latency_cycles_rtl"] + one_way(profile)
