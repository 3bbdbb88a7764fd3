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
    assert "--link-retry" in _sim_error(
        ["--design", "nic", "--op", "atomic", "--link-retry"], capsys)
    args = sim.parse_args(["--design", "nic", "--op", "load", "--fabric", "pod"])
    assert args.knobs == {"op": "load", "fabric": "pod", "framing": "compact"}


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
