"""The NIC with link-level retry at ``pod`` distance (spec.fabric_profiles): reliable
125-cycle links, the switch's 248-cycle hop elastic (it holds its beats while a
downlink's replay buffer is full), on Icarus (and Verilator in make test-all). Clean wires:
back-to-back 128-byte stores at the wire limit, RTL = model on every frame, write,
credit and stamp, nothing lost. Faulty wires: frames dropped, recovered by retry to
the cycle the model predicts."""

import pytest

from analysis.scenarios.nic import table_writes
from pymodel.fabric.elastic_delay import ElasticDelayModel
from pymodel.fabric.faulty_link import FaultSettings, rate_per_65535
from pymodel.nic.params import NicParams
from pymodel.nic.system import NicSystemModel
from rtl.tops.nic_top import NicTop
from spec.checks import silence
from spec.fabric_profiles import fabric_profile, one_way, replay_sizes
from spec.formats.nic import frame_beats
from spec.metrics import row_metrics
from spec.nic import HEADLINE_TOP
from tb.cosim import run_cosim
from tb.nic.cocotb_nic_retry import retry_stores
from tb.nic.headline import run_point

pytestmark = pytest.mark.slow(reason=(
    "the retry top at pod distance is a top of its own; make test keeps the retry at board "
    "(test_cosim_nic_retry.py), whose checks these repeat at a longer wire"))

#: As tests/test_cosim_nic_fabric.py: the steady-state window lies past the first credit
#: round trip.
MESSAGES = 300
#: Stores sent one at a time for the latency figures: two, not the headline's 16 (each
#: crosses the pod round trip alone; the figures checked here hold for any count).
LATENCY_MESSAGES = 2


@pytest.mark.slow(reason=(
    "make sim's pod gap table co-simulates this point (its link-retry rows, Verilator, RTL "
    "= model); make test runs the pod retry top with drops on Icarus "
    "(test_nic_retry_at_pod_recovers_drops); the point is a top of its own (an export of "
    "about 35 s)"))
def test_nic_retry_at_pod_keeps_the_wire_rate(sim, test_id):
    pod = fabric_profile("pod")
    w = HEADLINE_TOP["width"]
    row = run_point(sim, "compact", 128, MESSAGES, fabric="pod", retry=True,
                    latency_messages=LATENCY_MESSAGES, test_id=test_id)
    assert row["mismatches"] == 0
    for key in row_metrics("nic"):
        assert row[f"{key}_rtl"] == row[f"{key}_model"], key
    assert (row["fabric"], row["reliability"]) == ("pod", "link-retry")
    # The wire limit: one 64-byte beat a cycle, a 3-beat compact frame per store
    # (8-byte header, 128 bytes, 4-byte FCS).
    beats = frame_beats(w, "compact", 128)
    assert beats == 3
    assert row["ii_cycles_rtl"] == beats
    # Every store reached its memory (a lost one leaves no per-message figures) and
    # crossed link, switch and link; retry adds each link's store-and-forward.
    assert row["messages"] == MESSAGES
    assert row["latency_cycles_rtl"] >= one_way(pod) + 2 * beats


def test_replay_buffers_cover_the_pod_link_round_trip():
    """Each reliable link sizes itself from its own latency, the profile's link: its
    replay buffer holds that link's ACK round trip (2 L) and a frame more, at one beat
    a cycle; the switch hop is outside every link's loop."""
    pod = fabric_profile("pod")
    top = NicTop(width=64, framing="compact", nodes=2, retry=True, fabric="pod",
                 mem_words=64, items=16, events=16)
    n = frame_beats(64, "compact", top.max_payload)
    tx_depth, rx_depth, timeout = replay_sizes(pod, n)
    for up, down in top.links:
        for link in (up, down):
            assert (link.tx.depth, link.rx.depth) == (tx_depth, rx_depth)
            assert link.tx.depth >= 2 * pod.link + 2 * n
            assert timeout > 2 * pod.link
    assert top.switch.hop_latency == pod.switch - 2
    silence(top)


#: The faulty case: every node stores to node 0 (an incast, so node 0's downlink runs
#: near one beat a cycle) over eight faulty 125-cycle wires, 3 % of frames dropped in
#: bursts of up to 2: the replays on node 0's downlink hold the switch's hop.
TOP = dict(width=16, nodes=4, mem_words=256, max_payload=512)
SETTINGS = FaultSettings(seed=3, drop_rate=rate_per_65535(0.03), drop_burst=2)
SCENARIO = dict(seed=21, count=4, incast=0)


@pytest.mark.slow_variants("verilator", reason=(
    "Icarus runs the pod retry case with drops (one more Verilator build); Verilator runs the "
    "retry top at board (test_cosim_nic_retry.py) and the elastic hop's unit tests run in the "
    "Amaranth simulator"))
def test_nic_retry_at_pod_recovers_drops(sim, test_id):
    """The faulty case: frames, cycles, writes, credits, every link counter and the
    memories equal the model's, and every store's bytes are in its memory."""
    nt = NicTop(framing="compact", items=512, events=1024, retry=True, fabric="pod", **TOP)
    params = dict(TOP, link_latency=nt.link_latency, framing="compact",
                  credits=nt.credits, stall_rate=0, faults=vars(SETTINGS),
                  expect_damage=True, expect_signalling=False, fabric="pod", **SCENARIO)
    run_cosim(nt, name="nic_retry_top_compact_pod", test_module="tb.nic.cocotb_nic_retry",
              sim=sim, test_id=test_id, params=params)


def test_faulty_case_holds_the_hop(monkeypatch):
    """The faulty case tests the elastic hop: in the model of the same run, node 0's
    egress is not ready while a beat waits in the hop (the downlink's replays), and
    nothing is lost."""
    held = []
    cycle = ElasticDelayModel.cycle

    def watched(self, c, beat=None, out_ready=True):
        held.append(self.head(c) is not None and not out_ready)
        return cycle(self, c, beat, out_ready)

    monkeypatch.setattr(ElasticDelayModel, "cycle", watched)
    prm = NicParams("compact", retry=True, fabric="pod", **TOP)
    nodes = list(range(TOP["nodes"]))
    stores = retry_stores(nodes=TOP["nodes"], width=TOP["width"],
                          window=TOP["mem_words"] * TOP["width"],
                          max_payload=TOP["max_payload"], seed=SCENARIO["seed"],
                          count=SCENARIO["count"], dst=SCENARIO["incast"])
    res = NicSystemModel.of(prm).run(stores, nodes, table_writes=table_writes(nodes, 4),
                                     link_settings=SETTINGS)
    assert sum(held) > 100
    assert sum(c["frames_ok"] for c in res["counters"].values()) == sum(
        len(s.segments(TOP["width"], TOP["max_payload"])) for ss in stores.values()
        for s in ss)
