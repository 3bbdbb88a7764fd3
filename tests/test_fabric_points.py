"""Fabric profiles on the tops (no simulator): the NIC top's and model's credits, links
and switch hop by profile, the RDMA top's path, records and timer, the options of
``make sim`` and the comparison keys of every results row."""

import pytest

from analysis.scenarios.nic import build_scenario, table_writes
from pymodel.nic.params import NicParams
from pymodel.nic.system import NicSystemModel
from pymodel.throughput import steady_ii
from rtl.tops.nic_top import NicTop
from scripts import sim
from spec.fabric_profiles import fabric_profile, one_way
from spec.formats.nic import frame_beats
from spec.rdma_engine import SIM_TIMEOUT
from tb.nic.headline import comparison_keys as nic_keys
from tb.nic.headline import run_point as nic_point
from tb.rdma.headline import _top as rdma_top
from tb.rdma.headline import comparison_keys as rdma_keys
from tb.rdma.headline import run_point as rdma_point

W, MAX_PAYLOAD = 64, 1024


def test_board_keeps_todays_credits():
    """The default link's credits: two of the longest L2 frames (20-byte header, 1024 bytes, 4-byte
    FCS and 4 bytes of margin) in 64-byte beats, 2 x 17 = 34, on the model and the top;
    and the 2-cycle links and no extra switch hop."""
    want = 2 * -(-(20 + MAX_PAYLOAD + 4 + 4) // W)
    assert want == 34
    for prm in (NicParams("compact"), NicParams("compact", fabric="board")):
        assert (prm.credits, prm.link_latency, prm.hop_latency) == (want, 2, 0)
    top = NicTop(W, "compact", 4, max_payload=MAX_PAYLOAD, mem_words=512)
    assert (top.credits, top.link_latency, top.hop_latency, top.fabric) == (want, 2, 0,
                                                                             "board")
    # a longer link on board: the credit loop of that link (2 L + 2) less one, plus the
    # longest frame, so that the sender keeps line rate (the --link-latency of make sim)
    assert NicParams("compact", link_latency=50).credits == 2 * 50 + 2 - 1 + 17


@pytest.mark.parametrize("name", ["rack", "pod"])
def test_credits_at_distance_follow_the_rule(name):
    """The credit loop of a link of latency L is 2 L + 2 cycles (out L, one in the
    switch's ingress buffer, back L, one in the credit counter); a frame of n beats
    starts with n credits in hand, so the longest L2 frame (17 beats) at one beat a
    cycle needs 2 L + 1 + 17 credits. The top and the model agree, with the profile's
    links and a switch hop of its latency less the switch's own 2 cycles."""
    p = fabric_profile(name)
    n_max = frame_beats(W, "l2", MAX_PAYLOAD)
    assert n_max == 17
    want = 2 * p.link + 1 + n_max
    prm = NicParams("l2", fabric=name)
    top = NicTop(W, "l2", 4, max_payload=MAX_PAYLOAD, mem_words=512, fabric=name)
    assert prm.credits == top.credits == want
    assert prm.link_latency == top.link_latency == p.link
    assert prm.hop_latency == top.hop_latency == p.switch - 2


@pytest.mark.parametrize("name", ["board", "pod"])
def test_credits_with_retry_cover_the_reliable_link(name):
    """With link-level retry the reliable uplink delivers a frame of n beats n + 1
    cycles later than a plain link (it judges the whole frame first), so the credit loop
    of the longest frame (17 beats) is 2 L + 2 + 18 and the rule 2 L + 2 + 18 - 1 + 17
    credits, ``board`` included (40 > today's 34). The top and the model agree."""
    p = fabric_profile(name)
    want = 2 * p.link + 2 + 18 - 1 + 17
    prm = NicParams("l2", fabric=name, retry=True)
    top = NicTop(W, "l2", 4, max_payload=MAX_PAYLOAD, mem_words=512, fabric=name, retry=True)
    assert prm.credits == top.credits == want


def test_model_at_pod_keeps_line_rate():
    """The model at pod: compact 128-byte stores leave one every frame's beats (3), and
    the first store's payload arrives a path (link + switch + link) later at least."""
    prm = NicParams("compact", fabric="pod")
    stores, ids, _ = build_scenario("pair", nodes=4, width=W, window=512 * W,
                                    max_payload=MAX_PAYLOAD, seed=1, count=8, msg_bytes=128,
                                    messages=200, peers=1)
    res = NicSystemModel.of(prm).run(stores, ids, table_writes=table_writes(ids, 4))
    acc = [s["accept"] for s in res["stores"]]
    assert steady_ii(acc) == frame_beats(W, "compact", 128) == 3
    first = res["stores"][0]
    assert first["remote_write"] - first["accept"] >= one_way("pod")
    assert not res["credit_errors"]


@pytest.mark.parametrize("build,needle", [
    (lambda: NicParams("compact", fabric="lan"), "NicParams.fabric must be one of"),
    (lambda: NicTop(W, "compact", 4, fabric="lan"), "fabric must be one of"),
    (lambda: NicParams("compact", fabric="pod", link_latency=2), "NicParams.link_latency"),
    (lambda: NicTop(W, "compact", 4, link_latency=2, fabric="rack"), "link_latency 2"),
    (lambda: nic_point("icarus", "compact", 128, 4, fabric="lan"), "fabric must be"),
    (lambda: nic_point("icarus", "compact", 128, 4, top={"link_latency": 3}, fabric="pod"),
     "link_latency 3"),
    (lambda: rdma_point("icarus", 128, 4, fabric="lan"), "fabric must be"),
    (lambda: rdma_point("icarus", 128, 4, link_latency=6, fabric="pod"), "link_latency 6"),
])
def test_bad_fabric_is_refused_by_name(build, needle):
    with pytest.raises(ValueError, match=needle):
        build()


def test_rdma_top_by_profile():
    """board keeps today's top (no parameter differs: the same build); rack and pod set
    the link to the path one way (2 L + switch) and the records and timer by their
    rules: records for (1288 + round trip) / 4 messages as a power of two, the timer
    4096 plus the round trip beyond board's 12 cycles."""
    assert rdma_top("pcie", None, "board") == {}
    assert rdma_top("pcie", 9, "board") == {"link_latency": 9}
    for name, records in (("rack", 1024), ("pod", 1024)):
        p = fabric_profile(name)
        path = 2 * p.link + p.switch
        assert records == 1 << (-(-(1288 + 2 * path) // 4) - 1).bit_length()
        assert rdma_top("pcie", None, name) == {
            "link_latency": path, "records": records,
            "timeout": SIM_TIMEOUT + 2 * path - 12}
    assert rdma_top("on_die", 500, "pod")["host"] == "on_die"


def test_rows_carry_the_comparison_keys():
    """The keys, ``completion_at`` included: the NIC's link credit, its tracker (e2e
    without records), its record in host memory; the engine's CQE in host memory."""
    assert nic_keys("l2") == {"topology": "switch", "fabric": "board",
                              "attachment": "integrated", "completion": "credit",
                              "reliability": "none", "header": "l2",
                              "completion_at": "link-credit"}
    assert nic_keys("compact", "pcie", "pod")["attachment"] == "pcie"
    assert nic_keys("compact", completion="e2e")["completion_at"] == "tracker"
    assert nic_keys("compact", completion="e2e", records=16)["completion_at"] == \
        "host-memory"
    assert rdma_keys("on_die", "rack") == {"topology": "direct-link", "fabric": "rack",
                                           "attachment": "on_die", "completion": "e2e",
                                           "reliability": "go-back-N", "header": "roce",
                                           "completion_at": "host-memory"}


@pytest.mark.parametrize("argv,needle", [
    (["--fabric", "pod"], "--fabric: give --design too"),
    (["--design", "nic", "--fabric", "lan"], "--fabric: fabric must be one of"),
    (["--design", "rdma", "--fabric", "lan"], "--fabric: fabric must be one of"),
    (["--design", "nic", "--fabric", "pod", "--link-latency", "3"],
     "--fabric: fabric 'pod' sets the link latency (125 cycles)"),
    (["--design", "rdma", "--fabric", "rack", "--link-latency", "6"],
     "--fabric: fabric 'rack' sets the link latency (400 cycles)"),
])
def test_bad_fabric_option_names_it(argv, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        sim.parse_args(argv)
    assert exc.value.code == 2
    assert needle in capsys.readouterr().err


def test_fabric_option_reaches_the_point():
    assert sim.parse_args(["--design", "nic", "--fabric", "pod"]).knobs == {
        "fabric": "pod", "framing": "compact"}
    assert sim.parse_args(["--design", "rdma", "--fabric", "rack"]).knobs["fabric"] == "rack"
    # board with a link latency of the user's stays today's knob
    assert sim.parse_args(["--design", "nic", "--fabric", "board", "--link-latency",
                           "50"]).knobs == {"fabric": "board", "link_latency": 50,
                                            "framing": "compact"}
