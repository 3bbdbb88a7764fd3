"""The memory operations' sizing rules, parameter checks and golden model on their own
(no simulator): Little's law for the tag table, the UALink cap, tag exhaustion without
a drop, and the model's bytes against the stimulus."""

import random

import pytest

from pymodel.nic.mem_system import NicMemSystemModel
from rtl.tops.nic_mem_top import NicMemTop
from spec.fabric_profiles import FABRIC_PROFILES
from spec.formats.nic_mem import MAX_TAGS, MemOp, mem_frame_beats, mem_header_bytes
from spec.nic_mem import TAG_MARGIN, check_tags, default_tags, tag_entry_bits


@pytest.mark.parametrize("fabric", list(FABRIC_PROFILES))
def test_default_tags_follow_littles_law(fabric):
    p = FABRIC_PROFILES[fabric]
    # One request a cycle in flight for a whole round trip: out and back, each way a
    # link, the switch and a link.
    need = 2 * (2 * p.link + p.switch) + TAG_MARGIN
    tags = default_tags(fabric)
    assert tags >= min(need, MAX_TAGS)
    assert tags == MAX_TAGS or tags < 2 * need
    assert tags & (tags - 1) == 0


def test_tag_cap_is_ualinks_eleven_bit_tag():
    assert MAX_TAGS == 2 ** 11 == 2048
    assert check_tags(2048) == 2048
    for bad in (0, 2049, True, 3.0, "8"):
        with pytest.raises(ValueError, match="tags"):
            check_tags(bad)
        with pytest.raises(ValueError, match="tags"):
            NicMemTop(tags=bad)


def test_bad_top_parameters_are_named():
    with pytest.raises(ValueError, match="framing"):
        NicMemTop(framing="eth")
    with pytest.raises(ValueError, match="fabric"):
        NicMemTop(fabric="lan")
    with pytest.raises(ValueError, match="nodes"):
        NicMemTop(nodes=17)


def test_entry_bits_and_frame_sizes():
    # Busy and pending bits, a word address of 256 words (8 bits), length 13, op 3, the
    # node asked 8.
    assert tag_entry_bits(256) == 2 + 8 + 13 + 3 + 8
    assert (mem_header_bytes("compact"), mem_header_bytes("l2")) == (2 + 8, 14 + 8)
    # Every request is one 64-byte beat: the largest, a compare-and-swap, is the L2
    # header, 16 operand bytes, padding to 60 and the FCS.
    assert mem_frame_beats("l2", 16) == mem_frame_beats("compact", 16) == 1


def test_model_backpressures_on_tags_and_lands_every_byte():
    """20 loads with 2 tags: the model never has more than 2 outstanding, drops nothing,
    and lands the target's bytes."""
    rng = random.Random(3)
    mem = {1: [rng.getrandbits(512) for _ in range(256)]}
    cmds = {0: [dict(op=MemOp.LOAD, dst=1, addr=64 * k, length=1 + 13 * k,
                     laddr=64 * 5 * k, a=0, b=0) for k in range(20)]}
    res = NicMemSystemModel(nodes=2, tags=2).run(cmds, mem=mem)
    assert res["peak"][0] == 2
    assert res["counters"][0]["rsp_ok"] == 20 and res["counters"][1]["req_ok"] == 20
    for k in range(20):
        n = 1 + 13 * k
        got = b"".join(res["mem"][0][5 * k + j].to_bytes(64, "little") for j in range(5))[:n]
        want = b"".join(mem[1][k + j].to_bytes(64, "little") for j in range(5))[:n]
        assert got == want, k
    # A tag is reused only after its response landed: the third load waits for one.
    assert res["cmd_stamps"][0][2] > res["rsp"][0][0][0]


def _sim_error(argv, capsys):
    from scripts import sim

    with pytest.raises(SystemExit) as exc:
        sim.parse_args(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err.split("error: ", 1)[1]


def test_sim_op_option_is_checked_before_any_build(capsys):
    from scripts import sim

    assert "--op" in _sim_error(["--design", "nic", "--op", "read"], capsys)
    assert "--op" in _sim_error(["--design", "rdma", "--op", "load"], capsys)
    assert "--attachment" in _sim_error(
        ["--design", "nic", "--op", "load", "--attachment", "pcie"], capsys)
    assert "--msg-bytes" in _sim_error(
        ["--design", "nic", "--op", "load", "--msg-bytes", "300"], capsys)
    args = sim.parse_args(["--design", "nic", "--op", "load", "--fabric", "pod"])
    assert args.knobs == {"op": "load", "fabric": "pod", "framing": "compact"}


@pytest.mark.parametrize("op", ["load", "atomic"])
def test_sim_mem_op_takes_link_retry(op, capsys):
    """``--op load|atomic --link-retry`` is a point of NicMemTop(link_retry=True): the
    knob reaches the point (its top built by the checks, nothing exported), with the
    options it combines with; the engine's READ points refuse it by name."""
    from scripts import sim
    from scripts.sim_point import point_call

    args = sim.parse_args(["--design", "nic", "--op", op, "--link-retry"])
    assert args.knobs == {"op": op, "link_retry": True, "framing": "compact"}
    _, kwargs = point_call("nic", "icarus", 128, 16, args.knobs)
    assert kwargs["link_retry"] is True and kwargs["op"] == op
    args = sim.parse_args(["--design", "nic", "--op", op, "--link-retry", "--fabric", "pod",
                           "--peers", "15", "--framing", "l2", "--target-latency", "300",
                           "--messages", "16"])
    assert args.knobs["link_retry"] is True and args.knobs["fabric"] == "pod"
    rdma_op = {"load": "read", "atomic": "atomic"}[op]
    assert "--link-retry" in _sim_error(
        ["--design", "rdma", "--op", rdma_op, "--link-retry"], capsys)


def test_mem_point_link_retry_must_be_a_bool():
    from tb.nic.mem_point import run_mem_point

    with pytest.raises(ValueError, match="link_retry"):
        run_mem_point("icarus", "load", 128, 16, link_retry="yes", check_only=True)


def test_point_pairs_landings_with_requests_and_counts_busy_tags():
    from tb.nic.mem_point import landing_order, peak_busy

    # Tags 0 and 1 issued, then tag 0 again once its first use landed; the second
    # request (tag 1) lands first.
    issued = [(0, 1, 1), (1, 2, 1), (0, 1, 1)]
    landed = [{"tag": 1}, {"tag": 0}, {"tag": 0}]
    pairs = landing_order(issued, landed)
    assert pairs == [(0, 1), (1, 0), (2, 2)]
    # Busy from the cycle after the issue to the landing cycle: [1, 9], [2, 5], [11, 14].
    assert peak_busy([0, 1, 10], [5, 9, 14], pairs) == 2
    # A tag freed in cycle 9 and one taken in 9 (busy from 10) never overlap.
    assert peak_busy([0, 9], [9, 20], [(0, 0), (1, 1)]) == 1


def test_target_memory_parameters_are_named(capsys):
    from spec.host import ON_DIE
    from spec.nic_mem import TARGET_LEVEL_LATENCY, check_target

    assert TARGET_LEVEL_LATENCY == ON_DIE.read_latency == 300
    for kw, name in ((dict(target_latency=-1), "target_latency"),
                     (dict(target_latency=4097), "target_latency"),
                     (dict(target_latency=1.5), "target_latency"),
                     (dict(target_latency=9, target_reads=0), "target_reads"),
                     (dict(target_latency=9, target_reads=17), "target_reads")):
        with pytest.raises(ValueError, match=name):
            check_target(kw.get("target_latency", 0), kw.get("target_reads", 2))
        with pytest.raises(ValueError, match=name):
            NicMemTop(**kw)
        with pytest.raises(ValueError, match=name):
            NicMemSystemModel(**kw)
    base = ["--design", "nic", "--op", "load"]
    assert "--target-latency" in _sim_error(base + ["--target-latency", "-1"], capsys)
    assert "--target-reads" in _sim_error(
        base + ["--target-latency", "300", "--target-reads", "0"], capsys)
    assert "--target-reads" in _sim_error(base + ["--target-reads", "2"], capsys)
    assert "--target-latency" in _sim_error(
        ["--design", "nic", "--target-latency", "300"], capsys)
    assert "--target-latency" in _sim_error(
        ["--design", "rdma", "--op", "read", "--target-latency", "300"], capsys)


def _landings(op, n, target_latency, target_reads=2, size=128):
    """Node 0's ``n`` back-to-back loads of ``size`` bytes (or fetch-and-adds) to node 1
    on the `pod` profile, L2 framing: (issue cycles, landing cycles)."""
    if op == "load":
        cmds = [dict(op=MemOp.LOAD, dst=1, addr=64 * (2 * k % 200), length=size,
                     laddr=64 * (2 * k % 200), a=0, b=0) for k in range(n)]
    else:
        cmds = [dict(op=MemOp.FETCH_ADD, dst=1, addr=8 * (k % 8), length=8, laddr=64 * k,
                     a=1, b=0) for k in range(n)]
    res = NicMemSystemModel(nodes=2, framing="l2", fabric="pod", tags=default_tags("pod"),
                            target_latency=target_latency,
                            target_reads=target_reads).run({0: cmds})
    assert res["counters"][1]["req_ok"] == n and res["counters"][1]["drop_full"] == 0
    return res["cmd_stamps"][0], [ev[0] for ev in res["rsp"][0]]


@pytest.mark.parametrize("lat, reads", [(300, 2), (40, 3)])
def test_target_latency_adds_its_cycles_and_bounds_the_rate(lat, reads):
    """A read of the target's memory of ``lat`` cycles, ``reads`` in flight: the first
    load lands ``lat`` cycles later than from a memory read in no cycle (an idle fabric
    and target); back to back, a slot is held from the cycle after the previous
    response left (the issue) for ``lat`` cycles and the response's beats (a 128-byte
    load: 22 + 128 bytes and the FCS, 3 beats; an atomic 1), so ``reads`` loads land
    every ``lat + 3`` cycles, and atomics, which fence, one every ``lat + 1``."""
    beats = mem_frame_beats("l2", 128)
    assert beats == 3
    issue0, land0 = _landings("load", 8, 0)
    issue, land = _landings("load", 40, lat, reads)
    assert land[0] - issue[0] == land0[0] - issue0[0] + lat
    for k in range(10, 40 - reads):
        assert land[k + reads] - land[k] == lat + beats, k
    issue0, land0 = _landings("atomic", 4, 0)
    issue, land = _landings("atomic", 12, lat, reads)
    assert land[0] - issue[0] == land0[0] - issue0[0] + lat
    assert {b - a for a, b in zip(land[2:], land[3:], strict=False)} == {lat + 1}


def test_level_column_compares_the_target_memory():
    """The report's level check of a load row and a READ row: equal keys are level; a
    target latency on one side only or of another value is named."""
    from scripts.reporting.mem_ops import _level

    row = dict(topology="switch", fabric="pod", attachment="integrated", completion="e2e",
               completion_at="answer-landed", reliability="none", header="l2")
    read = dict(row, attachment="on_die", header="roce", target_latency=300)
    assert _level(dict(row, target_latency=300), read) == "yes"
    assert _level(row, read) == "no: target_latency"
    assert _level(dict(row, target_latency=0), read) == "no: target_latency"
