"""The NIC's completion records (NicTop ``records``): each completion the sender's tracker
accepts written as a record into a ring in the sender's memory, through the host
interface with ``pcie`` (as the RDMA engine writes a CQE), so that a store counts as
complete when its record is in host memory. RTL = model on every record and the cycle
it lands, every memory write and the whole memory; the ring's contents and the figures
checked from the record layout and the host interface's costs."""

import pytest

from pymodel.fields import unpack
from spec.formats.nic import completion_record_layout
from spec.host import PROFILES, WORD_BYTES
from spec.nic import COMPLETION_DEFAULTS, HEADLINE_TOP, RECORD_SLOTS, check_records
from tb.nic.headline import HEADLINE_DEPTH, model_point, run_point

#: Stores of 128 B from node 0 to node 1 after the warm-up store (which asks for its
#: completion, ``ack_req``, alone): two full groups of completions (one per ``coalesce``
#: = 16 frames) and the last store's, asked at once: four records in all.
STORES, MSG_BYTES = 40, 128
RECORDS = 4


def test_record_parameters():
    """A bad ``records`` is refused, naming it: not a power of two, more than half the
    memory, or without end-to-end completion (NicTop, its model and :func:`run_point`,
    before anything is built)."""
    from pymodel.nic.system import NicSystemModel
    from rtl.tops.nic_top import NicTop
    from spec.nic import link_credits

    assert check_records(0, 512, "credit") == 0
    assert check_records(16, 512, "e2e") == 16
    for bad in (3, 512, -1, True, 1.0):
        with pytest.raises(ValueError, match="records"):
            check_records(bad, 512, "e2e")
    with pytest.raises(ValueError, match="records 16: completion records need"):
        check_records(16, 512, "credit")
    with pytest.raises(ValueError, match="records"):
        NicTop(width=64, nodes=2, mem_words=64, items=16, events=16, completion="e2e",
               records=48)
    with pytest.raises(ValueError, match="records"):
        NicTop(width=64, nodes=2, mem_words=64, items=16, events=16, records=16)
    with pytest.raises(ValueError, match="records"):
        NicSystemModel(64, "l2", 2, 2, 64, 512, link_credits(64, 512), records=16)
    with pytest.raises(ValueError, match="records"):
        run_point("icarus", "l2", 128, 4, completion="e2e", records=5, check_only=True)


@pytest.mark.parametrize("slots", [1, 4])
def test_recorder_matches_twin(slots):
    """CompletionRecorder against its twin in the Amaranth simulator: random accepted
    completions of 3 destinations (and an untracked id), the write port free and ready
    at random; the offered record (valid, address, data, tag) equals the twin's every
    cycle. Independently of both: every destination accepted is written after its
    last acceptance with the count of that acceptance, and the ring's owner bit flips
    at each wrap."""
    import random

    from pymodel.nic.completion_record import CompletionRecorderModel
    from rtl.nic.completion_record import CompletionRecorder
    from tb.amsim import run_sim

    rng = random.Random(slots)
    peers, width, depth = 3, 64, 64
    dut = CompletionRecorder(peers, width, depth, slots)
    twin = CompletionRecorderModel(peers, width, depth, slots)
    completed, dropped = [0] * peers, [0] * peers
    last_acc, written = {}, []

    async def bench(ctx):
        for c in range(800):
            acc = rng.randrange(peers + 1) if rng.random() < 0.15 else None
            free, ready = rng.random() < 0.6, rng.random() < 0.8
            ctx.set(dut.accepted.valid, acc is not None)
            ctx.set(dut.accepted.payload.src, acc or 0)
            ctx.set(dut.free, free)
            ctx.set(dut.wr.ready, ready)
            for d in range(peers):
                ctx.set(dut.completed[d], completed[d])
                ctx.set(dut.dropped[d], dropped[d])
            want = twin.offer(free, completed, dropped)
            assert ctx.get(dut.wr.valid) == (want is not None), c
            if want is not None:
                got = (ctx.get(dut.wr.payload.addr), ctx.get(dut.wr.payload.data),
                       ctx.get(dut.wr.payload.tag))
                assert got == (want["addr"], want["data"], want["tag"]), c
                if ready:
                    written.append((c, unpack(completion_record_layout, want["data"]),
                                    want["addr"]))
            twin.step(acc, want is not None and ready)
            if acc is not None and acc < peers:
                completed[acc] = (completed[acc] + rng.randrange(1, 4)) & 0xFFFF
                dropped[acc] = rng.randrange(3)
                last_acc[acc] = (c, completed[acc])
            await ctx.tick()

    run_sim(dut, bench)
    assert len(written) > 2 * slots
    for d, (c, count) in last_acc.items():
        if not twin.pending or d not in twin.pending:
            assert any(cy > c and r["peer"] == d and r["count"] == count
                       for cy, r, _ in written), d
    for k, (_, r, addr) in enumerate(written):
        assert addr == depth - slots + k % slots
        assert r["owner"] == 1 ^ (k // slots) % 2


def _model_run(attachment, records, scenario="pair"):
    from tb.nic.cocotb_nic import model_run
    from tb.nic.headline import _point_params

    _, _, params, _ = _point_params("compact", MSG_BYTES, STORES, 1, None, attachment,
                                    "board", False, "e2e", 0, None, records)
    return params, model_run(dict(params, scenario=scenario))["want"]


@pytest.mark.parametrize("attachment", ["pcie", "integrated"])
def test_model_ring_holds_the_records(attachment):
    """The model's ring after the warm-up store and 40 stores to node 1: four records
    (the completions of frames 1, 17, 33 and 41), in slots 0 to 3 of the top
    ``RECORD_SLOTS`` words of node 0's memory, destination 1, owner bit 1 (the ring's
    first pass), none dropped; every store completes when its record lands, after its
    tracker accepted the completion (the run without records)."""
    p, want = _model_run(attachment, RECORD_SLOTS)
    _, plain = _model_run(attachment, 0)
    coalesce = COMPLETION_DEFAULTS["coalesce"]
    counts = [1, 1 + coalesce, 1 + 2 * coalesce, 1 + STORES]
    assert len(counts) == RECORDS
    assert [(d, k) for _, d, k in want["records"][0]] == [(1, k) for k in counts]
    base = p["mem_words"] - RECORD_SLOTS
    for slot, count in enumerate(counts):
        rec = unpack(completion_record_layout, want["mem"][0][base + slot])
        assert rec == {"peer": 1, "count": count, "dropped": 0, "owner": 1}
    assert not any(want["mem"][0][base + len(counts):])
    for s, t in zip(want["stores"], plain["stores"], strict=True):
        assert s["completion"] > t["completion"]
    landed = {c for c, _, _ in want["records"][0]}
    assert {s["completion"] for s in want["stores"]} == landed


def test_model_records_cost_a_posted_write_each():
    """Behind PCIe a record is one posted write of a whole word: ``WORD_BYTES`` plus the
    profile's write overhead on the host link, one write TLP and one CQE write per
    record (4 for the 41 stores of the run); the endpoint state gains the pending flags
    and the record counter (:func:`spec.nic.record_state_bits`)."""
    from spec.nic import record_state_bits

    row = model_point("compact", MSG_BYTES, STORES, attachment="pcie", completion="e2e",
                      latency_messages=0, records=RECORD_SLOTS)
    plain = model_point("compact", MSG_BYTES, STORES, attachment="pcie", completion="e2e",
                        latency_messages=0)
    per = RECORDS / (STORES + 1)
    overhead = PROFILES["pcie"].req_overhead     # a posted write TLP's overhead
    assert row["host_bytes_model"] == pytest.approx(
        plain["host_bytes_model"] + per * (WORD_BYTES + overhead))
    assert row["ctrl_ops_model"]["cqe_writes"] == per
    assert row["host_tlps_model"]["write"] == pytest.approx(
        plain["host_tlps_model"]["write"] + per)
    assert row["endpoint_state_bits_model"] == plain["endpoint_state_bits_model"] + \
        record_state_bits(HEADLINE_TOP["nodes"], RECORD_SLOTS)
    assert (row["completion_at"], plain["completion_at"]) == ("host-memory", "tracker")


@pytest.mark.slow(reason=(
    "a top of its own (an export and a Verilator build of about 2 minutes of CPU; make test "
    "is over budget): make sim co-simulates the same top with 1000 stores (the gap table's "
    "row 2), make test runs the records on the small all-to-all top "
    "(test_records_under_traffic) and make test-all runs this one on both simulators"))
def test_records_point(sim, test_id):
    """The gap table's row-2 top (compact, ``pcie``, e2e, records) with 40 stores: RTL =
    model on every figure, record, write and memory word; four records, one CQE write
    each, over the 41 stores of the run."""
    row = run_point(sim, "compact", MSG_BYTES, STORES, attachment="pcie",
                    completion="e2e", records=RECORD_SLOTS, test_id=test_id,
                    depth=HEADLINE_DEPTH, latency_messages=2)
    assert row["mismatches"] == 0
    assert row["completion_at"] == "host-memory"
    assert row["ctrl_ops_rtl"]["cqe_writes"] == RECORDS / (STORES + 1)
    assert row["completion_cycles_rtl"] > row["latency_cycles_rtl"]


#: A small top where every node sends and receives (all to all, 16-byte datapath): the
#: records wait for NicRx's writes, and stores may land in the ring's words.
TOP16 = dict(width=16, nodes=4, link_latency=2, mem_words=256, max_payload=512)


@pytest.mark.slow_variants("verilator-*", reason=(
    "Icarus runs the all-to-all top with records; Verilator runs the gap table's pcie "
    "top (test_records_point)"))
@pytest.mark.slow_variants("icarus-80", reason=(
    "the players' stalls repeat the unstalled run's checks on the same top"))
@pytest.mark.parametrize("stall", [0, 80])
def test_records_under_traffic(sim, stall, test_id):
    """Every node stores to random nodes and addresses (records and NicRx's writes share
    the memory's write port, and some stores hit the ring): RTL = model on every record
    and the cycle it lands, every write and every memory word, with and without the
    command players stalling."""
    from rtl.tops.nic_top import NicTop
    from tb.cosim import run_cosim

    top = NicTop(framing="compact", items=1024, events=1024, completion="e2e",
                 records=RECORD_SLOTS, **TOP16)
    params = dict(TOP16, framing="compact", credits=top.credits, coalesce=top.coalesce,
                  flush_idle=top.flush_idle, timeout=top.timeout, seed=11,
                  scenario="all_to_all", count=12, stall_rate=stall,
                  completion="e2e", records=RECORD_SLOTS)
    run_cosim(top, name="nic_top_records_compact", test_module="tb.nic.cocotb_nic",
              sim=sim, test_id=test_id, params=params)


@pytest.mark.slow(reason=(
    "a top of its own (an export of 25 to 40 s; make test is over budget): make test runs "
    "the records behind PCIe on the gap table's row-2 top (test_records_point) and the "
    "records beside NicRx's writes on the integrated all-to-all top "
    "(test_records_under_traffic); make test-all runs this one on both simulators"))
def test_records_behind_pcie_under_traffic(sim, test_id):
    """Every node of a ``pcie`` top with records stores to random nodes: the records
    share each interface's ``wr`` with NicRx's posted writes, outside their frames (a
    posted write TLP gathers a frame's words up to ``last``); RTL = model on every
    record, write, memory word and host-interface counter."""
    from rtl.tops.nic_top import NicTop
    from tb.cosim import run_cosim

    top = NicTop(framing="compact", items=1024, events=1024, attachment="pcie",
                 completion="e2e", records=RECORD_SLOTS, **HEADLINE_TOP)
    params = dict(HEADLINE_TOP, framing="compact", credits=top.credits,
                  coalesce=top.coalesce, flush_idle=top.flush_idle, timeout=top.timeout,
                  seed=5, scenario="all_to_all", count=12, attachment="pcie",
                  completion="e2e", records=RECORD_SLOTS)
    run_cosim(top, name="nic_top_records_pcie", test_module="tb.nic.cocotb_nic", sim=sim,
              test_id=test_id, params=params)
