"""The NIC top with link-level retry over faulty wires, on Verilator and Icarus, against
the model: recovery predicted to the cycle, nothing lost, nothing corrupted."""

import pytest

from pymodel.fabric.faulty_link import FaultSettings, rate_per_65535
from rtl.tops.nic_top import NicTop
from tb.cosim import run_cosim

TOP = dict(width=16, nodes=4, link_latency=2, mem_words=256, max_payload=512)
P = rate_per_65535

#: Fault settings of the wires (each wire adds its index to the seed).
FAULTS = {
    "clean": FaultSettings(seed=1),
    "drop": FaultSettings(seed=3, drop_rate=P(0.05), drop_burst=2),
    "corrupt": FaultSettings(seed=5, corrupt_rate=P(0.05)),
    "dup": FaultSettings(seed=7, dup_rate=P(0.05), dup_burst=2),
    "mixed": FaultSettings(seed=9, drop_rate=P(0.03), corrupt_rate=P(0.03),
                           dup_rate=P(0.03)),
    # The retry's signalling damaged too: sequence tags flipped, ACK/NAKs lost and flipped.
    "signalling": FaultSettings(seed=11, corrupt_rate=P(0.03), tag_rate=P(0.05),
                                ack_drop_rate=P(0.05), ack_corrupt_rate=P(0.05)),
}


@pytest.mark.slow_variants("verilator-l2-*", reason=(
    "a Verilator build of the L2 retry top for two tests (make test was over 10 minutes): "
    "Icarus runs the same two cases on the same top, and the compact retry top runs on both"))
@pytest.mark.slow_variants("verilator-compact-*", reason=(
    "Verilator runs the L2 retry top; Icarus runs both framings"))
@pytest.mark.slow_variants("icarus-compact-clean-0", "icarus-compact-drop-0",
                            "icarus-compact-corrupt-80", "icarus-l2-dup-0", reason=(
    "make test keeps on Icarus the two runs that damage the most: mixed drops, corruption "
    "and duplicates under stalls (L2) and the damaged signalling (compact); the retry's "
    "blocks run alone against their twins in test_unit_reliable_link.py, and the e2e "
    "retry top drops frames in test_cosim_nic_e2e_combos.py"))
@pytest.mark.parametrize("framing,faults,stall_rate", [
    ("compact", "clean", 0), ("compact", "drop", 0), ("compact", "corrupt", 80),
    ("l2", "dup", 0), ("l2", "mixed", 80), ("compact", "signalling", 0),
])
def test_nic_retry(sim, framing, faults, stall_rate, test_id):
    """All-to-all stores (1 B to 1 KiB, so some cut in segments) from 4 nodes over 8
    faulty wires: frames, cycles, writes, credits, every link counter and the memories
    equal the model's, and each memory holds exactly the stores sent to it. With
    ``signalling`` the wires also damage sequence tags and drop and damage ACK/NAKs: the
    receivers must catch every damaged tag and the senders every damaged ACK/NAK."""
    top = NicTop(framing=framing, items=1024, events=1024, retry=True, **TOP)
    settings = FAULTS[faults]
    params = dict(TOP, framing=framing, credits=top.credits, seed=21, count=8,
                  stall_rate=stall_rate, faults=vars(settings),
                  expect_damage=faults != "clean",
                  expect_signalling=faults == "signalling")
    run_cosim(top, name=f"nic_retry_top_{framing}", test_module="tb.nic.cocotb_nic_retry",
              sim=sim, test_id=test_id, params=params)
