"""NicTop with the per-peer retry (``peer_retry``) on Verilator and Icarus, against the
model: frames lost after the last reliable link recovered end to end, and a forged
sender whose ACKs and duplicates are dropped and counted (:mod:`tb.nic.cocotb_nic_peer`).
One top for both scenarios: 4 nodes, W = 16, L2 (the header and PSN span two beats),
64-byte stores at most, a window of 8 slots, a completion timeout of 512 cycles. A
second top adds link retry on every link and frame drops inside the switch
(``switch_faults``): frames the links can not see lost, recovered end to end. And
the loss behind PCIe with completion records and link retry (the spectrum's
per-peer-retry endpoint, :mod:`tb.ephemeral.spectrum`): the same top at W = 64
with ``attachment`` ``pcie``, ``records`` 16 and ``retry``."""

import pytest

from rtl.tops.nic_top import NicTop
from tb.cosim import run_cosim

TOP = dict(width=16, framing="l2", nodes=4, link_latency=2, mem_words=256, max_payload=128)
TIMEOUT, WINDOW = 512, 8


@pytest.mark.slow_variants("verilator-*", reason=(
    "a Verilator build of its own (about 75 s); make test runs both scenarios on this top "
    "on Icarus, and NicTx with peer_retry against its twin every cycle in the Amaranth "
    "simulator (test_unit_nic_peer_tx.py)"))
@pytest.mark.parametrize("scenario", ["loss", "forge"])
def test_nic_peer_retry(sim, scenario, test_id):
    """Frames (resends and completions included), writes, credits, counters, memories,
    completions, tracker ports and per-peer ports equal the model's, cycle for cycle;
    and each scenario's oracle from the stores alone (the module's docstring): every
    store lands exactly once and every completion arrives (``loss``); forged ACKs and
    the forger's resends are dropped and counted, nothing else lost (``forge``)."""
    top = NicTop(completion="e2e", timeout=TIMEOUT, peer_retry=True, peer_window=WINDOW,
                 items=256, events=1024, **TOP)
    params = dict(TOP, credits=top.credits, coalesce=top.coalesce,
                  flush_idle=top.flush_idle, timeout=TIMEOUT, peer_window=WINDOW, seed=3,
                  scenario=scenario)
    run_cosim(top, name="nic_top_peer_retry", test_module="tb.nic.cocotb_nic_peer",
              sim=sim, test_id=test_id, params=params)


@pytest.mark.slow_variants("verilator", reason=(
    "a Verilator build of its own; make test runs the scenario on this top on Icarus, the "
    "switch's drops against its twin in the Amaranth simulator "
    "(test_unit_switch.py, frame drops) and the recovery in the model "
    "(test_nic_switch_loss_model.py)"))
def test_nic_peer_retry_switch_loss(sim, test_id):
    """Link retry on every link over faulty wires, per-peer retry, and frames dropped
    inside the switch (store frames and completions): everything equals the model's,
    cycle for cycle (link counters and ``drop_fault`` included); every store lands
    exactly once, every completion arrives, the drops are counted and resent."""
    top = NicTop(completion="e2e", timeout=TIMEOUT, peer_retry=True, peer_window=WINDOW,
                 retry=True, switch_faults=True, items=256, events=1024, **TOP)
    params = dict(TOP, credits=top.credits, coalesce=top.coalesce,
                  flush_idle=top.flush_idle, timeout=TIMEOUT, peer_window=WINDOW, seed=3,
                  scenario="switch_loss", retry=True, switch_faults=True)
    run_cosim(top, name="nic_top_peer_switch_loss", test_module="tb.nic.cocotb_nic_peer",
              sim=sim, test_id=test_id, params=params)


PCIE_TOP = dict(TOP, width=64, attachment="pcie", records=16, retry=True)


@pytest.mark.slow_variants("verilator", reason=(
    "a Verilator build of its own (a 64-bit PCIe top with records); make test runs the "
    "same scenario on this top on Icarus, and both scenarios on the integrated top"))
def test_nic_peer_retry_pcie_records(sim, test_id):
    """``loss`` (:mod:`tb.nic.cocotb_nic_peer_pcie`) behind PCIe with completion records
    over reliable links: frames (resends and completions included), writes, credits,
    counters, host counters, memories, completions, records, tracker ports and per-peer
    ports equal the model's, cycle for cycle; every store lands once, every frame
    completes, and each destination's records carry rising counts that end at the frames
    sent to it."""
    top = NicTop(completion="e2e", timeout=TIMEOUT, peer_retry=True, peer_window=WINDOW,
                 items=256, events=1024, **PCIE_TOP)
    params = dict(PCIE_TOP, credits=top.credits, coalesce=top.coalesce,
                  flush_idle=top.flush_idle, timeout=TIMEOUT, peer_window=WINDOW, seed=3)
    run_cosim(top, name="nic_top_peer_retry_pcie",
              test_module="tb.nic.cocotb_nic_peer_pcie", sim=sim, test_id=test_id, params=params)


def test_nic_top_peer_retry_options():
    """Bad options stop with an error naming the option."""
    for kwargs, message in [
            (dict(peer_retry=True), "peer_retry needs completion 'e2e'"),
            (dict(peer_retry=True, completion="e2e", peer_window=6), "window"),
            (dict(peer_retry="on", completion="e2e"), "peer_retry must be True or False"),
            (dict(peer_retry=True, completion="e2e", destinations=512),
             "peer_retry: not with destinations"),
            (dict(switch_faults=1), "switch_faults must be True or False")]:
        with pytest.raises(ValueError, match=message):
            NicTop(**kwargs, **TOP)
