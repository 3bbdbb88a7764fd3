"""NicTop with ``destinations`` (docs/nic.md, "4,096 destinations") on Verilator and
Icarus against the model: node 0 stores round robin to 4,096 destination ids after the
switch's 4,100 table writes; every frame, write, credit, completion at each tracker and
every tracker entry (read through its poll port) equal the model's."""

import pytest

from rtl.tops.nic_top import NicTop
from spec.nic import HEADLINE_TOP
from tb.cosim import run_cosim

DESTINATIONS = 4096


def dest_params(messages, destinations=DESTINATIONS, **top_kw):
    top = NicTop(framing="l2", completion="e2e", destinations=destinations,
                 items=4 * messages + 64, events=4 * messages + 64, **HEADLINE_TOP,
                 **top_kw)
    params = dict(HEADLINE_TOP, framing="l2", credits=top.credits, scenario="destinations",
                  seed=1, messages=messages, msg_bytes=128, completion="e2e",
                  coalesce=top.coalesce, flush_idle=top.flush_idle, timeout=top.timeout,
                  destinations=destinations, **top_kw)
    return top, params


@pytest.mark.slow(reason=(
    "the top's blocks at 4,096 entries (TrackerMemory, CompletionKeyed, the switch's tables "
    "of 8,192, NicRx standing for destinations, 16-bit NicTx) run cycle by cycle against "
    "their twins in test_nic_destinations.py in make test; this top costs about a minute "
    "of export and 4,100 cycles of table setup per simulator, over make test's budget"))
def test_nic_destinations_round_robin(sim, test_id):
    """300 stores of 128 B from node 0 to ids 0 .. 299 (round robin over 4,096): each
    lands at the receiver the table routes its id to, each completes by a completion
    keyed by its id, RTL = model exactly (frames, cycles, memories, counters, every
    tracker entry)."""
    top, params = dest_params(300)
    run_cosim(top, name="nic_top_dest4096", test_module="tb.nic.cocotb_nic", sim=sim,
              test_id=test_id, params=params)


@pytest.mark.slow(reason="round robin runs the same top in make test; Zipf repeats it "
                        "with uneven counts per destination")
def test_nic_destinations_zipf(sim, test_id):
    """300 stores by Zipf 0.99 over the 4,096 ids: popular ids get several stores, some
    coalesced into one completion, so the tracker entries read through the poll port
    differ from one another; RTL = model exactly."""
    top, params = dest_params(300)
    params["popularity"] = "zipf"
    run_cosim(top, name="nic_top_dest4096", test_module="tb.nic.cocotb_nic", sim=sim,
              test_id=test_id, params=params)


@pytest.mark.slow(reason="round robin runs the top without retry in make test; the "
                        "reliable links carry the wide frames as any other")
def test_nic_destinations_over_link_retry(sim, test_id):
    """The round robin run with every link a reliable link (clean wires): RTL = model
    exactly."""
    top, params = dest_params(300, retry=True)
    run_cosim(top, name="nic_top_dest4096_retry", test_module="tb.nic.cocotb_nic",
              sim=sim, test_id=test_id, params=params)


@pytest.mark.slow(reason=(
    "the blocks it adds (CompletionRecorderQueue, TrackerMemory's record port, the host "
    "interface's wide register offset) run against their twins in test_nic_destinations.py "
    "in make test; this top costs about a minute of export and a cold build per simulator"))
def test_nic_destinations_pcie_records(sim, test_id):
    """Row 5's settings at 512 destinations (the code paths of 4,096 with an eighth of
    the tables): behind PCIe (the host's posted writes carry the 16-bit id in the
    register offset), 16 record slots, every link a reliable link; 300 stores round
    robin: every frame, write, record (its ring slot, id, count and cycle), tracker
    entry and host-interface counter equal the model's."""
    top, params = dest_params(300, destinations=512, attachment="pcie", records=16,
                              retry=True)
    params.update(attachment="pcie", records=16)
    run_cosim(top, name="nic_top_dest512_pcie_rec16_retry", test_module="tb.nic.cocotb_nic",
              sim=sim, test_id=test_id, params=params)


@pytest.mark.parametrize("kw,name", [
    (dict(framing="compact", completion="e2e"), "needs framing 'l2'"),
    (dict(framing="l2", completion="credit"), "needs completion 'e2e'"),
    (dict(framing="l2", completion="e2e", attachment="pcie", width=64, mem_words=4096),
     "mem_words at most 2048"),
    (dict(framing="l2", completion="e2e", records=12), "records"),
])
def test_nic_top_destinations_bad_options_named(kw, name):
    with pytest.raises(ValueError, match=name):
        NicTop(destinations=DESTINATIONS, **kw)


def test_nic_top_destinations_behind_pcie_with_records():
    """A top with destinations behind PCIe with records: the host interface's register
    offset is 28 bits (spec.nic.pcie_mmio_addr's with 16-bit ids), a record queue per
    node reading its tracker's record port (built, not elaborated: the co-simulation
    runs it)."""
    from rtl.nic.completion_record import CompletionRecorderQueue
    from spec.nic import pcie_mmio_addr

    top = NicTop(framing="l2", completion="e2e", destinations=DESTINATIONS,
                 attachment="pcie", records=16, **HEADLINE_TOP)
    top_bit = pcie_mmio_addr(DESTINATIONS - 1, 0, True, id_bits=16).bit_length()
    assert top_bit == 28
    assert all(hi.mmio_addr_bits == top_bit for hi in top.his)
    assert all(isinstance(r, CompletionRecorderQueue) for r in top.recs)
    assert all(t.record_port for t in top.trks)
